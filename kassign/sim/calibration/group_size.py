"""The simulator against ``benchmarks/group_size.py``'s recordings: groups of 6, 24 and 96 members (issue 28).

Each recorded run (``n<members>-<profile>-<scenario>-<mode>-r<k>``) is replayed through the benchmark's
harness (:mod:`kassign.sim.calibration.harness`, which reads the group's size, change, topics and
restart sample from meta.json) under the presets as they are -- fitted on the original benchmark's
groups of 6, never on these -- and measured the benchmark's way on both sides: unowned
partition-seconds, settle time, rounds and partitions moved. :func:`compare_group_sizes` sets the mean
and the median over a cell's runs of each, recorded against simulated, beside how well the recordings
reproduce themselves (:meth:`GroupSizeCell.reproducible`: runs repeated at the same trigger phase agree
within 25 %): a prediction within 25 % of a cell whose own repetitions disagree further is not owed.
``python -m kassign.sim.calibration --recordings DIR [--report FILE]`` prints or writes the comparison.

What grows with the group is CPU contention (:mod:`kassign.sim.contention`): every member was a Python
process of its own on the recording machine's :data:`RECORDING_CORES` cores, beside the broker. Its two
parameters are measured on the recordings' groups of :data:`MEASURED_AT_MEMBERS` only
(:func:`measured_contention`), never on the larger ones, and the comparison runs with them
(``contention=False``: without, the presets alone). A third, the core time of a revocation's commit
round trip (:func:`measured_revocation_commit_ms`), is measured there too and used unless
``revocation_commit=False``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kassign.sim.bench_meta import BENCH_MODES, bench_config, mode_of
from kassign.sim.calibration.benchmark import (
    DRAWS,
    BenchRun,
    _partitions,
    bench_metrics,
    load_bench_runs,
    simulate_bench,
)
from kassign.sim.calibration.fit import leaving_after, measured_heartbeat_lag_ms
from kassign.sim.calibration.harness import bench_topics
from kassign.sim.config import SimConfig, kafka44_presets
from kassign.sim.contention import BROKER_PROCESSES, mean_wait
from kassign.timeline.events import Event
from kassign.timeline.metrics import count_generations

__all__ = [
    "GROUP_SIZE_METRICS",
    "BOUND",
    "EXTRA_MODES",
    "group_size_mode",
    "group_size_config",
    "RECORDING_CORES",
    "MEASURED_AT_MEMBERS",
    "MeasuredContention",
    "measured_contention",
    "measured_member_cpu_ms",
    "measured_revocation_commit_ms",
    "contention_configure",
    "revocation_spread_ms",
    "GroupSizeRow",
    "GroupSizeCell",
    "bench_rounds",
    "recorded_row",
    "simulated_row",
    "compare_group_sizes",
    "format_group_sizes",
    "group_size_misses",
    "group_size_report",
    "selected_runs",
]

#: Compared per cell, each as the mean and the median over the cell's runs.
GROUP_SIZE_METRICS = ("unowned_ps", "settle_s", "rounds", "moved")
STATS = ("mean", "median")
#: A prediction passes within this fraction of the recorded statistic (every metric, ``moved`` and
#: ``rounds`` too: at 96 members hundreds of partitions move, and equality would be noise).
BOUND = 0.25
#: ``benchmarks/rebalance.py`` modes that :data:`~kassign.sim.bench_meta.MODE_NAMES` does not name yet:
#: mode -> (its short name, the mode it is simulated as); the differences come from meta.json keys
#: (:func:`group_size_config`).
EXTRA_MODES = {"consumer+interval-0": ("kip848-i0", "consumer")}


#: The cores of the machine ``benchmarks/group_size.py`` recorded on (``nproc``): its members' processes
#: and the broker shared them.
RECORDING_CORES = 2
#: The group size contention is measured at: the presets' (fitted on groups of 6).
MEASURED_AT_MEMBERS = 6


def group_size_mode(meta: Mapping[str, Any]) -> str:
    """A run's mode, short name (``fast``, ``kip848-i0``...)."""
    mode = str(meta.get("mode", ""))
    return EXTRA_MODES[mode][0] if mode in EXTRA_MODES else mode_of(meta)


