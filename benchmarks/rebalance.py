"""What a rebalance costs: aiokafka eager vs kassign cooperative vs the incumbents' cooperative-sticky.

One run measures every (profile, scenario, mode) cell ``--repeat`` times (median shown) on the
session broker, each repetition a fresh topic of 24 partitions and a fresh group under a steady
keyed load:

* profiles: ``instant`` processing, and ``process`` (each member works 250–750 ms on every
  non-empty poll batch, uniform and seeded: when a member notices a rebalance depends on it);
* scenarios: ``scale-out`` 3 -> 6 members, ``scale-in`` 6 -> 3 (clean closes), ``crash`` (SIGKILL)
  of 1 of 6, ``rolling-restart`` of 6 (each member closed and its replacement subscribed as soon as
  its consumer has closed, the group settled before the next: the replacement's process is started
  and ready beforehand, so a JVM's or interpreter's start-up and exit, which differ by client, are
  not measured);
* modes: ``eager`` (a plain ``AIOKafkaConsumer`` with its default round-robin assignor: what a
  user has today), ``cooperative`` (kassign's ``CooperativeConsumer``, ``fast_follow_up=False``),
  ``cooperative+fast-follow-up`` (the same with ``fast_follow_up=True``), ``cooperative+static``
  (the fast follow-up plus ``group_instance_id``: a restarted member takes its own partitions
  back), and ``java-cooperative`` / ``librdkafka-cooperative`` (kafka-clients 3.9.1 and
  confluent-kafka's librdkafka with ``cooperative-sticky``, in the same harness);
* KIP-848 modes, ``group.protocol=consumer`` with the broker's default (uniform) assignor:
  ``consumer`` (kassign's ``CooperativeConsumer(group_protocol="consumer")``), ``java-consumer``
  (kafka-clients 4.4.0) and ``librdkafka-consumer``. The broker owns their session timeout and
  heartbeat interval, so each run sets the group's own ``consumer.session.timeout.ms`` and
  ``consumer.heartbeat.interval.ms`` to the classic members' values.

Each trigger is fired at a set phase of the heartbeat interval after the last assignment (1/6,
1/2, 5/6 of it, in turn over the repetitions), so medians compare like with like.

Columns, from the members' own timeline (callbacks and processed records):

* ``unowned ps``: partition-seconds without an owner from the trigger to the settle (a closing
  member stops owning when it starts closing);
* ``kept pause s``: the longest stretch without processed records of a partition that kept its
  owner (owner just before the trigger = owner at the settle), against ``steady s``, the same
  measure over the steady stretch before the trigger (the members' reporting rhythm);
* ``settle s``: trigger to the last ownership change; ``rounds``: generations that handed out
  assignments; ``moved``: partitions whose owner changed; ``dup``/``lost``: records processed more
  than once / never; ``double ps``: partition-seconds with two owners (must be 0).

Run it alone on the broker::

    flock /tmp/kassign-broker.lock python benchmarks/rebalance.py --repeat 5 --json results.json

The broker is ``kassign.broker.open_broker``'s: ``KAFKA_BOOTSTRAP_SERVERS``, else a local Apache
Kafka from Maven Central's jars, else the embedded Tansu broker (every JoinGroup held for half the
session timeout, no join barrier: its numbers compare behaviours, not brokers).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.group_config import set_consumer_group_timing  # noqa: E402
from integration.proc_usage import busy_pct, machine_busy_seconds  # noqa: E402
from integration.timeline_checks import double_ownership, processed_offsets  # noqa: E402
from integration.topics import create_topic  # noqa: E402
from kassign.broker import open_broker  # noqa: E402
from kassign.model import TopicPartition  # noqa: E402
from kassign.sim.bench_meta import MODE_NAMES  # noqa: E402
from kassign.timeline.events import Event  # noqa: E402
from kassign.timeline.metrics import (  # noqa: E402
    GONE_EVENTS,
    change_settles,
    count_generations,
    delivery_counts,
    kept_partitions,
    longest_processing_gap,
    ownership_intervals,
    processing_times,
    unowned_partition_seconds,
)

log = logging.getLogger("benchmarks.rebalance")

COOPERATIVE_STICKY = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
#: Java members of the KIP-848 rows (3.9's consumer speaks only an early-access version of it).
KIP848_KAFKA_CLIENTS = "4.4.0"


@dataclass(frozen=True)
class Mode:
    """How the members of one mode are built: the driver's member kind, strategy and consumer factory,
    and whether each member slot keeps a ``group.instance.id`` across restarts."""

    strategy: str
    consumer_factory: str | None = None
    kind: str = "aiokafka"
    static: bool = False
    #: Scenarios where the mode differs from another row (static membership changes only restarts).
    scenarios: tuple[str, ...] | None = None
    #: ``"consumer"``: KIP-848's protocol, the broker assigning (``strategy`` is then unused).
    group_protocol: str | None = None
    #: Java members only: the kafka-clients release (``None``: the reference 3.9.1).
    kafka_clients: str | None = None
    #: Consumer protocol only: the group's ``consumer.assignment.interval.ms`` (``None``: the broker's, 1 s).
    assignment_interval_ms: int | None = None


MODES = {
    "eager": Mode("roundrobin"),  # aiokafka's default partition_assignment_strategy
    "cooperative": Mode(COOPERATIVE_STICKY, "benchmarks.rebalance:plain_cooperative_consumer"),
    "cooperative+fast-follow-up": Mode(COOPERATIVE_STICKY, "benchmarks.rebalance:fast_follow_up_consumer"),
    "cooperative+static": Mode(
        COOPERATIVE_STICKY, "benchmarks.rebalance:fast_follow_up_consumer", static=True, scenarios=("rolling-restart",)
    ),
    "java-cooperative": Mode("cooperative-sticky", kind="java"),
    "librdkafka-cooperative": Mode("cooperative-sticky", kind="confluent"),
    "consumer": Mode("range", "benchmarks.rebalance:consumer_protocol_consumer", group_protocol="consumer"),
    # The same with the group's assignment interval at 0: the broker's lever for KIP-848's cost (KIP-1263).
    "consumer+interval-0": Mode(
        "range", "benchmarks.rebalance:consumer_protocol_consumer", group_protocol="consumer", assignment_interval_ms=0
    ),
    "java-consumer": Mode("range", kind="java", group_protocol="consumer", kafka_clients=KIP848_KAFKA_CLIENTS),
    "librdkafka-consumer": Mode("range", kind="confluent", group_protocol="consumer"),
}
#: The modes the README's table has always had (the KIP-848 rows are a table of their own).
CLASSIC_MODES = (
    "eager",
    "cooperative",
    "cooperative+fast-follow-up",
    "cooperative+static",
    "java-cooperative",
    "librdkafka-cooperative",
)
SCENARIOS = ("scale-out", "scale-in", "crash", "rolling-restart")
#: Work per non-empty poll batch, ms (uniform in the range, seeded per run and member).
PROFILES = {"instant": (0, 0), "process": (250, 750)}
#: Where in the heartbeat interval after the last assignment each repetition fires its trigger.
PHASES = (1 / 6, 1 / 2, 5 / 6)
#: The modes' short names (run directories, progress lines): the recordings' names the simulator's
#: calibration reads, and the KIP-848 group with its assignment interval at 0.
SHORT = {**MODE_NAMES, "consumer+interval-0": "kip848-i0"}


def plain_cooperative_consumer(**config: Any) -> Any:
    """A ``CooperativeConsumer`` with the fast follow-up off (the members' consumer factory)."""
    from kassign.adapters.aiokafka import CooperativeConsumer

    return CooperativeConsumer(fast_follow_up=False, **config)


def consumer_protocol_consumer(**config: Any) -> Any:
    """A ``CooperativeConsumer`` on KIP-848's protocol (the member passes ``group_protocol``)."""
    from kassign.adapters.aiokafka import CooperativeConsumer

    return CooperativeConsumer(**config)


def fast_follow_up_consumer(**config: Any) -> Any:
    """A ``CooperativeConsumer`` with the fast follow-up on (the members' consumer factory)."""
    from kassign.adapters.aiokafka import CooperativeConsumer

    return CooperativeConsumer(fast_follow_up=True, **config)


@dataclass(frozen=True)
class RunResult:
    """One scenario in one mode, measured from its timeline."""

    scenario: str
    mode: str
    unowned_ps: float
    kept_pause_s: float
    steady_pause_s: float
    settle_s: float
    rounds: int
    moved: int
    kept: int
    duplicates: int
    lost: int
    double_ps: float
    profile: str = "instant"
    phase: float = 0.0
    #: The members' processes over the steady stretch before the trigger: resident memory summed
    #: (MB) and CPU used (percent of one core, summed).
    members_rss_mb: float = 0.0
    members_cpu_pct: float = 0.0
    #: The whole machine's CPU (members, broker, driver and producers; percent of one core, so 200 is
    #: both cores of a 2-core machine) over that steady stretch, and from the first trigger until the
    #: group settled (a rolling restart's: all its restarts, the replacements' start-ups among them).
    #: None where /proc/stat cannot be read, and in runs recorded before 2026-11-29.
    machine_cpu_pct: float | None = None
    machine_cpu_change_pct: float | None = None


COLUMNS = (
    ("unowned_ps", "unowned ps", 2),
    ("kept_pause_s", "kept pause s", 2),
    ("steady_pause_s", "steady s", 2),
    ("settle_s", "settle s", 2),
    ("rounds", "rounds", 1),
    ("moved", "moved", 1),
    ("duplicates", "dup", 0),
    ("lost", "lost", 0),
    ("double_ps", "double ps", 2),
)


def measure(
    scenario: str,
    mode: str,
    events: Sequence[Event],
    steps: Sequence[float],
    end: float,
    *,
    partitions: Sequence[TopicPartition],
    produced: Mapping[TopicPartition, Sequence[int]],
    steady_s: float,
) -> RunResult:
    """The row of one run. ``steps``: when each change began (one for a scale-out or scale-in, one
    per restarted member); ``end``: the end of the measured stretch (after the final settle)."""
    if not steps or end <= steps[-1]:
        raise ValueError(f"need change times before the end {end}, got {list(steps)}")
    topic = partitions[0].topic
    intervals = ownership_intervals(events, release_events=GONE_EVENTS)
    times = processing_times(events, topic)
    settles = change_settles(events, steps, end)
    pauses, moved, kept = [], 0, 0
    for lo, settle in zip(steps, settles):
        still = kept_partitions(intervals, lo, settle)
        kept += len(still)
        moved += len(partitions) - len(still)
        pauses.append(longest_processing_gap(times, still, lo, settle))
    dup, lost = delivery_counts(processed_offsets(events, topic), produced)
    start = steps[0]
    last = max(e.t for e in events)
    return RunResult(
        scenario=scenario,
        mode=mode,
        unowned_ps=unowned_partition_seconds(intervals, partitions, start, settles[-1]),
        kept_pause_s=max(pauses),
        steady_pause_s=longest_processing_gap(times, partitions, start - steady_s, start),
        settle_s=round(settles[-1] - start, 6),
        rounds=count_generations([e for e in events if start <= e.t < end], earlier=[e for e in events if e.t < start]),
        moved=moved,
        kept=kept,
        duplicates=dup,
        lost=lost,
        double_ps=round(sum(min(o.end, last) - o.start for o in double_ownership(events)), 6),
    )


def _wait_for_phase(group: GroupDriver, heartbeat_s: float, phase: float) -> None:
    """Sleep until ``phase`` of a heartbeat interval after the group's last assignment callback (the
    members' heartbeat timers restart with their SyncGroup), at least a little from now."""
    last = max((e.t for e in group.change_events() if e.ev == "cb_assigned"), default=time.time())
    now = time.time()
    periods = max(0, int((now - last) / heartbeat_s) + 1)
    time.sleep(max(0.0, last + (periods + phase) * heartbeat_s - now))


def run_once(
    bootstrap: str,
    scenario: str,
    mode: str,
    *,
    partitions: int,
    rate: float,
    timing: GroupTiming,
    steady_s: float,
    phase: float = PHASES[0],
    profile: str = "instant",
    record: Path | None = None,
    broker: str = "",
    members: int = 6,
    change: int | None = None,
    topics: Sequence[int] | None = None,
    restart_sample: int | None = None,
    held_newcomers: bool = False,
    members_per_process: int = 1,
) -> RunResult:
    """Run one scenario in one mode on a fresh topic and group, and measure it; with ``record``, write
    the run's timeline there (``events.jsonl.gz`` and ``meta.json``, the format of
    ``data/rebalance-timelines``).

    The group has ``members`` members at full size; a scale-out adds ``change`` of them to the others
    and a scale-in closes ``change`` (default half: 3 -> 6 and 6 -> 3); a rolling restart restarts the
    first ``restart_sample`` (default all). ``topics``: partition counts of the group's topics (default
    one topic of ``partitions``), the load spread over them by partition count. ``held_newcomers``: a
    scale-out's members are started and ready before the trigger, which lets them subscribe (in a large
    group on a small machine, many interpreters starting at once starve the running members'
    heartbeats: that would measure the machine, not the protocol). ``members_per_process``: aiokafka
    members share processes, this many to one (see :class:`GroupDriver`; not with a crash)."""
    if change is None:
        change = members // 2
    if not 0 < change < members:
        raise ValueError(f"need 0 < change < members, got change {change} of {members} members")
    sample = members if restart_sample is None else restart_sample
    if not 0 < sample <= members:
        raise ValueError(f"need 0 < restart_sample <= members, got {restart_sample} of {members}")
    layout = list(topics) if topics else [partitions]
    spec = MODES[mode]
    tag = f"bench-{scenario}-{SHORT[mode]}-{uuid.uuid4().hex[:8]}"
    names = [tag] if len(layout) == 1 else [f"{tag}-t{i}" for i in range(len(layout))]
    for name, count in zip(names, layout):
        create_topic(bootstrap, name, count)
    if spec.group_protocol is not None:
        set_consumer_group_timing(
            bootstrap,
            tag,
            session_ms=timing.session_ms,
            heartbeat_ms=timing.heartbeat_ms,
            assignment_interval_ms=spec.assignment_interval_ms,
        )

    def start(slots: range, *, hold: bool = False) -> list[str]:
        """Members for these slots; a static mode gives each slot its own group.instance.id, which a
        restarted slot's replacement takes over."""
        return [
            group.start_member(
                spec.kind,
                spec.strategy,
                hold=hold,
                consumer_factory=spec.consumer_factory,
                group_protocol=spec.group_protocol,
                kafka_clients=spec.kafka_clients,
                instance_id=f"{tag}-slot{slot}" if spec.static else None,
            )
            for slot in slots
        ]

    hb = timing.heartbeat_ms / 1000.0
    # Larger groups start and settle slower on a small machine (every member a process).
    settle_timeout = 120 + 2 * members
    total = sum(layout)
    with GroupDriver(bootstrap, tag, names, timing=timing, members_per_process=members_per_process) as group:
        producers = [group.start_producer(rate=rate * count / total, topic=n) for n, count in zip(names, layout)]
        ids = start(range(members - change if scenario == "scale-out" else members))
        group.wait_settled(settle_timeout, balanced=True)
        held = scenario == "scale-out" and held_newcomers
        newcomers = start(range(members - change, members), hold=True) if held else []
        for newcomer in newcomers:
            group.wait_ready(newcomer, 90)
        usage_before, usage_from, busy_before = group.member_usage(), time.monotonic(), machine_busy_seconds()
        time.sleep(steady_s)
        usage_after, usage_span = group.member_usage(), time.monotonic() - usage_from
        machine_pct = busy_pct(busy_before, machine_busy_seconds(), usage_span)
        change_busy: float | None = None
        change_from = 0.0
        rss_mb = sum(rss for rss, _ in usage_after.values()) / 2**20
        cpu_pct = 100 * sum(cpu - usage_before[m][1] for m, (_, cpu) in usage_after.items() if m in usage_before)
        cpu_pct /= usage_span
        if scenario == "scale-out":
            _wait_for_phase(group, hb, phase)
            steps = [time.time()]
            change_busy, change_from = machine_busy_seconds(), time.monotonic()
            if held:
                for newcomer in newcomers:
                    group.release_member(newcomer)
            else:
                start(range(members - change, members))
            group.wait_settled(settle_timeout, balanced=True)
        elif scenario == "scale-in":
            _wait_for_phase(group, hb, phase)
            steps = [time.time()]
            change_busy, change_from = machine_busy_seconds(), time.monotonic()
            group.stop_members(ids[members - change :])
            group.wait_settled(settle_timeout, balanced=True)
        elif scenario == "crash":
            _wait_for_phase(group, hb, phase)
            steps = [time.time()]
            change_busy, change_from = machine_busy_seconds(), time.monotonic()
            group.crash_member(ids[-1])
            group.wait_settled(settle_timeout, balanced=True)
        else:
            steps = []
            for slot, member in enumerate(ids[:sample]):
                (replacement,) = start(range(slot, slot + 1), hold=True)
                group.wait_ready(replacement, 90)
                _wait_for_phase(group, hb, phase)
                steps.append(time.time())
                if slot == 0:
                    change_busy, change_from = machine_busy_seconds(), time.monotonic()
                group.hand_over(member, replacement)
                group.wait_settled(settle_timeout, balanced=True)
        change_pct = busy_pct(change_busy, machine_busy_seconds(), time.monotonic() - change_from)
        time.sleep(steady_s)
        end = time.time()
        for producer in producers:
            producer.stop()
        try:
            for producer in producers:
                group.wait_all_processed(producer, 60)
        except TimeoutError as exc:
            log.warning("%s %s: not every record processed: %s", scenario, mode, str(exc).splitlines()[0])
        events = group.events()
        produced = {tp: offsets for producer in producers for tp, offsets in producer.produced().items()}
        result = replace(
            measure(
                scenario, mode, events, steps, end, partitions=group.partitions, produced=produced, steady_s=steady_s
            ),
            profile=profile,
            phase=round(phase, 3),
            members_rss_mb=round(rss_mb, 1),
            members_cpu_pct=round(cpu_pct, 1),
            machine_cpu_pct=machine_pct,
            machine_cpu_change_pct=change_pct,
        )
        if record is not None:
            _record(
                record,
                events,
                group,
                spec,
                timing,
                {
                    "scenario": scenario,
                    "mode": mode,
                    "profile": profile,
                    "phase": round(phase, 3),
                    "broker": broker,
                    "partitions": total,
                    "topics": layout,
                    "members": members,
                    "change": change,
                    "restart_sample": sample,
                    "held_newcomers": held_newcomers,
                    "members_per_process": members_per_process,
                    "rate": rate,
                    "triggers": steps,
                    "end": end,
                    "result": asdict(result),
                },
            )
        return result


def _record(
    path: Path, events: Sequence[Event], group: GroupDriver, spec: Mode, timing: GroupTiming, meta: dict[str, Any]
) -> None:
    from kassign.timeline.events import write_events

    path.mkdir(parents=True, exist_ok=True)
    # Positions reports are left out: the callbacks and processed ranges are what replays need.
    kept = [e for e in events if e.ev != "progress"]
    write_events(path / "events.jsonl.gz", kept, single_topic=group.topics[0] if len(group.topics) == 1 else None)
    meta |= {
        "kind": spec.kind,
        "strategy": spec.strategy,
        "static": spec.static,
        "group_protocol": spec.group_protocol or "classic",
        "assignment_interval_ms": spec.assignment_interval_ms,
        "session_ms": timing.session_ms,
        "heartbeat_ms": timing.heartbeat_ms,
        "max_poll_ms": timing.max_poll_ms,
        "process_ms": list(timing.process_ms),
        "seed": timing.seed,
        "clients": _client_versions(),
    }
    (path / "meta.json").write_text(json.dumps(meta, indent=1, default=str))


def medians(results: Sequence[RunResult]) -> dict[str, float]:
    """Median of every numeric column over the runs of one cell."""
    return {name: statistics.median(getattr(r, name) for r in results) for name, _, _ in COLUMNS}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, linear between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    k = q * (len(ordered) - 1)
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class Spread:
    """How one cell's unowned partition-seconds are distributed over its runs (users live the whole
    distribution: a median hides the runs that take extra rounds)."""

    runs: int
    mean: float
    p90: float
    median: float
    max: float
    #: runs per number of rounds
    rounds: dict[int, int]


def spread(results: Sequence[RunResult]) -> Spread:
    """The distribution of unowned partition-seconds over the runs of one cell."""
    values = [r.unowned_ps for r in results]
    rounds: dict[int, int] = {}
    for r in results:
        rounds[r.rounds] = rounds.get(r.rounds, 0) + 1
    return Spread(
        len(values),
        statistics.mean(values),
        percentile(values, 0.9),
        statistics.median(values),
        max(values),
        dict(sorted(rounds.items())),
    )


def format_spread(
    cells: Mapping[tuple[str, str, str], Sequence[RunResult]],
    profiles: Sequence[str],
    scenarios: Sequence[str],
    modes: Sequence[str],
) -> str:
    """Unowned partition-seconds per cell as mean, 90th percentile, median and maximum, with how many
    runs took how many rounds, as markdown."""
    lines = [
        "| profile | scenario | mode | runs | mean | p90 | median | max | runs by rounds |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for profile in profiles:
        for scenario in scenarios:
            for mode in modes:
                runs = cells.get((profile, scenario, mode))
                if not runs:
                    continue
                sp = spread(runs)
                by_rounds = ", ".join(f"{n}: {c}" for n, c in sp.rounds.items())
                lines.append(
                    f"| {profile} | {scenario} | {mode} | {sp.runs} | {sp.mean:.2f} | {sp.p90:.2f} | "
                    f"{sp.median:.2f} | {sp.max:.2f} | {by_rounds} |"
                )
    return "\n".join(lines)


def failed_run_line(label: str, exc: BaseException) -> str:
    """The one line a failed run gets in the progress output (the table counts it as failed)."""
    return f"{label}: FAILED {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else ("1.00" if a == b else "inf")


def format_table(
    cells: Mapping[tuple[str, str, str], Sequence[RunResult]],
    failures: Mapping[tuple[str, str, str], int],
    profiles: Sequence[str],
    scenarios: Sequence[str],
    modes: Sequence[str],
) -> str:
    """The side-by-side table (medians per cell) and the ratios to eager, as markdown."""
    header = "| profile | scenario | mode | runs | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    lines = [header, "|---|---|---|---:|" + "---:|" * len(COLUMNS)]
    for profile in profiles:
        for scenario in scenarios:
            for mode in modes:
                if MODES[mode].scenarios is not None and scenario not in MODES[mode].scenarios:
                    continue
                key = (profile, scenario, mode)
                runs = cells.get(key, [])
                failed = failures.get(key, 0)
                shown = f"{len(runs)}" + (f" (+{failed} failed)" if failed else "")
                if not runs:
                    lines.append(f"| {profile} | {scenario} | {mode} | {shown} |" + " – |" * len(COLUMNS))
                    continue
                med = medians(runs)
                values = " | ".join(f"{med[name]:.{digits}f}" for name, _, digits in COLUMNS)
                lines.append(f"| {profile} | {scenario} | {mode} | {shown} | {values} |")
    lines.append("")
    for profile in profiles:
        for scenario in scenarios:
            eager = cells.get((profile, scenario, "eager"))
            if not eager:
                continue
            base = medians(eager)
            parts = []
            for mode in modes:
                if mode != "eager" and cells.get((profile, scenario, mode)):
                    med = medians(cells[(profile, scenario, mode)])
                    parts.append(
                        f"{SHORT[mode]}/eager unowned ps {_ratio(med['unowned_ps'], base['unowned_ps'])}, "
                        f"settle {_ratio(med['settle_s'], base['settle_s'])}"
                    )
            if parts:
                lines.append(f"- {profile} {scenario}: " + "; ".join(parts))
    return "\n".join(lines)


def _csv(value: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in allowed]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown or value!r}; choose from {', '.join(allowed)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--profiles",
        type=lambda v: _csv(v, list(PROFILES), "profile"),
        default=list(PROFILES),
        help=f"comma-separated, of {', '.join(PROFILES)} (default all)",
    )
    ap.add_argument(
        "--scenarios",
        type=lambda v: _csv(v, SCENARIOS, "scenario"),
        default=list(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default all)",
    )
    ap.add_argument(
        "--modes",
        type=lambda v: _csv(v, list(MODES), "mode"),
        default=list(CLASSIC_MODES),
        help=f"comma-separated, of {', '.join(MODES)} (default: the classic protocol's {', '.join(CLASSIC_MODES)})",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell; the table shows medians (default 5)")
    ap.add_argument(
        "--first-rep",
        type=int,
        default=1,
        help="number of the first repetition (default 1); more runs of a recorded set go on from its last "
        "number, with the seeds and trigger phases that repetition would have had",
    )
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--rate", type=float, default=600.0, help="records produced per second")
    ap.add_argument("--steady-s", type=float, default=3.0, help="steady stretch before the change and after it")
    ap.add_argument("--session-ms", type=int, default=1500)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1, help="seeds the processing times (default 1)")
    ap.add_argument("--json", type=Path, default=None, help="also write every run and the table here")
    ap.add_argument(
        "--record",
        type=Path,
        default=None,
        help="write each run's timeline to DIR/<profile>-<scenario>-<mode>-r<k>/ (events.jsonl.gz, meta.json)",
    )
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.first_rep < 1:
        ap.error(f"--first-rep must be at least 1, got {args.first_rep}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from tqdm import tqdm

    # cells interleaved, so a slow spell of the machine spreads over every cell
    reps = range(args.first_rep - 1, args.first_rep - 1 + args.repeat)
    plan = [
        (k, p, s, m)
        for k in reps
        for p in args.profiles
        for s in args.scenarios
        for m in args.modes
        if MODES[m].scenarios is None or s in MODES[m].scenarios
    ]
    cells: dict[tuple[str, str, str], list[RunResult]] = {}
    failures: dict[tuple[str, str, str], int] = {}
    started = time.time()
    with open_broker() as broker:
        print(f"broker: {broker.describe()}")
        with tqdm(plan, desc="rebalance runs", unit="run") as bar:
            for k, profile, scenario, mode in bar:
                bar.set_postfix_str(f"{profile} {scenario} {mode}")
                # Sub-second processing reports: a kept partition's pause is measured against this rhythm.
                timing = GroupTiming(
                    session_ms=args.session_ms,
                    heartbeat_ms=args.heartbeat_ms,
                    progress_ms=200,
                    process_ms=PROFILES[profile],
                    seed=args.seed * 1000 + k,
                )
                phase = PHASES[k % len(PHASES)]
                key = (profile, scenario, mode)
                try:
                    record = args.record / f"{profile}-{scenario}-{SHORT[mode]}-r{k + 1}" if args.record else None
                    result = run_once(
                        broker.bootstrap,
                        scenario,
                        mode,
                        partitions=args.partitions,
                        rate=args.rate,
                        timing=timing,
                        steady_s=args.steady_s,
                        phase=phase,
                        profile=profile,
                        record=record,
                        broker=broker.describe(),
                    )
                except Exception as exc:  # one failed run (a group that never settles...) must not end the table
                    failures[key] = failures.get(key, 0) + 1
                    tqdm.write(failed_run_line(f"{profile} {scenario} {mode}", exc))
                    continue
                cells.setdefault(key, []).append(result)
                tqdm.write(
                    f"{profile} {scenario} {mode}: unowned {result.unowned_ps:.2f} ps, settle "
                    f"{result.settle_s:.2f} s, rounds {result.rounds}, kept pause {result.kept_pause_s:.2f} s, "
                    f"dup {result.duplicates}, lost {result.lost}"
                )
    table = format_table(cells, failures, args.profiles, args.scenarios, args.modes)
    table += "\n\nUnowned partition-seconds over the runs of each cell:\n\n" + format_spread(
        cells, args.profiles, args.scenarios, args.modes
    )
    print(
        f"\n{args.partitions} partitions, {args.rate:.0f} records/s, session {args.session_ms} ms, heartbeat "
        f"{args.heartbeat_ms} ms, processing per batch {PROFILES}; median of {args.repeat} runs per cell; "
        f"{time.time() - started:.0f} s in all\n"
    )
    print(table)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "broker": broker.describe(),
                    "clients": _client_versions(),
                    "settings": {k: v for k, v in vars(args).items() if k != "json"},
                    "runs": [asdict(r) for runs in cells.values() for r in runs],
                    "failures": [
                        {"profile": p, "scenario": s, "mode": m, "count": n} for (p, s, m), n in failures.items()
                    ],
                    "table": table,
                },
                indent=2,
                default=str,
            )
        )
    return 0


def _client_versions() -> dict[str, str]:
    import aiokafka
    import confluent_kafka

    from kassign._java import REFERENCE_KAFKA_CLIENTS

    return {
        "aiokafka": aiokafka.__version__,
        "confluent-kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-clients": REFERENCE_KAFKA_CLIENTS,
        "kafka-clients (consumer protocol)": KIP848_KAFKA_CLIENTS,
    }


if __name__ == "__main__":
    sys.exit(main())
