"""Kafka's metric statistics (``org.apache.kafka.common.metrics.stats``), re-implemented.

Java's consumer reports its coordinator metrics through these: ``Avg`` and ``Max`` are *sampled*
(by default two samples of 30 s each, so they describe roughly the last minute and read NaN
when nothing was recorded in it), ``Rate`` divides a windowed count by the window's length, and
``CumulativeSum``/``CumulativeCount`` never forget. The sampling rules are copied step for step
(including that measuring an empty rate creates its first sample) so that the same sequence of
records and measurements gives the numbers a Java consumer would report. Times are milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["MetricConfig", "Avg", "Max", "WindowedCount", "Rate", "CumulativeSum", "CumulativeCount"]


@dataclass(frozen=True)
class MetricConfig:
    """Java's ``metrics.num.samples`` (2) and ``metrics.sample.window.ms`` (30000)."""

    samples: int = 2
    time_window_ms: int = 30_000

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples must be at least 1, got {self.samples!r}")
        if self.time_window_ms <= 0:
            raise ValueError(f"time_window_ms must be positive, got {self.time_window_ms!r}")


class _Sample:
    __slots__ = ("initial", "event_count", "start_ms", "last_event_ms", "value")

    def __init__(self, initial: float, now_ms: float) -> None:
        self.initial = initial
        self.reset(now_ms)

    def reset(self, now_ms: float) -> None:
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = self.initial

    def is_complete(self, now_ms: float, config: MetricConfig) -> bool:
        return now_ms - self.start_ms >= config.time_window_ms


class _SampledStat:
    """Java's ``SampledStat``: a ring of ``samples + 1`` samples, each covering one time window."""

    initial = 0.0

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if sample.is_complete(now_ms, self.config):
            sample = self._advance(now_ms)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: float) -> float:
        self.purge_obsolete(now_ms)
        return self._combine()

    def purge_obsolete(self, now_ms: float) -> None:
        expire_age = self.config.samples * self.config.time_window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def oldest(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(self.initial, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(self.initial, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        # One extra sample overlaps the start of the monitored window (Java keeps it too).
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(self.initial, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _update(self, sample: _Sample, value: float) -> None:
        raise NotImplementedError

    def _combine(self) -> float:
        raise NotImplementedError


class Avg(_SampledStat):
    """Mean of the values recorded in the live samples; NaN when there are none."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self) -> float:
        count = sum(s.event_count for s in self._samples)
        return sum(s.value for s in self._samples) / count if count else math.nan


class Max(_SampledStat):
    """Largest value recorded in the live samples; NaN when there are none."""

    initial = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def _combine(self) -> float:
        if not any(s.event_count for s in self._samples):
            return math.nan
        return max(s.value for s in self._samples)


class WindowedCount(_SampledStat):
    """Number of records in the live samples."""

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0

    def _combine(self) -> float:
        return sum(s.value for s in self._samples)


class Rate:
    """Java's ``Rate(unit, WindowedCount)``: records per ``unit_ms`` over the sampled window.

    The window counts as at least ``samples - 1`` full windows, so a young rate is not inflated.
    """

    def __init__(self, config: MetricConfig, unit_ms: float) -> None:
        if unit_ms <= 0:
            raise ValueError(f"unit_ms must be positive, got {unit_ms!r}")
        self.unit_ms = unit_ms
        self._count = WindowedCount(config)

    def record(self, value: float, now_ms: float) -> None:
        self._count.record(value, now_ms)

    def measure(self, now_ms: float) -> float:
        count = self._count.measure(now_ms)
        return count / (self._window_ms(now_ms) / self.unit_ms)

    def _window_ms(self, now_ms: float) -> float:
        config = self._count.config
        self._count.purge_obsolete(now_ms)
        elapsed = now_ms - self._count.oldest(now_ms).start_ms
        full_windows = int(elapsed // config.time_window_ms)
        if full_windows < config.samples - 1:
            elapsed += (config.samples - 1 - full_windows) * config.time_window_ms
        return max(elapsed, 1.0)


class CumulativeSum:
    """Sum of every value ever recorded."""

    def __init__(self) -> None:
        self.total = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.total += value

    def measure(self, now_ms: float) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    """Number of records ever made."""

    def record(self, value: float, now_ms: float) -> None:
        self.total += 1.0