def group_size_config(meta: Mapping[str, Any], **overrides: Any) -> SimConfig:
    """:func:`~kassign.sim.bench_meta.bench_config` of a run, :data:`EXTRA_MODES` as the mode they are
    simulated as, and a KIP-848 group's ``assignment_interval_ms`` (the broker's
    ``consumer.assignment.interval.ms``) from meta.json when the run set it."""
    mode = str(meta.get("mode", ""))
    base = {**meta, "mode": EXTRA_MODES[mode][1]} if mode in EXTRA_MODES else meta
    interval = meta.get("assignment_interval_ms")
    if interval is not None and BENCH_MODES[mode_of(base)].group_protocol == "consumer":
        overrides = {"assignment_interval_ms": float(interval), **overrides}
    return bench_config(base, **overrides)


@dataclass(frozen=True)
class MeasuredContention:
    """CPU contention's parameters as measured on groups of :data:`MEASURED_AT_MEMBERS`
    (:func:`measured_contention`): ``cores``, ``member_cpu_ms`` (a member's core time per reaction),
    ``heartbeat_lag_ms`` (the lateness per heartbeat interval measured there) and ``cpu_wait_ms`` (that
    lateness per process beyond the cores, per core), from ``runs`` recorded runs; ``revocation_commit_ms``
    (a revocation's commit round trip's core time, :func:`measured_revocation_commit_ms`; None: not
    used, revocations take the preset's ``revocation_ms``)."""

    cores: int
    member_cpu_ms: float
    heartbeat_lag_ms: float
    cpu_wait_ms: float
    runs: int
    revocation_commit_ms: float | None = None

    def settings(self) -> dict[str, Any]:
        """The :class:`SimConfig` settings that turn contention on."""
        out: dict[str, Any] = {
            "cpu_cores": self.cores,
            "cpu_wait_ms": self.cpu_wait_ms,
            "member_cpu_ms": self.member_cpu_ms,
        }
        if self.revocation_commit_ms is not None:
            out["revocation_commit_ms"] = self.revocation_commit_ms
        return out


def _measured_size(run: BenchRun) -> bool:
    return int(run.meta.get("members", 6)) == MEASURED_AT_MEMBERS


def measured_member_cpu_ms(runs: Iterable[BenchRun], cores: int = RECORDING_CORES) -> float:
    """A member's core time per reaction to a broker's answer, from the scale-ins of eager and fast
    among ``runs``: the broker answers every SyncGroup of a round at once, and the members' assign
    callbacks follow one another ``member_cpu_ms / cores`` apart; the median over rounds (every
    survivor called back) of (last - first) / (survivors - 1), times ``cores`` (ms)."""
    spacings: list[float] = []
    for run in runs:
        if run.meta.get("scenario") != "scale-in" or group_size_mode(run.meta) not in ("eager", "fast"):
            continue
        trigger = float(run.meta["triggers"][0])
        events = run.events()
        survivors = {e.id for e in events if e.ev == "subscribed"} - leaving_after(events, trigger)
        by_generation: dict[Any, list[float]] = defaultdict(list)
        for e in events:
            if e.ev == "cb_assigned" and e.t >= trigger and e.id in survivors and e.extra.get("gen") is not None:
                by_generation[e.extra["gen"]].append(e.t)
        for times in by_generation.values():
            if len(times) == len(survivors) > 1:
                spacings.append((max(times) - min(times)) / (len(times) - 1))
    if not spacings:
        raise ValueError("no eager or fast scale-in among the runs to measure a member's core time on")
    return round(statistics.median(spacings) * cores * 1000, 2)


