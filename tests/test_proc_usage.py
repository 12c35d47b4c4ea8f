"""integration/proc_usage.py: the machine's busy CPU time from /proc/stat and a process's CPU and memory
(no broker, under a second)."""

from __future__ import annotations

import os
from pathlib import Path

from integration.proc_usage import busy_pct, machine_busy_seconds, process_cpu_seconds, process_rss_bytes


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


def test_a_process_reads_its_own_cpu_and_memory_and_a_gone_one_reads_none() -> None:
    if not Path("/proc/self/stat").exists():
        assert process_cpu_seconds(os.getpid()) is None
        return
    sum(range(200_000))  # some CPU of our own
    cpu = process_cpu_seconds(os.getpid())
    rss = process_rss_bytes(os.getpid())
    assert cpu is not None and cpu > 0
    assert rss is not None and rss > 1_000_000
    gone = 2**22 + 7  # above the kernel's default pid_max: no such process
    assert process_cpu_seconds(gone) is None and process_rss_bytes(gone) is None
