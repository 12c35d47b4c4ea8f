"""The data model every part of kassign shares: partitions, subscriptions, assignments.

These mirror the classes of Kafka's ``ConsumerPartitionAssignor`` interface so that a Kafka
engineer recognises them: a member's :class:`Subscription` carries its topics, opaque user data,
the partitions it owns and the generation it owned them in; the leader's assignor answers with
one :class:`Assignment` per member.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["TopicPartition", "Subscription", "Assignment", "RebalanceProtocol", "GroupSubscription"]


class TopicPartition(NamedTuple):
    """A partition of a topic; tuples order by (topic, partition) as Kafka sorts them."""

    topic: str
    partition: int


class RebalanceProtocol(enum.Enum):
    """The two classic-group rebalance protocols (KIP-429).

    EAGER: every member revokes everything before joining. COOPERATIVE: members keep their
    partitions through the rebalance and revoke only what moves. The numeric values are the ones
    Java's ``RebalanceProtocol.id()`` uses, so ``max`` picks the more capable protocol.
    """

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True)
class Subscription:
    """One member's JoinGroup metadata, decoded.

    ``generation_id`` is the generation in which ``owned_partitions`` were owned; ``None`` (on the
    wire -1) means the member has none. ``group_instance_id`` is never encoded: the leader fills it
    in from the JoinGroup response for static members.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int | None = None
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass
class Assignment:
    """What the leader hands one member in SyncGroup."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


@dataclass(frozen=True)
class GroupSubscription:
    """Everything the leader's assignor sees in one round: topic sizes and every member's subscription."""

    partitions_per_topic: dict[str, int]
    subscriptions: dict[str, Subscription]
    partition_racks: dict[TopicPartition, frozenset[str]] | None = None