def measured_revocation_commit_ms(runs: Iterable[BenchRun], wait_ms: float) -> float:
    """The core time of a revocation's commit round trip, from the eager scale-ins and scale-outs among
    ``runs``: each survivor's revocation callback (``cb_revoked`` to ``cb_revoked_done``, one OffsetCommit
    answered) is a wake-up wait and that core time; the median over the callbacks, less ``wait_ms``
    (the mean wake-up wait in those runs), in ms (at least 0). The median, because a callback that
    also waited for the member's periodic commit in flight takes two round trips (the model has those
    separately)."""
    durations: list[float] = []
    for run in runs:
        if run.meta.get("scenario") not in ("scale-in", "scale-out") or group_size_mode(run.meta) != "eager":
            continue
        trigger = float(run.meta["triggers"][0])
        events = run.events()
        leaving = leaving_after(events, trigger)
        began: dict[str, float] = {}
        for e in events:
            if e.t < trigger or e.id in leaving:
                continue
            if e.ev == "cb_revoked" and e.parts:
                began[e.id] = e.t
            elif e.ev == "cb_revoked_done" and e.id in began:
                durations.append(e.t - began.pop(e.id))
    if not durations:
        raise ValueError("no eager scale-in or scale-out revocations among the runs to measure a commit on")
    return round(max(0.0, statistics.median(durations) * 1000 - wait_ms), 2)


def measured_contention(
    runs: Iterable[BenchRun], cores: int = RECORDING_CORES, *, revocation_commit: bool = True
) -> MeasuredContention:
    """CPU contention's parameters, measured on the groups of :data:`MEASURED_AT_MEMBERS` among ``runs``
    (the others are not looked at): ``member_cpu_ms`` by :func:`measured_member_cpu_ms`; the heartbeats'
    lateness per interval of the eager survivors of a scale-in or scale-out
    (:func:`~kassign.sim.calibration.fit.measured_heartbeat_lag_ms`, their reaction being two network
    trips, the poll loop's latency and a reaction's core time), which with ``P`` processes (the members
    and the broker) on ``cores`` cores is ``cpu_wait_ms * (P - cores) / cores``; with
    ``revocation_commit``, a revocation's commit by :func:`measured_revocation_commit_ms` (less that
    lateness, the mean wake-up wait there)."""
    mine = [r for r in runs if _measured_size(r)]
    if not mine:
        raise ValueError(f"no groups of {MEASURED_AT_MEMBERS} members among the runs to measure contention on")
    work_ms = measured_member_cpu_ms(mine, cores)
    latency = kafka44_presets("aiokafka")
    reaction_ms = 2 * latency["network_ms"] + latency["poll_ms"] + work_ms
    lag_ms = max(0.0, measured_heartbeat_lag_ms(mine, reaction_ms, scenarios=("scale-in", "scale-out", "crash")))
    beyond = max(1, MEASURED_AT_MEMBERS + BROKER_PROCESSES - cores) / cores
    wait_ms = round(lag_ms / beyond, 3)
    commit_ms: float | None = None
    if revocation_commit:
        try:
            commit_ms = measured_revocation_commit_ms(
                mine, mean_wait(wait_ms, MEASURED_AT_MEMBERS + BROKER_PROCESSES, cores)
            )
        except ValueError:
            commit_ms = None  # no eager revocations there: revocations keep the preset's revocation_ms
    return MeasuredContention(cores, work_ms, lag_ms, wait_ms, len(mine), commit_ms)


def revocation_spread_ms(events: Iterable[Event], trigger: float) -> float | None:
    """From the first to the last survivor's first revocation after ``trigger`` (ms): how far apart
    the members that stay heard of the change (members that close or crash are not survivors; None
    with fewer than two survivors revoking)."""
    timeline = sorted(events, key=lambda e: e.t)
    leaving = leaving_after(timeline, trigger)
    first: dict[str, float] = {}
    for e in timeline:
        if e.ev == "cb_revoked" and e.t >= trigger and e.id not in leaving:
            first.setdefault(e.id, e.t)
    if len(first) < 2:
        return None
    return round((max(first.values()) - min(first.values())) * 1000, 3)


