"""The rebalance recorder: one per consumer, fed by its rebalance callbacks, writing timeline events.

Every event goes two ways: synchronously into the member's :class:`CoordinatorMetrics` (a few
arithmetic operations under a lock) and, as a JSON object in the ``kassign.timeline.events`` schema, into a
bounded queue that a background thread drains into the sink. The consumer's thread never waits
for the sink and never sees its errors.

Client glue lives in :mod:`kassign.telemetry.aiokafka_glue` and :mod:`kassign.telemetry.confluent_glue`
and is imported only when one of the attach methods is called, so this module needs nothing beyond
the standard library.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kassign.model import TopicPartition
from kassign.telemetry.coordinator_metrics import PROTOCOLS, CoordinatorMetrics
from kassign.telemetry.jsonsafe import to_jsonable
from kassign.telemetry.sinks import RotatingFileSink, Sink
from kassign.telemetry.stats import MetricConfig
from kassign.telemetry.writer import BackgroundWriter
from kassign.timeline.events import MAX_EVENT_TIME, Event

log = logging.getLogger(__name__)

__all__ = ["RebalanceRecorder"]

_CALLBACK_KINDS = ("cb_assigned", "cb_revoked", "cb_lost")


class RebalanceRecorder:
    """Records one consumer's rebalances as timeline events and keeps Java's coordinator metrics.

    ``sink``: a file path (JSON lines, rotated at ``max_bytes`` keeping ``backup_count`` old
    files), any callable taking each event's JSON object, or None to keep metrics only.
    ``member`` names the member in events and metric labels (default: host, pid and a per-recorder
    suffix); ``group`` and ``protocol`` ("eager" or "cooperative" on the classic group protocol,
    "consumer" on the consumer group protocol of KIP-848) are labels, and ``protocol`` also picks
    the rules: how rebalances are inferred from callbacks, which events the hooks write, which
    metrics are reported (None: detected by ``attach``, else eager). ``queue_size`` bounds the events waiting
    for the sink; beyond it events are
    dropped and counted. ``metric_config`` sets Java's sampling windows for the avg/max/rate
    metrics (default two samples of 30 s). ``clock`` gives unix seconds.

    One line attaches it: ``recorder.attach(aiokafka_consumer)``,
    ``consumer.subscribe(topics, listener=recorder.wrap_listener(listener))`` (aiokafka), or
    ``consumer.subscribe(topics, **recorder.confluent_callbacks(on_assign=...))`` (confluent-kafka).
    """

    def __init__(
        self,
        sink: str | os.PathLike[str] | Sink | None = None,
        *,
        member: str | None = None,
        group: str | None = None,
        protocol: str | None = None,
        max_bytes: int = 64 * 1024 * 1024,
        backup_count: int = 5,
        queue_size: int = 10_000,
        metric_config: MetricConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if protocol is not None and protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        #: False when the protocol is left for the adapter to detect (eager until then).
        self.protocol_given = protocol is not None
        protocol = protocol or "eager"
        self.member = member or f"{socket.gethostname()}-{os.getpid()}-{id(self) % 0x10000:04x}"
        self.group = group
        self.protocol = protocol
        self.clock = clock
        self.single_topic: str | None = None
        self._lock = threading.Lock()
        self._metrics = CoordinatorMetrics(protocol, metric_config)
        self.events_recorded = 0
        self.events_rejected = 0
        if sink is None:
            self._writer: BackgroundWriter | None = None
        else:
            if isinstance(sink, (str, os.PathLike)):
                sink = RotatingFileSink(sink, max_bytes=max_bytes, backup_count=backup_count)
            elif not callable(sink):
                raise TypeError(f"sink must be a path, a callable or None, got {sink!r}")
            self._writer = BackgroundWriter(sink, queue_size=queue_size, thread_name=f"kassign-telemetry-{self.member}")

    # -- labels and state ----------------------------------------------------------------------

    @property
    def labels(self) -> dict[str, str]:
        """The exporters' labels: group, member, protocol (empty string when unknown)."""
        return {"group": self.group or "", "member": self.member, "protocol": self.protocol}

    def metrics(self, now: float | None = None) -> dict[str, float]:
        """Java's consumer-coordinator rebalance metrics at ``now`` (default: the clock) as a plain dict."""
        at = self.clock() if now is None else now
        with self._lock:
            return self._metrics.snapshot(at)

    def stats(self) -> dict[str, Any]:
        """The recorder's own health: events recorded, written, dropped (queue full or sink failure),
        rejected (a time that is not finite), the sink's failed calls, its last error, and whether it
        is failing now (it failed since it last wrote an event)."""
        writer = self._writer
        return {
            "events": self.events_recorded,
            "written": writer.written if writer else 0,
            "dropped": writer.dropped if writer else 0,
            "rejected": self.events_rejected,
            "sink_errors": writer.sink_errors if writer else 0,
            "sink_error": repr(writer.sink_error) if writer and writer.sink_error else None,
            "sink_failing": bool(writer and writer.failing),
        }

    # -- events --------------------------------------------------------------------------------

    def record(self, ev: str, *, t: float | None = None, parts: Iterable[Any] | None = None, **extra: Any) -> None:
        """Record one event of kind ``ev`` at ``t`` (default now); ``parts`` any partition objects.

        Extra values JSON does not know (a compiled regex, a set) are stored in their JSON form. An
        event whose time is not a finite number (a broken clock) is rejected: logged once, counted
        in ``stats()["rejected"]``, and kept out of the metrics and the sink.
        """
        at = self.clock() if t is None else t
        try:
            at = float(at)
        except (TypeError, ValueError):
            at = math.nan
        if not math.isfinite(at) or abs(at) > MAX_EVENT_TIME:
            self._reject(ev, at)
            return
        event = Event(
            id=self.member,
            t=at,
            ev=ev,
            parts=None if parts is None else to_partitions(parts),
            extra={k: to_jsonable(v) for k, v in extra.items() if v is not None},
        )
        with self._lock:
            derived = self._metrics.observe(event)
            self.events_recorded += 1
        writer = self._writer
        if writer is None:
            return
        writer.submit(event.to_json(single_topic=self.single_topic))
        # Inferred rebalance boundaries follow the event implying them (at its time or its callback's end).
        for kind, at in derived:
            writer.submit(Event(self.member, at, kind, extra={"inferred": True}).to_json())

    def _reject(self, ev: str, t: float) -> None:
        with self._lock:
            self.events_rejected += 1
            first = self.events_rejected == 1
        (log.warning if first else log.debug)(
            "telemetry of %s: %s event at time %r rejected (not a finite unix time); rejected events are counted",
            self.member,
            ev,
            t,
        )

    def subscribed(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None) -> None:
        """The consumer subscribed; one topic makes partitions bare ints in later events.

        ``pattern``: a regex subscription, as a string or compiled (written as its pattern string).
        """
        names = sorted(topics) if topics is not None else None
        if isinstance(pattern, re.Pattern):
            pattern = pattern.pattern
        self.single_topic = names[0] if names is not None and len(names) == 1 and pattern is None else None
        self.record("subscribed", topics=names, pattern=pattern, group=self.group, protocol=self.protocol)

    def record_callback(
        self, kind: str, partitions: Iterable[Any], start: float, end: float, error: BaseException | None = None
    ) -> None:
        """A listener callback of ``kind`` (cb_assigned, cb_revoked, cb_lost) ran from ``start`` to ``end``.

        Writes the callback event at its start with its duration (``dur``, seconds) and, for a
        revocation, ``cb_revoked_done`` at its end.
        """
        if kind not in _CALLBACK_KINDS:
            raise ValueError(f"callback kind must be one of {_CALLBACK_KINDS}, got {kind!r}")
        err = None if error is None else f"{type(error).__name__}: {error}"
        self.record(kind, t=start, parts=partitions, dur=round(max(0.0, end - start), 6), error=err)
        if kind == "cb_revoked":
            self.record("cb_revoked_done", t=end)

    def rebalance_started(self, generation: int | None = None) -> None:
        """Hook for consumers that know: a JoinGroup is being sent (``generation`` the one the member had);
        on the consumer protocol, the member starts reconciling a new target assignment (``generation``
        its member epoch), written as a ``reconcile`` event.

        Once a consumer calls the hooks, callbacks are no longer used to infer rebalance boundaries.
        """
        if self.protocol == "consumer":
            self.record("reconcile", epoch=generation)
        else:
            self.record("join", gen=generation)

    def rebalance_completed(
        self, ok: bool = True, generation: int | None = None, error: str | BaseException | None = None
    ) -> None:
        """Hook: the rebalance round ended; ``ok`` a SyncGroup succeeded, else a JoinGroup/SyncGroup failed.

        On the consumer protocol: ``ok`` the reconciliation is done (``reconciled``), else a heartbeat
        failed while one was under way (``rebalance_failed``; the rebalance stays open, as in Java).
        """
        consumer = self.protocol == "consumer"
        if ok:
            if consumer:
                self.record("reconciled", epoch=generation)
            else:
                self.record("sync", gen=generation, protocol=self.protocol)
        else:
            numbered: dict[str, Any] = {"epoch" if consumer else "gen": generation}
            self.record("rebalance_failed", **numbered, error=None if error is None else str(error))

    def heartbeat_completed(
        self, latency_ms: float, error: str | BaseException | None = None, answered: bool = True
    ) -> None:
        """Hook (consumer group protocol): a heartbeat sent ``latency_ms`` ago was answered (with the
        error name ``error``, if any) or, ``answered`` false, failed without an answer (``error`` why).

        Written as a ``heartbeat`` event at its send time; feeds Java's heartbeat metrics. A recorder
        whose protocol was not given learns from it that the member is on the consumer protocol
        (a consumer's first heartbeat comes before its first rebalance).
        """
        if self.protocol != "consumer" and not self.protocol_given:
            log.info("telemetry of %s: the consumer heartbeats on the consumer group protocol", self.member)
            self.protocol = "consumer"
        latency = max(0.0, float(latency_ms))
        self.record(
            "heartbeat",
            t=self.clock() - latency / 1000.0,
            lat=round(latency, 3),
            error=None if error is None else str(error),
            answered=None if answered else False,
        )

    def closing(self) -> None:
        """The consumer starts closing (rebalance inference stops)."""
        self.record("closing")

    def closed(self) -> None:
        """The consumer has closed."""
        self.record("closed")

    def close(self, timeout: float = 5.0) -> bool:
        """Write what is queued and close the sink; True if done within ``timeout`` seconds."""
        return self._writer.close(timeout) if self._writer is not None else True

    def __enter__(self) -> RebalanceRecorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- attaching (client glue is imported only here) ---------------------------------------

    def attach(self, consumer: Any) -> Any:
        """Attach to an aiokafka consumer: its ``subscribe`` wraps listeners, its ``stop`` is recorded.

        Returns the consumer. confluent-kafka consumers cannot be patched: use
        :meth:`confluent_callbacks` in their ``subscribe`` call.
        """
        from kassign.telemetry.aiokafka_glue import attach

        return attach(self, consumer)

    def wrap_listener(self, listener: Any = None) -> Any:
        """An aiokafka ``ConsumerRebalanceListener`` that records around ``listener`` (None: no user listener)."""
        from kassign.telemetry.aiokafka_glue import wrap_listener

        return wrap_listener(self, listener)

    def subscribe(
        self,
        consumer: Any,
        topics: Iterable[str],
        *,
        listener: Any = None,
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        """Subscribe ``consumer`` (aiokafka or confluent-kafka) to ``topics`` with recording callbacks.

        aiokafka takes ``listener``; confluent-kafka takes ``on_assign``/``on_revoke``/``on_lost``.
        """
        topics = list(topics)
        if _is_confluent(consumer):
            if listener is not None:
                raise TypeError("a confluent-kafka consumer takes on_assign/on_revoke/on_lost, not listener")
            self.subscribed(topics)
            consumer.subscribe(topics, **self.confluent_callbacks(on_assign, on_revoke, on_lost))
        else:
            if (on_assign, on_revoke, on_lost) != (None, None, None):
                raise TypeError("an aiokafka consumer takes listener, not on_assign/on_revoke/on_lost")
            if getattr(consumer, "_kassign_recorder", None) is self:
                consumer.subscribe(topics, listener=listener)  # attach() already records subscribe
                return
            self.subscribed(topics)
            consumer.subscribe(topics, listener=self.wrap_listener(listener))

    def confluent_callbacks(
        self,
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> dict[str, Callable[..., Any]]:
        """``on_assign``/``on_revoke``/``on_lost`` keyword arguments for confluent-kafka's ``subscribe``."""
        from kassign.telemetry.confluent_glue import recording_callbacks

        return recording_callbacks(self, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)


def _is_confluent(consumer: Any) -> bool:
    return any(cls.__module__.split(".")[0] in ("confluent_kafka", "cimpl") for cls in type(consumer).__mro__)


def to_partitions(partitions: Iterable[Any]) -> list[TopicPartition]:
    """Sorted kassign partitions from any objects with ``topic`` and ``partition`` (aiokafka, confluent)."""
    try:
        return sorted(TopicPartition(str(p.topic), int(p.partition)) for p in partitions)
    except AttributeError as exc:
        raise TypeError(f"partitions must have .topic and .partition, got {partitions!r}") from exc
