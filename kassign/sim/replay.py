"""Replay a recorded consumer group through the simulator under another assignor or protocol.

A *recording* is any timeline in the :mod:`kassign.timeline.events` schema: one telemetry file, several
members' files of one group (merged by time), or a recorded run directory of
``data/rebalance-timelines`` (``events.jsonl.gz``, with or without ``meta.json``).

From the recording alone the replay infers the group's membership timeline:

- a member's first event is its join (a member id that subscribes or joins again after leaving
  is a restart);
- ``closing``/``closed``/``exit`` is a clean leave (at the first of them);
- ``crash``, or silence without a close after which other members are handed partitions the
  silent member never gave up, is a crash (at its last event);
- joins (or leaves) less than :data:`GROUP_GAP_S` apart are one scale-out (scale-in);
- the subscribed topics come from ``subscribed`` events that carry ``topics``, their partition
  counts from the highest partition seen (or ``meta.json``'s ``npart``).

It then builds a :class:`~kassign.sim.scenarios.Scenario` whose steps fire at the recorded times,
simulates it with the chosen assignor/protocol on the recorded broker model and timeouts (from
``meta.json`` when present, else given), and computes the same metrics (:mod:`kassign.timeline.metrics`)
for each membership change on both timelines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kassign.sim.bench_meta import bench_config, client_of, is_bench_meta, processing_of
from kassign.sim.config import BROKER_MODELS, SimConfig
from kassign.sim.scenarios import Crash, ScaleIn, ScaleOut, Scenario, Step, step_kind
from kassign.sim.simulator import SimResult, simulate
from kassign.timeline.events import DEFAULT_TOPIC, Event, merge_events, read_events, timeline_files
from kassign.timeline.metrics import PhaseMetrics, ownership_intervals, recording_phases, timeline_metrics

__all__ = [
    "Recording",
    "MembershipChange",
    "ReplayPlan",
    "PhaseComparison",
    "ReplayReport",
    "load_recording",
    "membership_changes",
    "replay_config",
    "plan_replay",
    "replay",
    "COMPARED_METRICS",
]

#: Joins (or leaves) closer together than this many seconds are one scale-out (scale-in) step.
GROUP_GAP_S = 0.5
#: Metrics the replay sets side by side.
COMPARED_METRICS = ("unowned_ps", "moved", "rounds", "settle_s")
#: Events only a group member writes (an orchestrator's ``exit`` line is no member).
MEMBER_EVENTS = frozenset({"subscribed", "join", "sync", "cb_assigned", "cb_revoked", "cb_lost"})
LEAVE_EVENTS = frozenset({"closing", "closed", "exit"})
#: Events by which a member that left shows it is back (its callbacks while closing are not).
RESTART_EVENTS = frozenset({"subscribed", "join"})
#: Events a member writes before it is in the group: a benchmark's replacement held until released.
HELD_EVENTS = frozenset({"ready"})
#: Recorded run strategies (meta.json) -> kassign assignor, and recorded clients -> simulator preset.
STRATEGY_ASSIGNORS = {"range": "range", "sticky": "sticky", "coop": "cooperative-sticky", "roundrobin": "roundrobin"}
META_CLIENTS = {"java": "java", "ck": "librdkafka"}
#: Longest recording a replay simulates (first to last event): a week of heartbeats.
MAX_REPLAY_SPAN_S = 7 * 24 * 3600.0


@dataclass
class Recording:
    """A recorded group's merged timeline, its ``meta.json`` (None without) and where it came from."""

    events: list[Event]
    meta: dict[str, Any] | None
    label: str
    sources: tuple[Path, ...] = ()


class MembershipChange(NamedTuple):
    """Member ``member`` (recorded id) ``kind`` (``join``, ``leave`` or ``crash``) at ``t``."""

    t: float
    kind: str
    member: str


