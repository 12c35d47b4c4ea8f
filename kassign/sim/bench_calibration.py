"""Calibration against the Apache Kafka 4.4.0 benchmark recordings (``data/rebalance-bench-kafka44``).

Each run there is one cell of ``benchmarks/rebalance.py`` (profile x scenario x mode) repeated five
times (``<profile>-<scenario>-<mode>-r<k>``). This module replays a run in the simulator and measures
both timelines the way the benchmark measured the real one:

* :func:`bench_config`: the run's settings as a :class:`SimConfig` (assignor, client and fast
  follow-up per mode, static membership, timeouts, per-batch processing);
* :func:`harness_inputs`: what the benchmark's harness did and when (the trigger's heartbeat phase;
  when the new members of a scale-out subscribed; how long after its predecessor closed a rolling
  restart's replacement subscribed; how long the harness took from one restart's settle to the next
  restart's phase wait). These are the experiment's inputs; everything the group does in between is
  the model's;
* :func:`simulate_bench`: the run in the simulator, driven like the harness drove the real group:
  each trigger a set phase of a heartbeat interval after the group's last assign callback, a rolling
  restart's replacement subscribing once its predecessor has closed, the next restart after the group
  has settled;
* :func:`bench_metrics`: the benchmark's own row (``unowned_ps``, ``settle_s``, ``moved``) from any
  timeline, built on :mod:`kassign.timeline.metrics` (a closing member stops owning when it starts
  closing, as in the benchmark); on a recording it reproduces the row in its ``meta.json``;
* :func:`compare_cells`: recorded vs simulated medians per cell.
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
from kassign.sim.config import SimConfig
from kassign.sim.member import SimMember
from kassign.sim.scenarios import Scenario
from kassign.sim.simulator import Simulation
from kassign.timeline.events import Event, read_events
from kassign.timeline.metrics import GONE_EVENTS, kept_partitions, ownership_intervals, unowned_partition_seconds

__all__ = [
    "BENCH_RECORDINGS",
    "BENCH_MODES",
    "BENCH_METRICS",
    "BenchMode",
    "BenchRun",
    "BenchMetrics",
    "HarnessInputs",
    "BenchSimulation",
    "CellComparison",
    "load_bench_runs",
    "bench_config",
    "harness_inputs",
    "bench_metrics",
    "recorded_bench_metrics",
    "simulate_bench",
    "simulated_bench_metrics",
    "compare_cells",
    "format_cells",
]

BENCH_RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-bench-kafka44"
TOPIC = "topic"
#: Metrics compared per cell; ``step_settle_s`` (a rolling restart's mean settle per restart) is
#: reported beside them because a rolling restart's ``settle_s`` is mostly the harness's schedule.
BENCH_METRICS = ("unowned_ps", "settle_s", "moved")
#: The harness: ``wait_settled`` wants the group settled this long, then the run sleeps ``STEADY_S``
#: before its first trigger; it polls the timeline every ``POLL_S``.
STABLE_S = 0.5
STEADY_S = 3.0
POLL_S = 0.1
#: The harness gives up on a group that has not settled this long after a trigger (``wait_settled(120)``).
SETTLE_TIMEOUT_S = 120.0
#: The simulation checks the group's state this often (seconds of simulated time).
CHECK_S = 0.002


@dataclass(frozen=True)
class BenchMode:
    """How a benchmark mode's members are simulated."""

    assignor: str
    client: str
    fast_follow_up: bool = False


#: The benchmark's modes (the short names of its run directories).
BENCH_MODES: dict[str, BenchMode] = {
    "eager": BenchMode("roundrobin", "aiokafka"),  # aiokafka 0.14's default assignor
    "coop": BenchMode("cooperative-sticky", "aiokafka"),  # kassign, fast_follow_up=False
    "fast": BenchMode("cooperative-sticky", "aiokafka", fast_follow_up=True),  # kassign's default
    "static": BenchMode("cooperative-sticky", "aiokafka", fast_follow_up=True),  # + group_instance_id
    "java": BenchMode("cooperative-sticky", "java"),  # kafka-clients 3.9.1
    "rdkafka": BenchMode("cooperative-sticky", "librdkafka"),  # librdkafka 2.16.0
}
#: meta.json's ``mode`` -> the short name.
MODE_NAMES = {"eager": "eager", "cooperative": "coop", "cooperative+fast-follow-up": "fast",
              "cooperative+static": "static", "java-cooperative": "java", "librdkafka-cooperative": "rdkafka"}