@dataclass(frozen=True)
class GroupSizeRow:
    """One timeline's row: ``benchmarks/rebalance.py``'s ``unowned_ps``, ``settle_s``, ``rounds``
    (generations members received assignments in after the trigger) and ``moved``."""

    unowned_ps: float
    settle_s: float
    rounds: int
    moved: int


def bench_rounds(events: Iterable[Event], start: float, end: float) -> int:
    """The benchmark's rounds (``count_generations`` of the events from the first trigger ``start`` to
    ``end``, generations seen before it not counted). The simulator's classic members stamp their
    generation on ``sync``, not on the assign callback that follows it, so a callback without one
    takes its member's last ``sync``'s (real members and KIP-848's stamp theirs)."""
    last_sync: dict[str, Any] = {}
    stamped: list[Event] = []
    for e in sorted(events, key=lambda e: e.t):
        if e.ev == "sync" and e.extra.get("gen") is not None:
            last_sync[e.id] = e.extra["gen"]
        elif e.ev == "cb_assigned":
            if e.extra.get("gen") is None and e.id in last_sync:
                e = Event(e.id, e.t, e.ev, e.parts, {**e.extra, "gen": last_sync[e.id]})
            stamped.append(e)
    return count_generations([e for e in stamped if start <= e.t < end], earlier=[e for e in stamped if e.t < start])


def _row(events: Sequence[Event], triggers: Sequence[float], end: float, run: BenchRun) -> GroupSizeRow:
    metrics = bench_metrics(events, triggers, end, _partitions(run.meta))
    return GroupSizeRow(metrics.unowned_ps, metrics.settle_s, bench_rounds(events, triggers[0], end), metrics.moved)


def recorded_row(run: BenchRun) -> GroupSizeRow:
    """The recorded run's row, recomputed from its events (its meta.json ``result``'s numbers)."""
    return _row(run.events(), run.meta["triggers"], float(run.meta["end"]), run)


def simulated_row(run: BenchRun, config: SimConfig | None = None, *, draws: int = DRAWS) -> GroupSizeRow:
    """The simulated run's row: with per-batch processing or heartbeat lateness (which draw random
    batch times or jitter), the median over ``draws`` seeds, as
    :func:`~kassign.sim.calibration.benchmark.simulated_bench_metrics` does."""
    config = config or group_size_config(run.meta)
    random_draws = config.processing().busy or config.latency_ms("heartbeat_lag_ms") > 0 or config.cpu_cores is not None
    draws = draws if random_draws else 1
    rows = []
    for draw in range(draws):
        result = simulate_bench(run, config, draw=draw)
        rows.append(_row(result.events, result.triggers, result.end, run))
    if len(rows) == 1:
        return rows[0]
    return GroupSizeRow(
        unowned_ps=statistics.median(r.unowned_ps for r in rows),
        settle_s=statistics.median(r.settle_s for r in rows),
        rounds=statistics.median_low(r.rounds for r in rows),
        moved=statistics.median_low(r.moved for r in rows),
    )


def _within(recorded: float, other: float, bound: float) -> bool:
    if recorded == 0:
        return other == 0
    return abs(other - recorded) / abs(recorded) <= bound