@dataclass
class ReplayPlan:
    """What the recording becomes in the simulator.

    ``phases``: recorded phase name -> its window on the recording's clock, in step order (the
    simulated run names the same phases); ``members``: live members before and after each phase.
    """

    scenario: Scenario
    phases: dict[str, tuple[float, float]]
    members: dict[str, tuple[int, int]]
    changes: list[MembershipChange]
    inferred_crashes: list[Event]
    notes: list[str] = field(default_factory=list)


@dataclass
class PhaseComparison:
    """One membership change: its metrics on the recording and in the simulation."""

    name: str
    members: tuple[int, int]
    recorded: PhaseMetrics
    simulated: PhaseMetrics


@dataclass
class ReplayReport:
    """The outcome of :func:`replay`; :meth:`format` is what ``kassign simulate --replay`` prints."""

    label: str
    recorded_as: str
    simulated_as: str
    config: SimConfig
    plan: ReplayPlan
    result: SimResult
    phases: list[PhaseComparison]

    def totals(self) -> dict[str, tuple[float, float]]:
        """Each compared metric summed over the phases: ``name -> (recorded, simulated)``."""
        return {
            m: (
                sum(float(getattr(p.recorded, m)) for p in self.phases),
                sum(float(getattr(p.simulated, m)) for p in self.phases),
            )
            for m in COMPARED_METRICS
        }

    def difference(self) -> str:
        """One line naming how the simulated assignor/protocol differs from the recording."""
        if not self.phases:
            return "no membership change to compare"
        totals = self.totals()
        rec_moved, sim_moved = (int(v) for v in totals["moved"])
        if sim_moved < rec_moved:
            moves = f"moves {rec_moved - sim_moved} fewer partitions than"
        elif sim_moved > rec_moved:
            moves = f"moves {sim_moved - rec_moved} more partitions than"
        else:
            moves = "moves as many partitions as"
        parts = [f"{self.simulated_as} {moves} the recorded {self.recorded_as} ({sim_moved} vs {rec_moved})"]
        for metric, label, unit in (
            ("unowned_ps", "unowned partition-seconds", ""),
            ("rounds", "rounds", ""),
            ("settle_s", "settle time", " s"),
        ):
            rec, sim = totals[metric]
            digits = 0 if metric == "rounds" else (1 if metric == "unowned_ps" else 3)
            parts.append(f"{label} {sim - rec:+.{digits}f}{unit}")
        return "; ".join(parts)

    def format(self) -> str:
        """A side-by-side table, recorded vs simulated per phase, then the difference and notes."""
        lines = [
            f"replay of {self.label}: recorded {self.recorded_as}; simulated {self.simulated_as} on "
            f"{self.config.broker} ({self.config.client}), session {self.config.session_timeout_ms:g} ms, "
            f"heartbeat {self.config.heartbeat_interval_ms:g} ms; topics "
            + ", ".join(f"{t}[{n}]" for t, n in sorted(self.plan.scenario.topics.items())),
        ]
        width = max([len("phase"), len("total")] + [len(p.name) for p in self.phases])
        cell = 21
        lines.append(f"{'phase':<{width}}  {'members':>7}  " + "  ".join(f"{m:>{cell}}" for m in COMPARED_METRICS))
        lines.append(
            f"{'':<{width}}  {'':>7}  " + "  ".join(f"{'recorded  simulated':>{cell}}" for _ in COMPARED_METRICS)
        )
        for p in self.phases:
            cells = [_pair(getattr(p.recorded, m), getattr(p.simulated, m), m) for m in COMPARED_METRICS]
            lines.append(
                f"{p.name:<{width}}  {f'{p.members[0]}->{p.members[1]}':>7}  "
                + "  ".join(f"{c:>{cell}}" for c in cells)
            )
        if len(self.phases) > 1:
            totals = self.totals()
            lines.append(
                f"{'total':<{width}}  {'':>7}  "
                + "  ".join(f"{_pair(*totals[m], m):>{cell}}" for m in COMPARED_METRICS)
            )
        lines.append(f"difference: {self.difference()}")
        if not self.result.settled:
            lines.append("note: the simulated group did not settle within its horizon")
        lines += [f"note: {n}" for n in self.plan.notes]
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary: per phase both metric sets (without owner maps), totals, notes."""

        def plain(m: PhaseMetrics) -> dict[str, Any]:
            d = m.as_dict()
            d.pop("final")
            return d

        return {
            "recording": self.label,
            "recorded_as": self.recorded_as,
            "simulated_as": self.simulated_as,
            "config": self.config.to_dict(),
            "phases": {
                p.name: {"members": list(p.members), "recorded": plain(p.recorded), "simulated": plain(p.simulated)}
                for p in self.phases
            },
            "totals": {m: {"recorded": r, "simulated": s} for m, (r, s) in self.totals().items()},
            "difference": self.difference(),
            "settled": self.result.settled,
            "notes": list(self.plan.notes),
        }


def _pair(recorded: float, simulated: float, metric: str) -> str:
    if metric in ("moved", "rounds"):
        return f"{int(recorded):>8}  {int(simulated):>9}"
    return f"{recorded:>8.3f}  {simulated:>9.3f}"


# -- loading ----------------------------------------------------------------------------------


def _read_meta(meta_path: Path) -> dict[str, Any]:
    """A recorder's meta.json; ValueError naming the file when it is not a JSON object."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{meta_path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(f"{meta_path}: JSON nested too deeply") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    return meta


