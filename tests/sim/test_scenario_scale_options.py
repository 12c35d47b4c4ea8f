"""The sweep's scenario options for large groups: a scale-out/scale-in by a fraction of the members and a
rolling restart of a sample (``kassign sweep --change-fraction F --restart-count N``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kassign.sim import RollingRestart, ScaleIn, ScaleOut, Scenario, SimConfig, make_scenario, simulate
from kassign.spark.cli import sweep_main
from kassign.spark.tasks import run_spec

KAFKA = dict(session_timeout_ms=1500, heartbeat_interval_ms=250, client="aiokafka")


def test_fraction_and_restart_count_shape_the_steps() -> None:
    assert make_scenario("scale_out", 8, 32).steps[0] == ScaleOut(
        4, phase=make_scenario("scale_out", 8, 32).steps[0].phase
    )
    (out,) = make_scenario("scale_out", 8, 32, change_fraction=0.25).steps
    (inn,) = make_scenario("scale_in", 8, 32, change_fraction=0.25).steps
    (one,) = make_scenario("scale_in", 3, 12, change_fraction=0.25).steps
    (restart,) = make_scenario("rolling_restart", 8, 32, restart_count=3).steps
    assert (type(out), out.count, type(inn), inn.count, one.count) == (ScaleOut, 2, ScaleIn, 2, 1)
    assert isinstance(restart, RollingRestart) and restart.count == 3
    assert make_scenario("rolling_restart", 8, 32).steps[0].count is None
    for bad in (dict(change_fraction=0.0), dict(change_fraction=1.5), dict(restart_count=0)):
        with pytest.raises(ValueError):
            make_scenario("scale_out", 4, 8, **bad)  # type: ignore[arg-type]


def test_a_sampled_rolling_restart_restarts_only_the_sample() -> None:
    scenario = Scenario(6, {"topic": 24}, seed=1).then(RollingRestart(down_s=0.2, interval_s=0.5, count=2))
    result = simulate(scenario, SimConfig(assignor="cooperative-sticky", **KAFKA))  # type: ignore[arg-type]
    assert result.settled
    closed = {e.id for e in result.events if e.ev == "closing"}
    assert len(closed) == 2


def test_specs_carry_the_options(tmp_path: Path) -> None:
    spec = {
        "assignor": "cooperative-sticky",
        "protocol": "cooperative",
        "broker": "kafka",
        "client": "aiokafka",
        "members": 8,
        "partitions": 32,
        "scenario": "scale_in",
        "seed": 0,
        "scenario_id": 0,
        "config": {"session_timeout_ms": 1500, "heartbeat_interval_ms": 250},
        "change_fraction": 0.25,
    }
    phases, _ = run_spec(spec, with_events=False)
    (change,) = [p for p in phases if p["kind"] != "initial"]
    assert change["settled"] and change["moved"] >= 8  # the 2 closing members' 8 partitions move


def test_sweep_cli_rejects_a_bad_restart_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "g.yaml"
    grid.write_text("members: [3]\n")
    assert sweep_main([str(grid), "--out", str(tmp_path / "out"), "--restart-count", "0"]) == 2
    assert "--restart-count" in capsys.readouterr().err
