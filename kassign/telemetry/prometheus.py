"""Prometheus export of recorders' metrics (needs ``prometheus_client``: ``pip install 'kassign[telemetry]'``).

Each Java metric becomes a gauge named ``kafka_consumer_coordinator_metrics_<name>`` (dashes as
underscores, the JMX exporter's usual shape) with labels ``group``, ``member`` and ``protocol``;
members on the consumer group protocol (``protocol="consumer"``) add its heartbeat metrics and
``failed-rebalance-rate-per-hour`` (a family has no sample for members that do not report it);
the recorder's own health adds ``kassign_telemetry_events_dropped`` and
``kassign_telemetry_sink_failed``. Values are measured at scrape time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kassign.telemetry.coordinator_metrics import ALL_METRIC_NAMES, METRIC_HELP
from kassign.telemetry.recorder import RebalanceRecorder

__all__ = ["PREFIX", "RecorderCollector", "register", "serve", "prometheus_name"]

PREFIX = "kafka_consumer_coordinator_metrics_"
_LABELS = ("group", "member", "protocol")


def prometheus_name(metric: str) -> str:
    """The exported name of a Java metric name, e.g. ``rebalance-total`` -> ``..._rebalance_total``."""
    return PREFIX + metric.replace("-", "_")


class RecorderCollector(Collector):
    """A collector over any number of recorders (one per consumer in the process)."""

    def __init__(self, recorders: Iterable[RebalanceRecorder] = ()) -> None:
        self._lock = threading.Lock()
        self._recorders: list[RebalanceRecorder] = list(recorders)

    def add(self, recorder: RebalanceRecorder) -> None:
        """Export ``recorder`` too."""
        with self._lock:
            self._recorders.append(recorder)

    def remove(self, recorder: RebalanceRecorder) -> None:
        """Stop exporting ``recorder`` (a closed consumer)."""
        with self._lock:
            self._recorders = [r for r in self._recorders if r is not recorder]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            recorders = list(self._recorders)
        families = {
            name: GaugeMetricFamily(prometheus_name(name), METRIC_HELP[name], labels=_LABELS)
            for name in ALL_METRIC_NAMES
        }
        dropped = GaugeMetricFamily(
            "kassign_telemetry_events_dropped", "Events the recorder could not hand to its sink", labels=_LABELS
        )
        failed = GaugeMetricFamily(
            "kassign_telemetry_sink_failed",
            "1 while the recorder's sink is failing (it raised since it last wrote an event)",
            labels=_LABELS,
        )
        for recorder in recorders:
            labels = recorder.labels
            values = [labels[k] for k in _LABELS]
            for name, value in recorder.metrics().items():
                families[name].add_metric(values, value)
            stats = recorder.stats()
            dropped.add_metric(values, stats["dropped"])
            failed.add_metric(values, 1.0 if stats["sink_failing"] else 0.0)
        yield from families.values()
        yield dropped
        yield failed


def register(
    recorders: RebalanceRecorder | Iterable[RebalanceRecorder], registry: CollectorRegistry | None = None
) -> RecorderCollector:
    """Register a collector for ``recorders`` in ``registry`` (default: prometheus_client's global one)."""
    if isinstance(recorders, RebalanceRecorder):
        recorders = [recorders]
    collector = RecorderCollector(recorders)
    (REGISTRY if registry is None else registry).register(collector)
    return collector


def serve(
    recorders: RebalanceRecorder | Iterable[RebalanceRecorder],
    port: int = 9464,
    addr: str = "0.0.0.0",
    registry: CollectorRegistry | None = None,
) -> tuple[RecorderCollector, Any]:
    """Serve ``/metrics`` over HTTP on ``addr:port`` (0 picks a free port) from a background thread.

    Uses a fresh registry unless one is given. Returns the collector and the HTTP server (its
    ``server_port`` is the bound port; ``shutdown()`` stops it).
    """
    registry = CollectorRegistry() if registry is None else registry
    collector = register(recorders, registry)
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return collector, server