def _event_files(path: Path) -> tuple[list[Path], dict[str, Any] | None]:
    """The timeline files a path names, and the meta.json beside them (if any)."""
    files = timeline_files(path)
    meta_path = (path if path.is_dir() else path.parent) / "meta.json"
    with_meta = meta_path.is_file() and (path.is_dir() or path.name.startswith("events."))
    return files, _read_meta(meta_path) if with_meta else None


def _single_subscribed_topic(events: Iterable[Event]) -> str | None:
    topics = {tuple(e.extra["topics"]) for e in events if e.ev == "subscribed" and e.extra.get("topics")}
    if len(topics) == 1:
        (only,) = topics
        if len(only) == 1:
            return str(only[0])
    return None


def load_recording(*paths: str | Path) -> Recording:
    """Load and merge a recording: timeline files and/or directories (a run directory with
    ``events.jsonl.gz`` and maybe ``meta.json``, or a directory of members' telemetry files).

    Bare-int partitions are read as the one topic the members subscribed to, when they say.
    """
    if not paths:
        raise ValueError("load_recording needs at least one file or directory")
    files: list[Path] = []
    meta: dict[str, Any] | None = None
    for raw in paths:
        found, found_meta = _event_files(Path(raw))
        files += found
        meta = meta or found_meta
    events = merge_events(*(read_events(f) for f in files))
    topic = _single_subscribed_topic(events)
    if topic and topic != DEFAULT_TOPIC:
        events = merge_events(*(read_events(f, default_topic=topic) for f in files))
    if not events:
        raise ValueError(f"recording {', '.join(map(str, paths))} holds no events")
    span = events[-1].t - events[0].t
    if span > MAX_REPLAY_SPAN_S:
        raise ValueError(
            f"recording {', '.join(map(str, paths))} spans {span:,.0f} s from its first to its last "
            f"event; a replay simulates at most {MAX_REPLAY_SPAN_S:,.0f} s (7 days): cut it to the "
            "part to replay"
        )
    first = Path(paths[0])
    label = str((meta or {}).get("label") or (first.name if first.is_dir() else first.name.split(".")[0]))
    if len(paths) > 1 and not meta:
        label += f" (+{len(paths) - 1} files)"
    return Recording(events=events, meta=meta, label=label, sources=tuple(files))


# -- inferring the membership timeline ---------------------------------------------------------


def _members(events: Sequence[Event]) -> set[str]:
    return {e.id for e in events if e.ev in MEMBER_EVENTS}


