"""benchmarks/cpu_sampler.py without a broker: its per-run windows and its command line (under a second)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cpu_sampler import main, per_cell

ROOT = Path(__file__).resolve().parent.parent


def _run(root: Path, name: str, trigger: float, settle: float, members: int = 24) -> None:
    run = root / name
    run.mkdir(parents=True)
    meta = {
        "members": members,
        "profile": "instant",
        "scenario": "crash",
        "mode": "eager",
        "triggers": [trigger],
        "result": {"settle_s": settle},
    }
    (run / "meta.json").write_text(json.dumps(meta))


def test_each_run_takes_the_samples_from_before_its_trigger_to_after_it_settled(tmp_path: Path) -> None:
    _run(tmp_path, "n24-instant-crash-eager-r1", trigger=100.0, settle=2.0)
    _run(tmp_path, "n24-instant-crash-eager-r2", trigger=500.0, settle=0.5)  # no samples near it
    log = [{"t": float(t), "busy": 1.0 + (t >= 100), "broker": 0.5 if t < 100 else 0.7} for t in range(90, 110)]
    cells = per_cell(log, [tmp_path])
    # samples 97..103 (trigger - 3 to trigger + settle + 1): 97, 98, 99 before it, 100..103 after
    ((broker, machine),) = cells[(24, "instant", "crash", "eager")]
    assert broker == (3 * 0.5 + 4 * 0.7) / 7
    assert machine == (3 * 1.0 + 4 * 2.0) / 7


def test_runs_prints_a_table_from_a_gzipped_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path / "rec", "n96-instant-crash-eager-r1", trigger=10.0, settle=1.0, members=96)
    log = tmp_path / "cpu.jsonl.gz"
    with gzip.open(log, "wt") as f:
        for t in range(5, 15):
            f.write(json.dumps({"t": t, "busy": 1.98, "broker": 0.36}) + "\n")
    assert main(["runs", str(log), str(tmp_path / "rec")]) == 0
    out = capsys.readouterr().out
    assert "| 96 | instant | crash | eager | 1 | 0.36 (0.36–0.36) | 1.98 |" in out


def test_a_missing_log_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks.cpu_sampler", "runs", str(tmp_path / "none.jsonl"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "not found:" in res.stderr and "none.jsonl" in res.stderr
    assert "Traceback" not in res.stderr
