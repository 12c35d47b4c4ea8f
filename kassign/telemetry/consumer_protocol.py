"""What Java 4's consumer reports on the consumer group protocol (KIP-848, ``group.protocol=consumer``)
beyond the classic rebalance metrics: the heartbeat metrics and the failed-rebalance rate.

Java's ``AsyncKafkaConsumer`` registers them in the same group, ``consumer-coordinator-metrics``:

- ``HeartbeatMetricsManager``: ``heartbeat-response-time-max`` (sampled max of the ms each
  ConsumerGroupHeartbeat waited for its answer), ``heartbeat-rate`` (answers per second over the
  sampled window) and ``heartbeat-total`` (answers since the consumer started) are one sensor
  recorded when an answer arrives, whatever its error code; a heartbeat that got no answer (a
  disconnect, a timeout) adds nothing to them. ``last-heartbeat-seconds-ago`` is the whole seconds
  since the last heartbeat was *sent*, -1 before any.
- ``ConsumerRebalanceMetricsManager``: besides the rebalance metrics of the classic consumer it has
  ``failed-rebalance-rate-per-hour``, the windowed rate of the failures counted in
  ``failed-rebalance-total``.

Timeline events (``heartbeat``): ``t`` when the heartbeat was sent, ``lat`` the ms until it was
answered (or failed), ``error`` the answer's error name or the failure, ``answered: false`` when no
answer came.
"""

from __future__ import annotations

import math

from kassign.telemetry.stats import CumulativeCount, Max, MetricConfig, Rate
from kassign.timeline.events import Event

__all__ = ["HEARTBEAT_METRIC_NAMES", "CONSUMER_PROTOCOL_METRIC_NAMES", "CONSUMER_PROTOCOL_HELP", "HeartbeatMetrics"]

#: Java's heartbeat metrics (``HeartbeatMetricsManager``), reported here for the consumer group protocol.
HEARTBEAT_METRIC_NAMES: tuple[str, ...] = (
    "heartbeat-response-time-max",
    "heartbeat-rate",
    "heartbeat-total",
    "last-heartbeat-seconds-ago",
)

#: The metrics a consumer-protocol member reports on top of the classic ones (``METRIC_NAMES``).
CONSUMER_PROTOCOL_METRIC_NAMES: tuple[str, ...] = ("failed-rebalance-rate-per-hour", *HEARTBEAT_METRIC_NAMES)

CONSUMER_PROTOCOL_HELP: dict[str, str] = {
    "failed-rebalance-rate-per-hour": "Failed rebalances per hour over the sampled window (consumer group protocol)",
    "heartbeat-response-time-max": "Longest ms a ConsumerGroupHeartbeat waited for its answer (sampled window)",
    "heartbeat-rate": "ConsumerGroupHeartbeat answers per second over the sampled window",
    "heartbeat-total": "ConsumerGroupHeartbeat answers since the consumer started",
    "last-heartbeat-seconds-ago": "Whole seconds since the last ConsumerGroupHeartbeat was sent, -1 before the first",
}

_SECOND_MS = 1000.0


class HeartbeatMetrics:
    """Java's ``HeartbeatMetricsManager``: feed ``heartbeat`` events, read :meth:`snapshot`."""

    def __init__(self, config: MetricConfig) -> None:
        self._response_time = Max(config)
        self._rate = Rate(config, _SECOND_MS)  # Java's Meter: Rate(SECONDS, WindowedCount) ...
        self._total = CumulativeCount()  # ... and a CumulativeSum of 1 per record
        self._last_sent_ms: float | None = None

    def observe(self, event: Event) -> None:
        """One heartbeat: sent at ``event.t``; answered ``lat`` ms later unless ``answered`` is false."""
        sent_ms = event.t * 1000.0
        self._last_sent_ms = sent_ms if self._last_sent_ms is None else max(self._last_sent_ms, sent_ms)
        if event.extra.get("answered", True) is False:
            return
        try:
            latency_ms = float(event.extra.get("lat", math.nan))
        except (TypeError, ValueError):
            latency_ms = math.nan
        if not math.isfinite(latency_ms) or latency_ms < 0:
            return  # a heartbeat event without a usable latency: only its send time counts
        # Java records the answer's latency when the answer arrives.
        at_ms = sent_ms + latency_ms
        self._response_time.record(latency_ms, at_ms)
        self._rate.record(1.0, at_ms)
        self._total.record(1.0, at_ms)

    def snapshot(self, now_ms: float) -> dict[str, float]:
        """The four heartbeat metrics at ``now_ms``."""
        return {
            "heartbeat-response-time-max": self._response_time.measure(now_ms),
            "heartbeat-rate": self._rate.measure(now_ms),
            "heartbeat-total": self._total.measure(now_ms),
            "last-heartbeat-seconds-ago": (
                -1.0 if self._last_sent_ms is None else float(math.trunc((now_ms - self._last_sent_ms) / 1000.0))
            ),
        }