def membership_changes(events: Iterable[Event]) -> tuple[list[MembershipChange], list[Event]]:
    """The group's joins, clean leaves and crashes, in time order, and the ``crash`` events the
    recording lacks (silent members whose partitions went to others), to add before measuring it."""
    timeline = sorted(events, key=lambda e: e.t)
    members = _members(timeline)
    changes: list[MembershipChange] = []
    inside: dict[str, bool] = {}
    last_seen: dict[str, float] = {}
    for e in timeline:
        if e.id not in members:
            continue
        last_seen[e.id] = e.t
        if not inside.get(e.id):
            # First seen, or back after leaving: what a closing member still writes is no restart.
            if e.ev in RESTART_EVENTS or (
                e.id not in inside and e.ev not in LEAVE_EVENTS | HELD_EVENTS and e.ev != "crash"
            ):
                changes.append(MembershipChange(e.t, "join", e.id))
                inside[e.id] = True
        elif e.ev in LEAVE_EVENTS:
            changes.append(MembershipChange(e.t, "leave", e.id))
            inside[e.id] = False
        elif e.ev == "crash":
            changes.append(MembershipChange(e.t, "crash", e.id))
            inside[e.id] = False
    inferred: list[Event] = []
    intervals = ownership_intervals(timeline)
    for member in sorted(m for m, live in inside.items() if live):
        silent_from = last_seen[member]
        for ivs in intervals.values():
            if any(iv.member == member and iv.end == math.inf for iv in ivs) and any(
                iv.member != member and iv.start >= silent_from for iv in ivs
            ):
                changes.append(MembershipChange(silent_from, "crash", member))
                inferred.append(Event(member, silent_from, "crash", extra={"inferred": True}))
                break
    changes.sort(key=lambda c: c.t)
    return changes, inferred


def _group_changes(changes: Sequence[MembershipChange]) -> list[list[MembershipChange]]:
    """Consecutive joins (leaves) within GROUP_GAP_S of each other form one group; a crash is alone."""
    groups: list[list[MembershipChange]] = []
    for change in changes:
        last = groups[-1] if groups else None
        if last and change.kind != "crash" and last[-1].kind == change.kind and change.t - last[-1].t <= GROUP_GAP_S:
            last.append(change)
        else:
            groups.append([change])
    return groups


def _topics(recording: Recording) -> tuple[dict[str, int], tuple[str, ...] | None, list[str]]:
    """Topic -> partition count, the subscribed topics (None: all), notes on what was assumed."""
    notes: list[str] = []
    counts: dict[str, int] = {}
    for e in recording.events:
        for tp in e.parts or ():
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
    subscriptions = {
        tuple(sorted(e.extra["topics"])) for e in recording.events if e.ev == "subscribed" and e.extra.get("topics")
    }
    subscribed = tuple(sorted({t for s in subscriptions for t in s})) or None
    if len(subscriptions) > 1:
        notes.append(
            f"members subscribed to different topic sets; every simulated member takes their union {subscribed}"
        )
    for topic in subscribed or ():
        counts.setdefault(topic, 0)
    npart = (recording.meta or {}).get("npart")
    if npart is not None and len(counts) <= 1:
        topic = next(iter(counts), DEFAULT_TOPIC)
        counts[topic] = max(counts.get(topic, 0), int(npart))
    elif counts:
        notes.append(
            "partition counts are the highest partition seen + 1: "
            + ", ".join(f"{t}[{n}]" for t, n in sorted(counts.items()))
        )
    if not counts:
        raise ValueError(f"recording {recording.label!r} names no partitions and no subscribed topics")
    return counts, subscribed, notes


# -- settings ----------------------------------------------------------------------------------


def _broker_model(described: Any) -> str | None:
    """The broker model a meta.json's ``broker`` names (``kafka``, or a benchmark's description
    such as "Apache Kafka 4.4.0 at ..."); None when it names neither model."""
    text = str(described).lower()
    if text in BROKER_MODELS:
        return text
    if text.startswith(("apache kafka", "kafka")):
        return "kafka"
    return "tansu" if "tansu" in text else None


