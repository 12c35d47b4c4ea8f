"""What a rebalance costs: aiokafka eager vs kassign cooperative, without and with the fast follow-up.

One run measures every (scenario, mode) cell ``--repeat`` times (median shown) on the session
broker, each repetition a fresh topic of 24 partitions and a fresh group under a steady keyed load:

* scenarios: ``scale-out`` 3 -> 6 members, ``scale-in`` 6 -> 3 (clean closes), ``rolling-restart``
  of 6 members (each closed, a new one started, the group settled before the next);
* modes: ``eager`` (a plain ``AIOKafkaConsumer`` with its default round-robin assignor: what a
  user has today), ``cooperative`` (kassign's ``CooperativeConsumer`` with ``CooperativeStickyAssignor``)
  and ``cooperative+fast-follow-up`` (the same with ``fast_follow_up=True``).

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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from kassign.broker import open_broker  # noqa: E402
from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.timeline_checks import double_ownership, processed_offsets  # noqa: E402
from integration.topics import create_topic  # noqa: E402
from kassign.events import Event  # noqa: E402
from kassign.metrics import (  # noqa: E402
    GONE_EVENTS,
    count_generations,
    delivery_counts,
    kept_partitions,
    longest_processing_gap,
    ownership_intervals,
    processing_times,
    unowned_partition_seconds,
)
from kassign.model import TopicPartition  # noqa: E402

log = logging.getLogger("benchmarks.rebalance")

COOPERATIVE_STICKY = "kassign.adapters.aiokafka:CooperativeStickyAssignor"


@dataclass(frozen=True)
class Mode:
    """How the members of one mode are built: the driver's strategy and consumer factory."""

    strategy: str
    consumer_factory: str | None


MODES = {
    "eager": Mode("roundrobin", None),  # aiokafka's default partition_assignment_strategy
    "cooperative": Mode(COOPERATIVE_STICKY, "kassign.adapters.aiokafka:CooperativeConsumer"),
    "cooperative+fast-follow-up": Mode(COOPERATIVE_STICKY, "benchmarks.rebalance:fast_follow_up_consumer"),
}
SCENARIOS = ("scale-out", "scale-in", "rolling-restart")
SHORT = {"eager": "eager", "cooperative": "coop", "cooperative+fast-follow-up": "fast"}


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


COLUMNS = (("unowned_ps", "unowned ps", 2), ("kept_pause_s", "kept pause s", 2), ("steady_pause_s", "steady s", 2),
           ("settle_s", "settle s", 2), ("rounds", "rounds", 1), ("moved", "moved", 1), ("duplicates", "dup", 0),
           ("lost", "lost", 0), ("double_ps", "double ps", 2))


def measure(scenario: str, mode: str, events: Sequence[Event], steps: Sequence[float], end: float, *,
            partitions: Sequence[TopicPartition], produced: Mapping[TopicPartition, Sequence[int]],
            steady_s: float) -> RunResult:
    """The row of one run. ``steps``: when each change began (one for a scale-out or scale-in, one
    per restarted member); ``end``: the end of the measured stretch (after the final settle)."""
    if not steps or end <= steps[-1]:
        raise ValueError(f"need change times before the end {end}, got {list(steps)}")
    topic = partitions[0].topic
    intervals = ownership_intervals(events, release_events=GONE_EVENTS)
    times = processing_times(events, topic)
    bounds = [*steps, end]
    settles, pauses, moved, kept = [], [], 0, 0
    for lo, hi in zip(bounds, bounds[1:]):
        changes = [e.t for e in events
                   if lo <= e.t < hi and e.parts and e.ev in ("cb_assigned", "cb_revoked", "cb_lost")]
        closings = [e.t for e in events if lo <= e.t < hi and e.ev in GONE_EVENTS]
        settle = max(changes + closings, default=lo)
        settles.append(settle)
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


def run_once(bootstrap: str, scenario: str, mode: str, *, partitions: int, rate: float, timing: GroupTiming,
             steady_s: float) -> RunResult:
    """Run one scenario in one mode on a fresh topic and group, and measure it."""
    spec = MODES[mode]
    tag = f"bench-{scenario}-{SHORT[mode]}-{uuid.uuid4().hex[:8]}"
    topic = create_topic(bootstrap, tag, partitions)
    kwargs = {"consumer_factory": spec.consumer_factory}
    with GroupDriver(bootstrap, tag, topic, timing=timing) as group:
        producer = group.start_producer(rate=rate)
        members = group.start_members(3 if scenario == "scale-out" else 6, "aiokafka", spec.strategy, **kwargs)
        group.wait_settled(90)
        time.sleep(steady_s)
        steps = [time.time()]
        if scenario == "scale-out":
            group.start_members(3, "aiokafka", spec.strategy, **kwargs)
            group.wait_settled(120)
        elif scenario == "scale-in":
            group.stop_members(members[3:])
            group.wait_settled(120)
        else:
            for i, member in enumerate(members):
                if i:
                    steps.append(time.time())
                group.stop_member(member)
                group.start_member("aiokafka", spec.strategy, **kwargs)
                group.wait_settled(120)
        time.sleep(steady_s)
        end = time.time()
        producer.stop()
        try:
            events = group.wait_all_processed(producer, 30)
        except TimeoutError as exc:
            log.warning("%s %s: not every record processed: %s", scenario, mode, str(exc).splitlines()[0])
            events = group.events()
        produced = producer.produced()
        return measure(scenario, mode, events, steps, end, partitions=group.partitions, produced=produced,
                       steady_s=steady_s)


