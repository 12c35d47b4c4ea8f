"""Kafka's ``RoundRobinAssignor``: every subscribed partition, in (topic, partition) order, dealt
to the members in turn, skipping members not subscribed to the partition's topic."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.member_order import sorted_members
from kassign.model import Subscription, TopicPartition
from kassign.protocol.topic_partitions import java_string_order

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(PartitionAssignor):
    """Round-robin assignment, identical to Java's ``roundrobin`` strategy.

    Members are visited in Java's order (static members by group instance id, then member id);
    a topic missing from ``partitions_per_topic`` has no partitions. Rack information is unused.
    """

    name = "roundrobin"

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = sorted_members(subscriptions, subscriptions)
        if not members:
            return assignment
        subscribed = {member: frozenset(subscriptions[member].topics) for member in members}
        topics = sorted({t for topics in subscribed.values() for t in topics}, key=java_string_order)
        cursor = 0
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                # Some member subscribes to every topic in `topics`, so this scan always ends.
                while topic not in subscribed[members[cursor]]:
                    cursor = (cursor + 1) % len(members)
                assignment[members[cursor]].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % len(members)
        return assignment
