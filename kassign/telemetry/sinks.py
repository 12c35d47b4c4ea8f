"""Where recorded events go: a size-rotated JSON-lines file, or any callable.

A sink is a callable taking one event's JSON object (a dict in the ``kassign.timeline.events`` schema) and
optionally having ``flush()`` and ``close()``. Sinks run on the recorder's writer thread only.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kassign.telemetry.jsonsafe import dumps_line

log = logging.getLogger(__name__)

__all__ = ["Sink", "RotatingFileSink"]

#: A sink: called with each event's JSON object, on the recorder's writer thread.
Sink = Callable[[dict[str, Any]], object]


class RotatingFileSink:
    """Appends one JSON object per line to ``path``; rotates by size and keeps ``backup_count`` old files.

    When a write would take the file past ``max_bytes`` it is renamed ``path.1`` (older ones move
    up to ``path.N``; the oldest beyond ``backup_count`` is deleted), as ``logging``'s rotating
    handler does. ``max_bytes=0`` never rotates. Each line is flushed when the writer's queue runs
    dry, so a crashed process loses at most the events still queued.

    Values JSON does not know (a compiled regex, a set, bytes) are written as their closest JSON
    form. A rotation that fails (``rotation_failures`` counts them) leaves the events in the current
    file, which grows past ``max_bytes`` until a later rotation succeeds; a write that fails raises
    OSError for the writer to retry, and the file is reopened on the next call.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, max_bytes: int = 64 * 1024 * 1024, backup_count: int = 5
    ) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes!r}")
        if backup_count < 0:
            raise ValueError(f"backup_count must be >= 0, got {backup_count!r}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backup_count = backup_count
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rotation_failures = 0
        self._closed = False
        self._open()
        #: Size at which to rotate: max_bytes, or further on after a failed rotation.
        self._rotate_at = max_bytes

    def _open(self) -> None:
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._size = self._fh.tell()

    def __call__(self, obj: dict[str, Any]) -> None:
        if self._closed:
            raise ValueError(f"sink {self.path} is closed")
        line = dumps_line(obj) + "\n"
        n = len(line.encode("utf-8"))
        if self._fh.closed:  # a failed write or rotation closed it: try again
            self._open()
        if self.max_bytes and self._size and self._size + n > self._rotate_at:
            self._rotate()
        try:
            self._fh.write(line)
        except OSError:
            self._discard()
            raise
        self._size += n

    def _discard(self) -> None:
        """Drop the file handle after a failed write (its buffer may hold a partial line)."""
        with contextlib.suppress(OSError):
            self._fh.close()

    def backups(self) -> list[Path]:
        """The rotated files that exist, newest first."""
        return [p for i in range(1, self.backup_count + 1) if (p := self._backup(i)).exists()]

    def _backup(self, i: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{i}")

    def _rotate(self) -> None:
        self._fh.close()
        try:
            if self.backup_count == 0:
                self.path.unlink(missing_ok=True)
            else:
                self._backup(self.backup_count).unlink(missing_ok=True)
                for i in range(self.backup_count - 1, 0, -1):
                    if self._backup(i).exists():
                        self._backup(i).replace(self._backup(i + 1))
                self.path.replace(self._backup(1))
        except OSError as exc:
            self.rotation_failures += 1
            self._open()
            self._rotate_at = self._size + self.max_bytes  # try again after another max_bytes
            log.warning("rotating %s failed (%s); writing on in the current file", self.path, exc)
            return
        self._open()
        self._rotate_at = self.max_bytes

    def flush(self) -> None:
        """Push buffered lines to the operating system."""
        if not self._fh.closed:
            try:
                self._fh.flush()
            except OSError:
                self._discard()
                raise

    def close(self) -> None:
        """Flush and close the current file."""
        self._closed = True
        if not self._fh.closed:
            self._fh.close()