def medians(results: Sequence[RunResult]) -> dict[str, float]:
    """Median of every numeric column over the runs of one cell."""
    return {name: statistics.median(getattr(r, name) for r in results) for name, _, _ in COLUMNS}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else ("1.00" if a == b else "inf")


def format_table(cells: Mapping[tuple[str, str], Sequence[RunResult]], failures: Mapping[tuple[str, str], int],
                 scenarios: Sequence[str], modes: Sequence[str]) -> str:
    """The side-by-side table (medians per cell) and the ratios to eager, as markdown."""
    header = "| scenario | mode | runs | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    lines = [header, "|---|---|---:|" + "---:|" * len(COLUMNS)]
    for scenario in scenarios:
        for mode in modes:
            runs = cells.get((scenario, mode), [])
            failed = failures.get((scenario, mode), 0)
            shown = f"{len(runs)}" + (f" (+{failed} failed)" if failed else "")
            if not runs:
                lines.append(f"| {scenario} | {mode} | {shown} |" + " – |" * len(COLUMNS))
                continue
            med = medians(runs)
            values = " | ".join(f"{med[name]:.{digits}f}" for name, _, digits in COLUMNS)
            lines.append(f"| {scenario} | {mode} | {shown} | {values} |")
    lines.append("")
    for scenario in scenarios:
        eager = cells.get((scenario, "eager"))
        if not eager:
            continue
        base = medians(eager)
        parts = []
        for mode in modes:
            if mode != "eager" and cells.get((scenario, mode)):
                med = medians(cells[(scenario, mode)])
                parts.append(f"{SHORT[mode]}/eager unowned ps {_ratio(med['unowned_ps'], base['unowned_ps'])}, "
                             f"settle {_ratio(med['settle_s'], base['settle_s'])}")
        if parts:
            lines.append(f"- {scenario}: " + "; ".join(parts))
    return "\n".join(lines)


def _csv(value: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in allowed]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown or value!r}; choose from {', '.join(allowed)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=lambda v: _csv(v, SCENARIOS, "scenario"), default=list(SCENARIOS),
                    help=f"comma-separated, of {', '.join(SCENARIOS)} (default all)")
    ap.add_argument("--modes", type=lambda v: _csv(v, list(MODES), "mode"), default=list(MODES),
                    help=f"comma-separated, of {', '.join(MODES)} (default all)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell; the table shows medians (default 5)")
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--rate", type=float, default=600.0, help="records produced per second")
    ap.add_argument("--steady-s", type=float, default=3.0, help="steady stretch before the change and after it")
    ap.add_argument("--session-ms", type=int, default=1500)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--json", type=Path, default=None, help="also write every run and the table here")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from tqdm import tqdm

    # Sub-second processing reports: a kept partition's pause is measured against this rhythm.
    timing = GroupTiming(session_ms=args.session_ms, heartbeat_ms=args.heartbeat_ms, progress_ms=200)
    plan = [(s, m) for _ in range(args.repeat) for s in args.scenarios for m in args.modes]  # cells interleaved
    cells: dict[tuple[str, str], list[RunResult]] = {}
    failures: dict[tuple[str, str], int] = {}
    started = time.time()
    with open_broker() as broker:
        print(f"broker: {broker.describe()}")
        with tqdm(plan, desc="rebalance runs", unit="run") as bar:
            for scenario, mode in bar:
                bar.set_postfix_str(f"{scenario} {mode}")
                try:
                    result = run_once(broker.bootstrap, scenario, mode, partitions=args.partitions, rate=args.rate,
                                      timing=timing, steady_s=args.steady_s)
                except Exception as exc:  # one failed run (a group that never settles...) must not end the table
                    failures[(scenario, mode)] = failures.get((scenario, mode), 0) + 1
                    tqdm.write(f"{scenario} {mode}: FAILED {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
                    continue
                cells.setdefault((scenario, mode), []).append(result)
                tqdm.write(f"{scenario} {mode}: unowned {result.unowned_ps:.2f} ps, settle {result.settle_s:.2f} s, "
                           f"rounds {result.rounds}, kept pause {result.kept_pause_s:.2f} s")
    table = format_table(cells, failures, args.scenarios, args.modes)
    print(f"\n{args.partitions} partitions, {args.rate:.0f} records/s, session {args.session_ms} ms, heartbeat "
          f"{args.heartbeat_ms} ms; median of {args.repeat} runs per cell; {time.time() - started:.0f} s in all\n")
    print(table)
    if args.json:
        args.json.write_text(json.dumps({
            "broker": broker.describe(),
            "settings": {k: v for k, v in vars(args).items() if k != "json"},
            "runs": [asdict(r) for runs in cells.values() for r in runs],
            "failures": [{"scenario": s, "mode": m, "count": n} for (s, m), n in failures.items()],
            "table": table,
        }, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