@dataclass
class GroupSizeCell:
    """One cell (members, profile, scenario, mode): each metric's values over its runs, recorded and
    simulated (the same runs, in the same order), and each run's trigger phase."""

    cell: tuple[int, str, str, str]
    partitions: int
    runs: list[str] = field(default_factory=list)
    phases: list[float] = field(default_factory=list)
    recorded: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    simulated: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def stat(self, side: str, metric: str, how: str) -> float:
        """The ``mean`` or ``median`` of ``metric`` over the runs, ``side`` ``recorded`` or ``simulated``."""
        values = (self.recorded if side == "recorded" else self.simulated)[metric]
        return statistics.fmean(values) if how == "mean" else float(statistics.median(values))

    def rel_err(self, metric: str, how: str) -> float:
        """(simulated - recorded) / recorded of the statistic (0 when both are 0)."""
        r, s = self.stat("recorded", metric, how), self.stat("simulated", metric, how)
        if r == 0:
            return 0.0 if s == 0 else math.inf
        return (s - r) / r

    def predicted(self, metric: str, how: str, bound: float = BOUND) -> bool:
        """Whether the simulated statistic is within ``bound`` of the recorded one."""
        return _within(self.stat("recorded", metric, how), self.stat("simulated", metric, how), bound)

    def spread(self, metric: str) -> tuple[float, bool] | None:
        """How far runs that should agree disagree, as max / min (1 when equal, inf when one is 0 and
        another not), and whether that is over runs at the same trigger phase (True) or, no phase having
        been recorded twice, over all the runs (False); None with fewer than two runs.

        The benchmark sweeps the trigger's phase in the heartbeat interval (1/6, 1/2, 5/6 in turn), and
        the settle time follows it by design (up to a heartbeat interval of waiting): only runs at the
        same phase are repetitions of one another."""
        values = self.recorded[metric]
        by_phase: dict[float, list[float]] = defaultdict(list)
        for phase, value in zip(self.phases, values):
            by_phase[round(phase, 3)].append(value)
        repeated = [vs for vs in by_phase.values() if len(vs) > 1]
        if repeated:
            return max(_ratio(vs) for vs in repeated), True
        return (_ratio(values), False) if len(values) > 1 else None

    def reproducible(self, metric: str, bound: float = BOUND) -> bool | None:
        """Whether the recordings reproduce themselves within ``bound``: at every trigger phase recorded
        more than once, the runs are within ``bound`` of one another (max / min at most ``1 + bound``).
        With no phase repeated, True if all the runs are (phase or not), else None: nothing says."""
        spread = self.spread(metric)
        if spread is None:
            return None
        ratio, same_phase = spread
        if ratio <= 1 + bound:
            return True
        return False if same_phase else None


