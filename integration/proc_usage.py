"""CPU and memory read from Linux's ``/proc``: a process's (the driver's members, the sampler's broker)
and the whole machine's.

The group-size benchmark's members, the broker and the driver share one machine; the members' own
CPU (``RunResult.members_cpu_pct``) does not say how close the machine was to saturation, which is
what makes a large group's waits for a core grow faster than the group (docs/scale.md).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["machine_busy_seconds", "busy_pct", "process_cpu_seconds", "process_rss_bytes"]


def _tick() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds the machine's cores have been busy since boot, summed over the cores: every state
    of the first ``cpu`` line but idle and iowait (guest time is already in user and nice, so it is
    left out). None where ``/proc/stat`` cannot be read."""
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
        if fields[0] != "cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, IndexError, ValueError):
        return None
    return (user + nice + system + irq + softirq + steal) / _tick()


def busy_pct(before: float | None, after: float | None, span_s: float) -> float | None:
    """The machine's CPU between two :func:`machine_busy_seconds` readings ``span_s`` apart, in percent
    of one core (200 is both cores of a 2-core machine busy); None if either reading is missing."""
    if before is None or after is None or span_s <= 0:
        return None
    return round(100 * (after - before) / span_s, 1)


def process_cpu_seconds(pid: int) -> float | None:
    """A process's user and system CPU seconds so far (None once it has gone)."""
    try:
        # after the command's closing parenthesis: state is field 3, utime/stime fields 14/15
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _tick()
    except (OSError, IndexError, ValueError):
        return None


def process_rss_bytes(pid: int) -> int | None:
    """A process's resident memory in bytes (None once it has gone)."""
    try:
        resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096)
