"""The at-scale sweep's grids (``python -m benchmarks.sweep_at_scale``) are valid ``kassign sweep`` grids with
the broker benchmarks' settings; its leader timing runs. No Spark here: the sweeps themselves are the benchmark."""

from __future__ import annotations

from pathlib import Path

from benchmarks.sweep_at_scale import SCENARIOS, STRATEGIES, grid, leader_ms, sweep_command
from kassign.sim import SimConfig
from kassign.spark.grid import expand_grid


def test_grids_expand_to_every_scenario_and_seed() -> None:
    for strategy, (assignor, protocol, fast) in STRATEGIES.items():
        specs = expand_grid(grid(500, strategy, 2))
        assert len(specs) == len(SCENARIOS) * 2
        assert {(s["assignor"], s["protocol"]) for s in specs} == {(assignor, protocol)}
        config = SimConfig.from_dict(specs[0]["config"])
        assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.fast_follow_up) == (1500, 250, fast)
    assert grid(2000, "kassign default", 1, assign_ms=123.0)["config"]["assign_ms"] == 123.0


def test_sweep_command_passes_the_scale_options(tmp_path: Path) -> None:
    cmd = sweep_command(tmp_path / "g.yaml", tmp_path / "out", "/tmp/some.lock")
    assert cmd[:2] == ["flock", "/tmp/some.lock"] and "sweep" in cmd
    assert cmd[cmd.index("--change-fraction") + 1] == "0.25" and cmd[cmd.index("--restart-count") + 1] == "24"
    assert sweep_command(tmp_path / "g.yaml", tmp_path / "out", "")[0] != "flock"


def test_leader_timing_runs() -> None:
    assert leader_ms(500, "roundrobin", reps=1) > 0