def replay_config(recording: Recording, **settings: Any) -> SimConfig:
    """The simulator settings for a replay: what meta.json says (broker; client from ``client``, or
    a benchmark's ``kind``/``mode``; session, heartbeat and max.poll; per-batch processing from
    ``process_ms``; for a ``benchmarks/rebalance.py`` recording also its static membership, fast
    follow-up and the Kafka 4.4 latencies), then ``settings`` (any :class:`SimConfig` field; None
    values are ignored); the assignor defaults to cooperative-sticky."""
    meta = recording.meta or {}
    values: dict[str, Any] = {"assignor": "cooperative-sticky"}
    if is_bench_meta(meta):
        values.update(bench_config(meta).to_dict())
        values.update(assignor="cooperative-sticky", protocol=None)
    if _broker_model(meta.get("broker")) is not None:
        values["broker"] = _broker_model(meta["broker"])
    if meta.get("client") in META_CLIENTS:
        values["client"] = META_CLIENTS[meta["client"]]
    elif client_of(meta) is not None:
        values["client"] = client_of(meta)
    for key, name in (
        ("sess", "session_timeout_ms"),
        ("hb", "heartbeat_interval_ms"),
        ("mp", "rebalance_timeout_ms"),
        ("session_ms", "session_timeout_ms"),
        ("heartbeat_ms", "heartbeat_interval_ms"),
        ("max_poll_ms", "rebalance_timeout_ms"),
    ):
        if key in meta:
            values[name] = float(meta[key])
    if "process_ms" in meta:
        values.update(processing_of(meta))
    values.update({k: v for k, v in settings.items() if v is not None})
    return SimConfig.from_dict(values)


def _recorded_as(recording: Recording) -> str:
    """The recording's assignor/protocol as far as it says."""
    meta = recording.meta or {}
    if is_bench_meta(meta):
        return f"{meta['mode']} ({client_of(meta)})"
    if meta.get("strategy") in STRATEGY_ASSIGNORS:
        assignor = STRATEGY_ASSIGNORS[meta["strategy"]]
        return f"{assignor} ({'cooperative' if assignor == 'cooperative-sticky' else 'eager'})"
    protocols = sorted(
        {
            str(e.extra["protocol"])
            for e in recording.events
            if e.ev in ("subscribed", "sync") and e.extra.get("protocol")
        }
    )
    return "/".join(protocols) if protocols else "group"


# -- planning and running ----------------------------------------------------------------------


