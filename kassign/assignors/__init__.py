"""Kafka's consumer partition assignors in Python: range, roundrobin, sticky, cooperative-sticky,
and Connect-style delayed reassignment on top of cooperative-sticky (KIP-415).

Each is a plain class, one instance per consumer (see :class:`PartitionAssignor` for the contract).
"""

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.delayed import DelayedCooperativeStickyAssignor
from kassign.assignors.range import RangeAssignor
from kassign.assignors.roundrobin import RoundRobinAssignor
from kassign.assignors.sticky import AbstractStickyAssignor, CooperativeStickyAssignor, StickyAssignor

__all__ = [
    "PartitionAssignor",
    "AbstractStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "DelayedCooperativeStickyAssignor",
]
