"""Java's ``consumer-coordinator-metrics`` rebalance metrics, computed from one member's timeline events.

Meanings (``AbstractCoordinator.GroupCoordinatorMetrics`` and ``RebalanceCallbackMetricsManager``):

- ``rebalance-latency-avg``/``-max`` (sampled, ms) and ``rebalance-latency-total`` (ms since
  creation): from the first JoinGroup of a rebalance to the SyncGroup that completes it, failed
  retries included; ``rebalance-total`` counts completed rebalances, ``rebalance-rate-per-hour``
  their windowed rate; ``failed-rebalance-total`` counts failed JoinGroup/SyncGroup rounds;
  ``last-rebalance-seconds-ago`` whole seconds since the last completed one, -1 before any.
- ``partition-{revoked,assigned,lost}-latency-avg``/``-max`` (sampled, ms): how long the user's
  listener callback ran, recorded only when it returned normally.

Rebalance start and end come from ``join`` / ``sync`` / ``rebalance_failed`` events when the
consumer reports them (the recorder's hooks). Otherwise they are inferred from the callbacks,
which Kafka clients invoke at fixed points of the protocol:

- eager: the revoke callback runs just before every JoinGroup (start) and the assign callback just
  after every successful SyncGroup (end);
- cooperative: each successful SyncGroup is followed by a revoke callback (when partitions are
  taken away) and then the assign callback; a member that revoked rejoins right after, so that
  rejoin's start is the end of the assign callback;
- both: ``subscribed`` starts the first rebalance; after a lost callback the member rejoins.

The recorder writes the inferred boundaries into the recording as ``join``/``sync`` events
marked ``"inferred": true`` (at the callback times above), for readers of the timeline.

A rebalance whose start was not observable (a cooperative member pulled into a rebalance by a
heartbeat) still counts in ``rebalance-total`` and the rate, but adds no latency sample. Failed
rounds are visible only through the hooks.

The consumer group protocol (KIP-848, protocol ``"consumer"``) has no JoinGroup/SyncGroup rounds.
Java's ``AsyncKafkaConsumer`` (``ConsumerRebalanceMetricsManager``, driven by
``AbstractMembershipManager.transitionTo``) starts a rebalance when the member starts reconciling a
new target assignment (any state -> RECONCILING; a later start overwrites an open one) and ends it
when the reconciliation is done (RECONCILING -> ACKNOWLEDGING, or STABLE when the broker's target
turns out to be what the member owns): the hooks write these as ``reconcile`` / ``reconciled``
events (``epoch``). A heartbeat answered with an error, or failing without an answer for a reason
that is not retriable, while a rebalance is open counts as a failed rebalance (``rebalance_failed``)
and leaves the rebalance open. Without hooks, a reconciliation is inferred from its callbacks: it
starts at its revoke callback (when it takes partitions away) or else its assign callback, and ends
when the assign callback returns (Java acknowledges right after it); a lost callback (fenced)
abandons an open one. Inferred latencies miss what precedes the first callback (the commit of the
revoked partitions, a metadata lookup). Such a member also reports
:data:`~kassign.telemetry.consumer_protocol.CONSUMER_PROTOCOL_METRIC_NAMES` (heartbeats, from
``heartbeat`` events, and ``failed-rebalance-rate-per-hour``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable

from kassign.telemetry.consumer_protocol import (
    CONSUMER_PROTOCOL_HELP,
    CONSUMER_PROTOCOL_METRIC_NAMES,
    HeartbeatMetrics,
)
from kassign.telemetry.stats import Avg, CumulativeCount, CumulativeSum, Max, MetricConfig, Rate
from kassign.timeline.events import Event

log = logging.getLogger(__name__)

__all__ = [
    "METRIC_NAMES",
    "METRIC_HELP",
    "ALL_METRIC_NAMES",
    "CoordinatorMetrics",
    "metric_names",
    "metrics_from_events",
]

#: The metric names, as Java's consumer reports them in group ``consumer-coordinator-metrics``.
METRIC_NAMES: tuple[str, ...] = (
    "rebalance-latency-avg",
    "rebalance-latency-max",
    "rebalance-latency-total",
    "rebalance-total",
    "rebalance-rate-per-hour",
    "failed-rebalance-total",
    "last-rebalance-seconds-ago",
    "partition-revoked-latency-avg",
    "partition-revoked-latency-max",
    "partition-assigned-latency-avg",
    "partition-assigned-latency-max",
    "partition-lost-latency-avg",
    "partition-lost-latency-max",
)

#: One line per metric for exporters; avg/max cover Java's sampled window (about the last minute).
METRIC_HELP: dict[str, str] = {
    "rebalance-latency-avg": "Mean ms a rebalance took: first JoinGroup to successful SyncGroup, or (consumer "
    "protocol) reconciliation start to end (sampled window)",
    "rebalance-latency-max": "Longest ms a rebalance took: first JoinGroup to successful SyncGroup, or (consumer "
    "protocol) reconciliation start to end (sampled window)",
    "rebalance-latency-total": "Milliseconds spent in successful rebalances since the consumer started",
    "rebalance-total": "Successful rebalances since the consumer started",
    "rebalance-rate-per-hour": "Successful rebalances per hour over the sampled window",
    "failed-rebalance-total": "Failed JoinGroup/SyncGroup rounds, or (consumer protocol) heartbeat errors while "
    "reconciling, since the consumer started",
    "last-rebalance-seconds-ago": "Whole seconds since the last successful rebalance, -1 before the first",
    "partition-revoked-latency-avg": "Mean ms the partitions-revoked listener callback ran (sampled window)",
    "partition-revoked-latency-max": "Longest ms the partitions-revoked listener callback ran (sampled window)",
    "partition-assigned-latency-avg": "Mean ms the partitions-assigned listener callback ran (sampled window)",
    "partition-assigned-latency-max": "Longest ms the partitions-assigned listener callback ran (sampled window)",
    "partition-lost-latency-avg": "Mean ms the partitions-lost listener callback ran (sampled window)",
    "partition-lost-latency-max": "Longest ms the partitions-lost listener callback ran (sampled window)",
    **CONSUMER_PROTOCOL_HELP,
}

#: Every name some member reports: the classic ones, then the consumer group protocol's additions.
ALL_METRIC_NAMES: tuple[str, ...] = METRIC_NAMES + CONSUMER_PROTOCOL_METRIC_NAMES

_HOUR_MS = 3_600_000.0
_CALLBACK_SENSOR = {"cb_revoked": "partition-revoked", "cb_assigned": "partition-assigned", "cb_lost": "partition-lost"}
#: "eager" and "cooperative": the classic group protocol; "consumer": the consumer group protocol (KIP-848).
PROTOCOLS = ("eager", "cooperative", "consumer")
# Events from a consumer that reports its own rebalance boundaries (the recorder's hooks).
_HOOK_EVENTS = frozenset({"join", "sync", "rebalance_failed", "reconcile", "reconciled"})
# Events only a member on the consumer group protocol writes.
_CONSUMER_PROTOCOL_EVENTS = frozenset({"reconcile", "reconciled", "heartbeat"})


def metric_names(protocol: str) -> tuple[str, ...]:
    """The metric names a member on ``protocol`` reports, in snapshot order."""
    return ALL_METRIC_NAMES if protocol == "consumer" else METRIC_NAMES


class _LatencySensor:
    """Java's ``Sensor`` holding an Avg and a Max of the same values."""

    def __init__(self, config: MetricConfig) -> None:
        self.avg = Avg(config)
        self.max = Max(config)

    def record(self, value_ms: float, now_ms: float) -> None:
        self.avg.record(value_ms, now_ms)
        self.max.record(value_ms, now_ms)


