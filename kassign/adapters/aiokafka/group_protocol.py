"""The consumer-protocol side of a group rebalance as aiokafka carries it, shared by the drop-in
assignors and kassign's coordinator: the JoinGroup metadata a member sends, reading every
member's subscription from aiokafka's JoinGroup response, what the leader needs from aiokafka's
cluster metadata (partition counts, replica racks), and the encoded assignments.

The rules themselves (assign, the cooperative check, unreadable members, the follow-up mark) are
:mod:`kassign.membership`'s; everything here works on kassign's codecs
(``ConsumerProtocolSubscription`` v0-v3), not on aiokafka's v0 struct, so owned partitions,
generations and racks reach the assignor.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from kassign.adapters.aiokafka.internals import replica_ids
from kassign.assignors.base import PartitionAssignor
from kassign.membership import GroupAssignment, InvalidAssignment, assign_group, select_rebalance_protocol
from kassign.membership import IllegalCooperativeAssignment as _CooperativeRuleBroken
from kassign.model import RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol import (
    ProtocolError,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

log = logging.getLogger(__name__)

__all__ = [
    "IllegalCooperativeAssignment",
    "select_rebalance_protocol",
    "member_metadata",
    "decode_member_subscriptions",
    "read_member_subscriptions",
    "topic_partition_counts",
    "replica_racks",
    "cluster_inputs",
    "encode_group_assignment",
    "as_kafka_error",
    "leader_assignment",
]


class IllegalCooperativeAssignment(KafkaError, _CooperativeRuleBroken):
    """The leader's assignor handed a partition to one member while another still owns it.

    Under the cooperative protocol that would let two members consume the same partition at once,
    so the leader refuses to send the assignment (Java's ``validateCooperativeAssignment``).
    """


def as_kafka_error(exc: InvalidAssignment) -> KafkaError:
    """The membership core's refusal as the KafkaError aiokafka's coordinator expects."""
    if isinstance(exc, _CooperativeRuleBroken):
        return IllegalCooperativeAssignment(str(exc))
    return KafkaError(str(exc))


def member_metadata(
    assignor: PartitionAssignor,
    topics: Iterable[str],
    *,
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    rack: str | None = None,
) -> bytes:
    """JoinGroup metadata for one protocol: a v3 ``ConsumerProtocolSubscription``."""
    topic_list = sorted(set(topics))
    subscription = Subscription(
        topic_list,
        assignor.subscription_user_data(set(topic_list)),
        sorted(owned),
        None if generation < 0 else generation,
        rack,
    )
    return encode_subscription(subscription)


def _lenient_subscription(member_id: str, data: bytes) -> Subscription:
    # A member we cannot fully parse still belongs to the group: keep what the v0 header says
    # (its topics) and drop everything that claims ownership.
    try:
        header = ConsumerProtocolMemberMetadata.decode(data)
        topics = [str(t) for t in header.subscription]
    except Exception as exc:  # aiokafka's struct raises assorted types on short or bad input
        log.error(
            "member %s sent unreadable subscription metadata (%s); it subscribes to nothing this round", member_id, exc
        )
        return Subscription([])
    log.error(
        "member %s sent a malformed subscription; using its topics %s without previous assignment", member_id, topics
    )
    return Subscription(topics)


def decode_member_subscriptions(members: Iterable[Sequence[Any]]) -> dict[str, Subscription]:
    """Decode the JoinGroup response's members: ``(member_id, metadata)`` or
    ``(member_id, group_instance_id, metadata)`` tuples, as aiokafka's response versions give them.

    A member whose metadata does not parse is logged and treated as subscribing to its v0 topics
    with no previous assignment (or to nothing when even that fails); it never fails the round.
    """
    return read_member_subscriptions(members)[0]


def read_member_subscriptions(members: Iterable[Sequence[Any]]) -> tuple[dict[str, Subscription], frozenset[str]]:
    """:func:`decode_member_subscriptions`, and the ids of the members whose metadata did not parse."""
    subscriptions: dict[str, Subscription] = {}
    unreadable: set[str] = set()
    for member in members:
        if len(member) == 3:
            member_id, instance_id, data = member
        elif len(member) == 2:
            member_id, data = member
            instance_id = None
        else:
            raise ValueError(f"JoinGroup member entry {member!r} has neither 2 nor 3 fields")
        try:
            subscription = decode_subscription(bytes(data))
        except ProtocolError as exc:
            log.debug("member %s: %s", member_id, exc)
            subscription = _lenient_subscription(member_id, bytes(data))
            unreadable.add(member_id)
        subscriptions[member_id] = Subscription(
            subscription.topics,
            subscription.user_data,
            subscription.owned_partitions,
            subscription.generation_id,
            subscription.rack_id,
            instance_id or None,
        )
    return subscriptions, frozenset(unreadable)


def topic_partition_counts(cluster: Any, topics: Iterable[str]) -> dict[str, int]:
    """Partition count per subscribed topic from aiokafka's ClusterMetadata; unknown topics omitted."""
    counts: dict[str, int] = {}
    for topic in sorted(set(topics)):
        partitions = cluster.partitions_for_topic(topic)
        if partitions is None:
            log.warning("no partition metadata for subscribed topic %s", topic)
            continue
        counts[topic] = len(partitions)
    return counts


def replica_racks(cluster: Any, partitions_per_topic: Mapping[str, int]) -> dict[TopicPartition, frozenset[str]]:
    """Racks of each partition's replicas, for rack-aware assignment; empty when brokers have no rack."""
    racks: dict[TopicPartition, frozenset[str]] = {}
    for topic in partitions_per_topic:
        for partition, replicas in sorted(replica_ids(cluster, topic).items()):
            replica_racks_ = set()
            for node_id in replicas:
                broker = cluster.broker_metadata(node_id)
                if broker is not None and broker.rack:
                    replica_racks_.add(broker.rack)
            if replica_racks_:
                racks[TopicPartition(topic, partition)] = frozenset(replica_racks_)
    return racks


def cluster_inputs(
    cluster: Any, subscriptions: Mapping[str, Subscription]
) -> tuple[dict[str, int], dict[TopicPartition, frozenset[str]] | None]:
    """What the leader's assignor needs from aiokafka's cluster metadata: the partition count of
    every subscribed topic, and the replicas' racks when some member names its rack."""
    all_topics = {topic for sub in subscriptions.values() for topic in sub.topics}
    partitions_per_topic = topic_partition_counts(cluster, all_topics)
    racks = replica_racks(cluster, partitions_per_topic) if any(s.rack_id for s in subscriptions.values()) else None
    return partitions_per_topic, racks or None


def encode_group_assignment(decision: GroupAssignment) -> dict[str, bytes]:
    """Every member's assignment as SyncGroup bytes. Empty assignments are encoded too: zero-length
    bytes would be read as "no assignment" by other clients."""
    return {member_id: encode_assignment(assignment) for member_id, assignment in decision.assignments.items()}


def leader_assignment(
    assignor: PartitionAssignor,
    cluster: Any,
    subscriptions: Mapping[str, Subscription],
    protocol: RebalanceProtocol,
    *,
    unreadable: Collection[str] = (),
    may_own: Collection[str] = (),
) -> dict[str, bytes]:
    """One leader round without member state (the drop-in assignors, tests): cluster metadata in,
    :func:`kassign.membership.assign_group`, encoded assignments out."""
    partitions_per_topic, racks = cluster_inputs(cluster, subscriptions)
    try:
        decision = assign_group(
            assignor,
            partitions_per_topic,
            subscriptions,
            protocol,
            -1,
            partition_racks=racks,
            unreadable=unreadable,
            may_own=may_own,
        )
    except InvalidAssignment as exc:
        raise as_kafka_error(exc) from exc
    return encode_group_assignment(decision)
