"""Commits under rapid churn (issue 27): an application that commits after every batch, in a group whose
members come and go every 0.75-2.25 s, for kassign on both group protocols, aiokafka eager and Java.

Each run: a fresh topic of 12 partitions under a steady keyed load, a group of 3-4 members, each of
which works 100-300 ms (uniform, seeded) on every non-empty poll batch and then commits
synchronously (``await consumer.commit()``; Java ``commitSync``), as most applications do with
``enable_auto_commit=False``; it also commits what it gives up in ``on_partitions_revoked`` and on
close. Then ``--changes`` changes, each a join or a clean leave, at seeded gaps of 0.75-2.25 s,
keeping the group within ``--min-members``..``--max-members`` (a joiner's process is started and
ready beforehand, so only its join is timed; a leaver is asked to close and the schedule goes on).
Once the group has settled the load stops and every record must be processed. Every repetition has
its own schedule (from ``--seed`` and the repetition), the same for every mode.

Modes: ``kassign-classic`` (``CooperativeConsumer``, cooperative-sticky, the fast follow-up on),
``kassign-consumer`` (``CooperativeConsumer(group_protocol="consumer")``, KIP-848, the broker's
assignor), ``aiokafka-eager`` (a plain ``AIOKafkaConsumer`` with its default assignor) and
``java-cooperative`` (kafka-clients 3.9.1, ``cooperative-sticky``, ``commitSync`` after each batch).

Figures per mode (:mod:`benchmarks.commit_stats`): commits, failed commits by error class (and
where: after a batch, in the revocation callback, on close), failed commits of partitions the member
kept, commit latency p50/p99/max over every commit, records re-read by the member that had processed
them, duplicates on partitions that moved and on partitions that did not, records lost. Targets
(issue 27): kassign 0 commit errors on both protocols, 0 lost, duplicates only on partitions that
moved. Run it alone on the broker::

    flock /tmp/broker-tests.lock python -m benchmarks.commits_under_churn --reps 5 \\
        --out benchmarks/results/commits-under-churn-2026-11-27-kafka44

The exit status is 1 when a kassign mode shows a commit error, a lost record or a duplicate on a
partition that did not move, or when a run failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.commit_stats import RunStats, pooled, run_stats  # noqa: E402
from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.group_config import set_consumer_group_timing  # noqa: E402
from integration.topics import create_topic  # noqa: E402

log = logging.getLogger("benchmarks.commits_under_churn")

__all__ = ["MODES", "Mode", "Change", "Schedule", "change_schedule", "run_once", "format_table", "main"]

COOPERATIVE_STICKY = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
COOPERATIVE_CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"


@dataclass(frozen=True)
class Mode:
    """How one mode's members are built (the driver's member kind, strategy, consumer factory, protocol)."""

    title: str
    kind: str
    strategy: str
    consumer_factory: str | None = None
    group_protocol: str | None = None
    #: the figures this mode is held to (issue 27's targets): kassign's
    judged: bool = False


MODES: dict[str, Mode] = {
    "kassign-classic": Mode(
        "kassign classic", "aiokafka", COOPERATIVE_STICKY, COOPERATIVE_CONSUMER, "classic", judged=True
    ),
    "kassign-consumer": Mode(
        "kassign consumer protocol (KIP-848)", "aiokafka", "range", COOPERATIVE_CONSUMER, "consumer", judged=True
    ),
    "aiokafka-eager": Mode("aiokafka eager", "aiokafka", "roundrobin"),  # aiokafka's default assignor
    "java-cooperative": Mode("Java 3.9 cooperative-sticky", "java", "cooperative-sticky"),
}


@dataclass(frozen=True)
class Change:
    """One change of the schedule: ``member`` joins or leaves ``at_s`` seconds after the churn began."""

    at_s: float
    action: str  # "join" | "leave"
    member: str


@dataclass(frozen=True)
class Schedule:
    """The members a run starts with and its changes, from a seed."""

    seed: int
    initial: tuple[str, ...]
    changes: tuple[Change, ...]

    def describe(self) -> str:
        steps = " ".join(f"{c.at_s:.2f}:{'+' if c.action == 'join' else '-'}{c.member}" for c in self.changes)
        return f"seed {self.seed}: start {','.join(self.initial)}; {steps}"


def change_schedule(
    seed: int, changes: int, *, min_members: int = 3, max_members: int = 4, gap_s: tuple[float, float] = (0.75, 2.25)
) -> Schedule:
    """The seeded schedule: a group of ``min_members``..``max_members`` (drawn) members ``m1``, ``m2``...,
    then ``changes`` joins (of new members, numbered on) and clean leaves (of a drawn live member),
    ``gap_s`` apart (uniform); at a bound the change is the one that stays inside it."""
    if not 1 <= min_members <= max_members:
        raise ValueError(f"need 1 <= min_members <= max_members, got {min_members}, {max_members}")
    if changes < 0 or not 0 < gap_s[0] <= gap_s[1]:
        raise ValueError(f"need changes >= 0 and 0 < gap low <= gap high, got {changes}, {gap_s}")
    rng = random.Random(f"commits-under-churn:{seed}")
    size = rng.randint(min_members, max_members)
    live = [f"m{i}" for i in range(1, size + 1)]
    initial, number, at = tuple(live), size, 0.0
    out = []
    for _ in range(changes):
        at += rng.uniform(*gap_s)
        if len(live) == min_members == max_members:
            action = rng.choice(("join", "leave"))  # a fixed size only swaps: allow one more for a moment
        elif len(live) <= min_members:
            action = "join"
        elif len(live) >= max_members:
            action = "leave"
        else:
            action = rng.choice(("join", "leave"))
        if action == "join":
            number += 1
            member = f"m{number}"
            live.append(member)
        else:
            member = rng.choice(live)
            live.remove(member)
        out.append(Change(round(at, 3), action, member))
    return Schedule(seed, initial, tuple(out))


def run_once(
    bootstrap: str,
    mode: str,
    schedule: Schedule,
    *,
    rep: int,
    partitions: int,
    rate: float,
    timing: GroupTiming,
    settle_timeout: float = 60.0,
    log_root: Path | None = None,
) -> RunStats:
    """Play ``schedule`` in ``mode`` on a fresh topic and group and measure it. The members' logs and
    timeline go to a temporary directory removed afterwards (kept under ``log_root`` when given)."""
    spec = MODES[mode]
    tag = f"cuc-{mode}-r{rep}-{uuid.uuid4().hex[:6]}"
    topic = create_topic(bootstrap, tag, partitions)
    if spec.group_protocol == "consumer":
        set_consumer_group_timing(bootstrap, tag, session_ms=timing.session_ms, heartbeat_ms=timing.heartbeat_ms)
    log_dir = log_root / tag if log_root else Path(tempfile.mkdtemp(prefix="commits-churn-"))
    began = time.monotonic()
    late = 0.0
    try:
        with GroupDriver(bootstrap, tag, topic, timing=timing, log_dir=log_dir) as group:

            def start(member: str, hold: bool = False) -> None:
                group.start_member(
                    spec.kind,
                    spec.strategy,
                    member_id=member,
                    hold=hold,
                    consumer_factory=spec.consumer_factory,
                    group_protocol=spec.group_protocol,
                )

            producer = group.start_producer(rate=rate)
            for member in schedule.initial:
                start(member)
            group.wait_settled(settle_timeout, balanced=True)
            joiners = [c.member for c in schedule.changes if c.action == "join"]
            if joiners:
                start(joiners[0], hold=True)  # ready before its turn: only its join is timed
            churn_began = time.time()
            for change in schedule.changes:
                wait = churn_began + change.at_s - time.time()
                if wait > 0:
                    time.sleep(wait)
                if change.action == "join":
                    group.wait_ready(change.member, settle_timeout)
                    late = max(late, time.time() - churn_began - change.at_s)
                    group.release_member(change.member)
                    following = joiners.index(change.member) + 1
                    if following < len(joiners):
                        start(joiners[following], hold=True)
                else:
                    late = max(late, time.time() - churn_began - change.at_s)
                    group.request_stop(change.member)
            group.wait_settled(settle_timeout, balanced=True)
            time.sleep(1.0)  # a steady stretch: commits of the settled group
            producer.stop()
            group.wait_all_processed(producer, settle_timeout)
        events = group.events()
        stats = run_stats(mode, rep, schedule.seed, events, producer.produced(), topic)
    except BaseException:
        log.warning("%s rep %s failed; logs and timeline kept in %s", mode, rep, log_dir)
        raise
    if log_root is None:
        shutil.rmtree(log_dir, ignore_errors=True)
    stats.changes = len(schedule.changes)
    stats.members = len(schedule.initial) + sum(c.action == "join" for c in schedule.changes)
    stats.duration_s = round(time.monotonic() - began, 1)
    stats.late_s = round(late, 3)
    return stats


def _errors_text(errors: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in errors.items()) or "0"


def format_table(results: dict[str, list[RunStats]], failures: dict[str, int], modes: Sequence[str]) -> str:
    """The modes side by side (every run of a mode pooled), as markdown."""
    lines = [
        "| mode | runs | commits | failed (by type) | failed, kept partitions | latency p50 / p99 / max ms "
        "| re-read by same member | dup, moved partitions | dup, unmoved partitions | lost / records |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in modes:
        runs = results.get(mode, [])
        failed_runs = f" (+{failures[mode]} failed)" if failures.get(mode) else ""
        if not runs:
            lines.append(f"| {MODES[mode].title} | 0{failed_runs} |" + " – |" * 8)
            continue
        p = pooled(runs)
        by_type = f" ({_errors_text(p['errors'])})" if p["failed"] else ""
        lines.append(
            f"| {MODES[mode].title} | {p['runs']}{failed_runs} | {p['commits']} | {p['failed']}"
            f"{by_type} | {p['kept_failures']} | {p['lat_p50_ms']:.1f} / {p['lat_p99_ms']:.1f} / "
            f"{p['lat_max_ms']:.0f} | {p['reread_same']} | {p['dup_moved']} | {p['dup_unmoved']} | "
            f"{p['lost']} / {p['records']} |"
        )
    return "\n".join(lines)


def format_details(results: dict[str, list[RunStats]], modes: Sequence[str], shown: int = 12) -> str:
    """Per run: commits, errors and where, and the first failed commits (member, why, partitions)."""
    lines = []
    for mode in modes:
        for r in results.get(mode, []):
            lines.append(
                f"{mode} rep {r.rep} (seed {r.seed}, {r.changes} changes, {r.members} members, "
                f"{r.duration_s:.0f} s, latest change {r.late_s:.2f} s behind): {r.commits} commits, "
                f"{r.failed} failed {r.errors_where or ''}, kept-partition failures {len(r.kept_failures)}, "
                f"p50/p99/max {r.latency(50):.1f}/{r.latency(99):.1f}/"
                f"{max(r.latencies_ms, default=0):.0f} ms, "
                f"re-read {r.reread_same}, dup moved {r.dup_moved}, unmoved {r.dup_unmoved}, "
                f"lost {r.lost}/{r.records}"
            )
            lines += [f"    kept: {k}" for k in r.kept_failures[:shown]]
            lines += [f"    failed: {f}" for f in r.failures[:shown]]
            if len(r.failures) > shown:
                lines.append(f"    ... and {len(r.failures) - shown} more failed commits")
    return "\n".join(lines)


def target_problems(results: dict[str, list[RunStats]], failures: dict[str, int]) -> list[str]:
    """Issue 27's targets that a kassign mode misses, and failed runs of any mode."""
    out = [f"{mode}: {n} run(s) failed" for mode, n in failures.items() if n]
    for mode, runs in results.items():
        if not MODES[mode].judged:
            continue
        p = pooled(runs)
        if p["failed"]:
            out.append(f"{mode}: {p['failed']} commit error(s): {p['errors_where']}")
        if p["lost"]:
            out.append(f"{mode}: {p['lost']} record(s) lost")
        if p["dup_unmoved"]:
            out.append(f"{mode}: {p['dup_unmoved']} duplicate(s) on partitions that did not move")
    return out


