"""The discrete-event loop under the simulator: a clock and a time-ordered queue of callbacks.

Ties are broken by scheduling order, so a run is a pure function of its inputs. Callbacks are
either *foreground* (part of a rebalance in flight: a request, a callback, a timeout) or
*background* (periodic heartbeats and session checks); the loop knows the group is quiet when no
foreground work is left, which is how a simulation ends without simulating idle hours.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

__all__ = ["EventLoop", "Timer", "MAX_TIME_S"]

#: Latest simulated time (about 31 years): beyond it ``t + heartbeat == t`` comes close, and the loop
#: would spin on one instant.
MAX_TIME_S = 1e9


class Timer:
    """A scheduled callback; :meth:`EventLoop.cancel` it to drop it."""

    __slots__ = ("t", "seq", "fn", "args", "background", "cancelled")

    def __init__(self, t: float, seq: int, fn: Callable[..., Any], args: tuple[Any, ...], background: bool) -> None:
        self.t, self.seq, self.fn, self.args = t, seq, fn, args
        self.background = background
        self.cancelled = False

    def __lt__(self, other: Timer) -> bool:
        return (self.t, self.seq) < (other.t, other.seq)


class EventLoop:
    """Simulated time in seconds from 0, and the callbacks waiting for it."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[Timer] = []
        self._seq = 0
        #: Foreground callbacks still pending.
        self.active = 0

    def at(self, t: float, fn: Callable[..., Any], *args: Any, background: bool = False) -> Timer:
        """Run ``fn(*args)`` at time ``t`` (never before now); ValueError for a time that is not
        finite or beyond :data:`MAX_TIME_S`."""
        if not math.isfinite(t) or t > MAX_TIME_S:
            raise ValueError(f"cannot schedule at simulated time {t!r} s (limit {MAX_TIME_S:g} s)")
        self._seq += 1
        timer = Timer(max(t, self.now), self._seq, fn, args, background)
        heapq.heappush(self._queue, timer)
        if not background:
            self.active += 1
        return timer

    def after(self, delay: float, fn: Callable[..., Any], *args: Any, background: bool = False) -> Timer:
        """Run ``fn(*args)`` ``delay`` seconds from now."""
        return self.at(self.now + delay, fn, *args, background=background)

    def cancel(self, timer: Timer | None) -> None:
        """Drop a pending callback (a no-op for None or one that already ran)."""
        if timer is None or timer.cancelled:
            return
        timer.cancelled = True
        if not timer.background:
            self.active -= 1

    def run(self, until: float, quiet: Callable[[], bool]) -> float:
        """Process callbacks in time order until ``until`` or until no foreground work is left
        and ``quiet()`` agrees; returns the time it stopped at."""
        queue = self._queue
        while queue:
            timer = heapq.heappop(queue)
            if timer.cancelled:
                continue
            if timer.t > until:
                heapq.heappush(queue, timer)
                self.now = until
                return until
            self.now = timer.t
            timer.cancelled = True  # ran: a later cancel() must not count it again
            if not timer.background:
                self.active -= 1
            timer.fn(*timer.args)
            if self.active == 0 and quiet():
                return self.now
        return self.now