#: meta.json's member ``kind`` -> the simulator's client.
KIND_CLIENTS = {"aiokafka": "aiokafka", "java": "java", "confluent": "librdkafka"}
SCENARIOS = ("scale-out", "scale-in", "crash", "rolling-restart")


def mode_of(meta: Mapping[str, Any]) -> str:
    """A run's mode, short name (``fast``...), from its meta.json."""
    mode = str(meta.get("mode", ""))
    short = MODE_NAMES.get(mode, mode)
    if short not in BENCH_MODES:
        raise ValueError(f"recording {meta.get('scenario', '?')}: unknown benchmark mode {mode!r}; "
                         f"expected one of {sorted(MODE_NAMES)}")
    return short


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
        """The repetition (``r3`` -> 3)."""
        stem, _, rep = self.name.rpartition("-r")
        return int(rep) if stem and rep.isdigit() else 0

    @property
    def cell(self) -> tuple[str, str, str]:
        """(profile, scenario, mode): what the repetitions of one benchmark cell share."""
        return (str(self.meta["profile"]), str(self.meta["scenario"]), mode_of(self.meta))


def load_bench_runs(root: str | Path = BENCH_RECORDINGS, *, reps: Iterable[int] | None = None) -> list[BenchRun]:
    """Every run directory under ``root`` (those with a meta.json), sorted by name; ``reps``
    keeps only those repetitions."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no recordings directory at {root}")
    wanted = None if reps is None else set(reps)
    runs = [BenchRun(d, json.loads((d / "meta.json").read_text())) for d in sorted(root.iterdir())
            if (d / "meta.json").is_file()]
    return [r for r in runs if wanted is None or r.rep in wanted]


# -- settings --------------------------------------------------------------------------------------


def processing_of(meta: Mapping[str, Any]) -> dict[str, float | None]:
    """``processing_ms``/``processing_max_ms`` from meta.json's ``process_ms`` (``[lo, hi]`` uniform,
    ``[0, 0]`` or absent: none; one number: fixed)."""
    spec = meta.get("process_ms")
    if spec is None:
        return {"processing_ms": 0.0, "processing_max_ms": None}
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return {"processing_ms": float(spec), "processing_max_ms": None}
    if isinstance(spec, (list, tuple)) and len(spec) == 2:
        lo, hi = float(spec[0]), float(spec[1])
        return {"processing_ms": lo, "processing_max_ms": None if hi == lo else hi}
    raise ValueError(f"process_ms must be MS or [LO, HI] in ms, got {spec!r}")


def client_of(meta: Mapping[str, Any]) -> str | None:
    """The simulator client of a recording's members: meta's ``kind`` (aiokafka, java, confluent),
    else its ``mode``; None when neither says."""
    kind = meta.get("kind")
    if kind in KIND_CLIENTS:
        return KIND_CLIENTS[str(kind)]
    mode = MODE_NAMES.get(str(meta.get("mode", "")))
    return BENCH_MODES[mode].client if mode else None


def bench_config(meta: Mapping[str, Any], **overrides: Any) -> SimConfig:
    """The simulator configuration of a benchmark run: Apache Kafka, the mode's assignor, client and
    fast follow-up, static membership, the run's timeouts and per-batch processing."""
    mode = BENCH_MODES[mode_of(meta)]
    values: dict[str, Any] = {
        "assignor": mode.assignor,
        "broker": "kafka",
        "client": client_of(meta) or mode.client,
        "fast_follow_up": mode.fast_follow_up,
        "static_membership": bool(meta.get("static", False)),
        "session_timeout_ms": float(meta.get("session_ms", 1500)),
        "heartbeat_interval_ms": float(meta.get("heartbeat_ms", 250)),
        "rebalance_timeout_ms": float(meta.get("max_poll_ms", 30000)),
        **processing_of(meta),
    }
    values.update(overrides)
    return SimConfig(**values)


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

    def as_dict(self) -> dict[str, float]:
        return {"unowned_ps": self.unowned_ps, "settle_s": self.settle_s, "moved": self.moved,
                "step_settle_s": self.step_settle_s}


