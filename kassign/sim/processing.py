"""How long a simulated consumer works on each poll batch: fixed, uniform in a range, or drawn
from recorded samples.

Processing decides when a member can act on a rebalance: a Java consumer joins only from inside
``poll()``, librdkafka serves its rebalance callbacks from ``poll()``, and every client's
``close()`` waits for the batch in hand. Each member draws from its own seeded generator, so one
member's batches never shift another's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Processing"]


@dataclass(frozen=True)
class Processing:
    """Work per non-empty poll batch, in milliseconds: ``low_ms`` fixed, uniform from ``low_ms`` to
    ``high_ms`` when that is given, or one of ``samples_ms`` at random when those are given."""

    low_ms: float = 0.0
    high_ms: float | None = None
    samples_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        values = [self.low_ms, *(() if self.high_ms is None else (self.high_ms,)), *self.samples_ms]
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"processing times must be finite milliseconds >= 0, got {value!r}")
        if self.high_ms is not None and self.high_ms < self.low_ms:
            raise ValueError(f"processing range {self.low_ms:g}..{self.high_ms:g} ms is empty")
        object.__setattr__(self, "samples_ms", tuple(float(s) for s in self.samples_ms))

    @classmethod
    def of(cls, spec: float | Sequence[float] | None) -> Processing:
        """From a plain value: ``None``/``0`` none, ``MS`` fixed, ``(LO, HI)`` uniform."""
        if spec is None:
            return cls()
        if isinstance(spec, (int, float)):
            return cls(float(spec))
        lo, hi = spec
        return cls(float(lo), float(hi))

    @property
    def busy(self) -> bool:
        """Whether batches take any time at all (with none, a member is always at ``poll()``)."""
        return self.low_ms > 0 or bool(self.high_ms) or any(self.samples_ms)

    def sample_s(self, rng: random.Random) -> float:
        """One batch's work, in seconds."""
        if self.samples_ms:
            return rng.choice(self.samples_ms) / 1000
        if self.high_ms is not None:
            return rng.uniform(self.low_ms, self.high_ms) / 1000
        return self.low_ms / 1000
