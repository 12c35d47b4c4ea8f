"""Rack-aware refinement of a balanced sticky assignment (either path).

Both paths decide how many partitions each member takes before racks can weigh in. This pass
then moves partitions along cycles of members (A gives B a partition, B gives C one, ..., back to A),
or along paths whose two ends swap their counts (the first member has one partition more than the
last): the multiset of counts, hence the balance, never changes. A cycle or path is applied when it
lowers the cost ``(rate * K + 1) * cross-rack + K * moved`` where ``moved`` counts previously owned
partitions that end up away from their owner: first at rate 1 (each extra move must bring a partition
onto its replica rack), then at rate 2. No single step takes a partition off a replica rack it is on,
so the number of cross-rack partitions never grows, and at equal locality a cycle that gives a
partition back to its owner is taken (fewer moves).

Negative cycles are found with Bellman-Ford on a graph linear in the assignment's size (members, one
node per (topic, rack) partitions are handed to, one per count level). The search is bounded by a
count of edge relaxations (:data:`RELAXATION_BUDGET`), so a very large rack-aware group gets the
trades found within it and stays fast; the bound is a count, not a clock, so the result stays
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kassign.assignors.rack_info import RackInfo
from kassign.model import TopicPartition

__all__ = ["refine_locality"]

#: Moves one partition brought onto a replica rack may cost. Java 3.9 trades at up to two (on random
#: groups it reaches one fewer cross-rack partition than a one-for-one rule in about 1 % of them).
MOVES_PER_LOCAL_PARTITION = 2
#: Edge relaxations (graph building counted alike) the whole refinement may spend: a few hundred
#: milliseconds of CPU; every group of the Java conformance test needs a tiny fraction of it.
RELAXATION_BUDGET = 3_000_000


def refine_locality(
    result: list[list[TopicPartition]],
    member_topics: Sequence[frozenset[str]],
    subscribers: Mapping[str, Sequence[int]],
    owner: Mapping[TopicPartition, int],
    racks: RackInfo,
) -> dict[TopicPartition, int]:
    """Improve ``result`` in place; returns partition -> new member for every partition it moved."""
    return _Refiner(result, member_topics, subscribers, owner, racks).run()


class _Refiner:
    def __init__(
        self,
        result: list[list[TopicPartition]],
        member_topics: Sequence[frozenset[str]],
        subscribers: Mapping[str, Sequence[int]],
        owner: Mapping[TopicPartition, int],
        racks: RackInfo,
    ) -> None:
        self.result = result
        self.member_topics = member_topics
        self.subscribers = subscribers
        self.owner = owner
        self.racks = racks
        # A move away from its owner weighs K, a partition off its replica racks K + 1: one partition
        # brought on-rack pays for at most one move, and moves decide only between equal localities.
        self.k = sum(map(len, result)) + 1
        self.rate = 1
        self.budget = RELAXATION_BUDGET

    def cost(self, tp: TopicPartition, member: int) -> int:
        """What ``tp`` costs at ``member``: off its replicas' racks, away from its owner."""
        owner = self.owner.get(tp)
        moved = owner is not None and owner != member
        return (self.rate * self.k + 1) * self.racks.mismatch(member, tp) + self.k * moved

    def run(self) -> dict[TopicPartition, int]:
        moved: dict[TopicPartition, int] = {}
        # The cheap trades first (one move per partition brought on-rack), so that a dearer one found
        # first does not block them. Each applied cycle lowers the (integer, non-negative) total cost at
        # that rate: this ends.
        for self.rate in range(1, MOVES_PER_LOCAL_PARTITION + 1):
            while True:
                cycle = self._negative_cycle()
                if cycle is None:
                    break
                for giver, taker, tp in cycle:
                    self.result[giver].remove(tp)
                    self.result[taker].append(tp)
                    moved[tp] = taker
        return moved

    def _graph(self) -> tuple[list[tuple[int, int, int, TopicPartition | None]], int]:
        """The edges (cost, from, to, partition moved or None) and the node count.

        Nodes: the members; one per (topic, rack) a partition can be handed to (the cost of a move depends
        on the taker only through its rack, unless the taker owned the partition: those moves are direct
        member-to-member edges), so the graph stays linear in the assignment's size; one per count level
        joining a path's ends (``end -> level(count(end) + 1) -> start``). No edge takes a partition off a
        replica rack it is on."""
        mismatch, owner, k = self.racks.mismatch, self.owner, self.k
        member_racks = self.racks.member_racks
        rack_weight = self.rate * k + 1
        n = len(self.result)
        edges: list[tuple[int, int, int, TopicPartition | None]] = []
        hand_to: dict[tuple[str, str | None], int] = {}  # (topic, rack or None) -> node
        takers: dict[str, dict[str | None, list[int]]] = {}
        for t in sorted(self.subscribers):
            by_rack: dict[str | None, list[int]] = {}
            for i in self.subscribers[t]:
                by_rack.setdefault(member_racks.get(i), []).append(i)
            if len(self.subscribers[t]) > 1:
                takers[t] = by_rack
        for giver, mine in enumerate(self.result):
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in mine:
                by_topic.setdefault(tp[0], []).append(tp)
            for t in sorted(by_topic):
                if t not in takers:
                    continue
                held = [(self.cost(tp, giver), mismatch(giver, tp), tp) for tp in sorted(by_topic[t])]
                for rack in sorted(takers[t], key=lambda r: (r is not None, r or "")):
                    replica_racks = None
                    best: tuple[int, TopicPartition] | None = None
                    for here, off, tp in held:
                        if rack is None:
                            off_there = False
                        else:
                            replica_racks = self.racks.partition_racks.get(tp, ())
                            off_there = rack not in replica_racks
                        if off_there > off:
                            continue
                        delta = rack_weight * off_there + k * (tp in owner) - here
                        if best is None or delta < best[0]:
                            best = (delta, tp)
                    if best is not None:
                        node = hand_to.get((t, rack))
                        if node is None:
                            node = hand_to[(t, rack)] = n + len(hand_to)
                        edges.append((best[0], giver, node, best[1]))
                for _, off, tp in held:  # back to its owner: a direct edge, cheaper than through its rack
                    o = owner.get(tp)
                    if o is not None and o != giver and t in self.member_topics[o] and mismatch(o, tp) <= off:
                        edges.append((self.cost(tp, o) - self.cost(tp, giver), giver, o, tp))
        for (t, rack), node in hand_to.items():
            for i in takers[t][rack]:
                edges.append((0, node, i, None))
        counts = [len(p) for p in self.result]
        base = n + len(hand_to)
        levels = {c: base + j for j, c in enumerate(sorted(set(counts)))}
        for i in range(n):
            if self.member_topics[i]:
                if counts[i] + 1 in levels:
                    edges.append((0, i, levels[counts[i] + 1], None))
                edges.append((0, levels[counts[i]], i, None))
        return edges, base + len(levels)

    def _negative_cycle(self) -> list[tuple[int, int, TopicPartition]] | None:
        """A negative cycle as (giver, taker, partition) moves, or None. Bellman-Ford from every node at
        once; after each pass the predecessor graph is checked for a cycle (one there is negative), which
        usually ends the search after a few passes instead of one per node."""
        if self.budget <= 0:
            return None  # spent: keep the trades made so far
        edges, n_nodes = self._graph()
        self.budget -= 4 * len(edges)  # building the graph costs about as much as a few relaxation passes
        if not any(e[0] < 0 for e in edges):
            return None
        dist = [0] * n_nodes
        pred: list[tuple[int, TopicPartition | None] | None] = [None] * n_nodes
        for _ in range(n_nodes):
            if self.budget < len(edges):
                return None  # spent: keep the trades made so far
            self.budget -= len(edges) + n_nodes
            changed = False
            for c, u, v, tp in edges:
                if dist[u] + c < dist[v]:
                    dist[v] = dist[u] + c
                    pred[v] = (u, tp)
                    changed = True
            if not changed:
                return None
            cycle = _pred_cycle(pred)
            if cycle is not None:
                return self._moves(cycle, pred)
        return None

    def _moves(
        self, start: int, pred: list[tuple[int, TopicPartition | None] | None]
    ) -> list[tuple[int, int, TopicPartition]]:
        """The member-to-member moves of the predecessor cycle through ``start``."""
        n = len(self.result)
        steps: list[tuple[int, int, TopicPartition | None]] = []
        node = start
        while True:
            u, tp = pred[node]  # type: ignore[misc]
            steps.append((u, node, tp))
            node = u
            if node == start:
                break
        steps.reverse()
        moves: list[tuple[int, int, TopicPartition]] = []
        for pos, (u, v, tp) in enumerate(steps):
            if tp is None:
                continue
            # giver u hands tp to v, or to the member after v when v is a (topic, rack) node
            taker = v if v < n else steps[(pos + 1) % len(steps)][1]
            moves.append((u, taker, tp))
        return moves


def _pred_cycle(pred: list[tuple[int, TopicPartition | None] | None]) -> int | None:
    """A node on a cycle of the predecessor graph, or None."""
    state = [0] * len(pred)  # 0 new, 1 on the current walk, 2 done
    for first in range(len(pred)):
        node: int | None = first
        walk = []
        while node is not None and state[node] == 0:
            state[node] = 1
            walk.append(node)
            p = pred[node]
            node = p[0] if p is not None else None
        if node is not None and state[node] == 1:
            return node
        for w in walk:
            state[w] = 2
    return None
