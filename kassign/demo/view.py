"""The demo's live view: members, their partitions and records/s, the producer's rate and the
group's rebalance phase.

On a terminal the view redraws in place with plain ANSI escapes; otherwise (a pipe, a CI log) it
prints one progress line whenever the step or the group's state changes, and every few seconds.
"""

from __future__ import annotations

import asyncio
import time
from typing import TextIO

from kassign.demo.group import DemoGroup, KeyedStream

__all__ = ["LiveView"]

_CLEAR = "\x1b[H\x1b[2J"
_BOLD, _DIM, _RED, _GREEN, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[32m", "\x1b[0m"


class LiveView:
    """Shows one run's group while it runs; call :meth:`run` as a task and set :attr:`step`."""

    def __init__(
        self,
        title: str,
        group: DemoGroup,
        stream: KeyedStream,
        out: TextIO,
        *,
        tty: bool,
        interval: float = 0.5,
        line_every: float = 5.0,
    ) -> None:
        self.title, self.group, self.stream, self.out, self.tty = title, group, stream, out, tty
        self.interval, self.line_every = interval, line_every
        self.step = "starting"
        self._start = time.monotonic()
        self._last_totals: dict[str, int] = {}
        self._last_sent = 0
        self._last_time = self._start
        self._rates: dict[str, float] = {}
        self._produce_rate = 0.0
        self._last_line: tuple[str, str] | None = None
        self._last_line_time = 0.0

    def _measure(self) -> None:
        now = time.monotonic()
        dt = max(now - self._last_time, 1e-6)
        for name, member in self.group.members.items():
            before = self._last_totals.get(name, member.processed_total)
            if member.processed_total < before:  # a restarted member counts from zero again
                before = 0
            self._rates[name] = (member.processed_total - before) / dt
            self._last_totals[name] = member.processed_total
        self._produce_rate = (self.stream.sent - self._last_sent) / dt
        self._last_sent = self.stream.sent
        self._last_time = now

    def group_state(self) -> str:
        """``settled``, or ``rebalancing`` with how many partitions have no owner and the generation."""
        if self.step == "closing members":
            return "closing: the members leave the group"  # partitions without owner are expected now
        if self.step == "done":
            return "done: every member has left"
        live = self.group.live_members()
        if self.group.is_settled():
            return "settled"
        gens = [self.group.members[n].generation() for n in live]
        unowned = len(self.group.unowned())
        return f"rebalancing: {unowned} partition(s) without owner, generation {max(gens, default=-1)}"

    def _frame(self) -> str:
        g = self.group
        elapsed = time.monotonic() - self._start
        state = self.group_state()
        colour = _RED if state.startswith("rebalancing") else _GREEN
        lines = [
            f"{_BOLD}kassign demo{_RESET}  {self.title}  {_DIM}t={elapsed:5.1f}s  group {g.group_id}{_RESET}",
            f"step: {_BOLD}{self.step}{_RESET}",
            f"group: {colour}{state}{_RESET}",
            f"producer: {self._produce_rate:6.0f} records/s, {self.stream.sent} sent, "
            f"{g.ledger.produced_count} acknowledged",
            "",
            f"{'member':<8} {'records/s':>9}  partitions",
        ]
        width = len(g.partitions)
        for name in g.live_members():
            owned = {tp.partition for tp in g.members[name].owned}
            cells = "".join("#" if p in owned else "." for p in range(width))
            listed = " ".join(str(p) for p in sorted(owned))
            lines.append(f"{name:<8} {self._rates.get(name, 0.0):9.0f}  {cells}  {listed}")
        unowned = " ".join(str(tp.partition) for tp in g.unowned())
        if unowned and self.step not in ("closing members", "done"):
            lines.append(f"{'(none)':<8} {'':>9}  {_RED}{unowned}{_RESET}")
        return "\n".join(lines)

    def _line(self, force: bool) -> str | None:
        state = self.group_state()
        key = (self.step, state.split(":")[0])
        now = time.monotonic()
        if not force and key == self._last_line and now - self._last_line_time < self.line_every:
            return None
        self._last_line, self._last_line_time = key, now
        owned = " ".join(f"{n}:{len(self.group.members[n].owned)}" for n in self.group.live_members())
        total = sum(self._rates.get(n, 0.0) for n in self.group.live_members())
        return (
            f"[{time.monotonic() - self._start:6.1f}s] {self.title} | {self.step} | {state} | "
            f"members {owned or '-'} | {total:.0f} records/s"
        )

    def draw(self, *, force: bool = False) -> None:
        """Redraw (terminal) or print a progress line when something changed (otherwise)."""
        self._measure()
        if self.tty:
            self.out.write(_CLEAR + self._frame() + "\n")
        else:
            line = self._line(force)
            if line is None:
                return
            self.out.write(line + "\n")
        self.out.flush()

    async def run(self) -> None:
        """Draw every ``interval`` seconds until cancelled."""
        while True:
            self.draw()
            await asyncio.sleep(self.interval)
