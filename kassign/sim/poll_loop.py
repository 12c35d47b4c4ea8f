"""The application side of a simulated consumer: its poll loop, what it consumes, and when the batch
in hand ends (callbacks that run inside ``poll()`` wait for it)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kassign.model import TopicPartition
from kassign.sim.engine import EventLoop, Timer
from kassign.sim.processing import Processing

__all__ = ["PollLoop"]


class PollLoop:
    """What the application consumes and when it is next inside ``poll()``: a member with partitions
    works a batch (drawn from ``processing`` with its own ``rng``) between polls; an idle one waits
    inside ``poll()``."""

    def __init__(self, loop: EventLoop, processing: Processing, rng: random.Random) -> None:
        self.loop = loop
        self.processing = processing
        self.rng = rng
        self.consuming: set[TopicPartition] = set()
        self.batch_end: float | None = None  # when the batch in hand ends (None: idle)
        self.batch_start: float | None = None  # when the batch in hand began
        self.batch_chained = False  # ... right as the one before it ended (not from an idle poll)

    def set_consuming(self, partitions: set[TopicPartition]) -> None:
        """The partitions the application consumes from now on (a first one starts a batch)."""
        was_idle = not self.consuming
        self.consuming = partitions
        if not partitions:
            self.batch_end = None
        elif was_idle:
            self.batch_start, self.batch_chained = self.loop.now, False
            self.batch_end = self.loop.now + self.processing.sample_s(self.rng)

    def next_poll(self) -> float:
        """When the loop is next inside ``poll()``: now if it is there (no batch in hand, or the batch
        ends now), else once the batch in hand is done."""
        now = self.loop.now
        if self.batch_end is None or not self.processing.busy:
            return now
        while self.batch_end < now - 1e-9:
            self.batch_start, self.batch_chained = self.batch_end, True
            self.batch_end += self.processing.sample_s(self.rng)
        return self.batch_end

    def hold_until(self, until: float) -> None:
        """Callbacks running inside ``poll()`` until ``until``: the next batch starts after them."""
        if self.batch_end is not None and self.processing.busy:
            self.batch_end = max(self.next_poll(), until)

    def at_next_poll(self, fn: Callable[..., Any], *args: Any, extra_s: float = 0.0) -> Timer:
        """Run ``fn(*args)`` at the next ``poll()``, ``extra_s`` later."""
        return self.loop.after(self.next_poll() - self.loop.now + extra_s, fn, *args)
