"""Java 4's consumer-protocol metrics (KIP-848, ``AsyncKafkaConsumer``) from timeline events, the
recorder's hooks and the exporters, without a broker.

Java's rules under test (``ConsumerRebalanceMetricsManager``, ``HeartbeatMetricsManager``): a
rebalance starts when the member starts reconciling (a later start overwrites an open one) and ends
when the reconciliation is done; an error answer counts as a failed rebalance only while one is
open, and leaves it open; heartbeat response time, rate and total count answers, while
last-heartbeat-seconds-ago follows sends.
"""

from __future__ import annotations

import json
import math
from collections import namedtuple
from pathlib import Path

import pytest

from kassign.model import TopicPartition
from kassign.telemetry import ALL_METRIC_NAMES, METRIC_NAMES, CoordinatorMetrics, RebalanceRecorder, metrics_from_events
from kassign.timeline.events import Event, write_events

TP = namedtuple("TP", "topic partition")


def ev(t: float, kind: str, parts: list[int] | None = None, **extra) -> Event:
    return Event("m", t, kind, None if parts is None else [TopicPartition("t", p) for p in parts], extra)


def run(events: list[Event], protocol: str = "consumer", now: float | None = None) -> dict[str, float]:
    metrics = CoordinatorMetrics(protocol)
    for e in events:
        metrics.observe(e)
    return metrics.snapshot(now)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_fresh_consumer_protocol_member_reads_like_java() -> None:
    m = run([], now=50.0)
    assert list(m) == list(ALL_METRIC_NAMES)
    assert m["heartbeat-total"] == 0 and m["last-heartbeat-seconds-ago"] == -1 and m["heartbeat-rate"] == 0
    assert math.isnan(m["heartbeat-response-time-max"])
    assert m["failed-rebalance-rate-per-hour"] == 0 and m["last-rebalance-seconds-ago"] == -1
    assert list(run([], "cooperative", now=50.0)) == list(METRIC_NAMES), "classic members report what they did"


def test_reconciliations_start_and_end_the_rebalances() -> None:
    events = [
        ev(0.0, "subscribed", protocol="consumer"),  # no rebalance yet: that starts with the assignment
        ev(0.4, "reconcile", epoch=1),
        ev(0.5, "cb_assigned", [0, 1], dur=0.02),
        ev(0.52, "reconciled", epoch=1),
        ev(10.0, "reconcile", epoch=2),
        ev(10.1, "cb_revoked", [1], dur=0.3),
        ev(10.4, "cb_assigned", [], dur=0.0),
        ev(10.45, "reconciled", epoch=2),
    ]
    m = run(events, now=12.0)
    assert m["rebalance-total"] == 2
    assert m["rebalance-latency-total"] == pytest.approx(120.0 + 450.0)
    assert m["rebalance-latency-max"] == pytest.approx(450.0)
    assert m["last-rebalance-seconds-ago"] == 1
    assert m["partition-revoked-latency-max"] == pytest.approx(300.0)
    assert m["failed-rebalance-total"] == 0


def test_failures_count_only_while_a_rebalance_is_open_and_a_new_start_overwrites() -> None:
    events = [
        ev(0.0, "subscribed", protocol="consumer"),
        ev(1.0, "rebalance_failed", error="NOT_COORDINATOR"),  # nothing open: Java ignores it
        ev(2.0, "reconcile", epoch=3),
        ev(2.5, "rebalance_failed", error="COORDINATOR_LOAD_IN_PROGRESS"),
        ev(3.0, "reconciled", epoch=3),  # 1000 ms: the failure kept the start
        ev(20.0, "reconcile", epoch=4),
        ev(21.0, "rebalance_failed", error="FENCED_MEMBER_EPOCH"),  # fenced while reconciling
        ev(21.5, "rebalance_failed", error="COORDINATOR_NOT_AVAILABLE"),  # still open: counts again
        ev(22.0, "reconcile", epoch=6),
        ev(22.2, "reconciled", epoch=6),  # rejoined: 200 ms from the new start
        ev(23.0, "rebalance_failed", error="NOT_COORDINATOR"),  # closed again: ignored
    ]
    m = run(events, now=30.0)
    assert m["rebalance-total"] == 2
    assert m["rebalance-latency-total"] == pytest.approx(1200.0)
    assert m["rebalance-latency-max"] == pytest.approx(1000.0)
    assert m["failed-rebalance-total"] == 3
    # Java's Rate over a young window counts (samples - 1) windows at least: 3 in 30 s + 30 s.
    assert m["failed-rebalance-rate-per-hour"] == pytest.approx(3 / ((30_000 - 2_500 + 30_000) / 3_600_000))


