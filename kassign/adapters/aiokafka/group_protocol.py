"""The consumer-protocol side of a group rebalance, shared by the drop-in assignors and kassign's
coordinator: what a member sends in JoinGroup, how the leader reads every member's subscription,
computes the assignment and checks it, and which rebalance protocol a list of assignors runs.

Everything here works on kassign's codecs (``ConsumerProtocolSubscription`` v0-v3), not on
aiokafka's v0 struct, so owned partitions, generations and racks reach the assignor.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from kassign.assignors.base import PartitionAssignor
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
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
    "exclude_unreadable",
    "topic_partition_counts",
    "replica_racks",
    "check_cooperative_assignment",
    "leader_assignment",
]


class IllegalCooperativeAssignment(KafkaError):
    """The leader's assignor handed a partition to one member while another still owns it.

    Under the cooperative protocol that would let two members consume the same partition at once,
    so the leader refuses to send the assignment (Java's ``validateCooperativeAssignment``).
    """


def select_rebalance_protocol(assignors: Sequence[PartitionAssignor]) -> RebalanceProtocol:
    """The most capable protocol every assignor supports, as Java's ConsumerCoordinator picks it.

    ``(range, cooperative-sticky)`` runs EAGER; ``(cooperative-sticky,)`` runs COOPERATIVE.
    """
    if not assignors:
        raise ValueError("at least one partition assignor is needed, got none")
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        names = [a.name for a in assignors]
        raise ValueError(f"assignors {names} support no common rebalance protocol")
    return max(common, key=lambda protocol: protocol.value)


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
        log.error("member %s sent unreadable subscription metadata (%s); it subscribes to nothing this round",
                  member_id, exc)
        return Subscription([])
    log.error("member %s sent a malformed subscription; using its topics %s without previous assignment",
              member_id, topics)
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
    # aiokafka keeps replica lists only in ClusterMetadata._partitions (no public accessor).
    by_topic = getattr(cluster, "_partitions", {})
    racks: dict[TopicPartition, frozenset[str]] = {}
    for topic in partitions_per_topic:
        for partition, meta in sorted(by_topic.get(topic, {}).items()):
            replica_racks_ = set()
            for node_id in meta.replicas:
                broker = cluster.broker_metadata(node_id)
                if broker is not None and broker.rack:
                    replica_racks_.add(broker.rack)
            if replica_racks_:
                racks[TopicPartition(topic, partition)] = frozenset(replica_racks_)
    return racks


def check_cooperative_assignment(
    assignment: Mapping[str, Iterable[TopicPartition]], subscriptions: Mapping[str, Subscription]
) -> None:
    """Raise :class:`IllegalCooperativeAssignment` if a partition is added to one member while
    another member still owns it in this round (it must be revoked first, then handed out in the
    follow-up rebalance)."""
    owner_of: dict[TopicPartition, str] = {}
    for member_id in sorted(subscriptions):
        for tp in subscriptions[member_id].owned_partitions:
            owner_of.setdefault(TopicPartition(*tp), member_id)
    conflicts = []
    for member_id in sorted(assignment):
        owned = set(subscriptions[member_id].owned_partitions) if member_id in subscriptions else set()
        for tp in sorted(set(assignment[member_id]) - owned):
            owner = owner_of.get(tp)
            if owner is not None and owner != member_id:
                conflicts.append(f"{tp.topic}-{tp.partition} to {member_id} (owned by {owner})")
    if conflicts:
        raise IllegalCooperativeAssignment(
            "assignor broke the cooperative rule, it adds partitions still owned by other members: "
            + ", ".join(conflicts)
        )


def exclude_unreadable(
    result: Mapping[str, Iterable[TopicPartition]],
    subscriptions: Mapping[str, Subscription],
    unreadable: Collection[str],
    may_own: Collection[str],
) -> tuple[dict[str, list[TopicPartition]], list[TopicPartition]]:
    """Keep a cooperative round exclusive when some members' metadata could not be read.

    Such a member may still own partitions nobody can see, so it gets an empty assignment: it revokes
    whatever it owns and rejoins. While one that ``may_own`` something is in the group, the partitions
    no readable member claims are withheld from everybody (they may be its own) until the next round.
    Returns the new assignment and the partitions withheld.
    """
    claimed = {TopicPartition(*tp) for m, sub in subscriptions.items() if m not in unreadable
               for tp in sub.owned_partitions}
    out: dict[str, list[TopicPartition]] = {}
    withheld: list[TopicPartition] = []
    for member_id, partitions in result.items():
        if member_id in unreadable:
            out[member_id] = []
            continue
        own = {TopicPartition(*tp) for tp in subscriptions[member_id].owned_partitions}
        keep = []
        for tp in partitions:
            tp = TopicPartition(*tp)
            if may_own and tp not in own and tp not in claimed:
                withheld.append(tp)
            else:
                keep.append(tp)
        out[member_id] = keep
    if unreadable:
        log.error("members %s sent unreadable metadata: each gets an empty assignment%s", sorted(unreadable),
                  f"; withholding {len(withheld)} unclaimed partitions until they have revoked" if withheld else "")
    return out, sorted(withheld)


def leader_assignment(
    assignor: PartitionAssignor,
    cluster: Any,
    subscriptions: Mapping[str, Subscription],
    protocol: RebalanceProtocol,
    *,
    unreadable: Collection[str] = (),
    may_own: Collection[str] = (),
) -> dict[str, bytes]:
    """Run ``assignor`` for the whole group and encode one assignment per member.

    Every member gets assignment bytes, empty assignments included: zero-length bytes would be
    read as "no assignment" by other clients. An assignor that leaves group-wide state in
    ``assignment_user_data`` after assigning (the delayed assignor) has it sent to every member.
    Under the cooperative protocol, members whose metadata could not be read (``unreadable``) are
    handled by :func:`exclude_unreadable`; ``may_own`` are those of them that may still own
    partitions (the caller knows which it emptied last round).
    """
    all_topics = {topic for sub in subscriptions.values() for topic in sub.topics}
    partitions_per_topic = topic_partition_counts(cluster, all_topics)
    racks = replica_racks(cluster, partitions_per_topic) if any(s.rack_id for s in subscriptions.values()) else None
    result = assignor.assign(partitions_per_topic, subscriptions, partition_racks=racks or None)
    missing = set(subscriptions) - set(result)
    if missing:
        raise KafkaError(f"assignor {assignor.name!r} left members {sorted(missing)} out of its assignment")
    if protocol is RebalanceProtocol.COOPERATIVE:
        check_cooperative_assignment(result, subscriptions)
        if unreadable:
            result, _ = exclude_unreadable(result, subscriptions, unreadable, may_own)
    log.info("assignor %s assigned %s", assignor.name,
             {m: len(ps) for m, ps in sorted(result.items())})
    user_data = getattr(assignor, "assignment_user_data", None)
    return {
        member_id: encode_assignment(Assignment(sorted(TopicPartition(*tp) for tp in result[member_id]), user_data))
        for member_id in subscriptions
    }