def plan_replay(recording: Recording, config: SimConfig) -> ReplayPlan:
    """Turn the recording's membership timeline into a scenario and the recorded phase windows.

    Simulated members are named m1, m2... in start order. A scale-in closes the newest members
    (as :class:`ScaleIn` does); when the recording closed older ones the remaining recorded
    members take over the closed ones' simulated names, which keeps the counts right (members are
    interchangeable to the assignors) and is said in the notes.
    """
    changes, inferred = membership_changes(recording.events)
    if not changes:
        raise ValueError(f"recording {recording.label!r} has no group member events")
    topics, subscribed, notes = _topics(recording)
    groups = _group_changes(changes)
    initial = groups[0]
    meta = recording.meta or {}
    phase_key = "phase_frac" if "phase_frac" in meta else ("phase" if is_bench_meta(meta) else None)
    phase = float(meta[phase_key]) if phase_key else None
    spawn_s = config.latency_ms("spawn_ms") / 1000
    t0 = initial[0].t
    end_t = max(e.t for e in recording.events) + 1e-6

    sim_names: dict[str, str] = {}  # recorded member -> simulated name
    live: list[str] = []  # simulated names, oldest first
    started = 0

    def start(member: str) -> None:
        nonlocal started
        started += 1
        sim_names[member] = f"m{started}"
        live.append(sim_names[member])

    for change in initial:
        start(change.member)
    if inferred:
        notes.append(
            "inferred crash (silent, partitions handed to others) of "
            + ", ".join(f"{e.id} at +{e.t - t0:.3f} s" for e in inferred)
        )

    steps: list[Step] = []
    starts: list[tuple[str, float, int, int]] = []  # (name, recorded time, members before, after)
    fire_prev = 0.0
    dropped: list[MembershipChange] = []
    # In a static group, the group.instance.ids of members that closed and were not replaced yet: the
    # next members to join take them over, as a restart's replacement does (a member's id is its
    # simulated name unless it took one over).
    vacated: list[str] = []
    instance_of: dict[str, str] = {}
    for index, group in enumerate(groups[1:]):
        kind = group[0].kind
        before = len(live)
        if kind == "join":
            for change in group:
                start(change.member)
            reused = tuple(vacated[: len(group)])
            del vacated[: len(group)]
            instance_of.update(zip(live[len(live) - len(group) :], reused))
            step: ScaleOut | ScaleIn | Crash = ScaleOut(len(group), instance_ids=reused)
        elif kind == "leave":
            if len(group) >= len(live) and index == len(groups) - 2:
                dropped = group  # the group's shutdown: nobody is left to take partitions over
                break
            step = ScaleIn(len(group))
            if config.static_membership:
                vacated.extend(instance_of.get(name, name) for name in live[-len(group) :])
            _close_newest([c.member for c in group], sim_names, live, notes, t0, group[0].t)
        else:
            if len(live) <= 1 and index == len(groups) - 2:
                dropped = group
                break
            name = sim_names[group[0].member]
            step = Crash(member=name)
            live.remove(name)
        # Members act spawn_ms after a step fires, so fire that much before the recorded change.
        fire = max(fire_prev, group[0].t - t0 - spawn_s)
        steps.append(_with_timing(step, fire - fire_prev, phase))
        fire_prev = fire
        starts.append((f"{len(steps)}:{step_kind(step)}", group[0].t, before, len(live)))
    if dropped:
        notes.append(
            f"the group's shutdown at +{dropped[0].t - t0:.3f} s ({len(dropped)} member(s) leaving) is not replayed"
        )
    stop = dropped[0].t if dropped else end_t
    phases: dict[str, tuple[float, float]] = {}
    members: dict[str, tuple[int, int]] = {}
    for i, (name, t, before, after) in enumerate(starts):
        phases[name] = (t, starts[i + 1][1] if i + 1 < len(starts) else stop)
        members[name] = (before, after)
    phases, members = _marked_phases(phases, members, meta)
    scenario = Scenario(
        members=len(initial),
        topics=topics,
        steps=tuple(steps),
        subscribed=subscribed,
        seed=int(meta.get("rep", 0)),
        name=recording.label,
    )
    return ReplayPlan(scenario, phases, members, changes, inferred, notes)


def _close_newest(
    leaving: list[str], sim_names: dict[str, str], live: list[str], notes: list[str], t0: float, t: float
) -> None:
    """Apply a scale-in of ``leaving`` (recorded ids) to the name map: the newest simulated members
    close, and survivors that held those names take over the names the leavers had."""
    closed = live[-len(leaving) :]
    freed = sorted((sim_names[m] for m in leaving if sim_names[m] not in closed), key=live.index)
    takers = sorted((m for m, n in sim_names.items() if n in closed and m not in leaving), key=lambda m: sim_names[m])
    if takers:
        notes.append(
            f"at +{t - t0:.3f} s the recording closed {', '.join(sorted(leaving))}, not the newest "
            f"member(s); the simulation closes its newest instead"
        )
    for member, name in zip(takers, freed):
        sim_names[member] = name
    for member in leaving:
        del sim_names[member]
    del live[-len(leaving) :]


