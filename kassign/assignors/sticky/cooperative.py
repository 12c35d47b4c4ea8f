"""Kafka's ``cooperative-sticky`` assignor (KIP-429).

The sticky assignment, minus every partition that changes owner this round: the current owner must
revoke it first, so the new owner gets it in the follow-up rebalance. No partition is ever revoked
from one member and added to another in the same round.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from kassign.assignors.sticky.assignor import DEFAULT_GENERATION, AbstractStickyAssignor
from kassign.model import RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol import (
    ProtocolError,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
)

log = logging.getLogger(__name__)

__all__ = ["CooperativeStickyAssignor"]

_GENERATION_ONLY = 4  # CooperativeStickyAssignor user data V0 is one int32


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Kafka's ``cooperative-sticky`` assignor; supports the COOPERATIVE and EAGER protocols."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def member_data(self, member_id: str, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        """Owned partitions from the subscription; the generation from the subscription, else from the
        user data (cooperative V0, or the sticky V1 layout librdkafka members send)."""
        owned = list(subscription.owned_partitions)
        if subscription.generation_id is not None:
            return owned, subscription.generation_id
        data = subscription.user_data
        if not data:
            return owned, DEFAULT_GENERATION
        if type(data) is bytes and len(data) == _GENERATION_ONLY:
            # The common case, read directly: a 2,000-member leader would build 2,000 codec readers.
            return owned, int.from_bytes(data, "big", signed=True)
        try:
            if len(data) == _GENERATION_ONLY:
                return owned, decode_cooperative_user_data(data)
            _, generation = decode_sticky_user_data(data)
        except ProtocolError as exc:
            # The owned partitions are still the member's (they travel outside the user data): keep
            # them, as Java does, at the lowest generation.
            log.warning(
                "member %s: unparseable cooperative-sticky user data (%s); taking generation -1", member_id, exc
            )
            return owned, DEFAULT_GENERATION
        return owned, DEFAULT_GENERATION if generation is None else generation

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        assignment = super()._assign(partitions_per_topic, subscriptions, partition_racks)
        moving = self.partitions_transferring_ownership or {}
        if moving:
            held_back: dict[str, set[TopicPartition]] = {}
            for tp, member in moving.items():
                held_back.setdefault(member, set()).add(tp)
            for member, partitions in held_back.items():
                assignment[member] = [tp for tp in assignment[member] if tp not in partitions]
            log.debug("held back %d partitions until their owners revoke them", len(moving))
        return assignment

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """V0 user data: this consumer's generation (-1 before its first assignment)."""
        return encode_cooperative_user_data(self._generation)