def _modes(value: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in MODES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown) or repr(value)}; choose from {', '.join(MODES)}"
        )
    return chosen


def _git_commit() -> str:
    """The checkout measured: its commit, and the tracked files changed in the work tree (measured too)."""
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h"], cwd=_ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    changed = sorted(line[3:] for line in dirty if line.strip())
    return out.stdout.strip() + (f" with uncommitted changes to {', '.join(changed)}" if changed else "")


#: What the columns mean, for the results file.
LEGEND = """columns: commits = every commit the members made (after a batch, in on_partitions_revoked, on close);
failed (by type) = commits that raised, by exception class; failed, kept partitions = failed commits
naming a partition the member owned from before the commit until after it, without losing it
(integration/churn/commit_checks.py; an eager member keeps nothing through a rebalance, it revokes
everything); latency = every commit, issued to answered, pooled over the runs; re-read by same
member = extra processings of a record by a member that had processed it before; dup, moved = extra
processings where the partition had another owner in between; dup, unmoved = the others (0 is the
target); lost = produced and acknowledged but never processed."""


def _client_versions() -> dict[str, str]:
    import aiokafka

    from kassign._java import REFERENCE_KAFKA_CLIENTS

    return {"aiokafka": aiokafka.__version__, "kafka-clients": REFERENCE_KAFKA_CLIENTS}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.commits_under_churn", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="runs per mode, each with its own schedule (default 5)")
    ap.add_argument("--changes", type=int, default=20, help="joins and leaves per run (default 20)")
    ap.add_argument("--modes", type=_modes, default=list(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--seed", type=int, default=27, help="seeds the schedules and processing times (default 27)")
    ap.add_argument("--out", type=Path, default=None, help="write the results to OUT.json and OUT.txt (a path prefix)")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rate", type=float, default=300.0, help="records produced per second (default 300)")
    ap.add_argument("--min-members", type=int, default=3)
    ap.add_argument("--max-members", type=int, default=4)
    ap.add_argument("--process-ms", default="100,300", help="work per non-empty batch, LO,HI ms (default 100,300)")
    ap.add_argument("--session-ms", type=int, default=1500)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--keep-logs", type=Path, default=None, help="keep every run's member logs and timeline here")
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no new repetition after this many minutes (the results cover those run)",
    )
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps must be at least 1, got {args.reps}")
    if args.changes < 1:
        ap.error(f"--changes must be at least 1, got {args.changes}")
    if args.max_minutes is not None and args.max_minutes <= 0:
        ap.error(f"--max-minutes must be positive, got {args.max_minutes:g}")
    if not 1 <= args.min_members <= args.max_members:
        ap.error(f"need 1 <= --min-members <= --max-members, got {args.min_members} and {args.max_members}")
    if args.partitions < args.max_members + 1 or args.rate <= 0:
        ap.error(f"need --partitions above --max-members and a positive --rate, got {args.partitions}, {args.rate}")
    try:
        from integration.members.reporting import parse_process_ms

        args.process_ms = parse_process_ms(args.process_ms)
    except ValueError as exc:
        ap.error(str(exc))
    if args.out is not None and not args.out.parent.is_dir():
        ap.error(f"--out: directory {args.out.parent} does not exist")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kassign.broker import open_broker

    schedules = [
        change_schedule(
            args.seed * 1000 + rep, args.changes, min_members=args.min_members, max_members=args.max_members
        )
        for rep in range(1, args.reps + 1)
    ]
    results: dict[str, list[RunStats]] = {}
    failures: dict[str, int] = {}
    commit = _git_commit()
    started = time.time()
    with open_broker() as broker:
        print(f"broker: {broker.describe()}; commit {commit}", flush=True)
        # modes interleaved, so a slow spell of the machine spreads over every mode
        for rep, schedule in enumerate(schedules, 1):
            if args.max_minutes is not None and time.time() - started > args.max_minutes * 60:
                print(f"time budget of {args.max_minutes:g} min spent: no repetition after {rep - 1}", flush=True)
                schedules = schedules[: rep - 1]
                break
            print(f"rep {rep}: {schedule.describe()}", flush=True)
            for mode in args.modes:
                timing = GroupTiming(
                    session_ms=args.session_ms,
                    heartbeat_ms=args.heartbeat_ms,
                    process_ms=args.process_ms,
                    seed=schedule.seed,
                    commit_every_batch=True,
                )
                try:
                    stats = run_once(
                        broker.bootstrap,
                        mode,
                        schedule,
                        rep=rep,
                        partitions=args.partitions,
                        rate=args.rate,
                        timing=timing,
                        log_root=args.keep_logs,
                    )
                except Exception as exc:  # one failed run must not end the table
                    failures[mode] = failures.get(mode, 0) + 1
                    print(f"  {mode}: FAILED {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}", flush=True)
                    continue
                results.setdefault(mode, []).append(stats)
                print(
                    f"  {mode}: {stats.commits} commits, {stats.failed} failed {stats.errors_where or ''}, "
                    f"kept-partition failures {len(stats.kept_failures)}, p50/p99 {stats.latency(50):.1f}/"
                    f"{stats.latency(99):.1f} ms, re-read {stats.reread_same}, dup moved {stats.dup_moved} "
                    f"unmoved {stats.dup_unmoved}, lost {stats.lost}/{stats.records}, {stats.duration_s:.0f} s",
                    flush=True,
                )
        broker_text = broker.describe()
    wall = time.time() - started
    header = (
        f"commits under churn (issue 27), {time.strftime('%Y-%m-%d', time.gmtime(started))}: {broker_text}; "
        f"commit {commit}\n{args.partitions} partitions, {args.rate:.0f} keyed records/s, "
        f"{args.min_members}-{args.max_members} members, {args.changes} changes per run at 0.75-2.25 s, "
        f"processing {args.process_ms[0]}-{args.process_ms[1]} ms per batch then a synchronous commit, "
        f"session {args.session_ms} ms, heartbeat {args.heartbeat_ms} ms (classic; the KIP-848 group's own "
        f"settings the same); {len(schedules)} rep(s) per mode (of {args.reps} asked), seed {args.seed}; "
        f"{wall / 60:.1f} min in all"
    )
    table = format_table(results, failures, args.modes)
    problems = target_problems(results, failures)
    verdict = (
        "targets met: kassign 0 commit errors, 0 lost, no duplicate on a partition that did not move"
        if not problems
        else "targets missed:\n" + "\n".join(f"  - {p}" for p in problems)
    )
    details = format_details(results, args.modes)
    print(f"\n{header}\n\n{table}\n\n{verdict}")
    if args.out is not None:
        text = (
            f"{header}\n\n{table}\n\n{LEGEND}\n\n{verdict}\n\nschedules:\n"
            + "\n".join(f"  rep {i}: {s.describe()}" for i, s in enumerate(schedules, 1))
            + f"\n\nper run:\n{details}\n"
        )
        Path(f"{args.out}.txt").write_text(text)
        Path(f"{args.out}.json").write_text(
            json.dumps(
                {
                    "broker": broker_text,
                    "commit": commit,
                    "clients": _client_versions(),
                    "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "schedules": [
                        {"rep": i, "seed": s.seed, "initial": list(s.initial), "changes": [vars(c) for c in s.changes]}
                        for i, s in enumerate(schedules, 1)
                    ],
                    "pooled": {mode: pooled(runs) for mode, runs in results.items()},
                    "runs": [r.row() for runs in results.values() for r in runs],
                    "failed_runs": failures,
                    "table": table,
                    "targets": problems,
                    "wall_min": round(wall / 60, 1),
                },
                indent=1,
                default=_json_default,
            )
        )
        print(f"\nwrote {args.out}.json and {args.out}.txt")
    return 1 if problems else 0


def _json_default(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