def _ratio(values: Sequence[float]) -> float:
    """max / min of ``values`` (1 when all are equal; inf when the smallest is 0 and the largest not)."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return 1.0
    return math.inf if lo <= 0 else hi / lo


def compare_group_sizes(
    runs: Iterable[BenchRun],
    configure: Callable[[BenchRun], SimConfig] | None = None,
    *,
    draws: int = DRAWS,
    progress: Callable[[str], None] | None = None,
) -> list[GroupSizeCell]:
    """Every run recorded and simulated (each under ``configure(run)``, default its
    :func:`group_size_config`), grouped by cell; ``progress(name)`` after each run."""
    cells: dict[tuple[int, str, str, str], GroupSizeCell] = {}
    for run in sorted(runs, key=lambda r: r.name):
        key = (
            int(run.meta.get("members", 6)),
            str(run.meta["profile"]),
            str(run.meta["scenario"]),
            group_size_mode(run.meta),
        )
        cell = cells.setdefault(key, GroupSizeCell(key, sum(bench_topics(run.meta).values())))
        rec = recorded_row(run)
        sim = simulated_row(run, configure(run) if configure else None, draws=draws)
        cell.runs.append(run.name)
        cell.phases.append(float(run.meta["phase"]))
        for metric in GROUP_SIZE_METRICS:
            cell.recorded[metric].append(getattr(rec, metric))
            cell.simulated[metric].append(getattr(sim, metric))
        if progress is not None:
            progress(run.name)
    return [cells[k] for k in sorted(cells, key=_cell_order)]


_SCENARIO_ORDER = ("scale-out", "scale-in", "crash", "rolling-restart")
_MODE_ORDER = ("eager", "coop", "fast", "static", "kip848", "kip848-i0", "java", "rdkafka", "java848", "rdkafka848")


def _cell_order(key: tuple[int, str, str, str]) -> tuple[Any, ...]:
    members, profile, scenario, mode = key
    return (
        members,
        profile,
        _SCENARIO_ORDER.index(scenario) if scenario in _SCENARIO_ORDER else 99,
        _MODE_ORDER.index(mode) if mode in _MODE_ORDER else 99,
        mode,
    )


def _num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _spread(row: GroupSizeCell, metric: str) -> str:
    """The recorded max / min, ``(all)`` when no phase was recorded twice."""
    spread = row.spread(metric)
    if spread is None:
        return "–"
    ratio, same_phase = spread
    return ("inf" if math.isinf(ratio) else f"{ratio:.2f}") + ("" if same_phase else " (all)")


def _err(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:+.0%}"


def _verdict(row: GroupSizeCell, metric: str, bound: float) -> str:
    """``mean/median`` pass marks and whether the recordings reproduce themselves."""
    marks = "/".join("ok" if row.predicted(metric, how, bound) else "MISS" for how in STATS)
    repro = row.reproducible(metric, bound)
    return f"{marks} ({'?' if repro is None else 'reproduces' if repro else 'does not'})"


def format_group_sizes(rows: Sequence[GroupSizeCell], bound: float = BOUND) -> str:
    """Markdown: one table per metric, per cell the recorded and simulated mean and median, their
    errors, the recordings' spread and the verdict."""
    out: list[str] = []
    for metric in GROUP_SIZE_METRICS:
        out += [
            f"### {metric}",
            "",
            "| members | partitions | profile | scenario | mode | runs | rec mean | sim mean | err | rec median "
            "| sim median | err | recorded max/min (same phase) | mean/median within 25 % (recordings) |",
            "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in rows:
            members, profile, scenario, mode = row.cell
            shown = _spread(row, metric)
            out.append(
                f"| {members} | {row.partitions} | {profile} | {scenario} | {mode} | {len(row.runs)} | "
                f"{_num(row.stat('recorded', metric, 'mean'))} | {_num(row.stat('simulated', metric, 'mean'))} | "
                f"{_err(row.rel_err(metric, 'mean'))} | {_num(row.stat('recorded', metric, 'median'))} | "
                f"{_num(row.stat('simulated', metric, 'median'))} | {_err(row.rel_err(metric, 'median'))} | "
                f"{shown} | {_verdict(row, metric, bound)} |"
            )
        out.append("")
    return "\n".join(out)


def group_size_misses(
    rows: Sequence[GroupSizeCell], bound: float = BOUND
) -> tuple[list[tuple[GroupSizeCell, str, str]], list[tuple[GroupSizeCell, str, str]]]:
    """(cell, metric, statistic) the simulator misses by more than ``bound``: first where the cell's
    recordings reproduce themselves (the misses that count), then where they do not or cannot tell."""
    owed: list[tuple[GroupSizeCell, str, str]] = []
    excused: list[tuple[GroupSizeCell, str, str]] = []
    for row in rows:
        for metric in GROUP_SIZE_METRICS:
            for how in STATS:
                if not row.predicted(metric, how, bound):
                    (owed if row.reproducible(metric, bound) else excused).append((row, metric, how))
    return owed, excused


def _name(row: GroupSizeCell) -> str:
    members, profile, scenario, mode = row.cell
    return f"{members} {profile} {scenario} {mode}"


def format_summary(rows: Sequence[GroupSizeCell], bound: float = BOUND) -> str:
    """Per group size and metric: cells whose median (and mean) the simulator predicts within ``bound``,
    cells whose recordings reproduce themselves, and the prediction's score on those."""
    lines = [
        "| members | metric | cells | median within 25 % | mean within 25 % | recordings reproduce themselves "
        "| median within 25 % there | mean within 25 % there |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for members in sorted({row.cell[0] for row in rows}):
        mine = [row for row in rows if row.cell[0] == members]
        for metric in GROUP_SIZE_METRICS:
            repro = [row for row in mine if row.reproducible(metric, bound)]
            lines.append(
                f"| {members} | {metric} | {len(mine)} | "
                f"{sum(r.predicted(metric, 'median', bound) for r in mine)} | "
                f"{sum(r.predicted(metric, 'mean', bound) for r in mine)} | {len(repro)} | "
                f"{sum(r.predicted(metric, 'median', bound) for r in repro)} / {len(repro)} | "
                f"{sum(r.predicted(metric, 'mean', bound) for r in repro)} / {len(repro)} |"
            )
    return "\n".join(lines)


def _miss_line(row: GroupSizeCell, metric: str, how: str) -> str:
    scatter = f"recorded max/min {_spread(row, metric)}"
    return (
        f"- {_name(row)}, {metric} {how}: recorded {_num(row.stat('recorded', metric, how))}, simulated "
        f"{_num(row.stat('simulated', metric, how))} ({_err(row.rel_err(metric, how))}; {scatter})"
    )


def contention_configure(
    all_runs: Sequence[BenchRun], *, revocation_commit: bool = True
) -> tuple[MeasuredContention | None, Callable[[BenchRun], SimConfig] | None, str]:
    """Contention measured on the groups of :data:`MEASURED_AT_MEMBERS` among ``all_runs`` (with the
    revocation's commit unless ``revocation_commit`` is False), the ``configure`` that simulates each run
    with it (:func:`group_size_config` plus its settings), and why not when it cannot be measured there
    (then ``None, None, reason``: the presets alone)."""
    try:
        measured = measured_contention(all_runs, revocation_commit=revocation_commit)
    except ValueError as exc:
        return None, None, str(exc)
    settings = measured.settings()
    return measured, lambda run: group_size_config(run.meta, **settings), ""


def selected_runs(
    every: Iterable[BenchRun], members: Iterable[int] | None = None, names: Iterable[str] | None = None
) -> list[BenchRun]:
    """The runs of ``every`` in groups of ``members`` (None: any size) whose name contains one of
    ``names`` (None: any), e.g. ``n96-instant-scale-out-eager``."""
    sizes = None if members is None else set(members)
    parts = None if names is None else [n for n in names if n]
    return [
        r
        for r in every
        if (sizes is None or int(r.meta.get("members", 6)) in sizes)
        and (parts is None or any(part in r.name for part in parts))
    ]


def group_size_report(
    root: str | Path,
    *,
    members: Iterable[int] | None = None,
    title: str = "",
    contention: bool = True,
    names: Iterable[str] | None = None,
    revocation_commit: bool = True,
) -> str:
    """The markdown report of every run under ``root`` (``members``, ``names``: only those runs,
    :func:`selected_runs`), with CPU contention measured on its groups of :data:`MEASURED_AT_MEMBERS`
    (``contention=False``: without; ``revocation_commit=False``: without the revocation's commit)."""
    every = load_bench_runs(root)
    runs = selected_runs(every, members, names)
    if not runs:
        raise ValueError(f"no recorded runs under {root} selected")
    measured: MeasuredContention | None = None
    configure: Callable[[BenchRun], SimConfig] | None = None
    why_not = "not asked for"
    if contention:
        measured, configure, why_not = contention_configure(every, revocation_commit=revocation_commit)
    rows = compare_group_sizes(runs, configure)
    owed, excused = group_size_misses(rows)
    model = (
        f"CPU contention off ({why_not}): the presets' constant latencies alone."
        if measured is None
        else (
            f"CPU contention on (`kassign.sim.contention`): the members' processes and the broker share "
            f"{measured.cores} cores (`cpu_cores`); a member's reaction to a broker's answer takes "
            f"`member_cpu_ms` {measured.member_cpu_ms:g} ms of a core, first come first served, and every "
            f"wake-up (a heartbeat timer, a broker's answer) waits for a core, on average `cpu_wait_ms` "
            f"{measured.cpu_wait_ms:g} ms per process beyond the cores, per core (exponential draws; a heartbeat's "
            f"wait carries over to the next, so timers drift apart). Both measured on the "
            f"{measured.runs} runs of {MEASURED_AT_MEMBERS} members only (`measured_contention`: the spacing of "
            f"the survivors' assign callbacks after one SyncGroup, and the heartbeats' lateness, "
            f"{measured.heartbeat_lag_ms:g} ms per interval there); so a wake-up waits "
            + ", ".join(
                f"{mean_wait(measured.cpu_wait_ms, n + BROKER_PROCESSES, measured.cores):.3g} ms at {n} members"
                for n in sorted({int(r.meta.get("members", 6)) for r in runs})
            )
            + " on average. "
            + (
                "Revocation callbacks take the preset's `revocation_ms`."
                if measured.revocation_commit_ms is None
                else (
                    "A revocation callback commits (`revocation_commit_ms`): it waits for the member's periodic "
                    "commit in flight (a cooperative survivor's, sent after its JoinGroup was answered, waits "
                    "behind its SyncGroup and is answered after the round), then for its own, each answer a "
                    "wake-up and "
                    f"{measured.revocation_commit_ms:g} ms of a core, first come first served (measured on the "
                    f"eager revocations of {MEASURED_AT_MEMBERS} members: their median less the mean wait there)."
                )
            )
            + f" Each run is simulated with {DRAWS} seeds and the median taken."
        )
    )
    lines = [
        f"# {title or 'The simulator against the group-size benchmark recordings'}",
        "",
        f"Written by `python -m kassign.sim.calibration --recordings {root} --report FILE` "
        f"({len(runs)} runs in {len(rows)} cells). Every recorded run is replayed through the benchmark's "
        "harness (the group forms as it did, the trigger at the run's phase, a scale-out's newcomers "
        "subscribing when they did) under `KAFKA44_PRESETS` / `KAFKA44_CONSUMER_PRESETS` as they are, "
        "fitted on the original benchmark's groups of 6 (3 -> 6, one topic of 24 partitions, session 1.5 s, "
        "heartbeat 250 ms), never on these runs, and measured the benchmark's way on both sides. "
        f"A statistic passes within {BOUND:.0%} of the recorded one (every metric, rounds and moves too). "
        "The benchmark sweeps the trigger's phase in the heartbeat interval (1/6, 1/2, 5/6 of it in turn, "
        "r1 and r4 at 1/6, r2 and r5 at 1/2), and settle time follows the phase by design, so only runs at "
        f"the same phase repeat one another: a cell's recordings *reproduce themselves* in a metric when at "
        f"every phase recorded twice the runs are within {BOUND:.0%} of each other (max/min at most "
        f"{1 + BOUND:g}); a cell with no phase recorded twice (fewer than four runs) reproduces itself if all its runs "
        "are within that, and cannot tell otherwise (`?`). The simulator replays each run at its own phase, "
        "so its mean and median are over the same phases as the recorded ones.",
        "",
        model,
        "",
        "## Summary",
        "",
        format_summary(rows),
        "",
        "## Misses where the recordings reproduce themselves",
        "",
        *([_miss_line(*m) for m in owed] or ["none"]),
        "",
        "## Misses where they do not (or cannot tell)",
        "",
        *([_miss_line(*m) for m in excused] or ["none"]),
        "",
        "## Per cell",
        "",
        format_group_sizes(rows),
    ]
    return "\n".join(lines).rstrip() + "\n"
