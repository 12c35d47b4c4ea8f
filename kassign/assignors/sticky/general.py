"""The sticky assignment when members subscribe to different topics (Java's general path).

Works on counts per (member, topic) and touches partitions only to build the result:

1. Members keep every owned partition they still subscribe to (and, rack-aware, that is on their rack).
2. Each topic's unowned partitions are poured onto its least loaded subscribers (water-filling), topics
   with the fewest subscribers first: the counts Java's one-partition-at-a-time loop reaches. Whole
   unowned topics for equally loaded subscribers (a fresh group) are dealt round-robin by slicing.
3. Balance from the bottom: the least loaded member takes a partition from the most loaded member
   holding a topic it subscribes to while they differ by two or more (newly handed out partitions
   first, owned ones only when needed); then chains (A takes from B what B takes back from C) while
   a member is two or more below one it can reach. The result: no partition could move to a
   subscribed member with two or more fewer, and no chain of moves would even the counts further.
4. Build the lists: each member's kept partitions plus its share of each topic's pool; a partition goes
   back to the member that gave it up, or to a same-rack member, where the counts allow.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import add, itemgetter, not_, sub

from kassign.assignors.rack_info import RackInfo
from kassign.assignors.sticky.constrained import topic_partitions, unowned_partitions
from kassign.assignors.sticky.ownership import Ownership
from kassign.model import TopicPartition

__all__ = ["general_assign"]

_topic_of = itemgetter(0)
# Up to this many partitions given up by one member are removed from its list one by one.
_FEW_GIVEN_UP = 8


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
    def __init__(
        self, topics: Mapping[str, int], member_topics: Sequence[frozenset[str]], ownership: Ownership, racks: RackInfo
    ) -> None:
        self.topics = topics
        self.member_topics = member_topics
        self.ownership = ownership
        self.racks = racks
        # Members with the same subscription share one set object: gather them once per distinct set.
        groups: dict[frozenset[str], list[int]] = {}
        for i, subscribed in enumerate(member_topics):
            groups.setdefault(subscribed, []).append(i)
        by_topic: dict[str, list[list[int]]] = {t: [] for t in topics}
        for subscribed, members in groups.items():
            for t in subscribed:
                by_topic[t].append(members)
        self.subscribers: dict[str, list[int]] = {
            t: (lists[0] if len(lists) == 1 else sorted(chain.from_iterable(lists))) for t, lists in by_topic.items()
        }
        # Java's order for handing out partitions: topics with fewer potential members first.
        self.topic_order = sorted(topics, key=lambda t: (len(self.subscribers[t]), t))
        self.kept: list[list[TopicPartition]] = []
        self.count: list[int] = []
        # topic -> member -> partitions of the topic handed out from the pool / kept from owned
        self.added: dict[str, dict[int, int]] = {t: {} for t in topics}
        self.given_up: dict[int, dict[str, int]] = {}
        # runs of whole topics dealt round-robin to equally loaded subscribers: (subscribers, topics)
        self.deals: list[tuple[list[int], list[str]]] = []
        # topic -> members that gave up partitions of it before pouring (owned, off-rack or unsubscribed)
        self.returning: dict[str, set[int]] = {}

    def build(self) -> tuple[list[list[TopicPartition]], dict[TopicPartition, int]]:
        self._keep_owned()
        for tp, i in self.ownership.given_up_by.items():
            self.returning.setdefault(tp[0], set()).add(i)
        topics, marks, order, count = self.topics, self.ownership.marks, self.topic_order, self.count
        # Dealing whole unowned topics to equally loaded subscribers needs no per-member bookkeeping
        # (a fresh group); anything owned, claimed or rack-aware goes through _pour.
        can_deal = not self.racks.enabled and not self.ownership.claimers
        k = 0
        while k < len(order):
            t, subs = order[k], self.subscribers[order[k]]
            free = marks[t].count(0)
            k += 1
            if not subs or not free:
                continue
            if can_deal and free == topics[t] and len(set(map(count.__getitem__, subs))) == 1:
                run = [t]
                while (
                    k < len(order)
                    and self.subscribers[order[k]] == subs
                    and marks[order[k]].count(0) == topics[order[k]]
                ):
                    run.append(order[k])
                    k += 1
                self._deal(subs, run)
            else:
                self._pour(t, free)
        if max(count, default=0) - min(count, default=0) >= 2:
            self._expand_deals()
            self._balance()
        return self._materialize()

    def _deal(self, subs: list[int], run: list[str]) -> None:
        """Deal the partitions of ``run`` (whole, unowned topics) round-robin to equally loaded ``subs``:
        what one-partition-at-a-time to the least loaded (lowest index first) does."""
        each, extra = divmod(sum(self.topics[t] for t in run), len(subs))
        count = self.count
        for pos, i in enumerate(subs):
            count[i] += each + (1 if pos < extra else 0)
        self.deals.append((subs, run))

    def _expand_deals(self) -> None:
        """Turn dealt runs into per-(topic, member) counts, for balancing."""
        for subs, run in self.deals:
            n_subs, offset = len(subs), 0
            for t in run:
                n = self.topics[t]
                added = self.added[t]
                for pos, i in enumerate(subs):
                    first = offset + (pos - offset) % n_subs  # first index >= offset dealt to pos
                    if first < offset + n:
                        added[i] = added.get(i, 0) + (offset + n - 1 - first) // n_subs + 1
                offset += n
        self.deals = []

    def _keep_owned(self) -> None:
        racks, release = self.racks, self.ownership.release
        # Owned partitions are all of assigned topics and subscriptions are within them: a member
        # subscribed to every topic keeps all it owns without a look at each partition.
        n_topics = len(self.topics)
        for i, mine in enumerate(self.ownership.owned):
            if mine:
                subscribed = self.member_topics[i]
                if (len(subscribed) != n_topics and not set(map(_topic_of, mine)) <= subscribed) or (
                    racks.enabled and i in racks.member_racks
                ):
                    dropped = [tp for tp in mine if tp[0] not in subscribed or racks.mismatch(i, tp)]
                    if dropped:
                        release(i, dropped)
                        mine = [tp for tp in mine if tp[0] in subscribed and not racks.mismatch(i, tp)]
            self.kept.append(mine)
            self.count.append(len(mine))

    def _pour(self, topic: str, units: int) -> None:
        """Give ``units`` partitions of ``topic`` to its least loaded subscribers (water-filling), the
        remainder to the lowest member indices: the counts Java's one-at-a-time loop reaches."""
        count, subs = self.count, self.subscribers[topic]
        before = list(map(count.__getitem__, subs))
        if units * 8 < len(subs):
            self._pour_few(topic, units, before)
            return
        level, below, left = 0, 0, units
        for c, n in sorted(Counter(before).items()):
            if below and below * (c - level) > left:
                break
            left -= below * (c - level)
            level = c
            below += n
        each, extra = divmod(left, below)
        target = level + each
        # members above the level stay as they are (target < their count): per-member work in C
        shares = list(map(max, repeat(0), map(sub, repeat(target), before)))
        if extra:
            after = list(map(add, before, shares))
            picked: list[int] = []
            # equally loaded members that gave up partitions of this topic first (they take them back
            # without a move), then, rack-aware, members on a rack with a free replica of the topic left
            # (so the remainder lands where it can be local), then by member index
            for i in sorted(self.returning.get(topic, ())):
                pos = bisect_left(subs, i)
                if len(picked) < extra and pos < len(subs) and subs[pos] == i and after[pos] == target:
                    picked.append(pos)
            chosen = set(picked)
            if self.racks.enabled and len(picked) < extra:
                room = self._free_on_rack(topic)
                for pos in (p for p, c in enumerate(after) if c == target and p not in chosen):
                    rack = self.racks.member_racks.get(subs[pos])
                    if len(picked) < extra and room.get(rack, 0) > 0:
                        room[rack] -= 1
                        picked.append(pos)
                        chosen.add(pos)
            pos = -1
            while len(picked) < extra:
                pos = after.index(target, pos + 1)
                if pos not in chosen:
                    picked.append(pos)
            for pos in picked:
                shares[pos] += 1
        added = self.added[topic]
        for i, k in zip(compress(subs, shares), compress(shares, shares)):
            added[i] = added.get(i, 0) + k
            count[i] += k

    def _free_on_rack(self, topic: str) -> dict[str | None, int]:
        """rack -> how many unowned partitions of ``topic`` have a replica there (a member without a
        rack looks up None, which is never there)."""
        room: dict[str | None, int] = {}
        mark, partition_racks = self.ownership.marks[topic], self.racks.partition_racks
        for p in range(self.topics[topic]):
            if not mark[p]:
                for rack in partition_racks.get(TopicPartition(topic, p), ()):
                    room[rack] = room.get(rack, 0) + 1
        return room

    def _pour_few(self, topic: str, units: int, before: list[int]) -> None:
        """_pour for a few partitions among many subscribers: one at a time to the least loaded
        (members that gave up partitions of the topic first among equals, then lowest index), which
        only ever reaches the ``units`` least loaded members, so only those are looked at."""
        subs, count, added = self.subscribers[topic], self.count, self.added[topic]
        returning = self.returning.get(topic)
        last = map(not_, map(returning.__contains__, subs)) if returning else repeat(True)
        off: Iterable[bool]
        if self.racks.enabled:  # among equals, members on a rack holding a free replica of the topic
            room, racks = self._free_on_rack(topic), self.racks.member_racks
            off = [not room.get(racks.get(i), 0) for i in subs]
        else:
            off = repeat(False)
        heap = heapq.nsmallest(units, zip(before, last, off, subs))
        heapq.heapify(heap)
        for _ in range(units):
            c, flag, rack_flag, i = heap[0]
            heapq.heapreplace(heap, (c + 1, flag, rack_flag, i))
            added[i] = added.get(i, 0) + 1
            count[i] += 1

    # -- balancing -------------------------------------------------------------------------------

    def _balance(self) -> None:
        """Fill from the bottom: the least loaded member takes one partition from the most loaded member
        holding a topic it subscribes to, while they differ by two or more; newly handed out partitions
        move first, owned ones only when that is not enough."""
        count, member_topics = self.count, self.member_topics
        n_members = len(count)
        added_by: list[dict[str, int]] = [{} for _ in range(n_members)]
        for t, per_member in self.added.items():
            for i, k in per_member.items():
                if k:
                    added_by[i][t] = k
        kept_by = _LazyTopicCounts(self.kept)
        for owned_too in (False, True):
            while self._balance_round(owned_too, added_by, kept_by, member_topics):
                pass
        self._augment(added_by, kept_by)
        if self.given_up:
            self._take_back(added_by)
        self.added = {t: {} for t in self.topics}
        for i, holding in enumerate(added_by):
            for t, k in holding.items():
                if k:
                    self.added[t][i] = k

    def _balance_round(
        self,
        owned_too: bool,
        added_by: list[dict[str, int]],
        kept_by: _LazyTopicCounts,
        member_topics: Sequence[frozenset[str]],
    ) -> bool:
        """One pass over the members from the least loaded up; True if anything moved."""
        count = self.count
        subscribers = self.subscribers
        shared = frozenset(t for t, subs in subscribers.items() if len(subs) > 1)
        # subscription -> its topics that another member could take over (one set per distinct subscription)
        movable: dict[frozenset[str], frozenset[str]] = {}

        def gives(d: int, lo_topics: frozenset[str]) -> str | None:
            # The topic d holds most of (ties: by name), so that the choice does not depend on the
            # order members listed their partitions in.
            can_take = movable.get(lo_topics)
            if can_take is None:
                can_take = movable[lo_topics] = lo_topics & shared
            for held in (added_by[d], kept_by[d]) if owned_too else (added_by[d],):
                if held.keys() <= can_take:
                    # every topic held is a candidate: the same choice, found in C
                    most = max(held.values(), default=0)
                    if most:
                        return max(compress(held.keys(), map(most.__eq__, held.values())))
                    continue
                best = max(((k, t) for t, k in held.items() if k and t in can_take), default=None)
                if best is not None:
                    return best[1]
            return None

        donors = [
            (-count[i], i) for i in range(len(count)) if any(added_by[i].values()) or (owned_too and kept_by.has_any(i))
        ]
        takers = [(count[i], i) for i in range(len(count)) if member_topics[i]]
        heapq.heapify(donors)
        heapq.heapify(takers)
        moved = False
        while takers and donors:
            c_low, lo = heapq.heappop(takers)
            if c_low != count[lo]:
                continue
            lo_topics = member_topics[lo]
            examined, found = [], None
            while donors:
                c, d = heapq.heappop(donors)
                if -c != count[d]:
                    continue
                examined.append((c, d))
                if -c < c_low + 2:
                    break
                topic = gives(d, lo_topics)
                if topic is not None:
                    found = (d, topic)
                    break
            for entry in examined:
                heapq.heappush(donors, entry)
            if not examined or -examined[0][0] < c_low + 2:
                break  # nobody has two more than the least loaded member left: balanced
            if found is None:
                continue
            d, t = found
            if added_by[d].get(t):
                added_by[d][t] -= 1
            else:
                kept_by[d][t] -= 1
                lost = self.given_up.setdefault(d, {})
                lost[t] = lost.get(t, 0) + 1
            added_by[lo][t] = added_by[lo].get(t, 0) + 1
            count[d] -= 1
            count[lo] += 1
            moved = True
            heapq.heappush(takers, (count[lo], lo))
            heapq.heappush(takers, (count[d], d))
            heapq.heappush(donors, (-count[lo], lo))
            heapq.heappush(donors, (-count[d], d))
        return moved

    def _augment(self, added_by: list[dict[str, int]], kept_by: _LazyTopicCounts) -> None:
        """Chains: member A may be two or more below member Z with no topic in common, yet reach it
        through members in between (A takes from B what B can take back from Z, ...). Shift one
        partition along the shortest such chain while one exists (each shift lowers the spread)."""
        count = self.count
        if max(count) - min(count) < 2:
            return
        # topic -> members holding newly handed out partitions of it / any partition of it
        holders_added: dict[str, set[int]] = {t: set() for t in self.topics}
        holders: dict[str, set[int]] = {t: set() for t in self.topics}
        for i in range(len(count)):
            for t, k in added_by[i].items():
                if k:
                    holders_added[t].add(i)
                    holders[t].add(i)
            for t, k in kept_by[i].items():
                if k:
                    holders[t].add(i)
        while True:
            top = max(count)
            # As in _balance, chains of newly handed out partitions first; owned partitions move only
            # when no such chain exists (else a member could lose an owned partition to one that ends
            # up with more).
            for searched in (holders_added, holders):
                # A search that fails from a member explores topics from which no member at least two
                # above it can be reached; members (no less loaded) with all topics among those need no search.
                dead: set[str] = set()
                path = None
                for lo in sorted((i for i in range(len(count)) if count[i] <= top - 2), key=lambda i: (count[i], i)):
                    if self.member_topics[lo] <= dead:
                        continue
                    path = self._chain(lo, searched, dead, added_by)
                    if path:
                        break
                if path:
                    break
            else:
                return
            taker = lo
            for topic, giver in path:
                if added_by[giver].get(topic):
                    added_by[giver][topic] -= 1
                    if not added_by[giver][topic]:
                        holders_added[topic].discard(giver)
                else:
                    kept_by[giver][topic] -= 1
                    lost = self.given_up.setdefault(giver, {})
                    lost[topic] = lost.get(topic, 0) + 1
                if not added_by[giver].get(topic) and not kept_by[giver].get(topic):
                    holders[topic].discard(giver)
                added_by[taker][topic] = added_by[taker].get(topic, 0) + 1
                holders_added[topic].add(taker)
                holders[topic].add(taker)
                taker = giver
            count[lo] += 1
            count[path[-1][1]] -= 1

    def _take_back(self, added_by: list[dict[str, int]]) -> None:
        """Undo moves that balancing no longer needs: a member that gave up an owned partition of a topic
        keeps it instead when a member holding a handed-out partition of that topic has one more
        partition than it (the counts swap, the balance stays, one move fewer). Moves made early in
        balancing can become unnecessary once later chains shift counts."""
        count = self.count
        for d in sorted(self.given_up):
            lost = self.given_up[d]
            for t in sorted(lost):
                while lost[t]:
                    x = next(
                        (
                            x
                            for x in self.subscribers[t]
                            if count[x] == count[d] + 1 and added_by[x].get(t) and not self.given_up.get(x, {}).get(t)
                        ),
                        None,
                    )
                    if x is None:
                        break
                    added_by[x][t] -= 1
                    lost[t] -= 1
                    count[x] -= 1
                    count[d] += 1

    def _chain(
        self, lo: int, holders: dict[str, set[int]], dead: set[str], added_by: list[dict[str, int]]
    ) -> list[tuple[str, int]] | None:
        """Shortest chain [(topic, giver), ...] from ``lo`` to a member with two or more partitions more;
        when there is none, the topics explored are added to ``dead``. Among givers of a topic, those
        holding newly handed out partitions of it come first: their move costs no owned partition."""
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
                    for giver in sorted(holders[t], key=lambda g: (not added_by[g].get(t), g)):
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
        dead |= seen_topics
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
            for tp in compress(mine, map(lost.__contains__, map(_topic_of, mine))):
                by_topic.setdefault(tp[0], []).append(tp)
            gone: list[TopicPartition] = []
            for t, k in lost.items():
                # give up the highest partition numbers (Java trims owned partitions the same way)
                out = sorted(by_topic[t], key=itemgetter(1))[-k:]
                gone += out
                self.ownership.release(i, out)  # back in the topic's pool, claimed by i
            if len(gone) <= _FEW_GIVEN_UP:
                # A balancing move takes one or two partitions of a member's hundreds: remove them (a
                # scan in C each) instead of hashing every partition the member keeps.
                mine = mine.copy()
                for tp in gone:
                    mine.remove(tp)
                self.kept[i] = mine
            else:
                leaving = set(gone)
                self.kept[i] = [tp for tp in mine if tp not in leaving]

        result = self.kept
        given_up_by = self.ownership.given_up_by
        for subs, run in self.deals:
            dealt = list(chain.from_iterable(topic_partitions(t, range(self.topics[t])) for t in run))
            for pos, i in enumerate(subs):
                result[i].extend(dealt[pos :: len(subs)])
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
                    result[i].extend(pool[start : start + k])
                    start += k
                continue
            placed: dict[TopicPartition, int] = {}
            if racks.enabled:
                # A claimer keeps room for its partitions that no member with room can have on-rack:
                # giving those back costs no locality and moves nothing.
                reserved = dict.fromkeys(slots, 0)
                for tp in pool:
                    giver = given_up_by.get(tp)
                    if (
                        giver is not None
                        and giver in slots
                        and reserved[giver] < slots[giver]
                        and not any(racks.matches(j, tp) for j in slots)
                    ):
                        reserved[giver] += 1
                for tp in sorted(pool, key=racks.members_on_replica_racks):
                    candidates = [i for i in slots if slots[i] > reserved[i] and racks.matches(i, tp)]
                    if candidates:
                        giver = given_up_by.get(tp)
                        i = giver if giver is not None and giver in candidates else candidates[0]
                        placed[tp] = i
                        slots[i] -= 1
            for tp in pool:
                giver = given_up_by.get(tp)
                if giver is not None and tp not in placed and slots.get(giver):
                    placed[tp] = giver  # back to the member that gave it up: no move
                    slots[giver] -= 1
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


class _LazyTopicCounts:
    """Per member, how many of its kept partitions each topic has; counted on first use only (a
    balancing pass usually looks at a few members of a large group)."""

    def __init__(self, kept: list[list[TopicPartition]]) -> None:
        self._kept = kept
        self._counts: list[Counter[str] | None] = [None] * len(kept)

    def __getitem__(self, member: int) -> Counter[str]:
        counts = self._counts[member]
        if counts is None:
            counts = self._counts[member] = Counter(map(_topic_of, self._kept[member]))
        return counts

    def has_any(self, member: int) -> bool:
        counts = self._counts[member]
        return bool(self._kept[member]) if counts is None else any(counts.values())
