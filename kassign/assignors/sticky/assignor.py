"""Kafka's sticky assignment (``AbstractStickyAssignor``) and the eager ``StickyAssignor``.

A sticky assignment is as balanced as possible and, within that, moves as few previously owned
partitions as possible. Members that all subscribe to the same topics take the quota-based path
(:mod:`~kassign.assignors.sticky.constrained`); otherwise the general path
(:mod:`~kassign.assignors.sticky.general`) balances so that no partition could move to a subscribed
member with two or more fewer partitions. Previous ownership is resolved by generation first
(:mod:`~kassign.assignors.sticky.ownership`); rack-aware when members and partitions carry racks, and
then partitions are traded between members at unchanged counts where that brings them onto their
replicas' racks (:mod:`~kassign.assignors.sticky.refine`).

Where Java iterates hash maps, members are taken in member-id order and topics in name order, so the
same input always gives the same assignment.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Collection, Iterable, Mapping

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.rack_info import RackInfo
from kassign.assignors.sticky.constrained import constrained_assign
from kassign.assignors.sticky.general import general_assign
from kassign.assignors.sticky.ownership import Ownership, resolve_ownership
from kassign.assignors.sticky.refine import refine_locality
from kassign.assignors.sticky.user_data_reader import StickyUserDataReader
from kassign.model import RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol import ProtocolError, encode_sticky_user_data

log = logging.getLogger(__name__)

__all__ = ["AbstractStickyAssignor", "StickyAssignor", "DEFAULT_GENERATION"]

#: The generation of a member that owns nothing (and -1 on the wire).
DEFAULT_GENERATION = -1


class AbstractStickyAssignor(PartitionAssignor):
    """The sticky assignment shared by ``sticky`` and ``cooperative-sticky``.

    Subclasses say where a member's previous partitions and generation come from (:meth:`member_data`).
    After :meth:`assign`, :attr:`partitions_transferring_ownership` maps every partition that changes
    owner this round to its new owner.
    """

    @abc.abstractmethod
    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        """The partitions ``member_id`` owned and the generation it owned them in (-1 if none)."""

    def _safe_member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        try:
            partitions, generation = self.member_data(member_id, subscription)
        except (ProtocolError, ValueError, TypeError) as exc:
            # Another member's bytes must never break the leader: treat it as owning nothing.
            log.warning("ignoring the previous assignment of member %s: unparseable user data (%s)", member_id, exc)
            return [], DEFAULT_GENERATION
        return partitions, DEFAULT_GENERATION if generation is None else generation

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        members = sorted(subscriptions)
        if not members:
            self.partitions_transferring_ownership = {}
            return {}
        raw_topics = _topic_sets(subscriptions, members)
        distinct = set(raw_topics)
        topics = {
            t: partitions_per_topic[t]
            for t in sorted(frozenset().union(*distinct))
            if t in partitions_per_topic and partitions_per_topic[t] > 0
        }
        effective = {raw: raw if raw <= topics.keys() else frozenset(t for t in raw if t in topics) for raw in distinct}
        member_topics = [effective[raw] for raw in raw_topics]

        claims, generations = [], []
        for m in members:
            partitions, generation = self._safe_member_data(m, subscriptions[m])
            claims.append(partitions)
            generations.append(generation)
        ownership = resolve_ownership(topics, claims, generations, members)
        racks = RackInfo([subscriptions[m].rack_id for m in members], topics, partition_racks)

        # As Java: the quota path only when the subscriptions are literally equal (a topic missing from
        # the metadata still counts), so both take the same path on the same group.
        # Both paths extend the owned lists in place: the resolved owners are read first.
        owner = {tp: i for i, mine in enumerate(ownership.owned) for tp in mine} if racks.enabled else {}
        if len(distinct) == 1:
            log.debug("all %d members subscribe to the same topics: constrained assignment", len(members))
            lists, moving = constrained_assign(topics, ownership, racks)
        else:
            log.debug("members subscribe to different topics: general assignment")
            lists, moving = general_assign(topics, member_topics, ownership, racks)
        if racks.enabled:
            _refine(lists, moving, topics, member_topics, ownership, owner, racks)
        self.partitions_transferring_ownership = {tp: members[i] for tp, i in moving.items()}
        return dict(zip(members, lists))


def _refine(
    lists: list[list[TopicPartition]],
    moving: dict[TopicPartition, int],
    topics: Mapping[str, int],
    member_topics: list[frozenset[str]],
    ownership: Ownership,
    owner: dict[TopicPartition, int],
    racks: RackInfo,
) -> None:
    """Rack-aware: trade partitions between members at unchanged counts where that brings partitions onto
    their replicas' racks (:mod:`~kassign.assignors.sticky.refine`), and keep ``moving`` up to date."""
    subscribers: dict[str, list[int]] = {t: [] for t in topics}
    for i, subscribed in enumerate(member_topics):
        for t in subscribed:
            subscribers[t].append(i)
    moved = refine_locality(lists, member_topics, subscribers, owner, racks)
    claimers = ownership.claimers
    for tp, i in moved.items():
        # it changes owner unless back with its owner; an unowned one only if someone claimed it
        if owner.get(tp) == i or (tp not in owner and not claimers.get(tp)):
            moving.pop(tp, None)
        else:
            moving[tp] = i


def _topic_sets(subscriptions: Mapping[str, Subscription], members: list[str]) -> list[frozenset[str]]:
    """Each member's subscribed topics as a set; large groups repeat a few distinct topic lists, so
    equal lists share one set (built once)."""
    seen: dict[tuple[str, ...], frozenset[str]] = {}
    out = []
    for m in members:
        key = tuple(subscriptions[m].topics)
        topic_set = seen.get(key)
        if topic_set is None:
            topic_set = seen[key] = frozenset(key)
        out.append(topic_set)
    return out


class StickyAssignor(AbstractStickyAssignor):
    """Kafka's ``sticky`` assignor (eager protocol): previous partitions travel in the user data."""

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        super().__init__()
        self._reader: StickyUserDataReader | None = None  # shared by the members of one assign()

    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        """Previous partitions and generation from the member's sticky user data (V1, or V0 without a
        generation); no user data means no previous assignment."""
        if not subscription.user_data:
            return [], DEFAULT_GENERATION
        partitions, generation = (self._reader or StickyUserDataReader()).read(subscription.user_data)
        return partitions, DEFAULT_GENERATION if generation is None else generation

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        self._reader = StickyUserDataReader()
        try:
            return super()._assign(partitions_per_topic, subscriptions, partition_racks)
        finally:
            self._reader = None

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """V1 user data of this consumer's last assignment and generation; None before the first."""
        if self._last_assignment is None:
            return None
        return encode_sticky_user_data(self._last_assignment, self._generation)