def test_heartbeat_metrics_count_answers_and_time_sends() -> None:
    events = [ev(0.0, "subscribed", protocol="consumer")]
    events += [ev(float(i), "heartbeat", lat=10.0 + i) for i in range(10)]  # answered at i + lat
    events += [ev(9.5, "heartbeat", lat=5000.0, error="KafkaConnectionError", answered=False)]
    events += [ev(9.8, "heartbeat", lat=3.0, error="NOT_COORDINATOR")]  # an error answer counts
    m = run(events, now=12.5)
    assert m["heartbeat-total"] == 11
    assert m["heartbeat-response-time-max"] == pytest.approx(19.0), "the unanswered one is no response time"
    assert m["last-heartbeat-seconds-ago"] == 2, "from the last send (9.8 s), truncated"
    first_ms = 10.0
    assert m["heartbeat-rate"] == pytest.approx(11 / ((12_500 - first_ms + 30_000) / 1000))
    later = run(events, now=9.8 + 61.5)  # both 30 s samples expired
    assert math.isnan(later["heartbeat-response-time-max"]) and later["heartbeat-rate"] == 0
    assert later["heartbeat-total"] == 11 and later["last-heartbeat-seconds-ago"] == 61


def test_callbacks_alone_infer_reconciliations() -> None:
    events = [
        ev(0.0, "subscribed", protocol="consumer"),
        ev(2.0, "cb_assigned", [0, 1], dur=0.004),  # 4 ms
        ev(10.0, "cb_revoked", [1], dur=0.05),
        ev(10.05, "cb_revoked_done"),
        ev(10.06, "cb_assigned", [], dur=0.002),  # 62 ms, one rebalance
        ev(15.0, "cb_revoked", [0], dur=0.01),
        ev(15.01, "cb_revoked_done"),  # fenced before its assign...
        ev(16.0, "cb_lost", [], dur=0.0),  # ... abandons it
        ev(19.0, "cb_assigned", [0], dur=0.001),  # 1 ms
        ev(30.0, "closing"),
        ev(30.1, "cb_revoked", [0], dur=0.0),  # leaving is no rebalance
    ]
    m = run(events, now=31.0)
    assert m["rebalance-total"] == 3
    assert m["rebalance-latency-total"] == pytest.approx(67.0)
    assert m["rebalance-latency-max"] == pytest.approx(62.0)
    assert m["failed-rebalance-total"] == 0
    # Under the classic rules the first one would start at subscribe (a JoinGroup goes out at once).
    classic = run([ev(0.0, "subscribed"), events[1]], "cooperative", now=31.0)
    assert classic["rebalance-latency-max"] == pytest.approx(2000.0)


def test_recorder_hooks_write_reconcile_and_heartbeat_events() -> None:
    out: list[dict] = []
    clock = Clock()
    rec = RebalanceRecorder(out.append, member="m1", group="g", protocol="consumer", clock=clock)
    rec.subscribed(["t"])
    clock.t = 1000.2
    rec.heartbeat_completed(200.0)  # sent at 1000.0
    rec.rebalance_started(1)
    clock.t = 1000.5
    rec.rebalance_completed(False, 1, "COORDINATOR_LOAD_IN_PROGRESS")
    clock.t = 1000.7
    rec.record_callback("cb_assigned", [TP("t", 0)], 1000.6, 1000.7)
    rec.rebalance_completed(True, 1)
    clock.t = 1001.0
    rec.heartbeat_completed(40.0, "KafkaConnectionError()", answered=False)
    rec.close()
    assert [o["ev"] for o in out] == [
        "subscribed",
        "heartbeat",
        "reconcile",
        "rebalance_failed",
        "cb_assigned",
        "reconciled",
        "heartbeat",
    ], "no boundaries inferred beside the hooks"
    assert out[0]["protocol"] == "consumer"
    assert out[1]["t"] == pytest.approx(1000.0) and out[1]["lat"] == 200.0 and "answered" not in out[1]
    assert out[2]["epoch"] == 1 and out[5]["epoch"] == 1 and out[3]["error"] == "COORDINATOR_LOAD_IN_PROGRESS"
    assert out[6]["answered"] is False and out[6]["t"] == pytest.approx(1000.96)
    m = rec.metrics(now=1003.0)
    assert m["rebalance-total"] == 1 and m["rebalance-latency-max"] == pytest.approx(500.0)
    assert m["failed-rebalance-total"] == 1
    assert m["heartbeat-total"] == 1 and m["heartbeat-response-time-max"] == pytest.approx(200.0)
    assert m["last-heartbeat-seconds-ago"] == 2
    assert m["partition-assigned-latency-max"] == pytest.approx(100.0)
    # The recording replays to the same numbers.
    replayed = metrics_from_events([Event.from_json(o) for o in out], now=1003.0)["m1"]
    assert replayed == pytest.approx(m, nan_ok=True)


