"""The order Java's eager assignors visit members in (``AbstractPartitionAssignor.MemberInfo``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kassign.model import Subscription
from kassign.protocol.topic_partitions import java_string_order

__all__ = ["sorted_members"]


def sorted_members(member_ids: Iterable[str], subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Static members first, by group instance id; then dynamic members, by member id.

    Ties between static members (only possible with duplicate instance ids) fall back to member
    id so the order stays deterministic. Strings compare as Java's ``String.compareTo`` does.
    """

    def key(member: str) -> tuple[int, bytes, bytes]:
        instance = subscriptions[member].group_instance_id
        if instance is not None:
            return 0, java_string_order(instance), java_string_order(member)
        return 1, b"", java_string_order(member)

    return sorted(set(member_ids), key=key)
