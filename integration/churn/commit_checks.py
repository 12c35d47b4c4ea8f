"""Commits read from a group's timeline (issue 27): every commit a member reported, and the failed
commits of partitions the member *kept*, which a churn run must not have.

Members report a failed commit as ``commit_err`` and, when asked to report every commit
(``--commit-every-batch``), a successful one as ``commit``; both carry ``parts`` (the partitions
committed), ``began`` (when the commit was issued), ``lat`` (ms) and ``why``, and ``whole: true``
when the commit was of the whole assignment (``commit()`` without offsets). Older timelines and
the librdkafka member write ``commit_err`` without some of these: no ``parts``, nothing to judge; no
``began``, the commit is taken as issued when it ended.

A partition is *kept* through a commit when its member owned it from before the commit was issued
until after it ended, in one ownership stretch that did not end in ``cb_lost`` (a member told it
lost its partitions had been expelled: a refused commit is then right). A failed commit breaks the
rule when it names a kept partition and either was of the whole assignment (kassign leaves the
partitions revoked meanwhile out) or named only kept partitions: an explicit commit naming a
partition revoked while it was in flight is rightly refused for that one.

Not judged: commits overlapping a member's zombie window (frozen or stuck in a slow revocation,
:func:`~integration.churn.fault_checks.zombie_windows`), and commits overlapping a coordinator
failover (from ``node_killed`` to ``node_restarted``): a dead coordinator is no rebalance, and what
commits must do then is judged by the fault checks (hung closes, late commits).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from integration.timeline_checks import OwnershipInterval, ownership_intervals
from kassign.model import TopicPartition
from kassign.timeline.events import Event

__all__ = [
    "COMMIT_EVENTS",
    "CommitReport",
    "OwnedStretch",
    "commit_reports",
    "owned_stretches",
    "kept_parts",
    "failover_windows",
    "kept_commit_failures",
]

#: Event kinds a member reports a commit with.
COMMIT_EVENTS = frozenset({"commit", "commit_err"})

Window = tuple[float, float]


@dataclass(frozen=True)
class CommitReport:
    """One commit a member reported."""

    member: str
    began: float
    ended: float
    ok: bool
    parts: tuple[TopicPartition, ...] | None  # None: the member did not say
    error: str | None = None
    why: str | None = None
    whole: bool = False
    #: as the member measured it (``lat``), else from ``began`` to the event's time
    latency_ms: float = 0.0

    @classmethod
    def from_event(cls, e: Event) -> CommitReport:
        began = e.extra.get("began")
        began = float(began) if isinstance(began, (int, float)) else e.t
        # the member stamps its events to the millisecond; ``began`` it keeps to the microsecond
        ended = max(e.t, began)
        lat = e.extra.get("lat")
        return cls(
            e.id,
            began,
            ended,
            e.ev == "commit",
            None if e.parts is None else tuple(e.parts),
            None if e.ev == "commit" else str(e.extra.get("error")),
            e.extra.get("why"),
            bool(e.extra.get("whole")),
            float(lat) if isinstance(lat, (int, float)) else (ended - began) * 1000.0,
        )


def commit_reports(events: Iterable[Event], members: Collection[str] | None = None) -> list[CommitReport]:
    """Every commit reported in ``events`` (of ``members`` only, when given), in the order they ended."""
    return [
        CommitReport.from_event(e)
        for e in sorted(events, key=lambda e: e.t)
        if e.ev in COMMIT_EVENTS and (members is None or e.id in members)
    ]


#: One member's ownership of one partition over [start, end), with the event kind that ended it.
OwnedStretch = OwnershipInterval


def owned_stretches(events: Iterable[Event]) -> dict[tuple[str, TopicPartition], list[OwnedStretch]]:
    """(member, partition) -> its ownership stretches in time order, by the timeline's rules
    (:func:`integration.timeline_checks.ownership_intervals`), each with the event kind that ended it."""
    out: dict[tuple[str, TopicPartition], list[OwnedStretch]] = defaultdict(list)
    for interval in ownership_intervals(events):
        out[(interval.member, interval.partition)].append(interval)
    return dict(out)


def kept_parts(
    commit: CommitReport, stretches: Mapping[tuple[str, TopicPartition], Sequence[OwnedStretch]]
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """The commit's partitions its member kept through it, and the others (not owned when it was
    issued, given up while it was in flight, or lost)."""
    kept, other = [], []
    for tp in commit.parts or ():
        held = any(
            s.start <= commit.began and s.end > commit.ended and s.ended_by != "cb_lost"
            for s in stretches.get((commit.member, tp), ())
        )
        (kept if held else other).append(tp)
    return kept, other


def failover_windows(events: Iterable[Event]) -> list[Window]:
    """[node_killed, node_restarted] of every coordinator failover in the timeline (open ones to the end)."""
    ordered = sorted(events, key=lambda e: e.t)
    out: list[Window] = []
    killed: float | None = None
    for e in ordered:
        if e.ev == "node_killed" and killed is None:
            killed = e.t
        elif e.ev == "node_restarted" and killed is not None:
            out.append((killed, e.t))
            killed = None
    if killed is not None:
        out.append((killed, math.inf))
    return out


def _overlaps(start: float, end: float, windows: Iterable[Window]) -> bool:
    return any(w_start <= end and start <= w_end for w_start, w_end in windows)


def kept_commit_failures(
    events: Sequence[Event],
    members: Collection[str] | None = None,
    *,
    zombie: Mapping[str, Sequence[Window]] | None = None,
) -> list[str]:
    """One line per failed commit of a kept partition (see the module docstring), for the commits of
    ``members`` (all when None); ``zombie``: member -> its zombie windows, whose commits are not judged."""
    stretches = owned_stretches(events)
    failovers = failover_windows(events)
    out = []
    for c in commit_reports(events, members):
        if c.ok or c.parts is None:
            continue
        if _overlaps(c.began, c.ended, failovers) or _overlaps(c.began, c.ended, (zombie or {}).get(c.member, ())):
            continue
        kept, other = kept_parts(c, stretches)
        if kept and (c.whole or not other):
            shown = ", ".join(f"{tp.topic}:{tp.partition}" for tp in kept)
            given_up = f"; not kept: {', '.join(f'{tp.topic}:{tp.partition}' for tp in other)}" if other else ""
            out.append(
                f"{c.member}'s commit ({c.why or 'commit'}, issued {c.began:.3f}, failed {c.ended:.3f} "
                f"after {c.latency_ms:.0f} ms) failed with {c.error} for partitions it kept: {shown}{given_up}"
            )
    return out
