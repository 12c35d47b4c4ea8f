"""How busy the whole machine was: its cores' CPU time, read from ``/proc/stat`` (Linux).

The group-size benchmark's members, the broker and the driver share one machine; the members' own
CPU (``RunResult.members_cpu_pct``) does not say how close the machine was to saturation, which is
what makes a large group's waits for a core grow faster than the group (docs/scale.md).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["machine_busy_seconds", "busy_pct"]


def machine_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds the machine's cores have been busy since boot, summed over the cores: every state
    of the first ``cpu`` line but idle and iowait (guest time is already in user and nice, so it is
    left out). None where ``/proc/stat`` cannot be read."""
    import os

    try:
        fields = stat.read_text().split("\n", 1)[0].split()
        if fields[0] != "cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except (OSError, IndexError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (user + nice + system + irq + softirq + steal) / tick


def busy_pct(before: float | None, after: float | None, span_s: float) -> float | None:
    """The machine's CPU between two :func:`machine_busy_seconds` readings ``span_s`` apart, in percent
    of one core (200 is both cores of a 2-core machine busy); None if either reading is missing."""
    if before is None or after is None or span_s <= 0:
        return None
    return round(100 * (after - before) / span_s, 1)
