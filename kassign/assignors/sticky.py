"""Kafka's sticky assignment (``AbstractStickyAssignor``) and the eager ``StickyAssignor``.

A sticky assignment is as balanced as possible and, within that, moves as few previously owned
partitions as possible. Members that all subscribe to the same topics take the quota-based path
(:mod:`~kassign.assignors.sticky_constrained`); otherwise the general path
(:mod:`~kassign.assignors.sticky_general`) balances so that no partition could move to a subscribed
member with two or more fewer partitions. Previous ownership is resolved by generation first
(:mod:`~kassign.assignors.sticky_ownership`); rack-aware when members and partitions carry racks.

Where Java iterates hash maps, members are taken in member-id order and topics in name order, so the
same input always gives the same assignment.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Collection, Iterable, Mapping

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.rack_info import RackInfo
from kassign.assignors.sticky_constrained import constrained_assign
from kassign.assignors.sticky_general import general_assign
from kassign.assignors.sticky_ownership import resolve_ownership
from kassign.model import RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol import ProtocolError, decode_sticky_user_data, encode_sticky_user_data

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
        subscribed = {t for m in members for t in subscriptions[m].topics}
        topics = {t: partitions_per_topic[t] for t in sorted(subscribed)
                  if t in partitions_per_topic and partitions_per_topic[t] > 0}
        member_topics = [frozenset(t for t in subscriptions[m].topics if t in topics) for m in members]

        claims, generations = [], []
        for m in members:
            partitions, generation = self._safe_member_data(m, subscriptions[m])
            claims.append(partitions)
            generations.append(generation)
        ownership = resolve_ownership(topics, claims, generations, members)
        racks = RackInfo([subscriptions[m].rack_id for m in members], topics, partition_racks)

        # As Java: the quota path only when the subscriptions are literally equal (a topic missing from
        # the metadata still counts), so both take the same path on the same group.
        first = frozenset(subscriptions[members[0]].topics)
        if all(frozenset(subscriptions[m].topics) == first for m in members):
            log.debug("all %d members subscribe to the same topics: constrained assignment", len(members))
            lists, moving = constrained_assign(topics, ownership, racks)
        else:
            log.debug("members subscribe to different topics: general assignment")
            lists, moving = general_assign(topics, member_topics, ownership, racks)
        self.partitions_transferring_ownership = {tp: members[i] for tp, i in moving.items()}
        return dict(zip(members, lists))


class StickyAssignor(AbstractStickyAssignor):
    """Kafka's ``sticky`` assignor (eager protocol): previous partitions travel in the user data."""

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        """Previous partitions and generation from the member's sticky user data (V1, or V0 without a
        generation); no user data means no previous assignment."""
        if not subscription.user_data:
            return [], DEFAULT_GENERATION
        partitions, generation = decode_sticky_user_data(subscription.user_data)
        return partitions, DEFAULT_GENERATION if generation is None else generation

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """V1 user data of this consumer's last assignment and generation; None before the first."""
        if self._last_assignment is None:
            return None
        return encode_sticky_user_data(self._last_assignment, self._generation)
