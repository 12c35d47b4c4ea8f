"""Rebalance telemetry for production consumers.

A :class:`RebalanceRecorder` attaches to an aiokafka or confluent-kafka consumer with one line,
writes its rebalance timeline in the ``kassign.timeline.events`` JSON-lines schema (to a size-rotated file
or any callable, through a bounded queue and a background thread) and keeps Java's
``consumer-coordinator-metrics`` rebalance metrics (and, on the consumer group protocol of
KIP-848, its heartbeat metrics), readable as a plain dict and exportable to
Prometheus (:mod:`kassign.telemetry.prometheus`) or OpenTelemetry (:mod:`kassign.telemetry.otel`).
"""

from kassign.telemetry.consumer_protocol import CONSUMER_PROTOCOL_METRIC_NAMES
from kassign.telemetry.coordinator_metrics import (
    ALL_METRIC_NAMES,
    METRIC_NAMES,
    CoordinatorMetrics,
    metric_names,
    metrics_from_events,
)
from kassign.telemetry.recorder import RebalanceRecorder
from kassign.telemetry.sinks import RotatingFileSink
from kassign.telemetry.stats import MetricConfig

__all__ = [
    "ALL_METRIC_NAMES",
    "CONSUMER_PROTOCOL_METRIC_NAMES",
    "METRIC_NAMES",
    "CoordinatorMetrics",
    "MetricConfig",
    "RebalanceRecorder",
    "RotatingFileSink",
    "metric_names",
    "metrics_from_events",
]
