"""The assignor base: input validation and the scoped GC pause for large groups."""

from __future__ import annotations

import gc

import pytest

from kassign import Subscription
from kassign.assignors import StickyAssignor
from kassign.assignors.base import LARGE_GROUP_PARTITIONS, PartitionAssignor


class _Probe(PartitionAssignor):
    name = "probe"

    def __init__(self) -> None:
        super().__init__()
        self.gc_enabled_inside: bool | None = None

    def _assign(self, partitions_per_topic, subscriptions, partition_racks):
        self.gc_enabled_inside = gc.isenabled()
        if partitions_per_topic.get("boom"):
            raise RuntimeError("boom")
        return {m: [] for m in subscriptions}


@pytest.mark.parametrize("partitions, paused", [(10, False), (LARGE_GROUP_PARTITIONS, True)])
def test_gc_paused_only_for_large_groups_and_restored(partitions: int, paused: bool) -> None:
    assert gc.isenabled()
    probe = _Probe()
    probe.assign({"t": partitions}, {"m": Subscription(["t"])})
    assert probe.gc_enabled_inside is (not paused)
    assert gc.isenabled()


def test_gc_restored_when_the_algorithm_raises() -> None:
    probe = _Probe()
    with pytest.raises(RuntimeError):
        probe.assign({"boom": LARGE_GROUP_PARTITIONS}, {"m": Subscription(["boom"])})
    assert gc.isenabled()


def test_gc_left_disabled_if_the_caller_disabled_it() -> None:
    gc.disable()
    try:
        _Probe().assign({"t": LARGE_GROUP_PARTITIONS}, {"m": Subscription(["t"])})
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "ppt, subs, exc, needle",
    [
        ({"t": -1}, {"m": Subscription(["t"])}, ValueError, "-1"),
        ({"t": 1}, {"m": ["t"]}, TypeError, "'m'"),
        ({"t": 1}, {"m": Subscription([5])}, TypeError, "5"),
        ({3: 1}, {"m": Subscription(["t"])}, TypeError, "3"),
    ],
)
def test_bad_input_names_the_offending_value(ppt, subs, exc, needle) -> None:
    with pytest.raises(exc, match=needle):
        StickyAssignor().assign(ppt, subs)


@pytest.mark.parametrize(
    ("generation", "error", "needle"),
    [("abc", TypeError, "'abc'"), (10**20, ValueError, "int32"), (True, TypeError, "True")],
)
def test_a_bad_generation_is_named(generation, error, needle):
    from kassign.assignors import CooperativeStickyAssignor

    subs = {"a": Subscription(["t"], None, [], 1), "b": Subscription(["t"], None, [], generation)}
    with pytest.raises(error, match=needle):
        CooperativeStickyAssignor().assign({"t": 2}, subs)
