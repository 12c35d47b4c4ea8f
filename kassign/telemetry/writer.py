"""A background writer that never blocks the consumer: a bounded queue drained by one daemon thread.

``submit`` only ever does a non-blocking put: when the queue is full the event is dropped and
counted. A sink that raises is logged with its traceback and detached; later events are counted
as dropped. Nothing the sink does reaches the thread that submitted the event.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from kassign.telemetry.sinks import Sink

log = logging.getLogger(__name__)

__all__ = ["BackgroundWriter"]

_STOP = object()


class BackgroundWriter:
    """Delivers JSON objects to ``sink`` on a daemon thread named ``thread_name``."""

    def __init__(self, sink: Sink, *, queue_size: int = 10_000, thread_name: str = "kassign-telemetry") -> None:
        if queue_size <= 0:
            raise ValueError(f"queue_size must be positive, got {queue_size!r}")
        self._sink: Sink | None = sink
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self.written = 0
        self.dropped = 0
        self.sink_error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def submit(self, obj: dict[str, Any]) -> bool:
        """Queue one object without blocking; False (and counted as dropped) when it cannot be."""
        if self._closed or self._sink is None:
            self._count_drop()
            return False
        try:
            self._queue.put_nowait(obj)
        except queue.Full:
            self._count_drop()
            return False
        return True

    def _count_drop(self) -> None:
        with self._lock:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                self._finish_sink()
                return
            self._deliver(item)
            if self._queue.empty():
                self._call_sink_method("flush")

    def _deliver(self, obj: dict[str, Any]) -> None:
        sink = self._sink
        if sink is None:
            self._count_drop()
            return
        try:
            sink(obj)
        except Exception as exc:  # any sink failure must stay on this thread
            log.exception("telemetry sink %r failed; it is detached and later events are dropped", sink)
            self.sink_error = exc
            self._sink = None
            self._count_drop()
            self._call_sink_method("close", sink)
            return
        self.written += 1

    def _call_sink_method(self, name: str, sink: Sink | None = None) -> None:
        sink = sink if sink is not None else self._sink
        method = getattr(sink, name, None)
        if method is None:
            return
        try:
            method()
        except Exception as exc:
            log.exception("telemetry sink %r failed in %s(); it is detached", sink, name)
            if sink is self._sink:
                self.sink_error = exc
                self._sink = None

    def _finish_sink(self) -> None:
        self._call_sink_method("flush")
        self._call_sink_method("close")

    def close(self, timeout: float = 5.0) -> bool:
        """Deliver what is queued, close the sink, stop the thread; True if it finished in time."""
        if not self._closed:
            self._closed = True
            # Blocks only if the queue is full, and then at most `timeout`.
            try:
                self._queue.put(_STOP, timeout=timeout)
            except queue.Full:
                log.warning("telemetry writer queue still full after %.1fs; stopping without draining", timeout)
                return False
        self._thread.join(timeout)
        return not self._thread.is_alive()
