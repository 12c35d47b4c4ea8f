"""Rebalance telemetry for aiokafka consumers: a listener wrapper and a one-line ``attach``.

The wrapper is an aiokafka ``ConsumerRebalanceListener`` that times the user's listener (sync or
async methods both work), records the callback, and re-raises whatever the user's code raised, so
aiokafka handles it exactly as before. It also forwards the recorder's rebalance hooks
(``rebalance_started`` / ``rebalance_completed``, and ``heartbeat_completed`` on the consumer group
protocol): a consumer that knows when it sends JoinGroup and receives SyncGroup, or when it starts
and ends a reconciliation (kassign's cooperative consumer, either protocol), can call them on the
listener it was given.

Imported by :class:`~kassign.telemetry.recorder.RebalanceRecorder` when one of its aiokafka
methods is called (aiokafka is an optional dependency).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from aiokafka.abc import ConsumerRebalanceListener

from kassign.adapters.aiokafka import group_id_of
from kassign.model import RebalanceProtocol
from kassign.telemetry.hooks import RecorderHooks

__all__ = ["RecordingListener", "wrap_listener", "attach", "protocol_of"]


class RecordingListener(ConsumerRebalanceListener):
    """Records around ``listener`` (or around nothing when it is None)."""

    def __init__(self, recorder: RecorderHooks, listener: Any = None) -> None:
        self.recorder = recorder
        self.listener = listener

    async def _run(self, kind: str, method: str, partitions: Iterable[Any]) -> None:
        given = partitions
        partitions = list(partitions)
        func = getattr(self.listener, method, None) if self.listener is not None else None
        clock = self.recorder.clock
        start = clock()
        try:
            if func is not None:
                result = func(given)
                if inspect.isawaitable(result):
                    await result
        except BaseException as exc:
            self.recorder.record_callback(kind, partitions, start, clock(), error=exc)
            raise
        self.recorder.record_callback(kind, partitions, start, clock())

    async def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
        await self._run("cb_revoked", "on_partitions_revoked", revoked)

    async def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
        await self._run("cb_assigned", "on_partitions_assigned", assigned)

    async def on_partitions_lost(self, lost: Iterable[Any]) -> None:
        """Lost partitions; a user listener without ``on_partitions_lost`` gets them revoked, as in Java."""
        method = "on_partitions_lost" if hasattr(self.listener, "on_partitions_lost") else "on_partitions_revoked"
        await self._run("cb_lost", method, lost)

    def rebalance_started(self, generation: int | None = None) -> None:
        """Hook for the consumer: a JoinGroup is about to be sent."""
        self.recorder.rebalance_started(generation)

    def rebalance_completed(self, ok: bool = True, generation: int | None = None, error: Any = None) -> None:
        """Hook for the consumer: SyncGroup succeeded (``ok``) or the JoinGroup/SyncGroup round failed."""
        self.recorder.rebalance_completed(ok, generation, error)

    def heartbeat_completed(self, latency_ms: float, error: Any = None, answered: bool = True) -> None:
        """Hook for the consumer (consumer group protocol): a heartbeat was answered, or failed."""
        self.recorder.heartbeat_completed(latency_ms, error, answered)


def wrap_listener(recorder: RecorderHooks, listener: Any = None) -> RecordingListener:
    """A listener for ``consumer.subscribe(..., listener=...)`` that records around ``listener``."""
    if isinstance(listener, RecordingListener):
        raise ValueError(f"listener {listener!r} already records to {listener.recorder.member!r}")
    return RecordingListener(recorder, listener)


def protocol_of(consumer: Any) -> str:
    """ "consumer" for a consumer on the consumer group protocol (``group_protocol == "consumer"``,
    kassign's CooperativeConsumer), else the protocol it declares in ``rebalance_protocol``, else "eager"."""
    if getattr(consumer, "group_protocol", None) == "consumer":
        return "consumer"
    declared = getattr(consumer, "rebalance_protocol", None)
    if callable(declared):
        declared = declared()
    if isinstance(declared, RebalanceProtocol):
        return declared.name.lower()
    if isinstance(declared, str) and declared.lower() in ("eager", "cooperative"):
        return declared.lower()
    return "eager"


def attach(recorder: RecorderHooks, consumer: Any) -> Any:
    """Patch this consumer instance: ``subscribe`` records and wraps the listener, ``stop`` records closing.

    Takes the group id and (unless the recorder was given one) the protocol from the consumer.
    Returns the consumer.
    """
    if getattr(consumer, "_kassign_recorder", None) is not None:
        raise ValueError(f"consumer {consumer!r} already has a recorder attached")
    if recorder.group is None:
        recorder.group = group_id_of(consumer)
    if not recorder.protocol_given:
        recorder.protocol = protocol_of(consumer)
    original_subscribe = consumer.subscribe
    original_stop = consumer.stop

    def subscribe(topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None) -> Any:
        topics = list(topics)
        recorder.subscribed(topics if pattern is None else None, pattern=pattern)
        return original_subscribe(topics=topics, pattern=pattern, listener=wrap_listener(recorder, listener))

    async def stop() -> None:
        recorder.closing()
        try:
            await original_stop()
        finally:
            recorder.closed()

    consumer.subscribe = subscribe
    consumer.stop = stop
    consumer._kassign_recorder = recorder
    return consumer