class CoordinatorMetrics:
    """Feed one member's events in order with :meth:`observe`; read the metrics with :meth:`snapshot`.

    ``protocol`` ("eager", "cooperative" or "consumer") selects the rules; a ``subscribed`` event
    carrying ``protocol`` overrides it, and a ``reconcile``, ``reconciled`` or ``heartbeat`` event
    (written only for consumer-protocol members) switches to "consumer". Not thread-safe: the
    recorder serialises calls.
    """

    def __init__(self, protocol: str | None = "eager", config: MetricConfig | None = None) -> None:
        self.protocol = _check_protocol(protocol or "eager")
        self.config = config or MetricConfig()
        self._latency = _LatencySensor(self.config)
        self._latency_total = CumulativeSum()
        self._rebalance_count = CumulativeCount()
        self._rebalance_rate = Rate(self.config, _HOUR_MS)
        self._failed_count = CumulativeCount()
        self._failed_rate = Rate(self.config, _HOUR_MS)
        self._heartbeats = HeartbeatMetrics(self.config)
        self._callbacks = {name: _LatencySensor(self.config) for name in _CALLBACK_SENSOR.values()}
        self._start_ms: float | None = None
        self._last_end_ms: float | None = None
        self._last_event_ms: float | None = None
        self._hooks_seen = False  # once the consumer reports join/sync, callbacks are not interpreted
        self._closing = False
        self._sync_counted = False  # cooperative: this SyncGroup was already counted at its revoke callback
        self._rejoin_after_assign = False
        self._derived: list[tuple[str, float]] = []
        self._event_t = 0.0  # the event being observed, in its own seconds and in ms
        self._event_ms = 0.0

    # -- feeding -----------------------------------------------------------------------------

    def observe(self, event: Event) -> list[tuple[str, float]]:
        """Account for one event (any kind; unknown kinds are ignored).

        Returns the rebalance boundaries this event implies by the inference rules, as
        ``("join" | "sync", unix seconds)`` (``"reconcile" | "reconciled"`` on the consumer
        protocol), so a recorder can write them down; events marked
        ``inferred`` are such boundaries themselves and are skipped (replaying a recording
        re-infers them).
        """
        self._derived = []
        if event.extra.get("inferred"):
            return self._derived
        now_ms = event.t * 1000.0
        self._event_t, self._event_ms = event.t, now_ms
        self._last_event_ms = now_ms if self._last_event_ms is None else max(self._last_event_ms, now_ms)
        kind = event.ev
        if kind in _CONSUMER_PROTOCOL_EVENTS and self.protocol != "consumer":
            # Only a consumer-protocol member reconciles and heartbeats this way: its recording says so.
            self.protocol = "consumer"
        if kind in _HOOK_EVENTS and not self._hooks_seen:
            # The consumer reports its rebalances: drop what the callbacks suggested so far.
            self._hooks_seen = True
            self._start_ms = None
        if kind == "join":
            self._start(now_ms)
        elif kind == "reconcile":
            # Java overwrites the start of a rebalance left open (a member fenced while reconciling).
            self._start_ms = now_ms
        elif kind in ("sync", "reconciled"):
            if event.extra.get("error"):
                self._failed(now_ms)
            else:
                self._complete(now_ms)
        elif kind == "rebalance_failed":
            self._failed(now_ms)
        elif kind == "heartbeat":
            self._heartbeats.observe(event)
        elif kind == "subscribed":
            if event.extra.get("protocol") in PROTOCOLS:
                self.protocol = event.extra["protocol"]
            self._closing = False
            if not self._hooks_seen and self.protocol != "consumer":
                # A classic member joins at once; a consumer-protocol member's first rebalance starts
                # when the broker's answer gives it an assignment to reconcile (not observable here).
                self._start(now_ms)
        elif kind == "closing":
            self._closing = True
        elif kind in _CALLBACK_SENSOR:
            self._observe_callback(event, now_ms)
        return self._derived

    def _observe_callback(self, event: Event, now_ms: float) -> None:
        duration_ms = float(event.extra.get("dur", 0.0)) * 1000.0
        if "dur" in event.extra and not event.extra.get("error"):
            # Java records the callback's duration at its end.
            self._callbacks[_CALLBACK_SENSOR[event.ev]].record(duration_ms, now_ms + duration_ms)
        if self._hooks_seen or self._closing:
            return
        end_ms = now_ms + duration_ms
        if self.protocol == "consumer":
            self._infer_reconciliation(event, now_ms, end_ms)
        elif event.ev == "cb_lost":
            self._start(end_ms)
        elif self.protocol == "eager":
            if event.ev == "cb_revoked":
                self._start(now_ms)
            else:
                self._complete(now_ms)
        elif event.ev == "cb_revoked":
            if not self._sync_counted:
                self._complete(now_ms)
            self._sync_counted = True
            self._rejoin_after_assign = self._rejoin_after_assign or bool(event.parts)
        else:  # cooperative assign: the last callback of a SyncGroup
            if not self._sync_counted:
                self._complete(now_ms)
            self._sync_counted = False
            if self._rejoin_after_assign:
                self._rejoin_after_assign = False
                self._start(end_ms)

    def _infer_reconciliation(self, event: Event, now_ms: float, end_ms: float) -> None:
        """Consumer group protocol: one reconciliation runs [revoke callback,] assign callback."""
        if event.ev == "cb_lost":
            self._start_ms = None  # fenced: the member joins again; its next reconciliation starts afresh
        elif event.ev == "cb_revoked":
            if event.parts:
                self._start(now_ms)
        else:
            self._start(now_ms)
            self._complete(end_ms)

    def _failed(self, now_ms: float) -> None:
        if self.protocol == "consumer" and self._start_ms is None:
            # Java's maybeRecordRebalanceFailed: only while a rebalance is open.
            return
        self._failed_count.record(1.0, now_ms)
        self._failed_rate.record(1.0, now_ms)

    def _start(self, now_ms: float) -> None:
        # A rebalance retried after failures keeps its first start (Java: lastRebalanceStartMs).
        if self._start_ms is None:
            self._start_ms = now_ms
            if not self._hooks_seen:
                self._derived.append((self._boundary_kinds[0], self._seconds(now_ms)))

    def _complete(self, now_ms: float) -> None:
        if self._start_ms is not None:
            latency = max(0.0, now_ms - self._start_ms)
            self._latency.record(latency, now_ms)
            self._latency_total.record(latency, now_ms)
        else:
            log.debug("rebalance completed at %.3f without an observed start: counted, no latency", now_ms / 1000)
        self._rebalance_count.record(1.0, now_ms)
        self._rebalance_rate.record(1.0, now_ms)
        self._last_end_ms = now_ms
        self._start_ms = None
        if not self._hooks_seen:
            self._derived.append((self._boundary_kinds[1], self._seconds(now_ms)))

    def _seconds(self, ms: float) -> float:
        # A boundary at the observed event's own time keeps that time exactly: t * 1000 / 1000 can
        # differ from t in the last bit and round to another microsecond when written.
        return self._event_t if ms == self._event_ms else ms / 1000.0

    @property
    def _boundary_kinds(self) -> tuple[str, str]:
        # The event kinds a rebalance's start and end are written as on this protocol.
        return ("reconcile", "reconciled") if self.protocol == "consumer" else ("join", "sync")

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> dict[str, float]:
        """The metrics at unix time ``now`` (default: the last event's time), keyed by Java's names
        (:func:`metric_names` of the protocol: the consumer protocol's include the heartbeat metrics).

        Measuring has Java's side effects on the sampled stats (expired samples are reset), so
        call it with non-decreasing ``now``.
        """
        if now is not None:
            now_ms = now * 1000.0
        elif self._last_event_ms is not None:
            now_ms = self._last_event_ms
        else:
            now_ms = 0.0
        out = {
            "rebalance-latency-avg": self._latency.avg.measure(now_ms),
            "rebalance-latency-max": self._latency.max.measure(now_ms),
            "rebalance-latency-total": self._latency_total.measure(now_ms),
            "rebalance-total": self._rebalance_count.measure(now_ms),
            "rebalance-rate-per-hour": self._rebalance_rate.measure(now_ms),
            "failed-rebalance-total": self._failed_count.measure(now_ms),
            "last-rebalance-seconds-ago": (
                -1.0 if self._last_end_ms is None else float(math.trunc((now_ms - self._last_end_ms) / 1000.0))
            ),
        }
        for name, sensor in self._callbacks.items():
            out[f"{name}-latency-avg"] = sensor.avg.measure(now_ms)
            out[f"{name}-latency-max"] = sensor.max.measure(now_ms)
        if self.protocol == "consumer":
            out["failed-rebalance-rate-per-hour"] = self._failed_rate.measure(now_ms)
            out.update(self._heartbeats.snapshot(now_ms))
        return {name: out[name] for name in metric_names(self.protocol)}


def _check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    return protocol


def metrics_from_events(
    events: Iterable[Event],
    *,
    now: float | None = None,
    protocol: str = "eager",
    config: MetricConfig | None = None,
) -> dict[str, dict[str, float]]:
    """Replay a recording (one member or a merged group) into each member's metrics.

    Events are taken in the given order per member; ``now`` defaults to the time of the last event
    of the whole recording. Returns ``{member: {metric name: value}}``.
    """
    per_member: dict[str, CoordinatorMetrics] = {}
    last_t: float | None = None
    for event in events:
        metrics = per_member.get(event.id)
        if metrics is None:
            metrics = per_member[event.id] = CoordinatorMetrics(protocol, config)
        metrics.observe(event)
        last_t = event.t if last_t is None else max(last_t, event.t)
    at = now if now is not None else last_t
    return {member: per_member[member].snapshot(at) for member in sorted(per_member)}
