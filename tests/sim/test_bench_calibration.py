"""The simulator against the Apache Kafka 4.4.0 benchmark recordings (data/rebalance-bench-kafka44).

The presets were fitted on repetitions r1-r5 (aiokafka's start-up delay measured on a live broker
instead); these tests replay each cell's held-out runs, recorded after the last model change that
touches the cell and never used to choose the model (r21-r30 for the four aiokafka modes, r11-r20 for
Java and librdkafka), and hold the simulator to what docs/simulator.md claims for them: unowned
partition-seconds and settle time within 25 % of the recorded medians and the same partition moves, in
every cell where the recordings reproduce themselves (the fit set's medians within the same bound of
the held-out ones) but the named exceptions (each of which docs/simulator.md explains), and the pass counts
docs/simulator.md gives for the held-out runs, for r11-r20 of every cell and for r6-r10 (recorded beside a
simulator fit). The benchmark's metrics themselves are checked against the rows the benchmark wrote
into every run's meta.json.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kassign.sim.bench_meta import BENCH_MODES, bench_config
from kassign.sim.calibration.benchmark import (
    BENCH_METRICS,
    BENCH_RECORDINGS,
    FITTED_REPS,
    HELD_OUT_BY_CLIENT,
    HELD_OUT_REPS,
    LOADED_REPS,
    RECHECK_REPS,
    compare_cells,
    held_out_yardsticks,
    is_held_out,
    load_bench_runs,
    recorded_bench_metrics,
    simulate_bench,
)
from kassign.sim.calibration.consumer_protocol import KIP848_RECORDINGS
from kassign.sim.calibration.fit import measured_heartbeat_lag_ms
from kassign.sim.calibration.harness import harness_inputs
from kassign.sim.config import KAFKA44_PRESETS

ROOT = Path(__file__).resolve().parents[2]

#: What docs/simulator.md claims: cells within 25 % (moves: equal) per metric, on each cell's held-out runs, on
#: r11-r20 of every cell (the aiokafka modes' seen before their start-up delay was measured) and on the
#: loaded r6-r10.
HELD_OUT_PASSING = {"unowned_ps": 41, "settle_s": 40, "moved": 40}
QUIET_PASSING = {"unowned_ps": 42, "settle_s": 42, "moved": 41}
LOADED_PASSING = {"unowned_ps": 30, "settle_s": 34, "moved": 41}
#: Every cell-metric the simulator misses on the held-out runs, as docs/simulator.md names them: in each the
#: fit set's own recorded median misses the held-out one too (real Kafka does not reproduce itself there).
HELD_OUT_MISSES: dict[tuple[str, str, str], set[str]] = {
    ("instant", "rolling-restart", "java"): {"moved"},
    ("process", "rolling-restart", "coop"): {"moved"},
    ("process", "scale-in", "coop"): {"settle_s"},
    ("process", "scale-in", "fast"): {"settle_s"},
    ("process", "scale-out", "eager"): {"unowned_ps"},
}
#: How many cells reproduce themselves per metric: r1-r5 against the held-out runs, and the held-out
#: runs' first five against their last five.
REPRODUCIBLE = {"unowned_ps": 34, "settle_s": 38, "moved": 39}
REPRODUCIBLE_HALVES = {"unowned_ps": 35, "settle_s": 39, "moved": 40}
AIOKAFKA_MODES = {
    name for name, mode in BENCH_MODES.items() if mode.client == "aiokafka" and mode.group_protocol == "classic"
}


@pytest.fixture(scope="module")
def held_out():  # noqa: ANN201
    return compare_cells(r for r in load_bench_runs() if is_held_out(r))


@pytest.fixture(scope="module")
def yardsticks():  # noqa: ANN201
    return held_out_yardsticks(load_bench_runs())


def test_the_recordings_are_all_there() -> None:
    runs = load_bench_runs()
    assert len(runs) == 840 + 260
    cells = {r.cell for r in runs}
    classic = {name for name, mode in BENCH_MODES.items() if mode.group_protocol == "classic"}
    assert len(cells) == 42 and {mode for _, _, mode in cells} == classic
    for cell in cells:
        last = 30 if cell[2] in AIOKAFKA_MODES else 20
        assert sorted(r.rep for r in runs if r.cell == cell) == list(range(1, last + 1)), cell
    sets = (set(FITTED_REPS), set(LOADED_REPS), set(HELD_OUT_REPS), set(RECHECK_REPS))
    assert set().union(*sets) == set(range(1, 31)) and sum(map(len, sets)) == 30
    # Each cell is judged on ten runs recorded after the model last changed for it.
    assert HELD_OUT_BY_CLIENT == {"aiokafka": RECHECK_REPS, "java": HELD_OUT_REPS, "librdkafka": HELD_OUT_REPS}
    held = [r for r in runs if is_held_out(r)]
    assert len(held) == 420 and all((r.rep >= 21) == (r.cell[2] in AIOKAFKA_MODES) for r in held)


@pytest.mark.parametrize("root", [BENCH_RECORDINGS, KIP848_RECORDINGS], ids=["classic", "kip848"])
def test_bench_metrics_are_the_benchmarks_own_rows(root) -> None:  # noqa: ANN001
    for run in load_bench_runs(root):
        mine, theirs = recorded_bench_metrics(run), run.meta["result"]
        assert mine.unowned_ps == pytest.approx(theirs["unowned_ps"], abs=1e-3), run.name
        assert mine.settle_s == pytest.approx(theirs["settle_s"], abs=1e-3), run.name
        assert mine.moved == theirs["moved"], run.name


def test_each_mode_runs_its_client_assignor_and_follow_up() -> None:
    runs = {r.name: r for r in load_bench_runs(reps=[1])}
    fast = bench_config(runs["process-scale-out-fast-r1"].meta)
    assert (fast.client, fast.assignor, fast.fast_follow_up, fast.static_membership) == (
        "aiokafka",
        "cooperative-sticky",
        True,
        False,
    )
    assert (fast.processing_ms, fast.processing_max_ms) == (250.0, 750.0)
    assert (fast.session_timeout_ms, fast.heartbeat_interval_ms, fast.rebalance_timeout_ms) == (1500, 250, 30000)
    assert bench_config(runs["instant-scale-out-coop-r1"].meta).fast_follow_up is False
    assert bench_config(runs["instant-scale-out-coop-r1"].meta).processing_ms == 0.0
    assert bench_config(runs["instant-scale-out-eager-r1"].meta).assignor == "roundrobin"
    assert bench_config(runs["instant-rolling-restart-static-r1"].meta).static_membership is True
    java = bench_config(runs["instant-crash-java-r1"].meta)
    rdkafka = bench_config(runs["instant-crash-rdkafka-r1"].meta)
    assert (java.client, rdkafka.client) == ("java", "librdkafka")
    assert java.startup_ms == KAFKA44_PRESETS["java"]["startup_ms"]
    assert rdkafka.id_rejoin_ms == KAFKA44_PRESETS["librdkafka"]["id_rejoin_ms"]


def test_aiokafka_heartbeats_drift_in_the_recordings_but_not_in_the_presets() -> None:
    # Eager survivors of a crash revoke at the heartbeat that tells them: 0.86 ms late per interval
    # (3.6 ms from heartbeat to revocation, as aiokafka's preset has it). Switched on and refitted on
    # r1-r5 it fits them no better (loss 5.10 against 5.05, the same cells missed), so the presets
    # keep lockstep.
    runs = load_bench_runs(reps=[1, 2, 3])
    latency = KAFKA44_PRESETS["aiokafka"]
    assert measured_heartbeat_lag_ms(runs, 2 * latency["network_ms"] + latency["poll_ms"]) == pytest.approx(0.86)
    assert all(values["heartbeat_lag_ms"] == 0.0 for values in KAFKA44_PRESETS.values())
    # The benchmark's members commit every 200 ms: a crashed member's session runs from its last commit too.
    assert bench_config(runs[0].meta).commit_interval_ms == 200.0


def test_harness_inputs_come_from_the_recording() -> None:
    runs = {r.name: r for r in load_bench_runs(reps=[2])}
    out = runs["instant-scale-out-java-r2"]
    inputs = harness_inputs(out.meta, out.events())
    trigger = out.meta["triggers"][0]
    assert inputs.launch_s == tuple(
        sorted(round(e.t - trigger, 6) for e in out.events() if e.ev == "subscribed" and e.t >= trigger)
    )
    assert len(inputs.launch_s) == 3 and inputs.phase == out.meta["phase"] and inputs.members == 3
    # The first members' subscribes, slot by slot, from the first of them: how the group formed.
    first = {e.id: e.t for e in reversed(out.events()) if e.ev == "subscribed" and e.t < trigger}
    assert inputs.start_s == tuple(round(first[f"m{i}"] - min(first.values()), 6) for i in (1, 2, 3))
    assert min(inputs.start_s) == 0.0
    restart = runs["process-rolling-restart-fast-r2"]
    inputs = harness_inputs(restart.meta, restart.events())
    assert inputs.members == 6 and len(inputs.release_s) == 6 and len(inputs.gap_s) == 5
    # The harness polls for the predecessor's close every 5 ms and its own timeline every 100 ms.
    assert all(0 <= r <= 0.15 for r in inputs.release_s) and all(0.5 <= g <= 2.0 for g in inputs.gap_s)


def test_a_simulated_run_fires_its_triggers_the_way_the_harness_did() -> None:
    run = next(r for r in load_bench_runs(reps=[1]) if r.name == "instant-rolling-restart-coop-r1")
    result = simulate_bench(run)
    assert len(result.triggers) == 6 and result.end > result.triggers[-1]
    hb = 0.25
    for trigger in result.triggers:
        last_assign = max(e.t for e in result.events if e.ev == "cb_assigned" and e.t < trigger)
        assert ((trigger - last_assign) / hb) % 1 == pytest.approx(run.meta["phase"], abs=1e-6)
    closing = [e.t for e in result.events if e.ev == "closing"]
    assert [round(c - t, 6) for c, t in zip(closing, result.triggers)] == [
        pytest.approx(KAFKA44_PRESETS["aiokafka"]["spawn_ms"] / 1000)
    ] * 6


def test_held_out_repetitions_within_25_percent_wherever_kafka_reproduces_itself(held_out, yardsticks) -> None:  # noqa: ANN001
    stable, halves = yardsticks
    # The fit set's own medians predict the held-out ones within the bound in only some cells: those
    # are the ones a prediction fitted on them can be held to.
    assert {metric: len(cells) for metric, cells in stable.items()} == REPRODUCIBLE
    assert {metric: len(cells) for metric, cells in halves.items()} == REPRODUCIBLE_HALVES
    rows = {row.cell: row for row in held_out}
    assert len(rows) == 42
    off = [
        f"{'/'.join(cell)} {metric}: recorded {rows[cell].recorded[metric]:.3f}, simulated "
        f"{rows[cell].simulated[metric]:.3f} ({rows[cell].rel_err(metric):+.0%})"
        for metric in BENCH_METRICS
        for cell in sorted(stable[metric])
        if not rows[cell].passes(metric)
    ]
    assert not off, "\n".join(off)


def test_the_held_out_misses_are_the_docs_and_none_is_where_kafka_reproduces_itself(held_out, yardsticks) -> None:  # noqa: ANN001
    # A miss that starts passing, or a new one, means docs/simulator.md's account of the calibration is out of date.
    misses: dict[tuple[str, str, str], set[str]] = {}
    for row in held_out:
        for metric in BENCH_METRICS:
            if not row.passes(metric):
                misses.setdefault(row.cell, set()).add(metric)
    assert misses == HELD_OUT_MISSES
    stable, _ = yardsticks
    assert not [(cell, metric) for cell, metrics in misses.items() for metric in metrics if cell in stable[metric]]


def test_held_out_pass_counts_are_the_docs(held_out) -> None:  # noqa: ANN001
    assert {m: sum(row.passes(m) for row in held_out) for m in BENCH_METRICS} == HELD_OUT_PASSING


def test_quiet_pass_counts_of_every_cell_are_the_docs(held_out) -> None:  # noqa: ANN001
    # r11-r20 are the held-out runs of the Java and librdkafka cells: only the aiokafka modes' are replayed here.
    quiet = compare_cells(load_bench_runs(reps=HELD_OUT_REPS), reuse=held_out)
    assert len(quiet) == 42
    assert sum(any(row is mine for mine in held_out) for row in quiet) == 16
    assert {m: sum(row.passes(m) for row in quiet) for m in BENCH_METRICS} == QUIET_PASSING


def test_a_static_replacement_joins_after_aiokafkas_measured_start_up() -> None:
    # subscribe() -> JoinGroup is the measured startup_ms; the broker answers a known static member's
    # JoinGroup and SyncGroup at once, so its partitions come two round trips later (the leader's
    # replacement computes the assignment first).
    run = next(r for r in load_bench_runs(reps=[21]) if r.name == "instant-rolling-restart-static-r21")
    result = simulate_bench(run)
    latency = KAFKA44_PRESETS["aiokafka"]
    replacements = {e.id: e.t for e in result.events if e.ev == "subscribed" and e.t > result.triggers[0]}
    assert len(replacements) == 6
    to_partitions = []
    for member, subscribed in replacements.items():
        join = next(e.t for e in result.events if e.id == member and e.ev == "join")
        assigned = next(e.t for e in result.events if e.id == member and e.ev == "cb_assigned" and e.parts)
        assert join - subscribed == pytest.approx(latency["startup_ms"] / 1000)
        to_partitions.append(round((assigned - join) * 1000, 6))
    round_trips = 4 * latency["network_ms"]
    assert sorted(to_partitions) == pytest.approx([round_trips] * 5 + [round_trips + latency["assign_ms"]])


def test_loaded_pass_counts_are_the_docs() -> None:
    loaded = compare_cells(load_bench_runs(reps=LOADED_REPS))
    assert {m: sum(row.passes(m) for row in loaded) for m in BENCH_METRICS} == LOADED_PASSING


def test_the_cli_refuses_repetitions_that_are_not_numbers(capsys) -> None:  # noqa: ANN001
    from kassign.sim.calibration.cli import main

    with pytest.raises(SystemExit):
        main(["--reps", "6,x"])
    assert "--reps must be comma-separated numbers, got '6,x'" in capsys.readouterr().err


def test_the_docs_page_gives_these_counts() -> None:
    """docs/simulator.md states the pass counts the tests above hold the simulator to."""
    text = " ".join((ROOT / "docs" / "simulator.md").read_text(encoding="utf-8").split())
    rows = {"unowned_ps": "unowned partition-seconds", "settle_s": "settle time", "moved": "partitions moved"}
    for metric, label in rows.items():
        row = (
            f"| {label} | **{HELD_OUT_PASSING[metric]} / 42** | {REPRODUCIBLE[metric]} / 42 | "
            f"**{REPRODUCIBLE[metric]} / {REPRODUCIBLE[metric]}** | {REPRODUCIBLE_HALVES[metric]} / 42 |"
        )
        assert row in text, row
    quiet = ", ".join(str(QUIET_PASSING[m]) for m in ("unowned_ps", "settle_s")) + f" and {QUIET_PASSING['moved']}"
    assert f"are within bound in {quiet} cells" in text, quiet
    loaded = ", ".join(str(LOADED_PASSING[m]) for m in ("unowned_ps", "settle_s")) + f" and {LOADED_PASSING['moved']}"
    assert f"r6–r10: {loaded} of 42" in text, loaded
