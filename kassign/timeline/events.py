"""The rebalance-timeline event schema, shared by the group driver, the simulator, telemetry and
``kassign analyze``.

One JSON object per line, the same shape as the recorded Java and librdkafka timelines in
``data/rebalance-timelines``::

    {"id": "m1", "t": 1795316494.476, "ev": "cb_assigned", "parts": [0, 3, 6]}

Keys: ``id`` member, ``t`` seconds (unix time for real consumers, simulated seconds for the
simulator), ``ev`` the kind. Kinds that carry ``parts`` (the partitions that callback received:
incremental under cooperative, the whole assignment under eager): ``cb_assigned``,
``cb_revoked``, ``cb_lost``. Others: ``subscribed``, ``cb_revoked_done``, ``join`` (a JoinGroup
sent; ``gen`` the generation the member had), ``sync`` (a SyncGroup answered; ``gen``,
``protocol``), ``progress`` (``pos``: partition -> next offset), ``commit`` and ``commit_err``
(a commit that succeeded / failed; optional ``parts``, ``began``, ``lat`` ms, ``why``, ``error``),
``closing``, ``closed``, ``exit``, ``crash``, ``processed`` (records a member processed), ``rebalance_failed``
(``gen``, ``error``), ``client_metrics`` (``metrics``: a Java member's own
consumer-coordinator-metrics, just before it closes). On KIP-848's consumer protocol, telemetry
writes ``reconcile`` / ``reconciled`` (a reconciliation of a new target assignment began / ended;
``epoch``; a heartbeat failing meanwhile is a ``rebalance_failed`` with ``epoch``) instead of
``join``/``sync``, and ``heartbeat`` (one per heartbeat sent; ``lat`` ms to its answer). Optional
keys: ``dur`` (seconds a callback ran) and ``error`` on ``cb_*`` events; ``"inferred": true`` on
``join``/``sync`` that telemetry worked out from the callbacks
rather than observed; ``topics``, ``pattern``, ``group``, ``protocol`` on ``subscribed``.

A partition in ``parts``/``pos`` is a bare int when the group reads one topic (the recorded data's
form) or ``"topic:partition"``/``[topic, partition]`` otherwise; :func:`partition_of` reads all.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kassign.model import TopicPartition

__all__ = [
    "OWNERSHIP_EVENTS",
    "Event",
    "partition_of",
    "encode_partition",
    "read_events",
    "write_events",
    "merge_events",
    "timeline_files",
    "EVENT_SUFFIXES",
]

#: Names of timeline files in a directory (rotated telemetry files add ``.1``, ``.2``...).
EVENT_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")

#: Event kinds that change which partitions a member owns.
OWNERSHIP_EVENTS = frozenset({"cb_assigned", "cb_revoked", "cb_lost"})

DEFAULT_TOPIC = "topic"

#: Largest event time accepted (seconds; unix time in 2286): later or non-finite times are errors,
#: so no timeline can make a simulator or a metric wait for ever.
MAX_EVENT_TIME = 1e10


@dataclass
class Event:
    """One timeline event. ``extra`` keeps every other key so a round trip loses nothing."""

    id: str
    t: float
    ev: str
    parts: list[TopicPartition] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, *, single_topic: str | None = None) -> dict[str, Any]:
        """The JSON object; partitions of ``single_topic`` are written as bare ints."""
        out: dict[str, Any] = {"id": self.id, "t": round(self.t, 6), "ev": self.ev}
        if self.parts is not None:
            out["parts"] = [encode_partition(tp, single_topic) for tp in self.parts]
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any], *, default_topic: str = DEFAULT_TOPIC) -> Event:
        """Parse one JSON object; raises ValueError naming the missing key."""
        try:
            member, t, ev = obj["id"], float(obj["t"]), obj["ev"]
        except KeyError as exc:
            raise ValueError(f"timeline event {obj!r} lacks key {exc.args[0]!r}") from None
        if not math.isfinite(t) or abs(t) > MAX_EVENT_TIME:
            raise ValueError(f"event time {obj['t']!r} is not a finite time within +-{MAX_EVENT_TIME:g} s")
        parts = obj.get("parts")
        extra = {k: v for k, v in obj.items() if k not in ("id", "t", "ev", "parts")}
        return cls(
            id=str(member),
            t=t,
            ev=str(ev),
            parts=None if parts is None else [partition_of(p, default_topic) for p in parts],
            extra=extra,
        )


def partition_of(value: Any, default_topic: str = DEFAULT_TOPIC) -> TopicPartition:
    """Read a partition as written in a timeline: ``3``, ``"3"``, ``"orders:3"`` or ``["orders", 3]``."""
    if isinstance(value, TopicPartition):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a partition: {value!r}")
    if isinstance(value, int):
        return TopicPartition(default_topic, value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return TopicPartition(str(value[0]), int(value[1]))
    if isinstance(value, str):
        topic, sep, num = value.rpartition(":")
        try:
            return TopicPartition(topic if sep else default_topic, int(num))
        except ValueError:
            pass
    raise ValueError(f"not a partition: {value!r}")


def encode_partition(tp: TopicPartition, single_topic: str | None = None) -> int | str:
    """The timeline form of a partition: a bare int for the group's single topic, else "topic:p"."""
    if single_topic is not None and tp.topic == single_topic:
        return tp.partition
    return f"{tp.topic}:{tp.partition}"


