"""The PySpark pipeline on local[2]: a small sweep whose aggregates must equal the simulator's
results computed directly, and an analysis of recorded groups against their recorded metrics.
One SparkSession for the module; a few Spark jobs in all."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

from kassign.model import RebalanceProtocol  # noqa: E402
from kassign.sim import SimConfig, make_scenario, simulate  # noqa: E402
from kassign.spark.grid import expand_grid  # noqa: E402
from kassign.spark.pipeline import run_analysis, run_sweep, spark_session  # noqa: E402
from kassign.spark.report import FIGURES, write_report  # noqa: E402
from kassign.spark.tasks import group_sources  # noqa: E402

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"
GRID = {
    "assignors": ["range", "cooperative-sticky"],
    "protocols": ["eager", "cooperative"],
    "members": [3],
    "partitions": [12],
    "scenarios": ["scale_out", "crash"],
    "seeds": 2,
    "config": {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000},
}


@pytest.fixture(scope="module")
def spark():  # noqa: ANN201
    session = spark_session("local[2]", "kassign-tests")
    yield session
    session.stop()


def test_sweep_aggregates_match_direct_simulation(spark, tmp_path: Path) -> None:  # noqa: ANN001
    specs = expand_grid(GRID)
    result = run_sweep(spark, specs, tmp_path, progress=False)

    direct: dict[tuple[str, str, str], list] = defaultdict(list)
    n_events = 0
    for s in specs:
        config = SimConfig(
            assignor=s["assignor"],
            protocol=RebalanceProtocol[s["protocol"].upper()],
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        sim = simulate(make_scenario(s["scenario"], 3, 12, seed=s["seed"]), config)
        n_events += len(sim.events)
        for phase, m in sim.metrics.items():
            if phase != "initial":
                direct[(s["assignor"], s["protocol"], phase.partition(":")[2])].append(m)

    got = {(a["assignor"], a["protocol"], a["kind"]): a for a in result.aggregates}
    assert set(got) == set(direct)
    for key, ms in direct.items():
        a = got[key]
        assert a["n"] == len(ms)
        assert a["unowned_ps_mean"] == pytest.approx(statistics.mean(m.unowned_ps for m in ms), abs=1e-6)
        assert a["moved_mean"] == pytest.approx(statistics.mean(m.moved for m in ms))
        assert a["settle_s_max"] == pytest.approx(max(m.settle_s for m in ms), abs=1e-6)
        # percentile_approx answers an observed value: the lower median
        assert a["settle_s_p50"] == pytest.approx(statistics.median_low(m.settle_s for m in ms), abs=1e-6)
        assert a["balance_max"] == max(m.balance for m in ms)
        assert a["rounds_max"] == max(m.rounds for m in ms)
        assert a["double_owned_ps_max"] == 0 and a["unsettled"] == 0

    phases = spark.read.parquet(str(tmp_path / "phases"))
    assert phases.count() == len(specs) * 2  # initial + one trigger each
    assert spark.read.parquet(str(tmp_path / "events")).count() == n_events
    assert spark.read.parquet(str(tmp_path / "aggregates")).count() == len(direct)

    page = write_report(tmp_path, result.phase_rows, result.aggregates, title="test", summary={"scenarios": len(specs)})
    text = page.read_text()
    drawn = [spec for spec in FIGURES if f'src="{spec.file}"' in text]
    assert {spec.metric for spec in drawn} >= {"unowned_ps", "moved", "settle_s"}
    for spec in FIGURES:
        assert spec.title in text
        assert (tmp_path / spec.file).stat().st_size > 1000 if spec in drawn else "Not drawn" in text
    assert "cooperative-sticky" in text
    assert len(json.loads((tmp_path / "aggregates.json").read_text())) == len(direct)


def test_analyze_reproduces_recorded_metrics(spark) -> None:  # noqa: ANN001
    runs = [RECORDINGS / f"kafka-java-{s}-r{r}" for s in ("range", "coop") for r in (1, 2, 3)]
    result = run_analysis(spark, group_sources([str(r) for r in runs]), None, with_events=False, progress=False)
    recorded: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text())
        strategy = "cooperative-sticky" if "coop" in run.name else "range"
        for phase, kind in (("out", "scale_out"), ("in", "scale_in")):
            recorded[(strategy, kind)].append(metrics[phase]["unowned_ps"])
    got = {(a["assignor"], a["kind"]): a for a in result.aggregates}
    assert set(got) == set(recorded)
    for key, values in recorded.items():
        assert got[key]["n"] == 3
        assert got[key]["unowned_ps_mean"] == pytest.approx(statistics.mean(values), abs=2e-3)
        assert got[key]["unowned_ps_p50"] == pytest.approx(statistics.median_low(values), abs=2e-3)
        assert got[key]["client"] == "java" and got[key]["broker"] == "kafka"
