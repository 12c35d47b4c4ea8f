"""What one commits-under-churn run shows (issue 27), read from its timeline: every commit the members
reported (count, errors by class and by where they were made, latency), the failed commits of
partitions a member kept (:mod:`integration.churn.commit_checks`), records processed more than once
and records never processed.

Every extra processing of a record (the second and later ``processed`` report of one offset) is
classed once:

* ``reread_same``: the member processing it again had processed it before (it read its own work
  again: an eager revocation handing the partition back, or a commit that failed);
* ``dup_moved``: another member owned the partition at some point between the two processings, or
  the earlier processing was another member's (the partition moved: its old owner's last work was
  not committed before the new owner started);
* ``dup_unmoved``: the partition did not move in between (no other member owned it, the same member
  processed it both times). Cooperative rebalancing must keep this at 0; under eager, a member whose
  partitions are all revoked and handed back to it re-reads what it had not committed.

``reread_same`` overlaps the other two: it counts by who re-read, they by whether the partition moved.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from integration.churn.commit_checks import commit_reports, kept_commit_failures
from integration.timeline_checks import missing_records, ownership_intervals
from kassign.model import TopicPartition
from kassign.timeline.events import Event
from kassign.timeline.metrics import processed_ranges

__all__ = ["RunStats", "Duplicates", "classify_duplicates", "percentile", "run_stats", "pooled"]


@dataclass
class Duplicates:
    """Extra processings of records, classed (see the module docstring)."""

    reread_same: int = 0
    dup_moved: int = 0
    dup_unmoved: int = 0

    @property
    def total(self) -> int:
        return self.dup_moved + self.dup_unmoved


@dataclass
class RunStats:
    """One run of one mode."""

    mode: str
    rep: int
    seed: int
    commits: int = 0
    failed: int = 0
    #: error class -> failed commits
    errors: dict[str, int] = field(default_factory=dict)
    #: "class@why" (why: batch, revoke, close, background) -> failed commits
    errors_where: dict[str, int] = field(default_factory=dict)
    #: failed commits of partitions the member kept, one line each
    kept_failures: list[str] = field(default_factory=list)
    #: every failed commit: member, why, error, partitions, when
    failures: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    records: int = 0
    lost: int = 0
    reread_same: int = 0
    dup_moved: int = 0
    dup_unmoved: int = 0
    changes: int = 0
    members: int = 0
    duration_s: float = 0.0
    #: how late the changes came against their schedule, seconds (the worst one)
    late_s: float = 0.0

    def latency(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def row(self) -> dict[str, object]:
        """The JSON form (latencies summarised, not listed)."""
        out = {k: v for k, v in vars(self).items() if k != "latencies_ms"}
        out.update(
            lat_p50_ms=round(self.latency(50), 3),
            lat_p99_ms=round(self.latency(99), 3),
            lat_max_ms=round(max(self.latencies_ms, default=0.0), 3),
        )
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by the nearest-rank method; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def classify_duplicates(events: Iterable[Event], default_topic: str) -> Duplicates:
    """Class every extra processing of a record in ``events`` (see the module docstring)."""
    events = sorted(events, key=lambda e: e.t)
    seen: dict[TopicPartition, dict[int, list[tuple[float, str]]]] = defaultdict(lambda: defaultdict(list))
    for e, tp, spans in processed_ranges(events, default_topic):
        for first, last in spans:
            for offset in range(int(first), int(last) + 1):
                seen[tp][offset].append((e.t, e.id))
    owners: dict[TopicPartition, list[tuple[str, float, float]]] = defaultdict(list)
    for i in ownership_intervals(events):
        owners[i.partition].append((i.member, i.start, i.end))
    out = Duplicates()
    for tp, offsets in seen.items():
        for processings in offsets.values():
            for k in range(1, len(processings)):
                t, member = processings[k]
                t_before, before = processings[k - 1]
                if any(m == member for _, m in processings[:k]):
                    out.reread_same += 1
                moved = before != member or any(
                    m != member and start <= t and end >= t_before for m, start, end in owners[tp]
                )
                if moved:
                    out.dup_moved += 1
                else:
                    out.dup_unmoved += 1
    return out


def run_stats(
    mode: str,
    rep: int,
    seed: int,
    events: Sequence[Event],
    produced: Mapping[TopicPartition, Sequence[int]],
    default_topic: str,
) -> RunStats:
    """The figures of one run from its timeline and the producer's acknowledged offsets."""
    stats = RunStats(mode, rep, seed)
    errors: Counter[str] = Counter()
    where: Counter[str] = Counter()
    for c in commit_reports(events):
        stats.commits += 1
        stats.latencies_ms.append(c.latency_ms)
        if c.ok:
            continue
        stats.failed += 1
        errors[c.error or "?"] += 1
        where[f"{c.error}@{c.why or '?'}"] += 1
        parts = "?" if c.parts is None else ",".join(str(tp.partition) for tp in c.parts)
        stats.failures.append(
            f"{c.member} {c.why} commit of [{parts}] issued {c.began:.3f} failed after {c.latency_ms:.0f} ms: {c.error}"
        )
    stats.errors, stats.errors_where = dict(sorted(errors.items())), dict(sorted(where.items()))
    stats.kept_failures = kept_commit_failures(events)
    dup = classify_duplicates(events, default_topic)
    stats.reread_same, stats.dup_moved, stats.dup_unmoved = dup.reread_same, dup.dup_moved, dup.dup_unmoved
    stats.records = sum(len(v) for v in produced.values())
    stats.lost = sum(len(v) for v in missing_records(events, produced, default_topic).values())
    return stats


def pooled(runs: Sequence[RunStats]) -> dict[str, object]:
    """One mode's runs together: sums, errors by class and where, latency percentiles over every
    commit of every run."""
    lats = [x for r in runs for x in r.latencies_ms]
    errors: Counter[str] = Counter()
    where: Counter[str] = Counter()
    for r in runs:
        errors.update(r.errors)
        where.update(r.errors_where)
    return {
        "runs": len(runs),
        "commits": sum(r.commits for r in runs),
        "failed": sum(r.failed for r in runs),
        "errors": dict(sorted(errors.items())),
        "errors_where": dict(sorted(where.items())),
        "kept_failures": sum(len(r.kept_failures) for r in runs),
        "lat_p50_ms": percentile(lats, 50),
        "lat_p99_ms": percentile(lats, 99),
        "lat_max_ms": max(lats, default=0.0),
        "records": sum(r.records for r in runs),
        "lost": sum(r.lost for r in runs),
        "reread_same": sum(r.reread_same for r in runs),
        "dup_moved": sum(r.dup_moved for r in runs),
        "dup_unmoved": sum(r.dup_unmoved for r in runs),
        "failed_per_run": [r.failed for r in runs],
    }
