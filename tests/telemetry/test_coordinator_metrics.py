"""Java's coordinator metrics from timeline events: the inference rules, the hooks, recorded real groups."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kassign.model import TopicPartition
from kassign.telemetry import METRIC_NAMES, CoordinatorMetrics, metrics_from_events
from kassign.timeline.events import Event, read_events

DATA = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"


def ev(t: float, kind: str, parts: list[int] | None = None, **extra) -> Event:
    return Event("m", t, kind, None if parts is None else [TopicPartition("t", p) for p in parts], extra)


def run(events: list[Event], protocol: str = "eager", now: float | None = None) -> dict[str, float]:
    metrics = CoordinatorMetrics(protocol)
    for e in events:
        metrics.observe(e)
    return metrics.snapshot(now)


def test_nothing_recorded_reads_like_a_fresh_java_consumer() -> None:
    m = run([], now=100.0)
    assert list(m) == list(METRIC_NAMES)
    assert m["rebalance-total"] == 0 and m["failed-rebalance-total"] == 0 and m["rebalance-latency-total"] == 0
    assert m["last-rebalance-seconds-ago"] == -1
    assert m["rebalance-rate-per-hour"] == 0
    for name in METRIC_NAMES:
        if name.endswith(("-avg", "-max")):
            assert math.isnan(m[name]), name


def test_eager_revoke_starts_and_assign_ends_each_rebalance() -> None:
    events = [
        ev(10.0, "subscribed"),
        ev(10.5, "cb_revoked", [], dur=0.001),
        ev(10.501, "cb_revoked_done"),  # aiokafka revokes before the first join
        ev(12.0, "cb_assigned", [0, 1], dur=0.004),  # 2000 ms after subscribe
        ev(20.0, "cb_revoked", [0, 1], dur=0.010),
        ev(20.010, "cb_revoked_done"),
        ev(20.5, "cb_assigned", [0], dur=0.002),  # 500 ms
    ]
    m = run(events, now=25.9)
    assert m["rebalance-total"] == 2
    assert m["rebalance-latency-total"] == pytest.approx(2500.0)
    assert m["rebalance-latency-avg"] == pytest.approx(1250.0)
    assert m["rebalance-latency-max"] == pytest.approx(2000.0)
    assert m["last-rebalance-seconds-ago"] == 5  # 5.4 s, truncated like Java's TimeUnit conversion
    assert m["partition-assigned-latency-avg"] == pytest.approx(3.0)
    assert m["partition-assigned-latency-max"] == pytest.approx(4.0)
    assert m["partition-revoked-latency-max"] == pytest.approx(10.0)
    assert math.isnan(m["partition-lost-latency-avg"])


def test_sampled_metrics_forget_after_two_windows_but_totals_do_not() -> None:
    events = [ev(0.0, "subscribed"), ev(1.0, "cb_assigned", [0], dur=0.002)]
    m = run(events, now=1.002 + 60.0)  # both 30 s samples expired (the callback was recorded at its end)
    assert math.isnan(m["rebalance-latency-avg"]) and math.isnan(m["partition-assigned-latency-max"])
    assert m["rebalance-total"] == 1 and m["rebalance-latency-total"] == pytest.approx(1000.0)
    assert m["last-rebalance-seconds-ago"] == 60


def test_cooperative_sync_with_revocation_counts_once_and_rejoin_starts_after_assign() -> None:
    # librdkafka / Java order after a SyncGroup that takes partitions away: revoke, then assign, then rejoin.
    events = [
        ev(0.0, "subscribed"),
        ev(1.0, "cb_assigned", [0, 1, 2, 3], dur=0.001),  # first rebalance: 1000 ms
        ev(5.0, "cb_revoked", [2, 3], dur=0.050),
        ev(5.05, "cb_revoked_done"),  # start unknown: count only
        ev(5.06, "cb_assigned", [], dur=0.002),  # same SyncGroup; rejoin at 5.062
        ev(6.062, "cb_assigned", [], dur=0.001),  # follow-up rebalance: 1000 ms
    ]
    m = run(events, "cooperative", now=7.0)
    assert m["rebalance-total"] == 3
    assert m["rebalance-latency-total"] == pytest.approx(2000.0)
    assert m["rebalance-latency-max"] == pytest.approx(1000.0)
    assert m["partition-revoked-latency-avg"] == pytest.approx(50.0)


def test_lost_partitions_start_the_rejoin_and_closing_stops_inference() -> None:
    events = [
        ev(0.0, "subscribed"),
        ev(1.0, "cb_assigned", [0], dur=0.0),
        # cb_assigned 2000 ms from the lost callback's end
        ev(10.0, "cb_lost", [0], dur=0.100),
        ev(12.1, "cb_assigned", [0], dur=0.0),
        ev(20.0, "closing"),
        ev(20.01, "cb_revoked", [0], dur=0.0),
        ev(20.02, "cb_assigned", [], dur=0.0),
    ]
    m = run(events, now=21.0)
    assert m["rebalance-total"] == 2
    assert m["rebalance-latency-total"] == pytest.approx(3000.0)
    assert m["partition-lost-latency-max"] == pytest.approx(100.0)


def test_hooks_replace_inference_and_failures_keep_the_first_start() -> None:
    events = [
        ev(0.0, "subscribed"),
        ev(0.1, "join", gen=None),
        ev(0.2, "rebalance_failed", error="UNKNOWN_MEMBER_ID"),
        ev(0.3, "join", gen=None),
        ev(0.9, "sync", gen=1),  # 800 ms from the first join
        ev(0.91, "cb_assigned", [0], dur=0.0),
        ev(5.0, "cb_revoked", [0], dur=0.0),  # ignored: hooks are reported
        ev(6.0, "join", gen=1),
        ev(6.25, "sync", gen=2),  # 250 ms
        ev(7.0, "sync", gen=2, error="REBALANCE_IN_PROGRESS"),  # an answered but failed sync
    ]
    m = run(events, "cooperative", now=8.0)
    assert m["rebalance-total"] == 2
    assert m["failed-rebalance-total"] == 2
    assert m["rebalance-latency-total"] == pytest.approx(1050.0)
    assert m["rebalance-latency-max"] == pytest.approx(800.0)


def test_a_callback_that_raised_adds_no_latency_sample() -> None:
    m = run([ev(0.0, "subscribed"), ev(1.0, "cb_assigned", [0], dur=0.5, error="ValueError: x")], now=2.0)
    assert math.isnan(m["partition-assigned-latency-avg"])
    assert m["rebalance-total"] == 1


def test_bad_protocol_is_named() -> None:
    with pytest.raises(ValueError, match="'sticky'"):
        CoordinatorMetrics("sticky")


def _callbacks_before_closing(events: list[Event], member: str) -> list[Event]:
    out = []
    for e in events:
        if e.id != member:
            continue
        if e.ev == "closing":
            break
        out.append(e)
    return out


@pytest.mark.parametrize("run_name", ["kafka-ck-coop-r1", "tansu-ck-coop-r2"])
def test_librdkafka_cooperative_recording_counts_one_rebalance_per_assign_callback(run_name: str) -> None:
    # librdkafka calls the assign callback once after every successful SyncGroup in cooperative mode.
    events = [e for e in read_events(DATA / run_name / "events.jsonl.gz") if e.id.startswith("m")]
    result = metrics_from_events(events, protocol="cooperative")
    assert len(result) == 6
    for member, m in result.items():
        mine = _callbacks_before_closing(events, member)
        assert m["rebalance-total"] == sum(e.ev == "cb_assigned" for e in mine), member


@pytest.mark.parametrize("run_name", ["kafka-ck-range-r1", "kafka-java-range-r3"])
def test_eager_recording_latency_is_revoke_to_assign(run_name: str) -> None:
    events = [e for e in read_events(DATA / run_name / "events.jsonl.gz") if e.id.startswith("m")]
    result = metrics_from_events(events, protocol="eager")
    for member, m in result.items():
        start, total, count = None, 0.0, 0
        for e in _callbacks_before_closing(events, member):
            if e.ev in ("subscribed", "cb_revoked") and start is None:
                start = e.t
            elif e.ev == "cb_assigned":
                count += 1
                if start is not None:
                    total += (e.t - start) * 1000.0
                start = None
        assert m["rebalance-total"] == count > 0, member
        # unix ms in a float: ~0.2 µs steps
        assert m["rebalance-latency-total"] == pytest.approx(total, abs=1e-3), member


def test_cli_prints_metrics_of_a_recording(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kassign.telemetry.cli import main

    path = DATA / "kafka-java-sticky-r1" / "events.jsonl.gz"
    assert main([str(path), "--window-ms", "3600000"]) == 0
    out = json.loads(capsys.readouterr().out)
    events = [e for e in read_events(path) if e.id == "m1"]
    assert out["m1"]["rebalance-total"] == sum(e.ev == "cb_assigned" for e in _callbacks_before_closing(events, "m1"))
    assert out["m1"]["partition-assigned-latency-avg"] is None  # this recording has no callback durations
