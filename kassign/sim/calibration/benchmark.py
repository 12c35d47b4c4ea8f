"""Calibration against the Apache Kafka 4.4.0 benchmark recordings (``data/rebalance-bench-kafka44``).

Each run there is one cell of ``benchmarks/rebalance.py`` (profile x scenario x mode) repeated five
times (``<profile>-<scenario>-<mode>-r<k>``). This module replays a run in the simulator and measures
both timelines the way the benchmark measured the real one:

* :func:`~kassign.sim.bench_meta.bench_config`: the run's settings as a :class:`SimConfig` (assignor,
  client and fast follow-up per mode, static membership, timeouts, per-batch processing, and the
  client's :data:`~kassign.sim.config.KAFKA44_PRESETS` latencies);
* :func:`simulate_bench`: the run in the simulator, driven by the benchmark's harness
  (:mod:`kassign.sim.calibration.harness`, with what the harness did read from the recording);
* :func:`bench_metrics`: the benchmark's row (``unowned_ps``, ``settle_s``, ``moved``) from any
  timeline, built on :mod:`kassign.timeline.metrics` (a member stops owning when it starts
  closing, as in the benchmark); on a recording it is the row in its ``meta.json``;
* :func:`compare_cells`: recorded vs simulated medians per cell.

The presets are fitted on :data:`FITTED_REPS` (r1-r5) and each cell is checked on the repetitions
recorded after the last model change that touches it (:data:`HELD_OUT_BY_CLIENT`, :func:`is_held_out`):
:data:`RECHECK_REPS` (r21-r30) for the aiokafka modes, recorded after aiokafka's start-up delay was
measured, and :data:`HELD_OUT_REPS` (r11-r20, a quiet machine) for Java and librdkafka.
:data:`LOADED_REPS` (r6-r10, recorded beside a simulator fit) and, for the aiokafka modes, r11-r20 are
further checks. ``python -m kassign.sim.calibration`` prints the held-out comparison (``--fit`` refits
the presets on the given repetitions first, :mod:`kassign.sim.calibration.fit`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kassign.model import TopicPartition
from kassign.sim.bench_meta import bench_client, bench_config, mode_of
from kassign.sim.calibration.harness import TOPIC, BenchRunResult, BenchSimulation, bench_topics, harness_inputs
from kassign.sim.config import KAFKA44_PRESETS, SimConfig
from kassign.timeline.events import Event, read_events
from kassign.timeline.metrics import (
    GONE_EVENTS,
    change_settles,
    kept_partitions,
    ownership_intervals,
    unowned_partition_seconds,
)

__all__ = [
    "BENCH_RECORDINGS",
    "BENCH_METRICS",
    "FITTED_REPS",
    "HELD_OUT_REPS",
    "LOADED_REPS",
    "RECHECK_REPS",
    "HELD_OUT_BY_CLIENT",
    "is_held_out",
    "agrees",
    "reproducible_cells",
    "held_out_yardsticks",
    "BenchRun",
    "BenchMetrics",
    "CellComparison",
    "load_bench_runs",
    "bench_metrics",
    "recorded_bench_metrics",
    "simulate_bench",
    "simulated_bench_metrics",
    "compare_cells",
    "format_cells",
]

BENCH_RECORDINGS = Path(__file__).resolve().parents[3] / "data" / "rebalance-bench-kafka44"
#: Metrics compared per cell; ``step_settle_s`` (a rolling restart's mean settle per restart) is
#: shown beside them because a rolling restart's ``settle_s`` is mostly the harness's schedule.
BENCH_METRICS = ("unowned_ps", "settle_s", "moved")
ALL_METRICS = (*BENCH_METRICS, "step_settle_s")
#: The repetitions the presets were fitted on.
FITTED_REPS = (1, 2, 3, 4, 5)
#: The held-out check: recorded on a quiet machine after the fit and after every model choice, ten
#: runs per cell (decided before they were recorded; data/rebalance-bench-kafka44/README.md).
HELD_OUT_REPS = tuple(range(11, 21))
#: A second check, recorded after the fit but beside a CPU-bound simulator fit on one of the two cores.
LOADED_REPS = (6, 7, 8, 9, 10)
#: The aiokafka modes' held-out set since aiokafka's subscribe-to-JoinGroup delay was measured (after
#: r11-r20 had been seen): ten runs per cell of ``eager``, ``coop``, ``fast`` and ``static``, decided
#: before they were recorded (data/rebalance-bench-kafka44/README.md).
RECHECK_REPS = tuple(range(21, 31))
#: Per client, the repetitions recorded after the last model change that touches its cells.
HELD_OUT_BY_CLIENT: dict[str, tuple[int, ...]] = {
    "aiokafka": RECHECK_REPS,
    "java": HELD_OUT_REPS,
    "librdkafka": HELD_OUT_REPS,
}
#: Seeds of the members' batch times simulated per recorded run with processing (see
#: :func:`simulated_bench_metrics`).
DRAWS = 5


@dataclass(frozen=True)
class BenchRun:
    """One recorded run: its directory and parsed ``meta.json``."""

    path: Path
    meta: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def rep(self) -> int:
        """The repetition (``...-r3`` -> 3; 0 when the name has none)."""
        stem, _, rep = self.name.rpartition("-r")
        return int(rep) if stem and rep.isdigit() else 0

    @property
    def cell(self) -> tuple[str, str, str]:
        """(profile, scenario, mode): what the repetitions of one benchmark cell share."""
        return (str(self.meta["profile"]), str(self.meta["scenario"]), mode_of(self.meta))

    def events(self) -> list[Event]:
        """The recorded events, in time order, their partitions under the simulator's topic names
        (:func:`~kassign.sim.calibration.harness.bench_topics`: the run's one topic as ``topic``, a
        recording's several ``<tag>-t<i>`` as ``topic-t<i>``)."""
        events = sorted(read_events(self.path / "events.jsonl.gz", default_topic=TOPIC), key=lambda e: e.t)
        names = list(bench_topics(self.meta))
        if len(names) == 1:
            return events
        renamed = _recorded_topic_names(events, names)
        for event in events:
            if event.parts:
                event.parts = [TopicPartition(renamed[tp.topic], tp.partition) for tp in event.parts]
        return events


def load_bench_runs(root: str | Path = BENCH_RECORDINGS, *, reps: Iterable[int] | None = None) -> list[BenchRun]:
    """Every run directory under ``root`` (those with a meta.json), sorted by name; ``reps`` keeps
    only those repetitions."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no recordings directory at {root}")
    wanted = None if reps is None else set(reps)
    runs = [
        BenchRun(d, json.loads((d / "meta.json").read_text()))
        for d in sorted(root.iterdir())
        if (d / "meta.json").is_file()
    ]
    return [r for r in runs if wanted is None or r.rep in wanted]


# -- the held-out runs ------------------------------------------------------------------------------


def is_held_out(run: BenchRun) -> bool:
    """Whether ``run`` belongs to its client's held-out set (:data:`HELD_OUT_BY_CLIENT`)."""
    return run.rep in HELD_OUT_BY_CLIENT[bench_client(run.meta)]


# -- the benchmark's metrics -------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchMetrics:
    """The benchmark's row for one timeline (``benchmarks/rebalance.py``'s ``measure``):
    ``unowned_ps`` partition-seconds without an owner from the first trigger to the last settle,
    ``settle_s`` first trigger to the last settle, ``moved`` partitions whose owner changed (summed
    over a rolling restart's restarts); ``step_settle_s`` the mean of each trigger's own settle."""

    unowned_ps: float
    settle_s: float
    moved: int
    step_settle_s: float


def bench_metrics(
    events: Iterable[Event], triggers: Sequence[float], end: float, partitions: Iterable[TopicPartition]
) -> BenchMetrics:
    """The benchmark's metrics of a timeline whose changes began at ``triggers`` (one per restart of
    a rolling restart) and whose measured stretch ends at ``end``.

    Each trigger's settle is :func:`~kassign.timeline.metrics.change_settles`'s: the last ownership
    change or departure before the next trigger.
    """
    if not triggers or end <= triggers[-1]:
        raise ValueError(f"need trigger times before the end {end}, got {list(triggers)}")
    timeline = sorted(events, key=lambda e: e.t)
    parts = sorted(set(partitions))
    intervals = ownership_intervals(timeline, release_events=GONE_EVENTS)
    settles = change_settles(timeline, triggers, end)
    moved = sum(len(parts) - len(kept_partitions(intervals, lo, settle)) for lo, settle in zip(triggers, settles))
    return BenchMetrics(
        unowned_ps=unowned_partition_seconds(intervals, parts, triggers[0], settles[-1]),
        settle_s=round(settles[-1] - triggers[0], 6),
        moved=moved,
        step_settle_s=round(statistics.fmean(s - t for s, t in zip(settles, triggers)), 6),
    )


def _recorded_topic_names(events: Sequence[Event], names: Sequence[str]) -> dict[str, str]:
    """Recorded topic -> simulator topic: ``<tag>-t<i>`` is the run's ``i``-th topic (``names[i]``)."""
    out: dict[str, str] = {}
    for topic in sorted({tp.topic for e in events if e.parts for tp in e.parts}):
        _, _, index = topic.rpartition("-t")
        if not index.isdigit() or int(index) >= len(names):
            raise ValueError(f"recorded topic {topic!r} is not one of the run's {len(names)} topics <tag>-t<i>")
        out[topic] = names[int(index)]
    return out


def _partitions(meta: Mapping[str, Any]) -> list[TopicPartition]:
    """Every partition of the run's topics (:func:`~kassign.sim.calibration.harness.bench_topics`)."""
    return [TopicPartition(topic, p) for topic, count in bench_topics(meta).items() for p in range(count)]


def recorded_bench_metrics(run: BenchRun) -> BenchMetrics:
    """The run's row recomputed from its recorded events (equal to meta.json's ``result``)."""
    return bench_metrics(run.events(), run.meta["triggers"], float(run.meta["end"]), _partitions(run.meta))


def simulate_bench(
    run: BenchRun, config: SimConfig | None = None, *, draw: int = 0, **overrides: Any
) -> BenchRunResult:
    """Simulate ``run`` under its :func:`~kassign.sim.bench_meta.bench_config` (with ``overrides``)
    unless ``config`` is given; ``draw`` picks another seed for the members' batch times."""
    config = config or bench_config(run.meta, **overrides)
    seed = int(run.meta.get("seed", run.rep)) * 100 + draw
    return BenchSimulation(harness_inputs(run.meta, run.events()), config, seed=seed, name=run.name).run_bench()


def simulated_bench_metrics(
    run: BenchRun, config: SimConfig | None = None, *, draws: int = DRAWS, **overrides: Any
) -> BenchMetrics:
    """The benchmark's metrics of the simulated run: with per-batch processing, the median over
    ``draws`` seeds of the members' batch times (the recorded members' own draws cannot be
    reproduced, so one simulated draw against one recorded run compares two dice)."""
    config = config or bench_config(run.meta, **overrides)
    draws = draws if config.processing().busy or config.latency_ms("heartbeat_lag_ms") > 0 else 1
    rows = []
    for draw in range(draws):
        result = simulate_bench(run, config, draw=draw)
        rows.append(bench_metrics(result.events, result.triggers, result.end, _partitions(run.meta)))
    if len(rows) == 1:
        return rows[0]
    return BenchMetrics(
        unowned_ps=statistics.median(r.unowned_ps for r in rows),
        settle_s=statistics.median(r.settle_s for r in rows),
        moved=statistics.median_low(r.moved for r in rows),
        step_settle_s=statistics.median(r.step_settle_s for r in rows),
    )


# -- comparing cells -------------------------------------------------------------------------------------


@dataclass
class CellComparison:
    """One cell's medians, recorded and simulated, over the runs compared."""

    cell: tuple[str, str, str]
    recorded: dict[str, float]
    simulated: dict[str, float]
    per_run: list[tuple[str, BenchMetrics, BenchMetrics]] = field(default_factory=list)

    def rel_err(self, metric: str) -> float:
        """(simulated - recorded) / recorded, of the medians (0 when both are 0)."""
        r, s = self.recorded[metric], self.simulated[metric]
        if r == 0:
            return 0.0 if s == 0 else math.inf
        return (s - r) / r

    def passes(self, metric: str, bound: float = 0.25) -> bool:
        """Within ``bound`` of the recorded median (``moved``: equal)."""
        return agrees(metric, self.recorded[metric], self.simulated[metric], bound)


def compare_cells(
    runs: Iterable[BenchRun],
    configure: Callable[[BenchRun], SimConfig] | None = None,
    *,
    draws: int = DRAWS,
    reuse: Iterable[CellComparison] = (),
) -> list[CellComparison]:
    """Median recorded vs median simulated per cell; ``configure`` builds each run's config
    (default :func:`~kassign.sim.bench_meta.bench_config`), ``draws`` as :func:`simulated_bench_metrics`.
    A row of ``reuse`` (compared with the same ``configure`` and ``draws``) over exactly a cell's runs
    is taken as it is instead of simulating them again."""
    grouped: dict[tuple[str, str, str], list[BenchRun]] = defaultdict(list)
    for run in runs:
        grouped[run.cell].append(run)
    known = {(row.cell, frozenset(name for name, _, _ in row.per_run)): row for row in reuse}
    out = []
    for cell in sorted(grouped):
        row = known.get((cell, frozenset(run.name for run in grouped[cell])))
        if row is not None:
            out.append(row)
            continue
        per_run = [
            (
                run.name,
                recorded_bench_metrics(run),
                simulated_bench_metrics(run, configure(run) if configure else None, draws=draws),
            )
            for run in grouped[cell]
        ]
        out.append(
            CellComparison(
                cell,
                {m: statistics.median(getattr(rec, m) for _, rec, _ in per_run) for m in ALL_METRICS},
                {m: statistics.median(getattr(sim, m) for _, _, sim in per_run) for m in ALL_METRICS},
                per_run,
            )
        )
    return out


def format_cells(rows: Sequence[CellComparison], bound: float = 0.25) -> str:
    """A markdown table: per cell the recorded and simulated medians, errors and pass marks."""
    lines = [
        "| profile | scenario | mode | unowned ps rec | sim | err | settle s rec | sim | err | "
        "per-restart settle s rec | sim | moved rec | sim | unowned, settle, moved |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        rec, sim = row.recorded, row.simulated
        marks = " ".join("pass" if row.passes(m, bound) else "FAIL" for m in BENCH_METRICS)
        lines.append(
            f"| {' | '.join(row.cell)} | {rec['unowned_ps']:.2f} | {sim['unowned_ps']:.2f} | "
            f"{row.rel_err('unowned_ps'):+.0%} | {rec['settle_s']:.2f} | {sim['settle_s']:.2f} | "
            f"{row.rel_err('settle_s'):+.0%} | {rec['step_settle_s']:.2f} | {sim['step_settle_s']:.2f} | "
            f"{rec['moved']:g} | {sim['moved']:g} | {marks} |"
        )
    return "\n".join(lines)


def summary(rows: Sequence[CellComparison], bound: float = 0.25) -> dict[str, Any]:
    """Per metric: cells passing, cells compared, and the worst relative error with its cell."""
    out: dict[str, Any] = {}
    for metric in BENCH_METRICS:
        worst = max(rows, key=lambda r: abs(r.rel_err(metric)))
        out[metric] = {
            "passing": sum(r.passes(metric, bound) for r in rows),
            "cells": len(rows),
            "worst": {"cell": "/".join(worst.cell), "rel_err": round(worst.rel_err(metric), 3)},
        }
    return out


def agrees(metric: str, recorded: float, other: float, bound: float = 0.25) -> bool:
    """Whether ``other`` is within ``bound`` of ``recorded`` (``moved``: equal), as :meth:`CellComparison.passes`."""
    if metric == "moved":
        return recorded == other
    if recorded == 0:
        return other == 0
    return abs(other - recorded) / recorded <= bound


def reproducible_cells(
    runs: Iterable[BenchRun],
    bound: float = 0.25,
    *,
    reference: Iterable[int] = FITTED_REPS,
    check: Iterable[int] = HELD_OUT_REPS,
) -> dict[str, set[tuple[str, str, str]]]:
    """Per metric, the cells whose recorded median over the ``check`` repetitions is within ``bound``
    of their median over the ``reference`` ones (``moved``: equal): where real Kafka reproduces
    itself from one set of runs to another as closely as the simulator is asked to (by default the
    fitted set's medians taken as the prediction of the held-out ones)."""
    reference, check = set(reference), set(check)
    grouped: dict[tuple[str, str, str], dict[bool, list[BenchMetrics]]] = defaultdict(lambda: {True: [], False: []})
    for run in runs:
        if run.rep in reference or run.rep in check:
            grouped[run.cell][run.rep in check].append(recorded_bench_metrics(run))
    out: dict[str, set[tuple[str, str, str]]] = {metric: set() for metric in BENCH_METRICS}
    for cell, sets in grouped.items():
        if not sets[True] or not sets[False]:
            continue
        for metric in BENCH_METRICS:
            ref, held = (statistics.median(getattr(m, metric) for m in sets[side]) for side in (False, True))
            if agrees(metric, ref, held, bound):
                out[metric].add(cell)
    return out


def _reps(reps: Sequence[int]) -> str:
    return f"r{min(reps)}-r{max(reps)}"


def held_out_yardsticks(
    runs: Sequence[BenchRun], bound: float = 0.25
) -> tuple[dict[str, set[tuple[str, str, str]]], dict[str, set[tuple[str, str, str]]]]:
    """:func:`reproducible_cells` with each cell's own held-out set (:data:`HELD_OUT_BY_CLIENT`): the
    fit set's medians against it, and its first half against its second half."""
    itself: dict[str, set[tuple[str, str, str]]] = {metric: set() for metric in BENCH_METRICS}
    halves: dict[str, set[tuple[str, str, str]]] = {metric: set() for metric in BENCH_METRICS}
    for reps in sorted(set(HELD_OUT_BY_CLIENT.values())):
        mine = [r for r in runs if HELD_OUT_BY_CLIENT[bench_client(r.meta)] == reps]
        half = len(reps) // 2
        for metric, cells in reproducible_cells(mine, bound, check=reps).items():
            itself[metric] |= cells
        for metric, cells in reproducible_cells(mine, bound, reference=reps[:half], check=reps[half:]).items():
            halves[metric] |= cells
    return itself, halves


def report(root: Path = BENCH_RECORDINGS) -> str:
    """The calibration report (markdown): the presets; each cell's held-out repetitions
    (:func:`is_held_out`) recorded vs simulated, beside how well the recordings predict themselves;
    then r11-r20 of every cell, the loaded check (:data:`LOADED_REPS`) and the fitted set
    (:data:`FITTED_REPS`)."""
    runs = load_bench_runs(root)
    held_out = compare_cells(r for r in runs if is_held_out(r))
    quiet = compare_cells((r for r in runs if r.rep in HELD_OUT_REPS), reuse=held_out)
    loaded = compare_cells(r for r in runs if r.rep in LOADED_REPS)
    fitted = compare_cells(r for r in runs if r.rep in FITTED_REPS)
    fit, load, quiet_reps, recheck = (_reps(r) for r in (FITTED_REPS, LOADED_REPS, HELD_OUT_REPS, RECHECK_REPS))
    held = f"{recheck} (aiokafka modes) / {quiet_reps} (Java, librdkafka)"
    lines = [
        "# The simulator against the Kafka 4.4.0 benchmark recordings",
        "",
        "Written by `python -m kassign.sim.calibration --report FILE` from `data/rebalance-bench-kafka44` "
        "(see its README); medians per cell, recorded vs simulated (each recorded run with processing "
        f"simulated with {DRAWS} seeds of the batch times, their median taken). A metric passes within 25 % "
        "of the recorded median; `moved` must be equal. `per-restart settle` is the mean settle of a rolling "
        "restart's six restarts (its `settle s` is mostly the harness's schedule between them).",
        "",
        "Client latencies (`KAFKA44_PRESETS`, ms; `spawn_ms` measured on the recordings, aiokafka's "
        f"`startup_ms` measured on a live broker (`benchmarks/aiokafka_startup.py`), the others fitted on {fit}):",
        "",
    ]
    lines += [
        f"- {client}: " + ", ".join(f"{k} {v:g}" for k, v in values.items())
        for client, values in KAFKA44_PRESETS.items()
    ]
    by_cell = {row.cell: row for row in held_out}
    itself, halves = held_out_yardsticks(runs)
    lines += [
        "",
        f"## Held out: {held}, against the recordings themselves",
        "",
        f"Each cell is judged on the runs recorded after the last model change that touches it, ten per cell "
        f"on a quiet machine: {recheck} for the four aiokafka modes (recorded after aiokafka's start-up delay "
        f"was measured), {quiet_reps} for Java and librdkafka. Beside the simulator, two yardsticks made of real "
        f"runs alone: the fitted set's own medians ({fit}) taken as the prediction of the held-out ones (what a "
        "model that reproduced the fit set exactly would score), and each held-out set's first five runs "
        "against its last five. Where the fit set's medians miss, no prediction fitted on them is owed.",
        "",
        "| metric | simulator within bound of the held-out runs | "
        f"{fit}'s medians within bound of them | first five within bound of last five | "
        f"simulator, where {fit} reproduces the held-out runs | simulator misses there |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for metric in BENCH_METRICS:
        inside = sorted(itself[metric])
        misses = ", ".join("/".join(c) for c in inside if not by_cell[c].passes(metric)) or "none"
        lines.append(
            f"| {metric} | {sum(r.passes(metric) for r in held_out)} / {len(held_out)} | "
            f"{len(inside)} / {len(by_cell)} | {len(halves[metric])} / {len(by_cell)} | "
            f"{sum(by_cell[c].passes(metric) for c in inside)} / {len(inside)} | {misses} |"
        )
    for title, rows in (
        (f"Held out: repetitions {held}", held_out),
        (
            f"Repetitions {quiet_reps} of every cell (quiet machine; seen before aiokafka's "
            "start-up delay was measured)",
            quiet,
        ),
        (f"Held out, loaded: repetitions {load} (beside a simulator fit)", loaded),
        (f"Fitted on: repetitions {fit}", fitted),
    ):
        totals = summary(rows)
        lines += [
            "",
            f"## {title}",
            "",
            "; ".join(
                f"{m}: {t['passing']}/{t['cells']} cells pass (worst {t['worst']['cell']}, "
                f"{t['worst']['rel_err']:+.0%})"
                for m, t in totals.items()
            ),
            "",
            format_cells(rows),
        ]
    return "\n".join(lines) + "\n"