def bench_metrics(events: Iterable[Event], triggers: Sequence[float], end: float,
                  partitions: Iterable[TopicPartition]) -> BenchMetrics:
    """The benchmark's metrics of a timeline whose changes began at ``triggers`` (one per restart of a
    rolling restart) and whose measured stretch ends at ``end``.

    Each trigger's window runs to the next trigger (the last to ``end``); its settle is the window's
    last ownership change or departure (``closing``, ``closed``, ``exit``, ``crash``).
    """
    if not triggers or end <= triggers[-1]:
        raise ValueError(f"need trigger times before the end {end}, got {list(triggers)}")
    timeline = sorted(events, key=lambda e: e.t)
    parts = sorted(set(partitions))
    intervals = ownership_intervals(timeline, release_events=GONE_EVENTS)
    bounds = [*triggers, end]
    settles: list[float] = []
    moved = 0
    for lo, hi in zip(bounds, bounds[1:]):
        inside = [e for e in timeline if lo <= e.t < hi]
        marks = [e.t for e in inside if (e.parts and e.ev in ("cb_assigned", "cb_revoked", "cb_lost"))
                 or e.ev in GONE_EVENTS]
        settle = max(marks, default=lo)
        settles.append(settle)
        moved += len(parts) - len(kept_partitions(intervals, lo, settle))
    return BenchMetrics(
        unowned_ps=unowned_partition_seconds(intervals, parts, triggers[0], settles[-1]),
        settle_s=round(settles[-1] - triggers[0], 6),
        moved=moved,
        step_settle_s=round(statistics.fmean(s - t for s, t in zip(settles, triggers)), 6),
    )


def _partitions(meta: Mapping[str, Any]) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in range(int(meta.get("partitions", 24)))]


def _events(run: BenchRun) -> list[Event]:
    return sorted(read_events(run.path / "events.jsonl.gz", default_topic=TOPIC), key=lambda e: e.t)


def recorded_bench_metrics(run: BenchRun) -> BenchMetrics:
    """The run's row recomputed from its recorded events (equal to meta.json's ``result``)."""
    return bench_metrics(_events(run), run.meta["triggers"], float(run.meta["end"]), _partitions(run.meta))


# -- what the harness did ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessInputs:
    """The membership changes the benchmark's harness made in one run, relative to each trigger.

    ``launch_s``: a scale-out's new members' ``subscribed`` after the trigger (their processes start
    at the trigger); ``release_s``: per restart, the replacement's ``subscribed`` after its
    predecessor's ``closed``; ``gap_s``: per restart after the first, from the previous restart's
    settle to the harness's phase wait (the harness's ``wait_settled``, the next replacement's start-up
    until ``ready``, and its polling).
    """

    scenario: str
    members: int
    partitions: int
    phase: float
    launch_s: tuple[float, ...] = ()
    release_s: tuple[float, ...] = ()
    gap_s: tuple[float, ...] = ()


