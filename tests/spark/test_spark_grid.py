"""Grid expansion and the per-task work of the Spark pipeline (no Spark needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kassign.spark.cli import analyze_main, sweep_main
from kassign.spark.grid import expand_grid, load_grid
from kassign.spark.tasks import group_sources, measure_group, run_spec

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "data" / "rebalance-timelines"


def test_example_grid_expands_to_supported_pairs_only() -> None:
    specs = expand_grid(load_grid(ROOT / "examples" / "grids" / "small.yaml"))
    pairs = {(s["assignor"], s["protocol"]) for s in specs}
    assert pairs == {
        ("range", "eager"),
        ("sticky", "eager"),
        ("cooperative-sticky", "eager"),
        ("cooperative-sticky", "cooperative"),
    }
    assert len(specs) == 4 * 2 * 4 * 3  # pairs x members x scenarios x seeds
    assert [s["scenario_id"] for s in specs] == list(range(len(specs)))


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"colours": [1]}, "unknown grid key"),
        ({"scenarios": ["explode"]}, "unknown scenario kind 'explode'"),
        ({"seeds": 0}, "'seeds' must be >= 1"),
        ({"members": []}, "axis 'members' is empty"),
        ({"config": {"assignor": "range"}}, "use the grid axes"),
        ({"config": {"session_timeout": 1}}, "unknown simulator setting"),
        ({"assignors": ["nope"]}, "unknown assignor 'nope'"),
    ],
)
def test_bad_grids_are_named(grid: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_grid(grid)


def test_sweep_cli_rejects_a_bad_grid_before_starting_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenarios: [explode]\n")
    assert sweep_main([str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "explode" in capsys.readouterr().err
    assert analyze_main([str(tmp_path / "missing"), "--out", str(tmp_path / "out")]) == 2


def test_a_spec_runs_to_phase_and_event_rows() -> None:
    spec = expand_grid(
        {
            "assignors": ["cooperative-sticky"],
            "protocols": ["cooperative"],
            "members": [3],
            "partitions": [12],
            "scenarios": ["scale_out"],
            "config": {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000},
        }
    )[0]
    phases, events = run_spec(spec)
    assert [r["phase"] for r in phases] == ["initial", "1:scale_out"]
    assert phases[1]["kind"] == "scale_out" and phases[1]["rounds"] == 2 and phases[1]["double_owned_ps"] == 0
    assert {e["ev"] for e in events} >= {"join", "sync", "cb_assigned", "cb_revoked"}
    assert all(e["scenario_id"] == spec["scenario_id"] for e in events)


def test_groups_without_meta_get_detected_phases(tmp_path: Path) -> None:
    run = RECORDINGS / "kafka-java-range-r1"
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run / "events.jsonl.gz", bare / "events.jsonl.gz")
    with_meta, _ = measure_group(0, group_sources([str(run)])[0], with_events=False)
    without, _ = measure_group(1, group_sources([str(bare)])[0], with_events=False)
    assert [r["kind"] for r in with_meta] == ["initial", "scale_out", "scale_in"]
    kinds = [r["kind"] for r in without]
    assert kinds[:3] == ["initial", "scale_out", "scale_in"]  # then the survivors' shutdown
    for a, b in zip(with_meta[1:], without[1:3]):
        assert (a["moved"], a["rounds"]) == (b["moved"], b["rounds"])
        assert a["unowned_ps"] == pytest.approx(b["unowned_ps"], abs=1e-6)
    assert with_meta[0]["assignor"] == "range" and with_meta[0]["protocol"] == "eager"


def test_an_assignment_the_client_would_reject_becomes_an_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # A scenario the simulated client rejects (e.g. Java's validateCooperativeAssignment failing)
    # must become one "error" row instead of failing the whole Spark job.
    import kassign.spark.tasks as tasks
    from kassign.sim import SimulationError

    def rejecting(*args, **kwargs):
        raise SimulationError("cooperative assignment moves topic-3 from m1 to m2 in one round")

    monkeypatch.setattr(tasks, "simulate", rejecting)
    spec = {
        "scenario_id": 7,
        "assignor": "cooperative-sticky",
        "protocol": "cooperative",
        "broker": "tansu",
        "client": "java",
        "members": 6,
        "partitions": 48,
        "scenario": "random",
        "seed": 11,
        "config": {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000},
    }
    phases, events = tasks.run_spec(spec)
    assert [(r["phase"], r["kind"], r["settled"]) for r in phases] == [("error", "error", False)]
    assert events == []
