"""The judge of a churn run's timeline (issue 9): whether the group has settled, which partitions
may see duplicates and why, unowned partition-seconds, and the invariants a run must keep
(:func:`churn_problems`, :func:`check`).

A group that did not settle in time ended the run early as *stalled* (:attr:`ChurnResult.stalled`),
a failure. So is a kassign member's failed commit of a partition it kept (issue 27,
:mod:`.commit_checks`). With faults injected (issue 16), double ownership inside a zombie's window is
excused and measured apart, and zombies must see their late commits rejected (:mod:`.fault_checks`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from integration.churn.commit_checks import kept_commit_failures
from integration.churn.fault_checks import FaultReport, fault_report, zombie_windows
from integration.churn.generator import ChurnSequence
from integration.timeline_checks import (
    double_ownership,
    missing_records,
    owners_at,
    ownership_intervals,
    processed_offsets,
)
from kassign.model import TopicPartition
from kassign.timeline.events import Event

__all__ = [
    "settle_problems",
    "excused_partitions",
    "unowned_partition_seconds",
    "hung_closes",
    "ChurnResult",
    "ChurnFailure",
    "churn_problems",
    "analyse",
    "check",
]


def settle_problems(
    events: Sequence[Event], live: Mapping[str, Iterable[str]], partitions: Mapping[str, Sequence[TopicPartition]]
) -> list[str]:
    """Why the group is not settled at the end of ``events`` (empty when it is).

    ``live``: live member -> topics it subscribes to; ``partitions``: topic -> its partitions.
    Settled: each partition of a topic some live member reads is owned by exactly one live member
    that reads it, partitions of topics nobody reads are owned by nobody, and every live member owns
    something (the profiles give topic ``a`` enough partitions for that).
    """
    owners = owners_at(events)
    readers: dict[str, set[str]] = defaultdict(set)
    for member, topics in live.items():
        for topic in topics:
            readers[topic].add(member)
    problems = []
    for topic, tps in sorted(partitions.items()):
        for tp in tps:
            who = owners.get(tp, [])
            if not readers[topic]:
                if who:
                    problems.append(f"{tp.topic}:{tp.partition} owned by {who} though no live member reads it")
            elif len(who) != 1:
                problems.append(f"{tp.topic}:{tp.partition} owned by {who or 'nobody'}")
            elif who[0] not in readers[topic]:
                problems.append(f"{tp.topic}:{tp.partition} owned by {who[0]}, not a live member reading it")
    owning = {m for ms in owners.values() for m in ms}
    problems += [f"{m} owns nothing" for m in sorted(set(live) - owning)]
    return problems


def excused_partitions(events: Iterable[Event]) -> dict[TopicPartition, str]:
    """Partitions that may see duplicates, with the reason: their owner crashed, lost them (``cb_lost``),
    exited on its own, or failed a commit while owning them or of them (a revocation's commit names
    the partitions it gave up), so processed offsets may be uncommitted."""
    owned: dict[str, set[TopicPartition]] = defaultdict(set)
    closing: set[str] = set()
    out: dict[TopicPartition, str] = {}

    def excuse(parts: Iterable[TopicPartition], why: str) -> None:
        for tp in parts:
            out.setdefault(tp, why)

    for e in sorted(events, key=lambda e: e.t):
        mine = owned[e.id]
        if e.ev == "cb_assigned":
            mine.update(e.parts or ())
            closing.discard(e.id)
        elif e.ev == "cb_revoked":
            mine.difference_update(e.parts or ())
        elif e.ev == "cb_lost":
            excuse(e.parts or (), f"lost by {e.id} at {e.t:.3f}")
            mine.difference_update(e.parts or ())
        elif e.ev == "commit_err":
            excuse(mine | set(e.parts or ()), f"commit by {e.id} failed at {e.t:.3f} ({e.extra.get('error')})")
        elif e.ev == "crash":
            excuse(mine, f"owner {e.id} crashed at {e.t:.3f}")
            mine.clear()
        elif e.ev == "closing":
            closing.add(e.id)  # what it owned is committed on close; keep it to judge the exit code
        elif e.ev == "exit":
            if e.extra.get("code") not in (0, None) and e.id not in closing:
                excuse(mine, f"owner {e.id} exited with {e.extra.get('code')} at {e.t:.3f}")
            mine.clear()
            closing.discard(e.id)
    return dict(sorted(out.items()))


def hung_closes(events: Iterable[Event]) -> list[str]:
    """Members that began closing and never finished: the driver killed them (exit -9, no ``crash``
    event, which marks a kill on purpose) after waiting for their close."""
    closing_since: dict[str, float] = {}
    crashed: set[str] = set()
    out = []
    for e in sorted(events, key=lambda e: e.t):
        if e.ev == "closing":
            closing_since[e.id] = e.t
        elif e.ev == "closed":
            closing_since.pop(e.id, None)
        elif e.ev == "crash":
            crashed.add(e.id)
        elif e.ev == "exit":
            since = closing_since.pop(e.id, None)
            if since is not None and e.extra.get("code") == -9 and e.id not in crashed:
                out.append(f"member {e.id} began closing at {since:.3f} and never finished: killed at {e.t:.3f}")
            crashed.discard(e.id)
    return out


def _measure(segments: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(segments):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _reader_intervals(
    events: Sequence[Event], partitions: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, list[tuple[float, float]]]:
    """Topic -> intervals in which some member subscribed to it was alive (subscribed .. closing/exit/crash)."""
    since: dict[str, tuple[float, list[str]]] = {}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.t):
        if e.ev == "subscribed":
            since[e.id] = (e.t, list(e.extra.get("topics") or partitions))
        elif e.ev in ("closing", "exit", "crash") and e.id in since:
            start, topics = since.pop(e.id)
            for topic in topics:
                out[topic].append((start, e.t))
    for start, topics in since.values():
        for topic in topics:
            out[topic].append((start, math.inf))
    return out


def unowned_partition_seconds(
    events: Sequence[Event], partitions: Mapping[str, Sequence[TopicPartition]], start: float, end: float
) -> float:
    """Partition-seconds within [start, end] in which a partition had no owner although a live member
    read its topic: what churn costs in availability."""
    readers = _reader_intervals(events, partitions)
    owned: dict[TopicPartition, list[tuple[float, float]]] = defaultdict(list)
    for i in ownership_intervals(events):
        owned[i.partition].append((max(i.start, start), min(i.end, end)))
    total = 0.0
    for topic, tps in partitions.items():
        needed = [(max(s, start), min(e, end)) for s, e in readers.get(topic, []) if min(e, end) > max(s, start)]
        need = _measure(needed)
        for tp in tps:
            # owned time only counts where it is also needed (owners are readers, so intersect by clipping)
            covered = [(max(a, s), min(b, e)) for a, b in owned[tp] for s, e in needed if min(b, e) > max(a, s)]
            total += need - _measure(covered)
    return total


@dataclass
class ChurnResult:
    """What one sequence did and what its timeline shows."""

    sequence: ChurnSequence
    events: list[Event]
    produced: dict[TopicPartition, list[int]]  # acknowledged offsets, on topics read at the end
    producer_errors: list[str]
    failed_members: dict[str, str]
    settled_at: tuple[float, float]  # first settle of the initial group, final settle
    timeline_path: Path | None = None
    generations: int = 0
    double_owned_ps: float = 0.0
    overlaps: list[str] = field(default_factory=list)
    unowned_ps: float = 0.0
    duplicates: int = 0
    unexcused_duplicates: dict[TopicPartition, int] = field(default_factory=dict)
    lost: dict[TopicPartition, list[int]] = field(default_factory=dict)
    excused: dict[TopicPartition, str] = field(default_factory=dict)
    #: where and why the group stopped converging (it then ended early, its members killed)
    stalled: str | None = None
    #: records of topics no member read when the sequence ended (left out of ``produced``)
    unread: int = 0
    duration: float = 0.0
    #: the injected faults and what they did (all zero without faults)
    faults: FaultReport = field(default_factory=FaultReport)
    #: members whose close never finished (see :func:`hung_closes`)
    hung: list[str] = field(default_factory=list)
    #: failed commits of partitions a kassign member kept (see :mod:`.commit_checks`)
    failed_kept_commits: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(len(v) for v in self.produced.values())

    def summary(self) -> str:
        stalled = "STALLED, " if self.stalled else ""
        return (
            f"seed {self.sequence.seed}: {stalled}{len(self.sequence.steps)} steps, "
            f"{self.generations} generations, {self.records} records ({self.unread} unread), "
            f"double-owned {self.double_owned_ps:.3f} ps, unowned {self.unowned_ps:.1f} ps, "
            f"duplicates {self.duplicates} (unexcused "
            f"{sum(self.unexcused_duplicates.values())}), lost {sum(len(v) for v in self.lost.values())}, "
            f"{self.duration:.1f}s" + self._fault_summary()
        )

    def _fault_summary(self) -> str:
        f = self.faults
        if not (f.failovers or f.zombies or f.slow_revocations):
            return ""
        return (
            f"; faults: {f.failovers} failover(s) ({f.failovers_mid_rebalance} mid-rebalance), "
            f"{f.zombies} zombie(s) ({f.late_commits_rejected} late commits rejected), "
            f"{f.slow_revocations} slow revocation(s) ({f.slow_in_rebalance} in a rebalance, "
            f"{f.slow_revokers_expelled} expelled), "
            f"zombie-window double-owned {f.zombie_ps:.3f} ps"
        )


class ChurnFailure(AssertionError):
    """A churn sequence broke an invariant; the message has the seed, the sequence and the replay command."""


def churn_problems(result: ChurnResult) -> list[str]:
    """The invariants of issue 9 that ``result`` breaks (empty when it passes)."""
    problems = []
    if result.stalled:
        problems.append(f"group did not settle (lost records not checked): {result.stalled}")
    if result.double_owned_ps > 0:
        problems.append(
            f"{result.double_owned_ps:.3f} double-owned partition-seconds: " + "; ".join(result.overlaps[:5])
        )
    if result.lost:
        shown = ", ".join(f"{tp.topic}:{tp.partition} {offs[:5]}" for tp, offs in list(result.lost.items())[:5])
        problems.append(f"{sum(len(v) for v in result.lost.values())} record(s) never processed: {shown}")
    if result.unexcused_duplicates:
        shown = ", ".join(f"{tp.topic}:{tp.partition} x{n}" for tp, n in result.unexcused_duplicates.items())
        problems.append(f"duplicates on partitions whose owners neither crashed nor failed to commit: {shown}")
    if result.producer_errors:
        problems.append(f"producer errors: {result.producer_errors[:3]}")
    problems += [f"member {m} exited on its own: {tail}" for m, tail in result.failed_members.items()]
    problems += result.hung
    problems += [f"commit of kept partitions failed: {c}" for c in result.failed_kept_commits]
    problems += result.faults.problems
    return problems


def analyse(result: ChurnResult, partitions: Mapping[str, Sequence[TopicPartition]], *, grace: float = 1.5) -> None:
    """Fill ``result``'s measurements from its timeline (``partitions``: topic -> its partitions;
    ``grace``: how soon after resuming, or after its slow callback, a zombie must hear it lost its
    partitions, in seconds: the members' session timeout)."""
    events = result.events
    result.generations = len(
        {
            e.extra["gen"]
            for e in events
            if isinstance(e.extra.get("gen"), int)
            and e.extra["gen"] >= 0
            and e.ev in ("cb_assigned", "cb_revoked", "sync")
        }
    )
    result.faults, counted = fault_report(events, double_ownership(events), grace)
    result.hung = hung_closes(events)
    # kassign's members only: the librdkafka and Java peers' commits are theirs to answer for
    seq = result.sequence
    specs = [*seq.initial, *(step.start for step in seq.steps if step.start is not None)]
    kassign = {spec.name for spec in specs if spec.kind == "aiokafka"}
    result.failed_kept_commits = kept_commit_failures(events, kassign, zombie=zombie_windows(events, grace))
    result.double_owned_ps = sum(outside for _, outside in counted)
    result.overlaps = [
        f"{o} ({outside:.3f}s outside zombie windows)" if outside < o.end - o.start - 1e-9 else str(o)
        for o, outside in counted
    ]
    result.unowned_ps = unowned_partition_seconds(events, partitions, *result.settled_at)
    result.lost = missing_records(events, result.produced)
    result.excused = excused_partitions(events)
    unexcused: Counter[TopicPartition] = Counter()
    for tp, counts in processed_offsets(events).items():
        extra = sum(n - 1 for n in counts.values() if n > 1)
        result.duplicates += extra
        if extra and tp not in result.excused:
            unexcused[tp] = extra
    result.unexcused_duplicates = dict(sorted(unexcused.items()))


def check(result: ChurnResult) -> None:
    """Raise ChurnFailure (seed, sequence, problems, timeline path) when ``result`` breaks an invariant."""
    problems = churn_problems(result)
    if problems:
        raise ChurnFailure(
            "\n".join(
                [
                    "churn invariants broken:",
                    *(f"  - {p}" for p in problems),
                    result.sequence.describe(),
                    f"timeline: {result.timeline_path}",
                ]
            )
        )
