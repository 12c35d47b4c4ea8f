"""The metrics the eager/cooperative comparison (benchmarks/rebalance.py) adds to kassign.timeline.metrics,
on hand-made timelines whose answers are worked out by hand below."""

from __future__ import annotations

from collections import Counter

import pytest

from kassign.model import TopicPartition
from kassign.timeline.events import Event
from kassign.timeline.metrics import (
    CLOCK_SLACK_S,
    GONE_EVENTS,
    change_settles,
    count_generations,
    delivery_counts,
    kept_partitions,
    longest_processing_gap,
    ownership_intervals,
    processing_times,
    unowned_partition_seconds,
)

T = "t"
P0, P1, P2 = (TopicPartition(T, p) for p in range(3))


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, None if parts is None else [TopicPartition(T, p) for p in parts], extra)


# m1 owns 0,1,2 from t=1; m2 joins at 10; cooperative: m1 revokes 2 at 11, m2 gets it at 12.5.
COOPERATIVE = [
    ev("m1", 1.0, "cb_assigned", [0, 1, 2], gen=1),
    ev("m2", 10.0, "subscribed"),
    ev("m1", 10.8, "cb_assigned", [], gen=2),
    ev("m2", 10.8, "cb_assigned", [], gen=2),
    ev("m1", 11.0, "cb_revoked", [2], gen=2),
    ev("m1", 12.5, "cb_assigned", [], gen=3),
    ev("m2", 12.5, "cb_assigned", [2], gen=3),
]


def test_unowned_partition_seconds_counts_the_handover_gap_only():
    intervals = ownership_intervals(COOPERATIVE)
    assert unowned_partition_seconds(intervals, [P0, P1, P2], 10.0, 13.0) == pytest.approx(1.5)
    # A partition nobody ever owned counts for the whole span.
    assert unowned_partition_seconds(intervals, [TopicPartition(T, 9)], 10.0, 13.0) == pytest.approx(3.0)


def test_closing_ends_ownership_when_asked():
    events = [
        ev("m1", 0.0, "cb_assigned", [0], gen=1),
        ev("m1", 5.0, "closing"),
        ev("m1", 6.0, "closed"),
        ev("m2", 8.0, "cb_assigned", [0], gen=2),
    ]
    default = ownership_intervals(events)
    closing = ownership_intervals(events, release_events=GONE_EVENTS)
    assert unowned_partition_seconds(default, [P0], 4.0, 9.0) == pytest.approx(2.0)  # 6 -> 8
    assert unowned_partition_seconds(closing, [P0], 4.0, 9.0) == pytest.approx(3.0)  # 5 -> 8


def test_kept_partitions_are_those_with_the_same_owner_before_and_after():
    intervals = ownership_intervals(COOPERATIVE)
    assert kept_partitions(intervals, 10.0, 12.5) == {P0: "m1", P1: "m1"}
    # Eager: everything revoked, then 0 comes back to m1 (kept, though it paused) and 1 goes to m2.
    eager = [
        ev("m1", 1.0, "cb_assigned", [0, 1], gen=1),
        ev("m1", 11.0, "cb_revoked", [0, 1], gen=1),
        ev("m1", 12.0, "cb_assigned", [0], gen=2),
        ev("m2", 12.0, "cb_assigned", [1], gen=2),
    ]
    assert kept_partitions(ownership_intervals(eager), 10.0, 12.0) == {P0: "m1"}


def test_count_generations_skips_generations_seen_before():
    before = [e for e in COOPERATIVE if e.t < 10]
    after = [e for e in COOPERATIVE if e.t >= 10]
    assert count_generations(after, earlier=before) == 2  # generations 2 and 3
    assert count_generations(COOPERATIVE) == 3
    assert count_generations([ev("m1", 1.0, "cb_assigned", [0])]) == 0  # no generation reported


def _processed(member, t, *parts):
    return Event(member, t, "processed", None, {"ranges": {f"{T}:{p}": [[0, 0]] for p in parts}})


def test_longest_processing_gap_includes_the_edges_and_the_pause():
    events = [_processed("m1", t, 0) for t in (10.2, 10.4, 11.9, 12.1)] + [_processed("m1", 10.3, 1)]
    times = processing_times(events)
    assert times[P0] == [10.2, 10.4, 11.9, 12.1]
    assert longest_processing_gap(times, [P0], 10.0, 12.2) == pytest.approx(1.5)  # 10.4 -> 11.9
    assert longest_processing_gap(times, [P1], 10.0, 12.2) == pytest.approx(1.9)  # 10.3 -> the end
    assert longest_processing_gap(times, [P2], 10.0, 12.0) == pytest.approx(2.0)  # never processed
    assert longest_processing_gap(times, [], 10.0, 12.0) == 0.0


def test_processing_times_rejects_an_event_without_ranges():
    with pytest.raises(ValueError, match="ranges"):
        processing_times([Event("m1", 1.0, "processed", None, {})])


def test_delivery_counts_duplicates_and_lost():
    processed = {P0: Counter({0: 1, 1: 3, 2: 1}), P1: Counter({0: 2})}
    produced = {P0: [0, 1, 2, 3], P1: [0, 1], P2: [0]}
    assert delivery_counts(processed, produced) == (3, 3)  # 2 + 1 extra; 0:3, 1:1, 2:0 never processed


def test_a_change_settles_before_the_next_one_starts_even_on_a_millisecond_clock():
    # Two restarts at 20.0 and 25.0: the second leaver's close, stamped by a clock that truncates to
    # milliseconds, reads 0.4 ms before the trigger that asked for it; it belongs to the second restart.
    timeline = [
        *COOPERATIVE,
        ev("m1", 20.0, "closing"),
        ev("m2", 20.3, "cb_assigned", [0, 1], gen=4),
        ev("m2", 25.0 - 0.0004, "closing"),
        ev("m3", 25.4, "cb_assigned", [0, 1, 2], gen=5),
    ]
    assert change_settles(timeline, [20.0, 25.0], 30.0) == [20.3, 25.4]
    # An event further before the next change than a clock can be off is still this change's.
    late = [*timeline, ev("m2", 25.0 - 2 * CLOCK_SLACK_S, "cb_revoked", [2])]
    assert change_settles(late, [20.0, 25.0], 30.0) == [25.0 - 2 * CLOCK_SLACK_S, 25.4]
    # Nothing happened after a change: it settles at once.
    assert change_settles(COOPERATIVE, [13.0], 30.0) == [13.0]
