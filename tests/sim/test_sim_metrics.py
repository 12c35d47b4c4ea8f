"""kassign.timeline.metrics: the recorder's metrics reproduced from the recordings in data/rebalance-timelines, and the
definitions checked on small hand-made timelines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kassign.model import TopicPartition
from kassign.timeline.events import Event, read_events
from kassign.timeline.metrics import (
    count_rounds,
    ownership_intervals,
    phase_metrics,
    recording_phases,
    timeline_metrics,
)

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"
RUNS = sorted(d.name for d in RECORDINGS.iterdir() if (d / "metrics.json").is_file())
#: metrics.json values that the events determine (gap_kept_s/gap_moved_s/base_gap_s were measured
#: on processed records, which the events do not carry).
FROM_EVENTS = (
    "settle_s",
    "window_s",
    "unowned_ps",
    "double_owned_ps",
    "moved",
    "unowned_parts",
    "kept",
    "revoke_callbacks",
    "assign_callbacks",
)


def tp(p: int) -> TopicPartition:
    return TopicPartition("topic", p)


def ev(member: str, t: float, kind: str, parts: list[int] | None = None, **extra: object) -> Event:
    return Event(member, t, kind, None if parts is None else [tp(p) for p in parts], dict(extra))


@pytest.mark.parametrize("run", RUNS)
def test_reproduces_recorded_metrics(run: str) -> None:
    d = RECORDINGS / run
    meta = json.loads((d / "meta.json").read_text())
    recorded = json.loads((d / "metrics.json").read_text())
    ours = timeline_metrics(read_events(d / "events.jsonl.gz"), recording_phases(meta))
    for phase in ("out", "in"):
        for name in FROM_EVENTS:
            assert getattr(ours[phase], name) == pytest.approx(recorded[phase][name], abs=1.5e-3), (phase, name)
        final = {str(p.partition): m for p, m in ours[phase].final.items()}
        assert final == recorded[phase]["final"], phase


def test_eager_handover_counts_unowned_time_between_first_revocation_and_settle() -> None:
    events = [
        ev("a", 0.0, "cb_assigned", [0, 1]),
        ev("b", 10.0, "subscribed"),
        ev("a", 10.5, "cb_revoked", [0, 1]),
        ev("a", 10.6, "cb_assigned", [0]),
        ev("b", 10.8, "cb_assigned", [1]),
    ]
    m = phase_metrics(events, 10.0)
    assert m.settle_s == pytest.approx(0.8)
    assert m.window_s == pytest.approx(0.3)
    assert m.unowned_ps == pytest.approx(0.1 + 0.3)
    assert (m.moved, m.kept, m.unowned_parts) == (1, 1, 2)
    assert m.gap_kept_s == pytest.approx(0.1)
    assert m.final == {tp(0): "a", tp(1): "b"}
    assert (m.revoke_callbacks, m.assign_callbacks, m.balance) == (1, 2, 0)


def test_double_ownership_is_measured() -> None:
    events = [ev("a", 0.0, "cb_assigned", [0]), ev("b", 1.0, "cb_assigned", [0]), ev("a", 2.5, "cb_revoked", [0])]
    assert phase_metrics(events, 0.5, 5.0).double_owned_ps == pytest.approx(1.5)


def test_a_crash_ends_ownership_without_a_callback() -> None:
    events = [
        ev("a", 0.0, "cb_assigned", [0]),
        ev("b", 0.0, "cb_assigned", [1]),
        ev("b", 5.0, "crash"),
        ev("a", 15.0, "cb_assigned", [1]),
    ]
    m = phase_metrics(events, 5.0)
    assert m.unowned_ps == pytest.approx(10.0)
    assert m.window_s == pytest.approx(10.0)
    assert m.final == {tp(0): "a", tp(1): "a"}
    assert m.balance == 0  # b is gone: only a counts


def test_ownership_intervals_of_an_incremental_timeline() -> None:
    events = [ev("a", 0.0, "cb_assigned", [0, 1]), ev("a", 1.0, "cb_revoked", [1]), ev("b", 2.0, "cb_assigned", [1])]
    iv = ownership_intervals(events)
    assert [(i.member, i.start, i.end) for i in iv[tp(0)]] == [("a", 0.0, math.inf)]
    assert [(i.member, i.start, i.end) for i in iv[tp(1)]] == [("a", 0.0, 1.0), ("b", 2.0, math.inf)]


def test_rounds_count_new_generations_or_callback_bursts() -> None:
    before = [ev("a", 0.0, "sync", gen=3)]
    inside = [
        ev("a", 1.0, "sync", gen=3),
        ev("a", 2.0, "sync", gen=4),
        ev("b", 2.0, "sync", gen=4),
        ev("a", 3.0, "sync", gen=5),
    ]
    assert count_rounds(inside, earlier=before) == 2
    bursts = [ev("a", 1.0, "cb_assigned", []), ev("b", 1.1, "cb_assigned", []), ev("a", 2.0, "cb_assigned", [])]
    assert count_rounds(bursts) == 2


def test_recording_phases_run_from_mark_to_next_mark() -> None:
    marks = {"start3": 1.0, "scale_out": 5.0, "scale_in": 9.0, "producer_stop": 12.0, "end": 13.0}
    assert recording_phases({"marks": marks}) == {"initial": (1.0, 5.0), "out": (5.0, 9.0), "in": (9.0, 12.0)}
    with pytest.raises(ValueError, match="marks"):
        recording_phases({"label": "x"})


def test_a_phase_cannot_end_before_it_starts() -> None:
    with pytest.raises(ValueError, match="before its start"):
        phase_metrics([], 5.0, 1.0)


def test_handovers_count_what_a_picture_shows_changing_hands() -> None:
    """A member restarted under its own name: its partitions go to another member and come back.
    ``moved`` (owner at the start vs at the settle) is 0; ``handovers`` counts both trips; an eager
    revoke-and-give-back to the same member is no handover."""
    events = [
        ev("m1", 0.0, "cb_assigned", [0, 1]),
        ev("m2", 0.0, "cb_assigned", [2, 3]),
        ev("m1", 10.0, "cb_revoked", [0, 1]),
        ev("m1", 10.1, "closed"),
        ev("m2", 10.5, "cb_revoked", [2, 3]),
        ev("m2", 10.6, "cb_assigned", [0, 1, 2, 3]),
        ev("m1", 11.0, "subscribed"),
        ev("m2", 11.5, "cb_revoked", [0, 1]),
        ev("m1", 11.8, "cb_assigned", [0, 1]),
    ]
    m = phase_metrics(events, 10.0)
    assert (m.moved, m.kept) == (0, 4)
    assert m.handovers == 4  # 0 and 1 to m2 and back to m1; 2 and 3 given back to m2 itself


def test_a_member_that_closes_without_a_revoke_callback_loses_its_partitions_when_it_goes() -> None:
    # aiokafka's eager consumer calls no listener on close(): its partitions are ownerless from its
    # ``closed`` until the survivors' next assignment, and the phase's window starts there.
    t0, t1, t2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    events = [
        Event("a", 0.0, "cb_assigned", [t0, t1]),
        Event("b", 0.0, "cb_assigned", [t2]),
        Event("a", 10.0, "closing"),
        Event("a", 10.2, "closed"),
        Event("b", 10.5, "cb_revoked", [t2]),
        Event("b", 11.0, "cb_assigned", [t0, t1, t2]),
    ]
    m = phase_metrics(events, 9.0)
    assert m.unowned_ps == pytest.approx(2 * 0.8 + 0.5) and m.window_s == pytest.approx(0.8)


def test_heartbeats_of_a_kip848_recording_do_not_hide_its_phases() -> None:
    """A KIP-848 member's telemetry writes a ``heartbeat`` event every interval; the quiet stretch
    that opens a phase must still be seen through them."""
    from kassign.timeline.metrics import detect_phases

    events = [ev("m1", 0.0, "subscribed"), ev("m1", 0.1, "cb_assigned", [0, 1])]
    events += [ev("m1", 0.2 + 0.25 * i, "heartbeat", lat=2.0) for i in range(40)]
    events += [ev("m2", 5.0, "subscribed"), ev("m1", 5.3, "cb_revoked", [1]), ev("m2", 5.5, "cb_assigned", [1])]
    assert list(detect_phases(sorted(events, key=lambda e: e.t))) == ["initial", "1:scale_out"]