def _open_text(path: str | os.PathLike[str], mode: str) -> IO[str]:
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")  # noqa: SIM115


def read_events(path: str | os.PathLike[str], *, default_topic: str = DEFAULT_TOPIC) -> Iterator[Event]:
    """Yield the events of one JSON-lines file (``.gz`` read transparently), in file order.

    A malformed line (or a time that is not finite, see :data:`MAX_EVENT_TIME`) raises ValueError
    naming the file and line number; so does a truncated or corrupted ``.gz`` file.
    """
    lineno = 0
    try:
        with _open_text(path, "r") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    yield Event.from_json(json.loads(line), default_topic=default_topic)
                except (ValueError, TypeError, AttributeError, RecursionError) as exc:
                    raise ValueError(f"{path}:{lineno}: bad timeline event: {exc or type(exc).__name__}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ValueError(
            f"{path}: truncated or corrupted gzip file after line {lineno} ({exc or type(exc).__name__})"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}:{lineno + 1}: not UTF-8 text ({exc.reason})") from None


def write_events(path: str | os.PathLike[str], events: Iterable[Event], *, single_topic: str | None = None) -> int:
    """Write events as JSON lines (gzip when the name ends in ``.gz``); returns how many."""
    n = 0
    with _open_text(path, "w") as fh:
        for event in events:
            fh.write(json.dumps(event.to_json(single_topic=single_topic), separators=(",", ":")) + "\n")
            n += 1
    return n


def merge_events(*streams: Iterable[Event]) -> list[Event]:
    """Merge several members' recordings of one group into one timeline ordered by time.

    The sort is stable, so events with equal timestamps keep their per-file order.
    """
    merged: list[Event] = [e for stream in streams for e in stream]
    merged.sort(key=lambda e: e.t)
    return merged


def _is_timeline_name(name: str) -> bool:
    if name.endswith(EVENT_SUFFIXES):
        return True
    stem, _, number = name.rpartition(".")
    return number.isdigit() and stem.endswith(EVENT_SUFFIXES)


def timeline_files(path: str | os.PathLike[str]) -> list[Path]:
    """The timeline files ``path`` names: the file itself; for a recorded run directory its
    ``events.jsonl.gz``; for a telemetry directory every member's file, rotated ones included.

    Raises FileNotFoundError when nothing is there, ValueError for a directory without timelines.
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no timeline file or directory here", str(path))
    run_file = path / "events.jsonl.gz"
    if run_file.is_file():
        return [run_file]
    files = sorted(p for p in path.iterdir() if p.is_file() and _is_timeline_name(p.name))
    if not files:
        raise ValueError(f"directory {path} holds no timeline files (*.jsonl, *.jsonl.gz)")
    return files