def _with_timing(step: ScaleOut | ScaleIn | Crash, after_s: float, phase: float | None) -> Step:
    if isinstance(step, ScaleOut):
        return ScaleOut(step.count, after_s=after_s, phase=phase, instance_ids=step.instance_ids)
    if isinstance(step, ScaleIn):
        return ScaleIn(step.count, after_s=after_s, phase=phase)
    return Crash(step.member, after_s=after_s, phase=phase)


def _marked_phases(
    phases: dict[str, tuple[float, float]], members: dict[str, tuple[int, int]], meta: Mapping[str, Any]
) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[int, int]]]:
    """With meta.json marks, name each phase as the recorder did (``out``, ``in``) and measure it over
    the recorder's window, so the recorded numbers are its metrics.json's; only when each marked
    phase holds exactly one change."""
    if "marks" not in meta:
        return phases, members
    marked = {name: window for name, window in recording_phases(meta).items() if name != "initial"}
    owner: dict[str, str] = {}
    for name, (t, _) in phases.items():
        hits = [m for m, (a, b) in marked.items() if a <= t < b]
        if len(hits) != 1:
            return phases, members
        owner[name] = hits[0]
    if len(set(owner.values())) != len(owner):
        return phases, members
    return ({owner[n]: marked[owner[n]] for n in phases}, {owner[n]: members[n] for n in phases})


def _observable(events: Iterable[Event], keep_sync: bool) -> list[Event]:
    """The events both sides are measured from: without inferred boundaries, and without ``sync``
    when the recording has no generations (rounds are then counted from assign bursts on both)."""
    kept = [e for e in events if e.ev == "crash" or not e.extra.get("inferred")]
    return kept if keep_sync else [e for e in kept if e.ev not in ("sync", "join")]


def replay(recording: Recording, config: SimConfig | None = None, **settings: Any) -> ReplayReport:
    """Replay ``recording`` in the simulator and compare it phase by phase.

    ``config`` None: :func:`replay_config` of the recording and ``settings`` (e.g.
    ``assignor="cooperative-sticky"``, ``broker="tansu"``, ``session_timeout_ms=10000``).
    """
    config = config or replay_config(recording, **settings)
    plan = plan_replay(recording, config)
    if recording.meta is None:
        assumed = [
            f"{label} {value}"
            for key, label, value in (
                ("broker", "broker", config.broker),
                ("session_timeout_ms", "session", f"{config.session_timeout_ms:g} ms"),
                ("heartbeat_interval_ms", "heartbeat", f"{config.heartbeat_interval_ms:g} ms"),
            )
            if settings.get(key) is None
        ]
        if assumed:
            plan.notes.append(f"no meta.json: assumed {', '.join(assumed)} (--broker, --session-ms, --heartbeat-ms)")
    result = simulate(plan.scenario, config)
    keep_sync = any(
        e.ev == "sync" and e.extra.get("gen") is not None and not e.extra.get("inferred") for e in recording.events
    )
    recorded_events = _observable(list(recording.events) + plan.inferred_crashes, keep_sync)
    recorded = timeline_metrics(recorded_events, plan.phases)
    sim_windows = [w for name, w in result.phases.items() if name != "initial"]
    names = list(plan.phases)
    if len(sim_windows) != len(names):
        raise RuntimeError(f"simulation ran {len(sim_windows)} steps for {len(names)} recorded phases")
    simulated = timeline_metrics(_observable(result.events, keep_sync), dict(zip(names, sim_windows)))
    comparisons = [PhaseComparison(n, plan.members[n], recorded[n], simulated[n]) for n in names]
    protocol = result.protocol.name.lower()
    return ReplayReport(
        label=recording.label,
        recorded_as=_recorded_as(recording),
        simulated_as=f"{config.assignor} ({protocol}"
        + ", static" * config.static_membership
        + ", fast follow-up" * config.fast_follow_up
        + ")",
        config=config,
        plan=plan,
        result=result,
        phases=comparisons,
    )
