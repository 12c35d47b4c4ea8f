"""Kafka's ``RangeAssignor`` (Java 3.9): per topic, the members subscribed to it, in Java's member
order, each take a contiguous range of partitions; the first ``partitions % members`` take one more.

Rack-aware (KIP-881) when members carry ``rack_id`` and ``partition_racks`` says where replicas
live: members first take partitions with a replica in their own rack, within the same per-member
quota, and topics with the same subscribers and partition count ("co-partitioned") keep
partition ``p`` of each such topic on one member. Then the plain range pass fills in the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from itertools import islice

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.member_order import sorted_members
from kassign.model import Subscription, TopicPartition
from kassign.protocol.topic_partitions import java_string_order

__all__ = ["RangeAssignor"]

log = logging.getLogger(__name__)


class _TopicState:
    """One topic's progress: its members (with racks), quotas and still-unassigned partitions."""

    def __init__(
        self,
        topic: str,
        n_partitions: int,
        consumers: dict[str, str | None],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> None:
        self.topic = topic
        self.consumers = consumers
        self.unassigned: dict[TopicPartition, None] = dict.fromkeys(
            TopicPartition(topic, p) for p in range(n_partitions)
        )
        self.assigned_count = dict.fromkeys(consumers, 0)
        self.quota = n_partitions // len(consumers) if consumers else 0
        self.members_with_extra = n_partitions % len(consumers) if consumers else 0

        consumer_racks = {rack for rack in consumers.values() if rack is not None}
        # Java only looks at replica racks when some member of this topic has a rack.
        self.partition_racks: dict[TopicPartition, frozenset[str]] = {}
        if consumer_racks:
            racks_of = partition_racks or {}
            for tp in self.unassigned:
                self.partition_racks[tp] = frozenset(r for r in racks_of.get(tp, ()) if r is not None)
        all_partition_racks = frozenset().union(*self.partition_racks.values())
        # Rack matching only pays off when members share racks with replicas and not every
        # partition has a replica in every rack.
        self.needs_rack_aware = (
            bool(consumer_racks)
            and not consumer_racks.isdisjoint(all_partition_racks)
            and any(racks != all_partition_racks for racks in self.partition_racks.values())
        )

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumers[consumer]
        return rack is None or rack in self.partition_racks.get(tp, ())

    def max_assignable(self, consumer: str) -> int:
        limit = self.quota + (1 if self.members_with_extra > 0 else 0)
        return max(0, limit - self.assigned_count[consumer])

    def on_assigned(self, consumer: str, partitions: list[TopicPartition]) -> None:
        self.assigned_count[consumer] += len(partitions)
        if self.assigned_count[consumer] > self.quota:
            self.members_with_extra -= 1
        for tp in partitions:
            del self.unassigned[tp]


class RangeAssignor(PartitionAssignor):
    """Range assignment, identical to Java 3.9's ``range`` strategy, rack-aware when racks are known."""

    name = "range"

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        member_racks = {m: (s.rack_id or None) for m, s in subscriptions.items()}
        subscribers: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in sub.topics:
                subscribers.setdefault(topic, []).append(member)

        states = []
        for topic in sorted(subscribers, key=java_string_order):
            n_partitions = partitions_per_topic.get(topic, 0)
            if n_partitions > 0:
                consumers = {m: member_racks[m] for m in sorted_members(subscribers[topic], subscriptions)}
                states.append(_TopicState(topic, n_partitions, consumers, partition_racks))

        rack_aware = any(state.needs_rack_aware for state in states)
        if rack_aware:
            log.debug("range: rack-aware assignment for %d topics", len(states))
            self._assign_with_rack_matching(states, assignment)
        for state in states:
            self._assign_ranges(state, lambda consumer, tp: True, assignment)
        if rack_aware:
            for partitions in assignment.values():
                partitions.sort()
        return assignment

    @staticmethod
    def _give(
        consumer: str, partitions: list[TopicPartition], state: _TopicState, assignment: dict[str, list[TopicPartition]]
    ) -> None:
        assignment[consumer].extend(partitions)
        state.on_assigned(consumer, partitions)

    def _assign_ranges(
        self,
        state: _TopicState,
        may_assign: Callable[[str, TopicPartition], bool],
        assignment: dict[str, list[TopicPartition]],
    ) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            allowed = (tp for tp in state.unassigned if may_assign(consumer, tp))
            partitions = list(islice(allowed, state.max_assignable(consumer)))
            if partitions:
                self._give(consumer, partitions, state, assignment)

    def _assign_with_rack_matching(
        self, states: list[_TopicState], assignment: dict[str, list[TopicPartition]]
    ) -> None:
        # Topics with the same members (and racks) and the same partition count are co-partitioned.
        groups: dict[tuple[tuple[tuple[str, str | None], ...], int], list[_TopicState]] = {}
        for state in states:
            key = (
                tuple(sorted(state.consumers.items(), key=lambda item: java_string_order(item[0]))),
                len(state.partition_racks),
            )
            groups.setdefault(key, []).append(state)
        for (_, n_partitions), group in groups.items():
            if len(group) > 1:
                self._assign_co_partitioned(group, n_partitions, assignment)
            elif group[0].needs_rack_aware:
                self._assign_ranges(group[0], group[0].racks_match, assignment)

    def _assign_co_partitioned(
        self, group: list[_TopicState], n_partitions: int, assignment: dict[str, list[TopicPartition]]
    ) -> None:
        remaining = list(group[0].consumers)
        for p in range(n_partitions):
            consumer = next(
                (
                    c
                    for c in remaining
                    if all(s.racks_match(c, TopicPartition(s.topic, p)) and s.max_assignable(c) > 0 for s in group)
                ),
                None,
            )
            if consumer is None:
                continue
            for state in group:
                self._give(consumer, [TopicPartition(state.topic, p)], state, assignment)
            if not any(state.max_assignable(consumer) > 0 for state in group):
                remaining.remove(consumer)
                if not remaining:
                    break
