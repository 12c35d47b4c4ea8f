"""The timeline checks on small hand-written timelines (no broker)."""

from __future__ import annotations

import math

import pytest

from integration.timeline_checks import (
    TimelineCheckError,
    assert_all_processed,
    assert_exclusive,
    assert_settled,
    current_assignment,
    double_ownership,
    is_settled,
    missing_records,
    owners_at,
    ownership_intervals,
)
from kassign.model import TopicPartition
from kassign.timeline.events import Event

T = "orders"


def tp(p: int) -> TopicPartition:
    return TopicPartition(T, p)


def ev(member: str, t: float, kind: str, parts=None, **extra) -> Event:
    return Event(member, t, kind, None if parts is None else [tp(p) for p in parts], extra)


EAGER_HANDOVER = [
    ev("a", 1.0, "cb_assigned", [0, 1]),
    ev("a", 5.0, "cb_revoked", [0, 1]),
    ev("a", 5.2, "cb_revoked_done"),
    ev("b", 6.0, "cb_assigned", [1]),
    ev("a", 6.1, "cb_assigned", [0]),
]


def test_eager_handover_is_exclusive_and_settled():
    assert double_ownership(EAGER_HANDOVER) == []
    assert_exclusive(EAGER_HANDOVER)
    assert current_assignment(EAGER_HANDOVER) == {"a": [tp(0)], "b": [tp(1)]}
    assert_settled(EAGER_HANDOVER, [tp(0), tp(1)], ["a", "b"])


def test_owners_at_a_time_inside_the_gap_is_empty():
    assert owners_at(EAGER_HANDOVER, 5.5) == {}
    assert owners_at(EAGER_HANDOVER, 3.0) == {tp(0): ["a"], tp(1): ["a"]}


def test_cooperative_increments_accumulate():
    events = [
        ev("a", 1.0, "cb_assigned", [0, 1, 2, 3]),
        ev("a", 4.0, "cb_revoked", [2, 3]),  # only what moves
        ev("b", 5.0, "cb_assigned", []),
        ev("b", 6.0, "cb_assigned", [2, 3]),
    ]
    assert current_assignment(events) == {"a": [tp(0), tp(1)], "b": [tp(2), tp(3)]}
    intervals = {(i.partition.partition, i.member): (i.start, i.end) for i in ownership_intervals(events)}
    assert intervals[(0, "a")] == (1.0, math.inf)
    assert intervals[(2, "a")] == (1.0, 4.0)
    assert intervals[(2, "b")] == (6.0, math.inf)
    assert_exclusive(events)


def test_double_ownership_is_reported_with_its_window():
    events = [
        ev("a", 1.0, "cb_assigned", [0]),
        ev("b", 2.0, "cb_assigned", [0]),
        ev("a", 2.5, "cb_revoked", [0]),
    ]
    overlaps = double_ownership(events)
    assert len(overlaps) == 1
    assert overlaps[0].members == ("a", "b") and overlaps[0].start == 2.0 and overlaps[0].end == 2.5
    assert double_ownership(events, tolerance=1.0) == []
    with pytest.raises(TimelineCheckError, match="orders:0 owned by both a and b"):
        assert_exclusive(events)


@pytest.mark.parametrize("ending", ["closing", "exit", "crash"])
def test_member_end_releases_everything(ending):
    events = [ev("a", 1.0, "cb_assigned", [0, 1]), ev("a", 3.0, ending), ev("b", 4.0, "cb_assigned", [0, 1])]
    assert_exclusive(events)
    assert current_assignment(events) == {"b": [tp(0), tp(1)]}


def test_lost_ends_ownership():
    events = [ev("a", 1.0, "cb_assigned", [0]), ev("a", 2.0, "cb_lost", [0])]
    assert owners_at(events) == {}


def test_settle_problems_are_named():
    events = [ev("a", 1.0, "cb_assigned", [0]), ev("c", 1.5, "cb_assigned", [1])]
    assert not is_settled(events, [tp(0), tp(1), tp(2)], ["a", "b"])
    with pytest.raises(TimelineCheckError) as err:
        assert_settled(events, [tp(0), tp(1), tp(2)], ["a", "b"])
    msg = str(err.value)
    assert "orders:1 owned by c, not a live member" in msg
    assert "orders:2 owned by nobody" in msg
    assert "b owns nothing" in msg
    assert is_settled(events[:1], [tp(0)], ["a", "b"], require_every_member=False)


def test_all_processed_counts_ranges_from_any_member():
    events = [
        ev("a", 1.0, "processed", ranges={"orders:0": [[0, 4]], "orders:1": [[0, 1]]}),
        ev("b", 2.0, "processed", ranges={"0": [[5, 6]]}),  # bare number = default topic
    ]
    produced = {tp(0): range(7), tp(1): [0, 1, 2]}
    assert missing_records(events, produced, default_topic=T) == {tp(1): [2]}
    with pytest.raises(TimelineCheckError, match="1 produced record"):
        assert_all_processed(events, produced, default_topic=T)
    assert_all_processed(events, {tp(0): range(7)}, default_topic=T)


def test_processed_without_ranges_is_an_error():
    with pytest.raises(ValueError, match="no ranges"):
        missing_records([ev("a", 1.0, "processed")], {tp(0): [0]})