def harness_inputs(run: BenchRun) -> HarnessInputs:
    """What the harness did in ``run``, read from its recording."""
    meta = run.meta
    scenario = str(meta["scenario"])
    if scenario not in SCENARIOS:
        raise ValueError(f"{run.name}: unknown scenario {scenario!r}; expected one of {SCENARIOS}")
    triggers = [float(t) for t in meta["triggers"]]
    events = _events(run)
    common = {"scenario": scenario, "members": 3 if scenario == "scale-out" else 6,
              "partitions": int(meta.get("partitions", 24)), "phase": float(meta["phase"])}
    if scenario == "scale-out":
        subscribed = sorted(e.t - triggers[0] for e in events if e.ev == "subscribed" and e.t >= triggers[0])
        return HarnessInputs(**common, launch_s=tuple(round(s, 6) for s in subscribed))
    if scenario != "rolling-restart":
        return HarnessInputs(**common)
    bounds = [*triggers, float(meta["end"])]
    release, gaps = [], []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        inside = [e for e in events if lo <= e.t < hi]
        closed = next(e.t for e in inside if e.ev in ("closed", "exit"))
        subscribed = next(e.t for e in inside if e.ev == "subscribed")
        release.append(round(max(0.0, subscribed - closed), 6))
        if i + 1 < len(triggers):
            changes = [e.t for e in inside if e.parts and e.ev in ("cb_assigned", "cb_revoked", "cb_lost")]
            ready = next(e.t for e in inside if e.ev == "ready")
            gaps.append(round(ready + POLL_S / 2 - max(changes), 6))
    return HarnessInputs(**common, release_s=tuple(release), gap_s=tuple(gaps))


# -- the run in the simulator --------------------------------------------------------------------------


