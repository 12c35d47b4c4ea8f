"""What every Python member shares: the JSON-lines event writer, processed-range bookkeeping, the
stdin watcher and the common command-line options."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable

__all__ = [
    "EventWriter",
    "ProcessedOffsets",
    "BatchProcessing",
    "watch_stdin",
    "common_arguments",
    "tp_key",
    "group_debug_wanted",
]

#: Set (to anything but "" or "0") in a member's environment to log its group protocol traffic on
#: stderr: kassign and aiokafka's group coordinator at DEBUG, librdkafka's ``cgrp`` debug contexts.
GROUP_DEBUG_ENV = "KASSIGN_MEMBER_GROUP_DEBUG"


def group_debug_wanted() -> bool:
    """Whether this member should log its group protocol traffic (see ``GROUP_DEBUG_ENV``)."""
    return os.environ.get(GROUP_DEBUG_ENV, "") not in ("", "0")


def tp_key(topic: str, partition: int) -> str:
    """The timeline form of a partition used by members: ``"topic:partition"``."""
    return f"{topic}:{partition}"


class EventWriter:
    """Prints one JSON object per line on stdout, flushed at once (a killed member loses nothing printed)."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self._lock = threading.Lock()

    def emit(self, ev: str, **fields: object) -> None:
        line = json.dumps({"id": self.member_id, "t": round(time.time(), 3), "ev": ev, **fields}, separators=(",", ":"))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def parts(self, ev: str, partitions: Iterable[tuple[str, int]], **fields: object) -> None:
        """Emit a callback event carrying ``parts``, sorted by (topic, partition)."""
        self.emit(ev, parts=[tp_key(t, p) for t, p in sorted(partitions)], **fields)


class ProcessedOffsets:
    """Offsets processed since the last report, as inclusive ranges, and the next offset to commit."""

    def __init__(self) -> None:
        self._ranges: dict[tuple[str, int], list[list[int]]] = {}
        self.next_offset: dict[tuple[str, int], int] = {}

    def add(self, topic: str, partition: int, offset: int) -> None:
        ranges = self._ranges.setdefault((topic, partition), [])
        if ranges and ranges[-1][1] + 1 == offset:
            ranges[-1][1] = offset
        else:
            ranges.append([offset, offset])
        self.next_offset[(topic, partition)] = offset + 1

    def report(self, writer: EventWriter, only: Iterable[tuple[str, int]] | None = None) -> None:
        """Emit a ``processed`` event for the pending ranges (of ``only``, or all) and forget them.

        Called before committing those offsets, so a crash can never hide a committed record.
        """
        keys = sorted(self._ranges) if only is None else sorted(set(only) & set(self._ranges))
        if keys:
            writer.emit("processed", ranges={tp_key(*k): self._ranges[k] for k in keys})
        for k in keys:
            del self._ranges[k]

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop commit positions of partitions this member no longer owns."""
        for k in partitions:
            self.next_offset.pop(k, None)


def read_stdin_lines(
    on_line: Callable[[str], None], on_eof: Callable[[], None], name: str = "stdin-watcher"
) -> threading.Thread:
    """Hand every line of stdin (decoded, stripped) to ``on_line``, then call ``on_eof`` at its end,
    both from a daemon thread: the driver talks to a member process through its stdin."""

    def run() -> None:
        try:
            for raw in sys.stdin.buffer:
                on_line(raw.decode("utf-8", "replace").strip())
        except OSError:
            pass  # a broken stdin means the driver is gone: stop as on end-of-file
        on_eof()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def watch_stdin(on_eof: Callable[[], None], on_go: Callable[[], None] | None = None) -> threading.Thread:
    """Call ``on_eof`` (from a daemon thread) when stdin reaches end-of-file: the driver's stop signal.

    A line ``go`` calls ``on_go``: the driver's signal for a member held before subscribing."""

    def on_line(line: str) -> None:
        if line == "go" and on_go is not None:
            on_go()

    return read_stdin_lines(on_line, on_eof)


class BatchProcessing:
    """How long this member works on each non-empty poll batch: 0, or uniform in [lo, hi] ms from a
    generator seeded with the run's seed and the member id, so a run can be repeated exactly."""

    def __init__(self, spec: str, seed: int, member_id: str) -> None:
        lo, hi = parse_process_ms(spec)
        self.lo_s, self.hi_s = lo / 1000.0, hi / 1000.0
        self._rng = random.Random(f"{seed}:{member_id}")

    def next_delay(self) -> float:
        """Seconds to spend on the next batch."""
        return self._rng.uniform(self.lo_s, self.hi_s) if self.hi_s > 0 else 0.0


def parse_process_ms(spec: str) -> tuple[int, int]:
    """``"0"`` -> (0, 0); ``"500"`` -> (500, 500); ``"250,750"`` -> (250, 750)."""
    parts = [p.strip() for p in str(spec).split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"--process-ms takes MS or LO,HI in ms, got {spec!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or not 0 <= values[0] <= values[1] <= 600_000:
        raise ValueError(f"--process-ms takes MS or LO,HI with 0 <= LO <= HI <= 600000, got {spec!r}")
    return values[0], values[1]


def common_arguments(description: str) -> argparse.ArgumentParser:
    """The options every member takes (the Java member takes the same ones)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topics", required=True, help="comma-separated")
    ap.add_argument("--id", required=True, help="member name used in the timeline")
    ap.add_argument("--strategy", required=True, help="comma-separated assignment strategies, preferred first")
    ap.add_argument("--session-ms", type=int, default=1500)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--max-poll-ms", type=int, default=30000)
    ap.add_argument("--rack", default=None)
    ap.add_argument("--progress-ms", type=int, default=1000)
    ap.add_argument("--process-ms", default="0", help="work per non-empty poll batch: MS, or LO,HI for uniform")
    ap.add_argument("--seed", type=int, default=0, help="seeds the processing times (with the member id)")
    ap.add_argument("--instance-id", default=None, help="group.instance.id: a static member")
    ap.add_argument(
        "--hold",
        action="store_true",
        help="build the consumer, print a 'ready' event, and subscribe only on a 'go' line on stdin",
    )
    return ap
