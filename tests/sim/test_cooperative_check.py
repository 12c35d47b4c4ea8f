"""The simulator's check of cooperative assignments is Java's validateCooperativeAssignment."""

from __future__ import annotations

import pytest

from kassign import Subscription, TopicPartition
from kassign.sim import SimulationError
from kassign.sim.member import _check_cooperative

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_partition_claimed_twice_may_stay_with_either_claimant() -> None:
    # Both claim t-0 (stale claims on a broker without a join barrier): keeping it with one of them
    # revokes it from the other without adding it anywhere, which Java accepts.
    subs = {"a": Subscription(["t"], owned_partitions=[T0], generation_id=3),
            "b": Subscription(["t"], owned_partitions=[T0], generation_id=4)}
    _check_cooperative(subs, {"a": [], "b": [T0]})
    _check_cooperative(subs, {"a": [T0], "b": []})


def test_partition_moved_in_one_round_is_rejected() -> None:
    subs = {"a": Subscription(["t"], owned_partitions=[T0, T1], generation_id=3),
            "b": Subscription(["t"], generation_id=3)}
    with pytest.raises(SimulationError, match="from a to b"):
        _check_cooperative(subs, {"a": [T0], "b": [T1]})
    _check_cooperative(subs, {"a": [T0], "b": []})  # withheld: fine
