"""The sticky assignment when every member subscribes to the same topics (Java's constrained path).

Quotas: each member ends with ``min_quota`` or ``max_quota`` partitions, ``total % members`` of them
with ``max_quota``. Members first keep what they own up to their quota (trimming keeps the lowest
partition numbers across topics, as Java does since KAFKA-16277); the rest is handed out round-robin
in (topic, partition) order to members in member-id order, first up to ``min_quota``, then one more
to members still allowed ``max_quota``. Where members return with claims from an older generation
than the partition's owner (a member that missed rebalances), an owner above its quota gives up
those partitions first and each goes back to its older claimer while that one is below its quota
(without racks): as sticky as the peers that keep older claims (kafka-python, aiokafka), where Java
reshuffles them.
With racks, owned partitions off the member's rack are given
up and unassigned partitions go to same-rack members first, as in Java 3.9.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import itemgetter

from kassign.assignors.rack_info import RackInfo
from kassign.assignors.sticky.ownership import ZERO_TO_ONE, Ownership
from kassign.model import TopicPartition

__all__ = ["constrained_assign", "topic_partitions", "unowned_partitions"]

# TopicPartition(topic, p) through the NamedTuple's __new__ is a Python-level call per partition;
# tuple.__new__ builds the same object from C.
_new = tuple.__new__
_partition_then_topic = itemgetter(1, 0)
# A topic with fewer than one free partition in this many has them found one by one.
_SPARSE = 32


def topic_partitions(topic: str, partitions: Iterable[int]) -> list[TopicPartition]:
    """``[TopicPartition(topic, p) for p in partitions]``, built without a Python call per item."""
    return list(map(_new, repeat(TopicPartition), zip(repeat(topic), partitions)))


def unowned_partitions(topic: str, count: int, mark: bytearray) -> list[TopicPartition]:
    """The partitions of ``topic`` whose mark is zero, in partition order."""
    free = mark.count(0)
    if free == 0:
        return []
    if free == count:
        return topic_partitions(topic, range(count))
    if free * _SPARSE < count:
        # A few free partitions (a member left, or gave one up to balance): find them rather than
        # scanning every partition's mark.
        found, pos = [], -1
        for _ in range(free):
            pos = mark.find(0, pos + 1)
            found.append(pos)
        return topic_partitions(topic, found)
    return topic_partitions(topic, compress(range(count), mark.translate(ZERO_TO_ONE)))


def constrained_assign(
    topics: Mapping[str, int],
    ownership: Ownership,
    racks: RackInfo,
) -> tuple[list[list[TopicPartition]], dict[TopicPartition, int]]:
    """Assign ``topics`` (sorted by name) to members ``0..M-1`` (in member-id order).

    Returns each member's partitions and the partitions changing owner (partition -> new member).
    """
    owned = ownership.owned
    n_members = len(owned)
    total = sum(topics.values())
    min_quota, expected_over_min = divmod(total, n_members)
    max_quota = min_quota + (1 if expected_over_min else 0)

    if not racks.enabled and not ownership.claimers and not any(owned):
        # Fresh group: the round-robin below gives member k exactly partitions k, k+M, k+2M, ...
        everything = list(chain.from_iterable(topic_partitions(t, range(n)) for t, n in topics.items()))
        return [everything[k::n_members] for k in range(n_members)], {}

    assignment: list[list[TopicPartition]] = []
    under_min: list[int] = []
    exactly_min: deque[int] = deque()
    over_min = 0
    for i, mine in enumerate(owned):
        if racks.enabled:
            off_rack = [tp for tp in mine if racks.mismatch(i, tp)]
            if off_rack:
                ownership.release(i, off_rack)
                mine = [tp for tp in mine if not racks.mismatch(i, tp)]
        n_owned = len(mine)
        if n_owned < min_quota:
            assignment.append(mine)
            under_min.append(i)
            continue
        if n_owned >= max_quota and over_min < expected_over_min:
            quota = max_quota
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
        else:
            quota = min_quota
            if over_min < expected_over_min:
                exactly_min.append(i)
        if n_owned > quota:
            older = ownership.older_claims
            by_age = (lambda tp: (tp in older, tp[1], tp[0])) if older else _partition_then_topic  # noqa: B023 - used at once
            mine = sorted(mine, key=by_age)
            ownership.release(i, mine[quota:])
            del mine[quota:]
        assignment.append(mine)

    pool = list(chain.from_iterable(unowned_partitions(t, n, ownership.marks[t]) for t, n in topics.items()))
    state = _Filling(
        assignment, ownership.claimers, under_min, exactly_min, over_min, min_quota, max_quota, expected_over_min
    )
    if ownership.older_claims and not racks.enabled:  # with racks, Java's rack-aware filling decides
        pool = state.back_to_older_claimers(pool, ownership.older_claims)
    if racks.enabled:
        pool.sort(key=racks.members_on_replica_racks)  # stable: (topic, partition) within equal counts
        pool = state.rack_aware_round_robin(pool, racks)
    state.round_robin(pool)
    state.verify()
    return assignment, state.transferring


class _Filling:
    """Java's round-robin filling of unfilled members, with its quota bookkeeping."""

    def __init__(
        self,
        assignment: list[list[TopicPartition]],
        claimers: dict[TopicPartition, set[int]],
        under_min: list[int],
        exactly_min: deque[int],
        over_min: int,
        min_quota: int,
        max_quota: int,
        expected_over_min: int,
    ) -> None:
        self.assignment = assignment
        self.claimers = claimers
        self.under_min = under_min
        self.exactly_min = exactly_min
        self.over_min = over_min
        self.min_quota = min_quota
        self.max_quota = max_quota
        self.expected_over_min = expected_over_min
        self.transferring: dict[TopicPartition, int] = {}

    def give(self, tp: TopicPartition, member: int) -> int:
        mine = self.assignment[member]
        mine.append(tp)
        holders = self.claimers.get(tp)
        if holders is not None and (len(holders) > 1 or member not in holders):
            self.transferring[tp] = member
        return len(mine)

    def back_to_older_claimers(
        self, pool: list[TopicPartition], older: Mapping[TopicPartition, list[int]]
    ) -> list[TopicPartition]:
        """Give each partition to the newest older-generation claimer still below the minimum quota;
        returns the partitions left over, in order."""
        left: list[TopicPartition] = []
        under = self.under_min
        for tp in pool:
            member = next((c for c in older.get(tp, ()) if c in under), None)
            if member is None:
                left.append(tp)
            elif self.give(tp, member) == self.min_quota:
                under.remove(member)
                if self.min_quota < self.max_quota and self.over_min < self.expected_over_min:
                    self.exactly_min.append(member)
        return left

    def rack_aware_round_robin(self, pool: list[TopicPartition], racks: RackInfo) -> list[TopicPartition]:
        """Place what can go to a same-rack unfilled member; returns the partitions left over."""
        left: list[TopicPartition] = []
        under, exactly = self.under_min, self.exactly_min
        next_index = 0
        for tp in pool:
            member = None
            index = _next_rack_member(racks, tp, under, next_index)
            if index >= 0:
                member = under[index]
                count = len(self.assignment[member]) + 1
                if count >= self.min_quota:
                    del under[index]
                    if count < self.max_quota and self.over_min < self.expected_over_min:
                        exactly.append(member)
                else:
                    index += 1
                next_index = index % len(under) if under else 0
            elif exactly:
                index = _next_rack_member(racks, tp, exactly, 0)
                if index >= 0:
                    member = exactly[index]
                    if len(self.assignment[member]) + 1 == self.max_quota:
                        del exactly[index]
                        self.over_min += 1
                        if self.over_min == self.expected_over_min:
                            exactly.clear()
            if member is None:
                left.append(tp)
            else:
                self.give(tp, member)
        return left

    def round_robin(self, pool: list[TopicPartition]) -> None:
        under, exactly = self.under_min, self.exactly_min
        min_quota, max_quota = self.min_quota, self.max_quota
        position = 0
        for tp in pool:
            if position < len(under):
                member, from_under = under[position], True
            elif under:
                position = 0
                member, from_under = under[0], True
            elif exactly:
                member, from_under = exactly.popleft(), False
            else:
                raise RuntimeError(f"sticky assignment: no member left to take {tp} (quotas {min_quota}/{max_quota})")
            count = self.give(tp, member)
            if from_under:
                if count == min_quota:
                    del under[position]
                    exactly.append(member)
                else:
                    position += 1
            elif count == max_quota:
                self.over_min += 1

    def verify(self) -> None:
        """The quotas must be met exactly; anything else is a bug in this module."""
        if self.under_min and self.over_min != self.expected_over_min:
            raise RuntimeError(
                f"sticky assignment: {self.over_min} members above the minimum quota, expected {self.expected_over_min}"
            )
        short = [m for m in self.under_min if len(self.assignment[m]) != self.min_quota]
        if short:
            raise RuntimeError(f"sticky assignment: members {short} below the minimum quota {self.min_quota}")


def _next_rack_member(racks: RackInfo, tp: TopicPartition, members: Sequence[int], first: int) -> int:
    """Index in ``members`` (cyclically from ``first``) of the first member on a rack of ``tp``, or -1."""
    n = len(members)
    for k in range(n):
        index = (first + k) % n
        if racks.matches(members[index], tp):
            return index
    return -1