class BenchSimulation(Simulation):
    """A simulated group driven the way ``benchmarks/rebalance.py`` drives a real one."""

    def __init__(self, inputs: HarnessInputs, config: SimConfig, *, seed: int = 0, name: str = "") -> None:
        scenario = Scenario(members=inputs.members, topics={TOPIC: inputs.partitions}, seed=seed, name=name)
        super().__init__(scenario, config, None)
        self.inputs = inputs
        self.triggers: list[float] = []
        self.finished_at: float | None = None
        self._watchers: list[tuple[str, str, Callable[[], None]]] = []
        self._last_assign = 0.0
        self._last_change = 0.0
        self.failure: str | None = None

    def emit(self, member: str, ev: str, parts: Iterable[TopicPartition] | None = None, **extra: Any) -> None:
        super().emit(member, ev, parts, **extra)
        now = self.loop.now
        if ev == "cb_assigned":
            self._last_assign = now
        if ev in ("cb_assigned", "cb_revoked", "cb_lost", "closing", "crash"):
            self._last_change = now
        for watch in [w for w in self._watchers if w[0] == member and w[1] == ev]:
            self._watchers.remove(watch)
            watch[2]()

    # -- the harness -----------------------------------------------------------------------------
    def settled_now(self) -> bool:
        """The harness's ``wait_settled(balanced=True)``: every partition has exactly one owner among
        the members still running and not told to stop, each of which owns something, balanced."""
        live = [m for m in self.live() if not m._closing]
        counts: dict[TopicPartition, int] = defaultdict(int)
        for member in live:
            for tp in member.consuming:
                counts[tp] += 1
        sizes = [len(m.consuming) for m in live]
        return (bool(live) and len(counts) == self.inputs.partitions and all(n == 1 for n in counts.values())
                and min(sizes) > 0 and max(sizes) - min(sizes) <= 1)

    def _when_settled(self, then: Callable[[float], None], deadline: float) -> None:
        """Call ``then(settle time)`` once the group is settled (checked every CHECK_S)."""
        if self.settled_now():
            then(self._last_change)
        elif self.loop.now > deadline:
            self.failure = f"not settled by {deadline:.1f} s"
            self.finished_at = self.loop.now
        else:
            self.loop.after(CHECK_S, self._when_settled, then, deadline)

    def _stays_settled(self, since: float, until: float, then: Callable[[], None]) -> None:
        """``then()`` at ``until`` if nothing changed ownership since ``since``, else wait for the next settle."""
        def check() -> None:
            if self._last_change > since or not self.settled_now():
                self._when_settled(lambda t: self._stays_settled(t, t + (until - since), then),
                                   self.loop.now + SETTLE_TIMEOUT_S)
            else:
                then()
        self.loop.at(until, check)

    def _phase_wait(self, then: Callable[[], None]) -> None:
        """``_wait_for_phase``: sleep until ``phase`` of a heartbeat interval after the last assign
        callback (the next such moment from now), then ``then()`` with the trigger time recorded."""
        hb, last, now = self.heartbeat_s, self._last_assign, self.loop.now
        periods = max(0, int((now - last) / hb) + 1)
        at = max(now, last + (periods + self.inputs.phase) * hb)

        def fire() -> None:
            self.triggers.append(self.loop.now)
            then()
        self.loop.at(at, fire)

    # -- scenarios -------------------------------------------------------------------------------
    def start(self) -> None:
        for _ in range(self.inputs.members):
            self.start_member()
        scenario = self.inputs.scenario

        def after_steady() -> None:
            action = {"scale-out": self._scale_out, "scale-in": self._scale_in, "crash": self._crash,
                      "rolling-restart": lambda: self._restart(0)}[scenario]
            self._phase_wait(action)

        # Only the phase after the last assignment matters for the first trigger, not how long the
        # harness waited before it.
        self._when_settled(lambda t: self._stays_settled(t, t + STABLE_S + STEADY_S, after_steady), SETTLE_TIMEOUT_S)

    def _finish_when_settled(self) -> None:
        self._when_settled(self._finish, self.loop.now + SETTLE_TIMEOUT_S)

    def _finish(self, settle: float) -> None:
        self.finished_at = settle

    def _scale_out(self) -> None:
        for offset in self.inputs.launch_s:
            self.loop.after(offset, self.start_member)
        self.loop.after(max(self.inputs.launch_s, default=0.0), self._finish_when_settled)

    def _newest(self, count: int) -> list[SimMember]:
        return self.live()[-count:]

    def _scale_in(self) -> None:
        leaving = self._newest(self.inputs.members // 2)
        self.loop.after(self.latency("spawn_ms"), self._close, leaving)
        self.loop.after(self.latency("spawn_ms"), self._finish_when_settled)

    def _close(self, members: Sequence[SimMember]) -> None:
        for member in members:
            member.close()

    def _crash(self) -> None:
        (victim,) = self._newest(1)
        victim.crash()
        self._finish_when_settled()

    def _restart(self, index: int) -> None:
        """Restart slot ``index``: close its member; its replacement subscribes once it has closed."""
        old = self.live()[0]  # the oldest: slots go in start order, each replacement joins the end
        instance = old.instance_id
        release = self.inputs.release_s[index] if index < len(self.inputs.release_s) else 0.0

        def replace() -> None:
            self.loop.after(release, lambda: self.start_member(instance_id=instance))

        self._watchers.append((old.name, "closed", replace))
        self.loop.after(self.latency("spawn_ms"), old.close)
        last = index + 1 >= self.inputs.members

        def settled(t: float) -> None:
            if last:
                self._finish(t)
                return
            gap = self.inputs.gap_s[index] if index < len(self.inputs.gap_s) else STABLE_S
            self._stays_settled(t, t + gap, lambda: self._phase_wait(lambda: self._restart(index + 1)))

        # The replacement must be in before the group counts as settled (the harness's live members).
        def await_settle() -> None:
            self._when_settled(settled, self.loop.now + SETTLE_TIMEOUT_S)
        self._watchers.append((old.name, "closed", lambda: self.loop.after(release + 1e-9, await_settle)))

    def run_bench(self, horizon_s: float = 600.0) -> tuple[list[Event], list[float], float]:
        """Run to the end of the measured stretch; returns (events, triggers, end)."""
        self.start()
        self.loop.run(horizon_s, lambda: self.finished_at is not None)
        if self.finished_at is None or self.failure is not None or not self.triggers:
            raise RuntimeError(f"benchmark run {self.scenario.name!r} did not settle in the simulator: "
                               f"{self.failure or 'no settle'} (triggers {self.triggers})")
        end = self.finished_at + STEADY_S
        return self.events, self.triggers, end


def simulate_bench(run: BenchRun, config: SimConfig | None = None, **overrides: Any
                   ) -> tuple[list[Event], list[float], float]:
    """Simulate ``run`` (its :func:`bench_config` with ``overrides`` unless ``config`` is given);
    returns the simulated (events, triggers, end)."""
    config = config or bench_config(run.meta, **overrides)
    sim = BenchSimulation(harness_inputs(run), config, seed=int(run.meta.get("seed", run.rep)), name=run.name)
    return sim.run_bench()


def simulated_bench_metrics(run: BenchRun, config: SimConfig | None = None, **overrides: Any) -> BenchMetrics:
    """The benchmark's metrics of the simulated run."""
    events, triggers, end = simulate_bench(run, config, **overrides)
    return bench_metrics(events, triggers, end, _partitions(run.meta))


# -- comparing cells -------------------------------------------------------------------------------------


@dataclass
class CellComparison:
    """One cell's medians, recorded and simulated, over the runs compared."""

    cell: tuple[str, str, str]
    runs: list[str]
    recorded: dict[str, float]
    simulated: dict[str, float]
    per_run: list[tuple[str, BenchMetrics, BenchMetrics]] = field(default_factory=list)

    def rel_err(self, metric: str) -> float:
        """(simulated - recorded) / recorded of the medians (0 when both are 0)."""
        r, s = self.recorded[metric], self.simulated[metric]
        if r == 0:
            return 0.0 if s == 0 else math.inf
        return (s - r) / r

    def passes(self, metric: str, bound: float = 0.25) -> bool:
        """Within ``bound`` of the recorded median (``moved``: exactly equal)."""
        if metric == "moved":
            return self.recorded[metric] == self.simulated[metric]
        return abs(self.rel_err(metric)) <= bound


def compare_cells(runs: Iterable[BenchRun], configure: Callable[[BenchRun], SimConfig] | None = None
                  ) -> list[CellComparison]:
    """Median recorded vs median simulated per cell; ``configure`` builds each run's config
    (default :func:`bench_config`)."""
    grouped: dict[tuple[str, str, str], list[BenchRun]] = defaultdict(list)
    for run in runs:
        grouped[run.cell].append(run)
    out = []
    for cell in sorted(grouped):
        per_run = []
        for run in grouped[cell]:
            config = configure(run) if configure else bench_config(run.meta)
            per_run.append((run.name, recorded_bench_metrics(run), simulated_bench_metrics(run, config)))
        names = ("unowned_ps", "settle_s", "moved", "step_settle_s")
        recorded = {m: statistics.median(getattr(r, m) for _, r, _ in per_run) for m in names}
        simulated = {m: statistics.median(getattr(s, m) for _, _, s in per_run) for m in names}
        out.append(CellComparison(cell, [n for n, _, _ in per_run], recorded, simulated, per_run))
    return out


def format_cells(rows: Sequence[CellComparison], bound: float = 0.25) -> str:
    """A markdown table: per cell the recorded and simulated medians, errors and pass marks."""
    lines = ["| profile | scenario | mode | unowned ps rec | sim | err | settle s rec | sim | err | "
             "per-restart settle rec | sim | moved rec | sim | pass |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        marks = "".join("✓" if row.passes(m, bound) else "✗" for m in BENCH_METRICS)
        lines.append(
            f"| {' | '.join(row.cell)} | {row.recorded['unowned_ps']:.2f} | {row.simulated['unowned_ps']:.2f} | "
            f"{row.rel_err('unowned_ps'):+.0%} | {row.recorded['settle_s']:.2f} | {row.simulated['settle_s']:.2f} | "
            f"{row.rel_err('settle_s'):+.0%} | {row.recorded['step_settle_s']:.2f} | "
            f"{row.simulated['step_settle_s']:.2f} | {row.recorded['moved']:g} | {row.simulated['moved']:g} | {marks} |")
    return "\n".join(lines)
