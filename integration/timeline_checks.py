"""Checks over a group's rebalance timeline (``kassign.timeline.events`` schema), as recorded by the group driver.

Ownership follows the shared recordings' definition: a member owns a partition from the start of
the ``cb_assigned`` callback that gave it until the start of the ``cb_revoked``/``cb_lost`` callback
that takes it away. A member also stops owning everything when it starts closing (it no longer
processes), exits or crashes. ``cb_assigned`` parts are added to what the member owns, which reads
eager (whole assignment after a full revocation) and cooperative (increments) callbacks alike.

Processing is read from ``processed`` events (``ranges``: partition -> inclusive offset ranges)
that the members print before committing those offsets.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kassign.model import TopicPartition
from kassign.timeline.events import DEFAULT_TOPIC, Event
from kassign.timeline.metrics import processed_ranges

__all__ = [
    "END_OF_OWNERSHIP",
    "OwnershipInterval",
    "Overlap",
    "TimelineCheckError",
    "ownership_intervals",
    "double_ownership",
    "assert_exclusive",
    "owners_at",
    "current_assignment",
    "is_settled",
    "assert_settled",
    "processed_offsets",
    "missing_records",
    "assert_all_processed",
]

#: Member events after which a member owns nothing.
END_OF_OWNERSHIP = frozenset({"closing", "closed", "exit", "crash"})


class TimelineCheckError(AssertionError):
    """A timeline violates an invariant; the message names the partitions, members and times."""


@dataclass(frozen=True)
class OwnershipInterval:
    """``member`` owned ``partition`` over [start, end); ``end`` is ``inf`` while it still owns it.
    ``ended_by``: the event kind that ended it (``None`` while still owned)."""

    partition: TopicPartition
    member: str
    start: float
    end: float
    ended_by: str | None = None


@dataclass(frozen=True)
class Overlap:
    """Two members owned ``partition`` at once over [start, end)."""

    partition: TopicPartition
    members: tuple[str, str]
    start: float
    end: float

    def __str__(self) -> str:
        end = "now" if math.isinf(self.end) else f"{self.end:.3f}"
        return (
            f"{self.partition.topic}:{self.partition.partition} owned by both {self.members[0]} and "
            f"{self.members[1]} from {self.start:.3f} to {end} ({self.end - self.start:.3f}s)"
        )


def _in_time_order(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.t)  # stable: one member's same-millisecond events keep their order


def ownership_intervals(events: Iterable[Event], until: float | None = None) -> list[OwnershipInterval]:
    """Every ownership interval in the timeline (events up to ``until`` when given), ordered by start."""
    open_since: dict[str, dict[TopicPartition, float]] = defaultdict(dict)
    out: list[OwnershipInterval] = []
    for e in _in_time_order(events):
        if until is not None and e.t > until:
            break
        owned = open_since[e.id]
        if e.ev == "cb_assigned":
            for tp in e.parts or ():
                owned.setdefault(tp, e.t)
        elif e.ev in ("cb_revoked", "cb_lost"):
            for tp in e.parts or ():
                if tp in owned:
                    out.append(OwnershipInterval(tp, e.id, owned.pop(tp), e.t, e.ev))
        elif e.ev in END_OF_OWNERSHIP:
            for tp, start in sorted(owned.items()):
                out.append(OwnershipInterval(tp, e.id, start, e.t, e.ev))
            owned.clear()
    for member, owned in sorted(open_since.items()):
        for tp, start in sorted(owned.items()):
            out.append(OwnershipInterval(tp, member, start, math.inf))
    out.sort(key=lambda i: (i.start, i.partition, i.member))
    return out


def double_ownership(events: Iterable[Event], *, tolerance: float = 0.0) -> list[Overlap]:
    """Every stretch of time longer than ``tolerance`` seconds in which two members owned one partition."""
    by_partition: dict[TopicPartition, list[OwnershipInterval]] = defaultdict(list)
    for interval in ownership_intervals(events):
        by_partition[interval.partition].append(interval)
    overlaps = []
    for tp in sorted(by_partition):
        intervals = by_partition[tp]  # ordered by start
        for i, a in enumerate(intervals):
            for b in intervals[i + 1 :]:
                if b.start >= a.end:
                    break
                if a.member == b.member:
                    continue
                start, end = b.start, min(a.end, b.end)
                if end - start > tolerance:
                    overlaps.append(Overlap(tp, (a.member, b.member), start, end))
    return overlaps


def assert_exclusive(events: Iterable[Event], *, tolerance: float = 0.0) -> None:
    """Raise TimelineCheckError if any partition was ever owned by two members at once."""
    overlaps = double_ownership(events, tolerance=tolerance)
    if overlaps:
        shown = "\n  ".join(str(o) for o in overlaps[:10])
        more = f"\n  ... and {len(overlaps) - 10} more" if len(overlaps) > 10 else ""
        raise TimelineCheckError(f"{len(overlaps)} double ownership(s):\n  {shown}{more}")


def owners_at(events: Iterable[Event], t: float | None = None) -> dict[TopicPartition, list[str]]:
    """Partition -> the members owning it at time ``t`` (at the end of the timeline when None)."""
    owners: dict[TopicPartition, list[str]] = defaultdict(list)
    for i in ownership_intervals(events, until=t):
        # at the end of the timeline only still-open intervals count
        if math.isinf(i.end) if t is None else i.start <= t < i.end:
            owners[i.partition].append(i.member)
    return {tp: sorted(ms) for tp, ms in sorted(owners.items())}


def current_assignment(events: Iterable[Event], t: float | None = None) -> dict[str, list[TopicPartition]]:
    """Member -> sorted partitions it owns at ``t`` (end of timeline when None); members owning nothing omitted."""
    out: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp, members in owners_at(events, t).items():
        for m in members:
            out[m].append(tp)
    return {m: sorted(ps) for m, ps in sorted(out.items())}


def all_owned_at(
    events: Sequence[Event], partitions: Iterable[TopicPartition], members: Sequence[str], after: float = 0.0
) -> float:
    """When every partition first had exactly one owner among ``members`` (by their callbacks), each
    member owning some, after ``after``; AssertionError when that never happened."""
    wanted = sorted(partitions)
    for i, e in enumerate(events):
        if e.ev != "cb_assigned" or e.t < after:
            continue
        owned = current_assignment(events[: i + 1])
        counts = [tp for m in members for tp in owned.get(m, ())]
        if sorted(counts) == wanted and all(owned.get(m) for m in members):
            return e.t
    raise AssertionError("the partitions were never all owned")


def _settle_problems(
    events: Sequence[Event], partitions: Iterable[TopicPartition], members: Iterable[str], require_every_member: bool
) -> list[str]:
    owners = owners_at(events)
    expected = set(members)
    problems = []
    for tp in sorted(set(partitions)):
        who = owners.get(tp, [])
        if len(who) != 1:
            problems.append(f"{tp.topic}:{tp.partition} owned by {who or 'nobody'}")
        elif who[0] not in expected:
            problems.append(f"{tp.topic}:{tp.partition} owned by {who[0]}, not a live member")
    if require_every_member:
        owning = {m for ms in owners.values() for m in ms}
        problems += [f"{m} owns nothing" for m in sorted(expected - owning)]
    return problems


def is_settled(
    events: Sequence[Event],
    partitions: Iterable[TopicPartition],
    members: Iterable[str],
    *,
    require_every_member: bool = True,
) -> bool:
    """True when, at the end of the timeline, each partition has exactly one owner among ``members``
    (and, by default, every member owns something)."""
    return not _settle_problems(events, partitions, members, require_every_member)


def assert_settled(
    events: Sequence[Event],
    partitions: Iterable[TopicPartition],
    members: Iterable[str],
    *,
    require_every_member: bool = True,
) -> None:
    """Raise TimelineCheckError listing what is not settled (see :func:`is_settled`)."""
    problems = _settle_problems(events, partitions, members, require_every_member)
    if problems:
        raise TimelineCheckError("group not settled: " + "; ".join(problems[:20]))


def processed_offsets(
    events: Iterable[Event], default_topic: str = DEFAULT_TOPIC
) -> dict[TopicPartition, Counter[int]]:
    """Partition -> how many times each offset was processed (by any member)."""
    out: dict[TopicPartition, Counter[int]] = defaultdict(Counter)
    for _, tp, spans in processed_ranges(events, default_topic):
        for first, last in spans:
            out[tp].update(range(int(first), int(last) + 1))
    return dict(sorted(out.items()))


def missing_records(
    events: Iterable[Event], produced: Mapping[TopicPartition, Iterable[int]], default_topic: str = DEFAULT_TOPIC
) -> dict[TopicPartition, list[int]]:
    """Partition -> produced offsets that no member processed (only partitions with gaps)."""
    seen = processed_offsets(events, default_topic)
    out = {}
    for tp in sorted(produced):
        counts = seen.get(tp, Counter())
        gap = sorted(o for o in set(produced[tp]) if counts[o] == 0)
        if gap:
            out[tp] = gap
    return out


def assert_all_processed(
    events: Iterable[Event], produced: Mapping[TopicPartition, Iterable[int]], default_topic: str = DEFAULT_TOPIC
) -> None:
    """Raise TimelineCheckError if a produced record was never processed by any member."""
    missing = missing_records(events, produced, default_topic)
    if missing:
        total = sum(len(v) for v in missing.values())
        shown = ", ".join(
            f"{tp.topic}:{tp.partition} {offs[:5]}{'...' if len(offs) > 5 else ''}"
            for tp, offs in list(missing.items())[:10]
        )
        raise TimelineCheckError(f"{total} produced record(s) never processed: {shown}")
