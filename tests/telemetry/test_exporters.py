"""Prometheus and OpenTelemetry exporters publish exactly the recorder's metrics, labelled per member."""

from __future__ import annotations

import math
import urllib.request
from collections import namedtuple

import pytest

from kassign.telemetry import METRIC_NAMES, RebalanceRecorder

TP = namedtuple("TP", "topic partition")


def _recorders() -> list[RebalanceRecorder]:
    a = RebalanceRecorder(None, member="a", group="g", protocol="eager")
    b = RebalanceRecorder(None, member="b", group="g", protocol="cooperative")
    for rec in (a, b):
        rec.subscribed(["t"])
        rec.confluent_callbacks()["on_assign"](None, [TP("t", 0)])
    a.confluent_callbacks()["on_revoke"](None, [TP("t", 0)])
    a.confluent_callbacks()["on_assign"](None, [TP("t", 1)])
    return [a, b]


def test_prometheus_http_endpoint_serves_every_metric_per_member() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from kassign.telemetry.prometheus import prometheus_name, serve

    recorders = _recorders()
    _collector, server = serve(recorders, port=0, addr="127.0.0.1")
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
    samples = {
        (s.name, s.labels["member"]): (s.value, s.labels)
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    for rec in recorders:
        expected = rec.metrics()
        for name in METRIC_NAMES:
            value, labels = samples[(prometheus_name(name), rec.member)]
            assert labels == {"group": "g", "member": rec.member, "protocol": rec.protocol}
            if name != "rebalance-rate-per-hour":  # measured a moment later: its window grew
                assert (math.isnan(value) and math.isnan(expected[name])) or value == pytest.approx(expected[name])
    assert samples[(prometheus_name("rebalance-total"), "a")][0] == 2
    assert samples[("kassign_telemetry_events_dropped", "a")][0] == 0
    assert not any("partition" in labels for _, labels in samples.values())  # no per-partition labels


def test_opentelemetry_gauges_carry_group_member_protocol() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from kassign.telemetry.otel import OTEL_PREFIX, instrument

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    recorders = _recorders()
    instrument(recorders, meter_provider=provider)
    data = reader.get_metrics_data()
    points = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    points[(metric.name, p.attributes["member"])] = (p.value, dict(p.attributes))
    assert points[(OTEL_PREFIX + "rebalance-total", "a")][0] == 2
    assert points[(OTEL_PREFIX + "rebalance-total", "b")][1] == {"group": "g", "member": "b", "protocol": "cooperative"}
    assert (OTEL_PREFIX + "partition-lost-latency-avg", "a") not in points  # NaN: nothing in the window
    expected = recorders[0].metrics()["partition-assigned-latency-max"]
    assert points[(OTEL_PREFIX + "partition-assigned-latency-max", "a")][0] == pytest.approx(expected)
