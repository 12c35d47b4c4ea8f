"""OpenTelemetry export of recorders' metrics (needs ``opentelemetry-api``: ``pip install 'kassign[telemetry]'``).

Each Java metric becomes an observable gauge ``kafka.consumer.coordinator.<name>`` (Java's dashed
name kept) read at collection time, with attributes ``group``, ``member`` and ``protocol``; members on the
consumer group protocol
(``protocol="consumer"``) also report its heartbeat metrics and ``failed-rebalance-rate-per-hour``
(other members observe nothing for those). The
meter comes from the given ``MeterProvider`` or the global one, so the application's SDK and
exporters decide where the numbers go.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from opentelemetry import metrics as otel_metrics

from kassign.telemetry.coordinator_metrics import ALL_METRIC_NAMES, METRIC_HELP
from kassign.telemetry.recorder import RebalanceRecorder

__all__ = ["OTEL_PREFIX", "OtelExporter", "instrument"]

OTEL_PREFIX = "kafka.consumer.coordinator."


def _unit(metric: str) -> str:
    if "latency" in metric or "response-time" in metric:
        return "ms"
    if metric.endswith("seconds-ago"):
        return "s"
    if metric.endswith("per-hour"):
        return "{rebalance}/h"
    if metric == "heartbeat-rate":
        return "{heartbeat}/s"
    if metric.startswith("heartbeat-"):
        return "{heartbeat}"
    return "{rebalance}"


class OtelExporter:
    """Observable gauges over a changing set of recorders."""

    def __init__(self, recorders: Iterable[RebalanceRecorder] = (), meter_provider: Any = None) -> None:
        self._lock = threading.Lock()
        self._recorders: list[RebalanceRecorder] = list(recorders)
        provider = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
        meter = provider.get_meter("kassign.telemetry")
        self.instruments = [
            meter.create_observable_gauge(
                OTEL_PREFIX + name, callbacks=[self._callback(name)], unit=_unit(name), description=METRIC_HELP[name]
            )
            for name in ALL_METRIC_NAMES
        ]

    def add(self, recorder: RebalanceRecorder) -> None:
        """Export ``recorder`` too."""
        with self._lock:
            self._recorders.append(recorder)

    def remove(self, recorder: RebalanceRecorder) -> None:
        """Stop exporting ``recorder``."""
        with self._lock:
            self._recorders = [r for r in self._recorders if r is not recorder]

    def _callback(self, name: str):
        def observe(options: otel_metrics.CallbackOptions) -> Iterator[otel_metrics.Observation]:
            with self._lock:
                recorders = list(self._recorders)
            for recorder in recorders:
                value = recorder.metrics().get(name)
                # NaN (no sample in the window) is left out rather than exported as a number, as is a
                # metric this member's protocol does not have.
                if value is not None and not math.isnan(value):
                    yield otel_metrics.Observation(value, dict(recorder.labels))

        return observe


def instrument(recorders: RebalanceRecorder | Iterable[RebalanceRecorder], meter_provider: Any = None) -> OtelExporter:
    """Create the gauges for ``recorders`` on ``meter_provider`` (default: the global provider)."""
    if isinstance(recorders, RebalanceRecorder):
        recorders = [recorders]
    return OtelExporter(recorders, meter_provider)
