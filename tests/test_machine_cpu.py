"""benchmarks/machine_cpu.py: the machine's busy CPU time from /proc/stat (no broker, under a second)."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.machine_cpu import busy_pct, machine_busy_seconds


def test_busy_time_leaves_out_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {tick} 0 {tick} {50 * tick} {7 * tick} 0 {tick} 0 {3 * tick} 0\ncpu0 1 2 3\n")
    assert machine_busy_seconds(stat) == 3.0


def test_unreadable_or_foreign_stat_gives_none(tmp_path: Path) -> None:
    assert machine_busy_seconds(tmp_path / "missing") is None
    odd = tmp_path / "stat"
    odd.write_text("intr 1 2 3\n")
    assert machine_busy_seconds(odd) is None


def test_busy_percent_is_of_one_core() -> None:
    assert busy_pct(10.0, 13.9, 2.0) == 195.0
    assert busy_pct(None, 13.9, 2.0) is None
    assert busy_pct(10.0, 11.0, 0.0) is None


def test_this_machine_reads_and_counts_up() -> None:
    first = machine_busy_seconds()
    if not Path("/proc/stat").exists():
        assert first is None
        return
    assert first is not None and first > 0
    second = machine_busy_seconds()
    assert second is not None and second >= first
