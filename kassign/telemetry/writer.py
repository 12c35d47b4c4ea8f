"""A background writer that never blocks the consumer: a bounded queue drained by one daemon thread.

``submit`` only ever does a non-blocking put: when the queue is full the event is dropped and
counted. A sink that raises never loses its place: an ``OSError`` (a full disk, a file that went
away) is retried with exponential backoff, up to ``retries`` times per event; any other error
drops that one event. Every event that could not be written is counted in ``dropped`` and every
failed call in ``sink_errors``; ``sink_error`` keeps the last error and ``failing`` says whether
the sink has failed since it last wrote an event. Nothing the sink does reaches the thread that submitted the event.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from kassign.telemetry.sinks import Sink

log = logging.getLogger(__name__)

__all__ = ["BackgroundWriter"]

_STOP = object()


class BackgroundWriter:
    """Delivers JSON objects to ``sink`` on a daemon thread named ``thread_name``.

    ``retries``: further attempts for an event whose write raised OSError; the waits between
    attempts start at ``backoff_s`` and double up to ``max_backoff_s``, and carry over to the next
    event while the sink keeps failing (so a full disk costs one attempt per wait, not a busy loop).
    While closing, failed writes are retried without waiting.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        queue_size: int = 10_000,
        thread_name: str = "kassign-telemetry",
        retries: int = 3,
        backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
    ) -> None:
        if queue_size <= 0:
            raise ValueError(f"queue_size must be positive, got {queue_size!r}")
        if retries < 0 or not 0 < backoff_s <= max_backoff_s:
            raise ValueError(
                f"need retries >= 0 and 0 < backoff_s <= max_backoff_s, got {retries!r}, "
                f"{backoff_s!r}, {max_backoff_s!r}"
            )
        self._sink: Sink = sink
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self.written = 0
        self.dropped = 0
        self.sink_errors = 0
        self.sink_error: BaseException | None = None
        self._backing_off = False
        self._reported = False
        self._backoff = 0.0
        self._closed = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    @property
    def failing(self) -> bool:
        """True from a sink failure until the sink next writes an event."""
        return self._reported

    def submit(self, obj: dict[str, Any]) -> bool:
        """Queue one object without blocking; False (and counted as dropped) when it cannot be."""
        if self._closed:
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

    def _failed(self, exc: BaseException, what: str) -> None:
        self.sink_errors += 1
        self.sink_error = exc
        if not self._reported:  # the first failure of a run says so, with its traceback
            self._reported = True
            log.warning(
                "telemetry sink %r failed in %s (%s); it stays attached: write errors are retried "
                "with backoff, events that cannot be written are dropped and counted",
                self._sink,
                what,
                exc,
                exc_info=exc,
            )
        else:
            log.debug("telemetry sink %r failed again in %s: %s", self._sink, what, exc)

    def _recovered(self) -> None:
        if self._reported:
            log.warning(
                "telemetry sink %r works again after %d error(s); %d event(s) dropped so far",
                self._sink,
                self.sink_errors,
                self.dropped,
            )
        self._reported = self._backing_off = False
        self._backoff = 0.0

    def _wait_backoff(self) -> None:
        self._backoff = min(self.max_backoff_s, self._backoff * 2 if self._backoff else self.backoff_s)
        self._stopping.wait(self._backoff)

    def _deliver(self, obj: dict[str, Any]) -> None:
        for _attempt in range(self.retries + 1):
            if self._backing_off and not self._stopping.is_set():
                self._wait_backoff()
            try:
                self._sink(obj)
            except OSError as exc:
                self._failed(exc, "a write")
                self._backing_off = True
                continue
            except Exception as exc:  # not transient: this event cannot be written, the next may
                self._failed(exc, "a write")
                break
            self.written += 1
            self._recovered()
            return
        self._count_drop()

    def _call_sink_method(self, name: str) -> None:
        method = getattr(self._sink, name, None)
        if method is None:
            return
        try:
            method()
        except OSError as exc:
            self._failed(exc, f"{name}()")
            self._backing_off = True
        except Exception as exc:
            self._failed(exc, f"{name}()")

    def _finish_sink(self) -> None:
        self._call_sink_method("flush")
        self._call_sink_method("close")

    def close(self, timeout: float = 5.0) -> bool:
        """Deliver what is queued (retrying without backoff), close the sink, stop the thread; True if it
        finished within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        if not self._closed:
            self._closed = True
            self._stopping.set()
            # Blocks only if the queue is full, and then at most `timeout`.
            try:
                self._queue.put(_STOP, timeout=timeout)
            except queue.Full:
                log.warning("telemetry writer queue still full after %.1fs; stopping without draining", timeout)
                return False
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()
