"""Rack awareness for the sticky assignors (KIP-881), decided as Java 3.9's ``RackInfo`` does.

Rack-aware assignment is used when some members carry a rack, some partition has a replica on one of
those racks, and the partitions do not all have replicas on every rack (then locality is free).
A member with a rack "mismatches" a partition that has no replica on its rack; members without a
rack never mismatch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kassign.model import TopicPartition

__all__ = ["RackInfo"]


class RackInfo:
    """Member racks and partition replica racks, or nothing when rack-aware assignment is off."""

    def __init__(
        self,
        member_racks: Sequence[str | None],
        topics: Mapping[str, int],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> None:
        #: member index -> rack, only for members with a rack, and only when rack-aware.
        self.member_racks: dict[int, str] = {}
        #: partition -> replica racks, only when rack-aware (missing partitions have none).
        self.partition_racks: dict[TopicPartition, frozenset[str]] = {}
        self._members_per_rack: dict[str, int] = {}
        racked = {i: r for i, r in enumerate(member_racks) if r}
        if not racked or not partition_racks:
            return
        replica_racks: dict[TopicPartition, frozenset[str]] = {}
        for tp, racks in partition_racks.items():
            if isinstance(racks, str):
                raise TypeError(f"partition_racks[{tp!r}] must be a collection of rack ids, got the string {racks!r}")
            if tp[0] in topics and 0 <= tp[1] < topics[tp[0]]:
                replica_racks[TopicPartition(*tp)] = frozenset(r for r in racks if r is not None)
        all_partition_racks = frozenset().union(*replica_racks.values()) if replica_racks else frozenset()
        if all_partition_racks.isdisjoint(racked.values()):
            return
        n_partitions = sum(topics.values())
        if len(replica_racks) == n_partitions and all(r == all_partition_racks for r in replica_racks.values()):
            return  # every partition has a replica on every rack: nothing to gain
        self.member_racks = racked
        self.partition_racks = replica_racks
        for rack in racked.values():
            self._members_per_rack[rack] = self._members_per_rack.get(rack, 0) + 1

    @property
    def enabled(self) -> bool:
        """Whether rack-aware assignment is in use."""
        return bool(self.member_racks)

    def mismatch(self, member: int, tp: TopicPartition) -> bool:
        """True when ``member`` has a rack and ``tp`` has no replica on it."""
        rack = self.member_racks.get(member)
        return rack is not None and rack not in self.partition_racks.get(tp, ())

    def matches(self, member: int, tp: TopicPartition) -> bool:
        """True when ``member`` has a rack and ``tp`` has a replica on it."""
        rack = self.member_racks.get(member)
        return rack is not None and rack in self.partition_racks.get(tp, ())

    def members_on_replica_racks(self, tp: TopicPartition) -> int:
        """How many members sit on a rack holding a replica of ``tp`` (fewer = harder to place)."""
        return sum(self._members_per_rack.get(r, 0) for r in self.partition_racks.get(tp, ()))
