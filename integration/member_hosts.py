"""The driver's side of :mod:`integration.members.aiokafka_host`: one process running several aiokafka
members, spoken to through its stdin, and the exits of the members it runs."""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["MemberHost"]


class MemberHost:
    """A host process with room for ``capacity`` members over its lifetime (a member that has left
    keeps its place: a host is filled once, as a fleet's machines are)."""

    def __init__(self, name: str, capacity: int, *, cwd: Path, env: Mapping[str, str], stderr_path: Path) -> None:
        if capacity < 1:
            raise ValueError(f"a host needs room for at least one member, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "integration.members.aiokafka_host"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
            )
        self.members: list[str] = []
        self._exits: dict[str, int] = {}
        self._changed = threading.Condition()

    def has_room(self) -> bool:
        return len(self.members) < self.capacity and self.proc.poll() is None

    def _send(self, line: str) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            raise RuntimeError(f"host {self.name} no longer takes commands")
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def start(self, member_id: str, argv: Sequence[str]) -> None:
        """Start a member with :mod:`integration.members.aiokafka_member`'s options ``argv``."""
        self.members.append(member_id)
        self._send("start " + shlex.join(argv))

    def release(self, member_id: str) -> None:
        self._send(f"go {member_id}")

    def request_stop(self, member_id: str) -> None:
        self._send(f"stop {member_id}")

    def close_stdin(self) -> None:
        """Every member closes, then the host exits."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def note_exit(self, member_id: str, code: int) -> None:
        """A member's consumer has closed (its ``exit`` event, or the host's end)."""
        with self._changed:
            self._exits.setdefault(member_id, code)
            self._changed.notify_all()

    def exit_code(self, member_id: str) -> int | None:
        with self._changed:
            return self._exits.get(member_id)

    def wait_member(self, member_id: str, timeout: float) -> int:
        """The member's exit code once it has closed; raises ``subprocess.TimeoutExpired``."""
        with self._changed:
            if not self._changed.wait_for(lambda: member_id in self._exits, timeout):
                raise subprocess.TimeoutExpired(f"{self.name}:{member_id}", timeout)
            return self._exits[member_id]
