"""The sticky assignment when members subscribe to different topics (Java's general path).

Works on counts per (member, topic) and touches partitions only to build the result:

1. Members keep every owned partition they still subscribe to (and, rack-aware, that is on their rack).
2. Each topic's unowned partitions are poured onto its least loaded subscribers (water-filling), topics
   with the fewest subscribers first: the same counts Java's one-partition-at-a-time loop reaches.
3. Balance: within each topic, partitions move from a subscriber to another that has two or more
   fewer partitions in total, until no partition anywhere could move to such a member. Newly handed
   out partitions move first; owned ones only when that is not enough.
4. Build the lists: each member's kept partitions plus its share of each topic's pool (partitions
   go back to a member that claimed them, or to a same-rack member, where the counts allow).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from operator import itemgetter

from kassign.assignors.rack_info import RackInfo
from kassign.assignors.sticky_constrained import unowned_partitions
from kassign.assignors.sticky_ownership import Ownership
from kassign.model import TopicPartition

__all__ = ["general_assign"]

_topic_of = itemgetter(0)


def general_assign(
    topics: Mapping[str, int],
    member_topics: Sequence[frozenset[str]],
    ownership: Ownership,
    racks: RackInfo,
) -> tuple[list[list[TopicPartition]], dict[TopicPartition, int]]:
    """Assign ``topics`` to members ``0..M-1`` subscribed to ``member_topics[i]``.

    Returns each member's partitions and the partitions changing owner (partition -> new member).
    """
    return _GeneralAssignment(topics, member_topics, ownership, racks).build()


class _GeneralAssignment:
    def __init__(self, topics: Mapping[str, int], member_topics: Sequence[frozenset[str]], ownership: Ownership,
                 racks: RackInfo) -> None:
        self.topics = topics
        self.member_topics = member_topics
        self.ownership = ownership
        self.racks = racks
        self.subscribers: dict[str, list[int]] = {t: [] for t in topics}
        for i, subscribed in enumerate(member_topics):
            for t in subscribed:
                self.subscribers[t].append(i)
        # Java's order for handing out partitions: topics with fewer potential members first.
        self.topic_order = sorted(topics, key=lambda t: (len(self.subscribers[t]), t))
        self.kept: list[list[TopicPartition]] = []
        self.count: list[int] = []
        # topic -> member -> partitions of the topic handed out from the pool / kept from owned
        self.added: dict[str, dict[int, int]] = {t: {} for t in topics}
        self.given_up: dict[int, dict[str, int]] = {}

    def build(self) -> tuple[list[list[TopicPartition]], dict[TopicPartition, int]]:
        self._keep_owned()
        for t in self.topic_order:
            free = self.ownership.marks[t].count(0)
            if free and self.subscribers[t]:
                self._pour(t, free)
        if max(self.count, default=0) - min(self.count, default=0) >= 2:
            self._balance()
        return self._materialize()

    def _keep_owned(self) -> None:
        racks, release = self.racks, self.ownership.release
        for i, mine in enumerate(self.ownership.owned):
            if mine:
                subscribed = self.member_topics[i]
                if not set(map(_topic_of, mine)) <= subscribed or (racks.enabled and i in racks.member_racks):
                    dropped = [tp for tp in mine if tp[0] not in subscribed or racks.mismatch(i, tp)]
                    if dropped:
                        release(i, dropped)
                        mine = [tp for tp in mine if tp[0] in subscribed and not racks.mismatch(i, tp)]
            self.kept.append(mine)
            self.count.append(len(mine))

    def _pour(self, topic: str, units: int) -> None:
        """Give ``units`` partitions of ``topic`` to its least loaded subscribers, ties to lower member index."""
        count = self.count
        order = sorted(zip(map(count.__getitem__, self.subscribers[topic]), self.subscribers[topic]))
        level, j, left = order[0][0], 0, units
        while j + 1 < len(order) and left >= (order[j + 1][0] - level) * (j + 1):
            left -= (order[j + 1][0] - level) * (j + 1)
            level = order[j + 1][0]
            j += 1
        each, extra = divmod(left, j + 1)
        added = self.added[topic]
        for rank, (before, i) in enumerate(sorted(order[: j + 1], key=itemgetter(1))):
            k = level + each + (1 if rank < extra else 0) - before
            if k:
                added[i] = added.get(i, 0) + k
                count[i] += k

    # -- balancing -------------------------------------------------------------------------------

    def _balance(self) -> None:
        """Fill from the bottom: the least loaded member takes one partition from the most loaded member
        holding a topic it subscribes to, while they differ by two or more; repeat until none can."""
        count, subscribers, member_topics = self.count, self.subscribers, self.member_topics
        n_members = len(count)
        added_by: list[dict[str, int]] = [{} for _ in range(n_members)]
        for t, per_member in self.added.items():
            for i, k in per_member.items():
                if k:
                    added_by[i][t] = k
        kept_by = [Counter(map(_topic_of, mine)) for mine in self.kept]
        shared = [[t for t in sorted(member_topics[i]) if len(subscribers[t]) > 1] for i in range(n_members)]

        for owned_too in (False, True):  # first move only newly handed out partitions
            def movable(i: int, t: str) -> int:
                return added_by[i].get(t, 0) + (kept_by[i].get(t, 0) if owned_too else 0)

            donors: dict[str, list[tuple[int, int]]] = {}
            for i in range(n_members):
                for t in (set(added_by[i]) | set(kept_by[i]) if owned_too else added_by[i]):
                    if movable(i, t):
                        donors.setdefault(t, []).append((-count[i], i))
            for heap in donors.values():
                heapq.heapify(heap)

            def top_donor(t: str) -> tuple[int, int] | None:
                heap = donors.get(t)
                while heap:
                    c, d = heap[0]
                    if -c == count[d] and movable(d, t):
                        return count[d], d
                    heapq.heappop(heap)
                return None

            moved_in_round = True
            while moved_in_round:
                moved_in_round = False
                takers = [(count[i], i) for i in range(n_members) if shared[i]]
                heapq.heapify(takers)
                while takers:
                    c_low, lo = heapq.heappop(takers)
                    if c_low != count[lo]:
                        continue
                    best: tuple[int, int, str] | None = None
                    for t in shared[lo]:
                        top = top_donor(t)
                        if top is not None and (best is None or top[0] > best[0]):
                            best = (top[0], top[1], t)
                    if best is None or best[0] - c_low < 2:
                        continue  # nothing can come to this member now
                    _, d, t = best
                    if added_by[d].get(t):
                        added_by[d][t] -= 1
                    else:
                        kept_by[d][t] -= 1
                        lost = self.given_up.setdefault(d, {})
                        lost[t] = lost.get(t, 0) + 1
                    added_by[lo][t] = added_by[lo].get(t, 0) + 1
                    count[d] -= 1
                    count[lo] += 1
                    moved_in_round = True
                    heapq.heappush(takers, (count[lo], lo))
                    heapq.heappush(takers, (count[d], d))
                    for i in (d, lo):
                        for held in ((added_by[i], kept_by[i]) if owned_too else (added_by[i],)):
                            for t2, k in held.items():
                                if k:
                                    donors.setdefault(t2, [])
                                    heapq.heappush(donors[t2], (-count[i], i))
        self._augment(added_by, kept_by)
        self.added = {t: {} for t in self.topics}
        for i, holding in enumerate(added_by):
            for t, k in holding.items():
                if k:
                    self.added[t][i] = k

    def _augment(self, added_by: list[dict[str, int]], kept_by: list[Counter[str]]) -> None:
        """Chains: member A may be two or more below member Z with no topic in common, yet reach it
        through members in between (A takes from B what B can take back from Z, ...). Shift one
        partition along the shortest such chain while one exists (each shift lowers the spread)."""
        count, subscribers = self.count, self.subscribers
        holders: dict[str, set[int]] = {t: set() for t in self.topics}
        for i in range(len(count)):
            for held in (added_by[i], kept_by[i]):
                for t, k in held.items():
                    if k:
                        holders[t].add(i)
        while True:
            top = max(count)
            for lo in sorted((i for i in range(len(count)) if count[i] <= top - 2), key=lambda i: (count[i], i)):
                path = self._chain(lo, holders)
                if path:
                    break
            else:
                return
            taker = lo
            for topic, giver in path:
                if added_by[giver].get(topic):
                    added_by[giver][topic] -= 1
                else:
                    kept_by[giver][topic] -= 1
                    lost = self.given_up.setdefault(giver, {})
                    lost[topic] = lost.get(topic, 0) + 1
                if not added_by[giver].get(topic) and not kept_by[giver].get(topic):
                    holders[topic].discard(giver)
                added_by[taker][topic] = added_by[taker].get(topic, 0) + 1
                holders[topic].add(taker)
                taker = giver
            count[lo] += 1
            count[path[-1][1]] -= 1

    def _chain(self, lo: int, holders: dict[str, set[int]]) -> list[tuple[str, int]] | None:
        """Shortest chain [(topic, giver), ...] from ``lo`` to a member with two or more partitions more."""
        count, subscribers = self.count, self.subscribers
        want = count[lo] + 2
        came_from: dict[int, tuple[str, int]] = {}
        seen_topics: set[str] = set()
        frontier = [lo]
        reached = {lo}
        while frontier:
            nxt = []
            for taker in frontier:
                for t in sorted(self.member_topics[taker]):
                    if t in seen_topics or len(subscribers[t]) < 2:
                        continue
                    seen_topics.add(t)
                    for giver in sorted(holders[t]):
                        if giver in reached:
                            continue
                        reached.add(giver)
                        came_from[giver] = (t, taker)
                        if count[giver] >= want:
                            path = []
                            node = giver
                            while node != lo:
                                topic, prev = came_from[node]
                                path.append((topic, node))
                                node = prev
                            return path[::-1]
                        nxt.append(giver)
            frontier = nxt
        return None

    # -- building the result ---------------------------------------------------------------------

    def _materialize(self) -> tuple[list[list[TopicPartition]], dict[TopicPartition, int]]:
        claimers = self.ownership.claimers
        for i, lost in self.given_up.items():
            lost = {t: k for t, k in lost.items() if k}
            if not lost:
                continue
            mine = self.kept[i]
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in mine:
                if tp[0] in lost:
                    by_topic.setdefault(tp[0], []).append(tp)
            gone: set[TopicPartition] = set()
            for t, k in lost.items():
                # give up the highest partition numbers (Java trims owned partitions the same way)
                out = sorted(by_topic[t], key=itemgetter(1))[-k:]
                gone.update(out)
                self.ownership.release(i, out)  # back in the topic's pool, claimed by i
            self.kept[i] = [tp for tp in mine if tp not in gone]

        result = self.kept
        transferring: dict[TopicPartition, int] = {}
        racks = self.racks
        for t, n in self.topics.items():
            slots = {i: k for i, k in sorted(self.added[t].items()) if k}
            if not slots:
                continue
            pool = unowned_partitions(t, n, self.ownership.marks[t])
            if not claimers and not racks.enabled:
                start = 0
                for i, k in slots.items():
                    result[i].extend(pool[start:start + k])
                    start += k
                continue
            placed: dict[TopicPartition, int] = {}
            if racks.enabled:
                for tp in sorted(pool, key=racks.members_on_replica_racks):
                    holders = claimers.get(tp, ())
                    candidates = [i for i in slots if slots[i] and racks.matches(i, tp)]
                    if candidates:
                        back = [i for i in candidates if i in holders]
                        i = back[0] if back else candidates[0]
                        placed[tp] = i
                        slots[i] -= 1
            for tp in pool:
                holders = claimers.get(tp)
                if tp not in placed and holders and len(holders) == 1:
                    (i,) = holders
                    if slots.get(i):
                        placed[tp] = i
                        slots[i] -= 1
            rest = iter([tp for tp in pool if tp not in placed])
            for i, k in slots.items():
                for _ in range(k):
                    placed[next(rest)] = i
            for tp, i in placed.items():
                result[i].append(tp)
                holders = claimers.get(tp)
                if holders is not None and (len(holders) > 1 or i not in holders):
                    transferring[tp] = i
        return result, transferring
