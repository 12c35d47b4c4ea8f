"""The group-size benchmark (benchmarks/group_size.py) without a broker: its layouts, its table and
ratios, its command line, and the run's argument checks (under a second)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.group_size import LAYOUTS, change_of, format_tables, summary
from benchmarks.rebalance import RunResult, run_once
from integration.driver import GroupTiming

ROOT = Path(__file__).resolve().parent.parent


def row(mode: str, unowned: float, settle: float, rounds: int = 1, **kw: float) -> RunResult:
    return RunResult("scale-out", mode, unowned, 0.1, 0.2, settle, rounds, 6, 18, 0, 0, 0.0, **kw)


def test_layouts_spread_partitions_over_topics_of_different_sizes() -> None:
    assert {n: sum(t) for n, t in LAYOUTS.items()} == {6: 24, 24: 240, 96: 960}
    for topics in LAYOUTS.values():
        assert len(set(topics)) == len(topics) > 1
    assert [change_of(n) for n in LAYOUTS] == [2, 6, 24]


def test_summary_and_table_show_the_distribution_and_the_ratio_to_eager() -> None:
    cells = {
        (24, "instant", "scale-out", "eager"): [row("eager", u, 1.0) for u in (40.0, 50.0, 60.0)],
        (24, "instant", "scale-out", "cooperative+fast-follow-up"): [
            row(
                "cooperative+fast-follow-up",
                u,
                2.0,
                rounds=2,
                members_rss_mb=800.0,
                members_cpu_pct=30.0,
                machine_cpu_pct=m,
                machine_cpu_change_pct=m + 10,
            )
            for u, m in ((10.0, 150.0), (10.0, 190.0), (40.0, 199.0))
        ],
    }
    assert summary([10.0, 10.0, 40.0]) == {"mean": 20.0, "p90": pytest.approx(34.0), "median": 10.0}
    table = format_tables(cells, {(24, "instant", "scale-in", "eager"): 2})
    assert "| 24 | 240 | instant | scale-out | cooperative+fast-follow-up | 3 | 20.00 | 34.00 | 10.00 |" in table
    assert "| 800 | 30 | 190 / 200 |" in table
    # eager's runs have no machine CPU (as runs recorded before it was measured)
    (eager_row,) = [line for line in table.splitlines() if "| scale-out | eager | 3 |" in line]
    assert eager_row.endswith("| – |")
    assert "| 24 | 240 | instant | scale-in | eager | 0 (+2 failed) |" in table
    # mean 20 / 50, p90 34 / 58
    assert "fast/eager unowned ps mean 0.40, p90 0.59" in table


def test_run_refuses_a_change_as_large_as_the_group() -> None:
    with pytest.raises(ValueError, match="need 0 < change < members, got change 6 of 6"):
        run_once("127.0.0.1:1", "scale-out", "eager", partitions=24, rate=1, timing=GroupTiming(), steady_s=0, change=6)
    with pytest.raises(ValueError, match="restart_sample"):
        run_once(
            "127.0.0.1:1",
            "rolling-restart",
            "eager",
            partitions=24,
            rate=1,
            timing=GroupTiming(),
            steady_s=0,
            restart_sample=7,
        )


def test_command_line_rejects_an_unknown_size_in_one_line() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks.group_size", "--sizes", "6,48"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "unknown size [48]; choose from 6, 24, 96" in res.stderr
    assert "Traceback" not in res.stderr


def test_earlier_runs_merge_into_one_table_and_a_figure(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    def saved(name: str, unowned: float) -> Path:
        runs = [
            {"members": n, "profile": "instant", "scenario": "scale-out", "mode": m, **asdict(row(m, unowned * n, 1.0))}
            for n in (6, 24)
            for m in ("eager", "cooperative+fast-follow-up")
        ]
        path = tmp_path / name
        path.write_text(json.dumps({"runs": runs}))
        return path

    figure = tmp_path / "sizes.png"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.group_size",
            "--from-json",
            str(saved("a.json", 1.0)),
            str(saved("b.json", 3.0)),
        ]
        + ["--figure", str(figure)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    # two runs per cell, one from each file: 24 and 72 at 24 members
    assert "| 24 | 240 | instant | scale-out | eager | 2 | 48.00 |" in res.stdout
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cell_measured_again_on_a_later_date_replaces_the_earlier_runs(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    from benchmarks.group_size import load_current

    def saved(name: str, cells: dict[str, list[float]]) -> Path:
        runs = [
            {"members": 6, "profile": "instant", "scenario": "scale-out", "mode": m, **asdict(row(m, u, 1.0))}
            for m, values in cells.items()
            for u in values
        ]
        path = tmp_path / name
        path.write_text(json.dumps({"runs": runs}))
        return path

    old = saved("group-size-2026-11-27-a.json", {"eager": [1.0, 2.0], "consumer": [5.0]})
    older_too = saved("group-size-2026-11-27-b.json", {"eager": [3.0]})
    new = saved("group-size-2026-11-28-a.json", {"eager": [7.0]})
    cells = load_current([new, old, older_too])
    assert [r.unowned_ps for r in cells[(6, "instant", "scale-out", "eager")]] == [7.0]
    assert [r.unowned_ps for r in cells[(6, "instant", "scale-out", "consumer")]] == [5.0]  # not measured again
    assert len(load_current([old, older_too])[(6, "instant", "scale-out", "eager")]) == 3  # one date: merged
    # A later set of the same day (after a change to kassign) carries a letter after the date.
    later_that_day = saved("group-size-2026-11-28b-a.json", {"eager": [9.0]})
    cells = load_current([later_that_day, new, old])
    assert [r.unowned_ps for r in cells[(6, "instant", "scale-out", "eager")]] == [9.0]
