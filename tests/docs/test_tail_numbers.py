"""docs/benchmarks.md's scale-out tail tables are the recordings' numbers (issue 28): every mean,
90th percentile, median, maximum and rounds count is recomputed from
``benchmarks/results/rebalance-2026-11-27-kafka44-scale-out-tail-{before,after}.json``."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.rebalance import RunResult, spread
from tests.docs.test_docs_numbers import markdown_tables

ROOT = Path(__file__).resolve().parents[2]
MODES = {"aiokafka eager": "eager", "eager": "eager", "kassign default": "cooperative+fast-follow-up"}


def _spreads(run: str) -> dict:
    data = json.loads(
        (ROOT / "benchmarks" / "results" / f"rebalance-2026-11-27-kafka44-scale-out-tail-{run}.json").read_text()
    )
    cells: dict = {}
    for raw in data["runs"]:
        result = RunResult(**raw)
        cells.setdefault((result.profile, result.mode), []).append(result)
    return {key: spread(runs) for key, runs in cells.items()}


def _tables(heading: tuple[str, ...]) -> list[list[str]]:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    found = [t for t in markdown_tables(text) if tuple(t[0]) == heading]
    assert len(found) == 1, f"docs/benchmarks.md has {len(found)} tables headed {heading}"
    return found[0][1:]


def test_the_distribution_table_is_the_recordings():
    spreads = {run: _spreads(run) for run in ("before", "after")}
    rows = _tables(("run", "profile", "mode", "runs", "mean", "p90", "median", "max", "runs by rounds"))
    assert len(rows) == 8
    for run, profile, mode, runs, mean, p90, median, top, by_rounds in rows:
        sp = spreads[run][(profile, MODES[mode])]
        assert int(runs) == sp.runs
        expected = [f"{v:.2f}" for v in (sp.mean, sp.p90, sp.median, sp.max)]
        assert [mean, p90, median, top] == expected, (run, profile, mode)
        assert by_rounds == ", ".join(f"{n}: {c}" for n, c in sp.rounds.items())


def test_the_ratio_table_is_the_recordings():
    spreads = {run: _spreads(run) for run in ("before", "after")}
    rows = _tables(
        ("run", "profile", "aiokafka eager mean", "p90", "kassign default mean", "p90", "default/eager mean", "p90")
    )
    assert len(rows) == 4
    for run, profile, eager_mean, eager_p90, mean, p90, ratio_mean, ratio_p90 in rows:
        eager, fast = spreads[run][(profile, "eager")], spreads[run][(profile, "cooperative+fast-follow-up")]
        assert [eager_mean, eager_p90, mean, p90] == [f"{v:.2f}" for v in (eager.mean, eager.p90, fast.mean, fast.p90)]
        assert ratio_mean == f"{fast.mean / eager.mean:.2f}" and ratio_p90 == f"{fast.p90 / eager.p90:.2f}"
