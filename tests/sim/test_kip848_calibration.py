"""The simulator's KIP-848 model against the Apache Kafka 4.4.0 consumer-protocol recordings
(data/rebalance-bench-kafka44-kip848).

The consumer-protocol presets were fitted on repetitions r1-r3; these tests replay the held-out r4-r5
and hold the model to what docs/simulator.md and benchmarks/results/sim-calibration-kafka44-kip848.md say:
within 25 % of the recorded medians (moves equal) in every cell but the named misses, and those still
miss. (The benchmark's metrics themselves are checked against its meta.json rows in
test_bench_calibration.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kassign.sim.bench_meta import BENCH_MODES, bench_config
from kassign.sim.calibration.benchmark import BENCH_METRICS, load_bench_runs
from kassign.sim.calibration.consumer_protocol import (
    KIP848_RECORDINGS,
    compare_consumer_protocol,
    consumer_protocol_runs,
)
from kassign.sim.config import KAFKA44_CONSUMER_PRESETS

ROOT = Path(__file__).resolve().parents[2]

#: Held-out cells and metrics the model does not reproduce within the bound (docs/simulator.md says why).
KNOWN_MISSES = {
    ("instant", "rolling-restart", "java848"): {"moved"},
    ("instant", "rolling-restart", "kip848"): {"unowned_ps", "moved"},
    ("instant", "rolling-restart", "rdkafka848"): {"moved"},
    ("instant", "scale-in", "java848"): {"unowned_ps", "settle_s"},
    ("instant", "scale-in", "kip848"): {"unowned_ps", "settle_s"},
    ("instant", "scale-in", "rdkafka848"): {"unowned_ps", "settle_s"},
    ("instant", "scale-out", "java848"): {"unowned_ps"},
    ("instant", "scale-out", "kip848"): {"unowned_ps"},
    ("process", "rolling-restart", "java848"): {"unowned_ps", "settle_s", "moved"},
    ("process", "rolling-restart", "kip848"): {"unowned_ps", "moved"},
    ("process", "rolling-restart", "rdkafka848"): {"moved"},
    ("process", "scale-out", "java848"): {"unowned_ps", "settle_s"},
}


@pytest.fixture(scope="module")
def held_out():  # noqa: ANN201
    return compare_consumer_protocol(consumer_protocol_runs(reps=[4, 5]))


def test_the_recordings_are_all_there() -> None:
    runs = load_bench_runs(KIP848_RECORDINGS)
    assert len(runs) == 200
    consumer = consumer_protocol_runs()
    cells = {r.cell for r in consumer}
    assert len(consumer) == 120 and len(cells) == 24
    assert {mode for _, _, mode in cells} == {m for m, mode in BENCH_MODES.items() if mode.group_protocol == "consumer"}
    assert all(sorted(r.rep for r in consumer if r.cell == cell) == [1, 2, 3, 4, 5] for cell in cells)
    assert all(r.meta["group_protocol"] == "consumer" for r in consumer)


def test_consumer_protocol_runs_use_the_kip848_model_and_presets() -> None:
    (run,) = [r for r in consumer_protocol_runs(reps=[1]) if r.cell == ("instant", "scale-out", "java848")]
    config = bench_config(run.meta)
    assert config.group_protocol == "consumer" and config.client == "java"
    assert config.latency_ms("startup_ms") == KAFKA44_CONSUMER_PRESETS["java"]["startup_ms"]


def test_held_out_repetitions_within_25_percent_but_the_named_misses(held_out) -> None:  # noqa: ANN001
    assert len(held_out) == 24
    failures = [
        (row.cell, metric, round(row.rel_err(metric), 3))
        for row in held_out
        for metric in BENCH_METRICS
        if not row.passes(metric) and metric not in KNOWN_MISSES.get(row.cell, set())
    ]
    assert not failures, failures


def test_the_named_misses_still_miss(held_out) -> None:  # noqa: ANN001
    rows = {row.cell: row for row in held_out}
    fixed = [
        (cell, metric) for cell, metrics in KNOWN_MISSES.items() for metric in metrics if rows[cell].passes(metric)
    ]
    assert not fixed, f"now within the bound: update KNOWN_MISSES and docs/simulator.md: {fixed}"


def test_the_docs_page_gives_the_held_out_counts() -> None:
    """docs/simulator.md's counts for r4-r5 are 24 cells less the named misses of each metric."""
    text = " ".join((ROOT / "docs" / "simulator.md").read_text(encoding="utf-8").split())
    passing = {m: 24 - sum(m in metrics for metrics in KNOWN_MISSES.values()) for m in BENCH_METRICS}
    claim = (
        f"held-out r4–r5 are within 25 % in {passing['unowned_ps']} of 24 cells for unowned partition-seconds, "
        f"{passing['settle_s']} of 24 for settle time, and moves are equal in {passing['moved']} of 24"
    )
    assert claim in text, claim