def test_a_recorder_without_a_protocol_learns_it_from_the_first_heartbeat() -> None:
    out: list[dict] = []
    clock = Clock()
    rec = RebalanceRecorder(out.append, member="m1", clock=clock)  # e.g. wrap_listener() without attach()
    rec.subscribed(["t"])  # written as eager: nothing said yet
    rec.heartbeat_completed(5.0)
    rec.rebalance_started(1)
    clock.t += 0.1
    rec.rebalance_completed(True, 1)
    rec.close()
    assert rec.protocol == "consumer" and rec.labels["protocol"] == "consumer"
    assert [o["ev"] for o in out if not o.get("inferred")] == ["subscribed", "heartbeat", "reconcile", "reconciled"]
    m = rec.metrics()
    assert list(m) == list(ALL_METRIC_NAMES) and m["heartbeat-total"] == 1
    assert m["rebalance-total"] == 1 and m["rebalance-latency-max"] == pytest.approx(100.0)
    replayed = metrics_from_events([Event.from_json(o) for o in out], now=clock.t)["m1"]
    assert list(replayed) == list(ALL_METRIC_NAMES) and replayed["rebalance-latency-max"] == pytest.approx(100.0)
    given = RebalanceRecorder(None, member="m2", protocol="cooperative")
    given.heartbeat_completed(5.0)
    assert given.protocol == "cooperative", "a protocol the application gave is kept"


def test_recorder_writes_inferred_reconciliations_for_callback_only_consumers() -> None:
    out: list[dict] = []
    rec = RebalanceRecorder(out.append, member="m1", protocol="consumer", clock=Clock())
    rec.subscribed(["t"])
    rec.record_callback("cb_revoked", [TP("t", 1)], 1001.0, 1001.2)
    rec.record_callback("cb_assigned", [], 1001.3, 1001.4)
    rec.close()
    inferred = [(o["ev"], o["t"]) for o in out if o.get("inferred")]
    assert inferred == [("reconcile", 1001.0), ("reconciled", pytest.approx(1001.4))]
    assert rec.metrics(now=1002.0)["rebalance-latency-max"] == pytest.approx(400.0)


def test_cli_takes_the_protocol_from_the_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kassign.telemetry.cli import main

    path = tmp_path / "m1.jsonl"
    write_events(
        path,
        [
            ev(0.0, "subscribed", protocol="consumer"),
            ev(1.0, "heartbeat", lat=12.0),
            ev(1.01, "reconcile", epoch=1),
            ev(1.2, "reconciled", epoch=1),
            ev(4.0, "heartbeat", lat=7.0),
        ],
    )
    assert main([str(path)]) == 0
    out = json.loads(capsys.readouterr().out)["m"]
    assert list(out) == list(ALL_METRIC_NAMES)
    assert out["heartbeat-total"] == 2 and out["heartbeat-response-time-max"] == 12.0
    assert out["rebalance-latency-max"] == pytest.approx(190.0) and out["last-heartbeat-seconds-ago"] == 0


def _consumer_recorder() -> RebalanceRecorder:
    clock = Clock()
    rec = RebalanceRecorder(None, member="k", group="g", protocol="consumer", clock=clock)
    rec.subscribed(["t"])
    rec.rebalance_started(1)
    clock.t += 0.25
    rec.rebalance_completed(True, 1)
    rec.heartbeat_completed(15.0)
    return rec


def test_prometheus_exports_the_consumer_protocol_metrics() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from kassign.telemetry.prometheus import prometheus_name, register

    classic = RebalanceRecorder(None, member="c", group="g", protocol="cooperative")
    registry = CollectorRegistry()
    register([_consumer_recorder(), classic], registry)
    text = generate_latest(registry).decode()
    samples = {(s.name, s.labels["member"]): s for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples[(prometheus_name("heartbeat-total"), "k")].value == 1
    assert samples[(prometheus_name("heartbeat-response-time-max"), "k")].value == 15.0
    assert samples[(prometheus_name("rebalance-latency-max"), "k")].value == pytest.approx(250.0)
    assert samples[(prometheus_name("rebalance-total"), "k")].labels["protocol"] == "consumer"
    assert (prometheus_name("heartbeat-total"), "c") not in samples, "a classic member reports no heartbeats here"
    assert (prometheus_name("rebalance-total"), "c") in samples


def test_opentelemetry_exports_the_consumer_protocol_metrics() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from kassign.telemetry.otel import OTEL_PREFIX, instrument

    reader = InMemoryMetricReader()
    classic = RebalanceRecorder(None, member="c", group="g", protocol="eager")
    instrument([_consumer_recorder(), classic], MeterProvider(metric_readers=[reader]))
    points = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    points[(metric.name, p.attributes["member"])] = (p.value, metric.unit)
    assert points[(OTEL_PREFIX + "heartbeat-total", "k")] == (1, "{heartbeat}")
    assert points[(OTEL_PREFIX + "heartbeat-response-time-max", "k")] == (15.0, "ms")
    assert points[(OTEL_PREFIX + "heartbeat-rate", "k")][1] == "{heartbeat}/s"
    assert (OTEL_PREFIX + "heartbeat-total", "c") not in points
    assert (OTEL_PREFIX + "rebalance-total", "c") in points
