"""Rebalance metrics computed from a timeline of events (:mod:`kassign.timeline.events`).

One set of definitions serves simulated timelines, recorded real groups and telemetry, and they
match the recorder of ``data/rebalance-timelines`` (see its README):

- a member *owns* a partition from the start of the assign callback that hands it over to the
  start of the revoke/lost callback that takes it away (or the member's crash);
- a *phase* is the stretch of timeline after a trigger (a scale-out, a crash...) up to the next
  trigger; its *settle* is the last ownership change in it;
- ``unowned_ps``: sum over partitions of the seconds without an owner between the phase's first
  loss (a revocation, or a member going -- crash, close, exit -- with partitions still its own) and
  its settle;
- ``settle_s``: settle minus the phase's first event; ``window_s``: settle minus first revocation;
- ``moved``: partitions whose owner at settle differs from their owner when the phase began;
  ``kept`` the others; ``unowned_parts``: partitions that spent any time without owner;
- ``handovers``: times in the phase a partition was assigned to a member other than its last
  owner (a partition that goes to another member and comes back counts twice, one handed back to
  the member that just revoked it not at all): what a timeline picture shows as changes of colour;
- ``gap_kept_s``: the longest ownership pause of a kept partition (the recorder measured pauses in
  record processing, which the events do not carry; for ownership the two agree on zero vs not);
- ``rounds``: rebalance rounds in the phase: generations first synced in it, or, for recordings
  without ``sync`` events, bursts of assign callbacks;
- ``balance``: max - min partitions per live member at settle;
- ``double_owned_ps``: partition-seconds with two owners at once; must be 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from kassign.model import TopicPartition
from kassign.timeline.events import DEFAULT_TOPIC, OWNERSHIP_EVENTS, Event, partition_of

__all__ = [
    "OwnershipInterval",
    "PhaseMetrics",
    "ownership_intervals",
    "phase_metrics",
    "timeline_metrics",
    "recording_phases",
    "detect_phases",
    "count_rounds",
    "count_generations",
    "unowned_partition_seconds",
    "kept_partitions",
    "change_settles",
    "processed_ranges",
    "processing_times",
    "longest_processing_gap",
    "delivery_counts",
]

#: Events that say nothing about the group's state and never open or settle a phase (a KIP-848
#: member's ``heartbeat`` comes every interval, so it would never let the group look quiet).
NOISE_EVENTS = frozenset({"progress", "processed", "commit", "commit_err", "heartbeat", "client_metrics"})
#: Lifecycle events after which a member neither owns nor counts for balance.
GONE_EVENTS = frozenset({"closing", "closed", "exit", "crash"})
#: Member events that end what a member owns in :func:`ownership_intervals` by default.
RELEASE_EVENTS = frozenset({"crash", "closed", "exit"})
#: Assign callbacks further apart than this (seconds) belong to different rounds, when a
#: recording has no ``sync`` events to count generations from.
ROUND_GAP_S = 0.25
#: How early a member's clock may stamp an event: Java members (``java/JavaMember.java`` before
#: microsecond stamps) wrote ``System.currentTimeMillis()``, up to a millisecond before the instant.
CLOCK_SLACK_S = 0.001


class OwnershipInterval(NamedTuple):
    """``member`` owned the partition from ``start`` to ``end`` (``inf`` while still owned)."""

    member: str
    start: float
    end: float


@dataclass
class PhaseMetrics:
    """The metrics of one phase of a timeline; see the module docstring for definitions."""

    settle_s: float
    window_s: float
    unowned_ps: float
    double_owned_ps: float
    moved: int
    unowned_parts: int
    kept: int
    gap_kept_s: float
    rounds: int
    balance: int
    revoke_callbacks: int
    assign_callbacks: int
    final: dict[TopicPartition, str] = field(default_factory=dict)
    handovers: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (``final`` keyed by ``"topic:partition"``)."""
        out = asdict(self)
        out["final"] = {f"{tp.topic}:{tp.partition}": m for tp, m in sorted(self.final.items())}
        return out


def _handovers(inside: Sequence[Event], owners_before: Mapping[TopicPartition, Sequence[str]]) -> int:
    """Assignments, in time order, of a partition to a member other than its last owner."""
    last = {tp: members[0] for tp, members in owners_before.items() if members}
    count = 0
    for e in inside:
        if e.ev == "cb_assigned" and e.parts:
            for tp in e.parts:
                if last.get(tp, e.id) != e.id:
                    count += 1
                last[tp] = e.id
    return count


def _sorted_events(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.t)  # stable: equal times keep their order


def ownership_intervals(
    events: Iterable[Event], *, release_events: Collection[str] = RELEASE_EVENTS
) -> dict[TopicPartition, list[OwnershipInterval]]:
    """Every partition's ownership intervals, from the callbacks (and crashes) of a timeline.

    ``cb_assigned`` adds its partitions to the member's (incremental under cooperative, the
    whole assignment under eager, where the member owns nothing just before); ``cb_revoked`` and
    ``cb_lost`` remove theirs; ``release_events`` (``crash``, ``closed`` and ``exit``; pass
    :data:`GONE_EVENTS` to end ownership when a member starts closing, as the group driver's
    checks do) end whatever the member still owns.
    """
    owned: dict[str, dict[TopicPartition, float]] = {}
    out: dict[TopicPartition, list[OwnershipInterval]] = {}

    def release(member: str, parts: Iterable[TopicPartition], t: float) -> None:
        mine = owned.get(member, {})
        for tp in parts:
            start = mine.pop(tp, None)
            if start is not None:
                out.setdefault(tp, []).append(OwnershipInterval(member, start, t))

    for e in _sorted_events(events):
        if e.ev == "cb_assigned":
            mine = owned.setdefault(e.id, {})
            for tp in e.parts or ():
                mine.setdefault(tp, e.t)
                out.setdefault(tp, [])
        elif e.ev in ("cb_revoked", "cb_lost"):
            release(e.id, e.parts or (), e.t)
        elif e.ev in release_events:
            release(e.id, list(owned.get(e.id, ())), e.t)
    for member, mine in owned.items():
        for tp, start in mine.items():
            out[tp].append(OwnershipInterval(member, start, math.inf))
    for intervals in out.values():
        intervals.sort(key=lambda iv: (iv.start, iv.member))
    return out


def _owners_at(intervals: Sequence[OwnershipInterval], t: float) -> list[str]:
    return sorted(iv.member for iv in intervals if iv.start <= t < iv.end)


def _covered(intervals: Sequence[OwnershipInterval], lo: float, hi: float) -> tuple[float, float, float]:
    """(seconds with >= 1 owner, seconds with >= 2 owners, longest stretch with none) in [lo, hi]."""
    if hi <= lo:
        return 0.0, 0.0, 0.0
    edges: list[tuple[float, int]] = []
    for iv in intervals:
        a, b = max(iv.start, lo), min(iv.end, hi)
        if b > a:
            edges += [(a, 1), (b, -1)]
    edges.sort()
    owned = double = longest_gap = 0.0
    depth, prev = 0, lo
    for t, step in edges + [(hi, 0)]:
        span = t - prev
        if depth >= 1:
            owned += span
        elif span > longest_gap:
            longest_gap = span
        if depth >= 2:
            double += span
        depth += step
        prev = t
    return owned, double, longest_gap


def count_rounds(events: Sequence[Event], round_gap_s: float = ROUND_GAP_S, *, earlier: Sequence[Event] = ()) -> int:
    """Rebalance rounds among ``events``: generations first synced there (a static member that
    rejoins into the current generation is no round), else bursts of assign callbacks.

    ``earlier``: the events before, whose generations do not count again.
    """
    gens = {e.extra.get("gen") for e in events if e.ev == "sync"}
    if gens:
        return len(gens - {e.extra.get("gen") for e in earlier if e.ev == "sync"})
    times = sorted(e.t for e in events if e.ev == "cb_assigned")
    return sum(1 for i, t in enumerate(times) if i == 0 or t - times[i - 1] > round_gap_s)


def phase_metrics(
    events: Iterable[Event],
    start: float,
    end: float = math.inf,
    *,
    intervals: Mapping[TopicPartition, list[OwnershipInterval]] | None = None,
) -> PhaseMetrics:
    """The metrics of the phase ``[start, end)`` of a timeline (all of its events, any order).

    ``intervals`` may pass a precomputed :func:`ownership_intervals` of the same events.
    """
    if end < start:
        raise ValueError(f"phase end {end} is before its start {start}")
    timeline = _sorted_events(events)
    if intervals is None:
        intervals = ownership_intervals(timeline)
    inside = [e for e in timeline if start <= e.t < end and e.ev not in NOISE_EVENTS]
    first_t = inside[0].t if inside else start

    owners_before = _owners_before(intervals, start)
    # A member that goes without a revoke callback (a crash, or a client whose close() calls none,
    # such as aiokafka's eager consumer) loses what it still owned when it goes.
    released = {(iv.member, iv.end) for ivs in intervals.values() for iv in ivs}
    losses = [
        e.t
        for e in inside
        if (e.ev in ("cb_revoked", "cb_lost") and e.parts)
        or (e.ev == "crash" and any(e.id in ms for ms in owners_before.values()))
        or (e.ev in RELEASE_EVENTS and (e.id, e.t) in released)
    ]
    changes = [e.t for e in inside if e.ev in OWNERSHIP_EVENTS and e.parts]
    assigns = [e.t for e in inside if e.ev == "cb_assigned"]
    settle = max(changes) if changes else (max(assigns) if assigns else first_t)
    first_loss = min(losses) if losses else first_t

    unowned_ps = double_ps = gap_kept = 0.0
    moved = kept = unowned_parts = 0
    final: dict[TopicPartition, str] = {}
    horizon = min(end, _last_time(timeline, end))
    for tp in sorted(intervals):
        ivs = intervals[tp]
        before = owners_before.get(tp, [])
        after = _owners_at(ivs, settle)
        if after:
            final[tp] = after[0]
        if not before and not after:
            continue  # not part of the group's partitions in this phase
        owned_s, _, gap = _covered(ivs, first_loss, settle)
        _, double_s, _ = _covered(ivs, start, horizon)
        unowned = (settle - first_loss) - owned_s
        unowned_ps += unowned
        double_ps += double_s
        if unowned > 1e-9:
            unowned_parts += 1
        if before and before == after:
            kept += 1
            gap_kept = max(gap_kept, gap)
        elif before:
            moved += 1

    handovers = _handovers(inside, owners_before)
    alive = _alive_members(timeline, settle)
    counts = {m: 0 for m in alive}
    for member in final.values():
        if member in counts:
            counts[member] += 1
    return PhaseMetrics(
        settle_s=round(settle - first_t, 6),
        window_s=round(settle - first_loss, 6),
        unowned_ps=round(unowned_ps, 6),
        double_owned_ps=round(double_ps, 6),
        moved=moved,
        unowned_parts=unowned_parts,
        kept=kept,
        gap_kept_s=round(gap_kept, 6),
        rounds=count_rounds(inside, earlier=[e for e in timeline if e.t < start]),
        balance=(max(counts.values()) - min(counts.values())) if counts else 0,
        revoke_callbacks=sum(1 for e in inside if e.ev in ("cb_revoked", "cb_lost") and e.parts),
        assign_callbacks=sum(1 for e in inside if e.ev == "cb_assigned" and e.parts),
        final=final,
        handovers=handovers,
    )


def _owners_before(
    intervals: Mapping[TopicPartition, Sequence[OwnershipInterval]], t: float
) -> dict[TopicPartition, list[str]]:
    """Owners just before ``t`` (so a hand-over exactly at ``t`` belongs to the phase)."""
    out: dict[TopicPartition, list[str]] = {}
    for tp, ivs in intervals.items():
        owners = sorted(iv.member for iv in ivs if iv.start < t <= iv.end)
        if owners:
            out[tp] = owners
    return out


def _last_time(timeline: Sequence[Event], end: float) -> float:
    """The end of the observed timeline, so that an open phase is not integrated to infinity."""
    times = [e.t for e in timeline if e.t < end]
    return max(times) if times else end


def _alive_members(timeline: Sequence[Event], t: float) -> set[str]:
    alive: set[str] = set()
    for e in timeline:
        if e.t > t:
            break
        if e.ev in GONE_EVENTS:
            alive.discard(e.id)
        elif e.ev in ("subscribed", "join", "sync", "cb_assigned"):
            alive.add(e.id)
    return alive


def timeline_metrics(events: Iterable[Event], phases: Mapping[str, tuple[float, float]]) -> dict[str, PhaseMetrics]:
    """The metrics of each named phase ``name -> (start, end)`` of one timeline."""
    timeline = _sorted_events(events)
    intervals = ownership_intervals(timeline)
    return {name: phase_metrics(timeline, a, b, intervals=intervals) for name, (a, b) in phases.items()}


#: Recording marks that open a phase, and the phase names the recorder's metrics.json uses.
RECORDING_PHASE_MARKS = (("start3", "initial"), ("scale_out", "out"), ("scale_in", "in"))


def recording_phases(meta: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """Phases ``name -> (start, end)`` of a recorded run from its meta.json ``marks``.

    Each phase runs from its mark to the next mark (``producer_stop`` closes the last), so the
    survivors' final shutdown is never counted as a rebalance.
    """
    marks = meta.get("marks")
    if not isinstance(marks, Mapping):
        raise ValueError(f"recording meta {meta.get('label', '?')!r} has no 'marks' mapping")
    ordered = sorted((float(t), name) for name, t in marks.items())
    phases: dict[str, tuple[float, float]] = {}
    for mark, phase in RECORDING_PHASE_MARKS:
        if mark not in marks:
            continue
        start = float(marks[mark])
        later = [t for t, _ in ordered if t > start]
        phases[phase] = (start, later[0] if later else math.inf)
    return phases


#: Member events that start a phase in a timeline without marks, and the phase kind they start.
TRIGGER_KINDS = {"subscribed": "scale_out", "closing": "scale_in", "crash": "crash"}


def detect_phases(events: Iterable[Event], quiet_s: float = 2.0) -> dict[str, tuple[float, float]]:
    """Phases of a timeline that has no marks: a member starting, closing or crashing after the
    group was quiet (no member event) for ``quiet_s`` opens a phase (``1:scale_out``...); what
    precedes the first is ``initial``."""
    timeline = [e for e in _sorted_events(events) if e.ev not in NOISE_EVENTS]
    if not timeline:
        return {}
    starts: list[tuple[str, float]] = [("initial", timeline[0].t)]
    last = timeline[0].t
    for e in timeline[1:]:
        if e.ev in TRIGGER_KINDS and e.t - last >= quiet_s:
            starts.append((f"{len(starts)}:{TRIGGER_KINDS[e.ev]}", e.t))
        last = e.t
    stop = timeline[-1].t + 1e-6
    return {name: (t, starts[i + 1][1] if i + 1 < len(starts) else stop) for i, (name, t) in enumerate(starts)}


def count_generations(events: Iterable[Event], *, earlier: Iterable[Event] = ()) -> int:
    """Rebalance rounds as the generations members received assignments in (the ``gen`` of their
    ``cb_assigned`` events), not counting generations already seen in ``earlier``. For timelines
    of real members, which report no ``sync`` events but stamp callbacks with their generation."""

    def generations(evs: Iterable[Event]) -> set[Any]:
        return {e.extra.get("gen") for e in evs if e.ev == "cb_assigned" and e.extra.get("gen") is not None}

    return len(generations(events) - generations(earlier))


def change_settles(events: Iterable[Event], changes: Sequence[float], end: float) -> list[float]:
    """When the group settled after each change that began at ``changes`` (a scale-out, a crash, or
    each restart of a rolling restart; the last one's stretch ends at ``end``): the last ownership
    callback with partitions or departure (:data:`GONE_EVENTS`) before the next change began, or the
    change's own start when nothing happened.

    A change's stretch stops :data:`CLOCK_SLACK_S` short of the next change: the next member to
    leave cannot act before it is told to, so an event stamped in that last millisecond is the next
    change's, written by a clock that truncates."""
    timeline = sorted(events, key=lambda e: e.t)
    bounds = [*changes, end]
    settles = []
    for lo, hi in zip(bounds, bounds[1:]):
        stop = hi - CLOCK_SLACK_S if hi < end else hi
        marks = [
            e.t
            for e in timeline
            if lo <= e.t < stop and ((e.parts and e.ev in OWNERSHIP_EVENTS) or e.ev in GONE_EVENTS)
        ]
        settles.append(max(marks, default=lo))
    return settles


def unowned_partition_seconds(
    intervals: Mapping[TopicPartition, Sequence[OwnershipInterval]],
    partitions: Iterable[TopicPartition],
    lo: float,
    hi: float,
) -> float:
    """Sum over ``partitions`` of the seconds in ``[lo, hi]`` in which the partition had no owner
    (a partition without any interval counts for the whole span)."""
    total = 0.0
    for tp in set(partitions):
        owned_s, _, _ = _covered(intervals.get(tp, ()), lo, hi)
        total += max(0.0, hi - lo) - owned_s
    return round(total, 6)


def kept_partitions(
    intervals: Mapping[TopicPartition, Sequence[OwnershipInterval]], start: float, settle: float
) -> dict[TopicPartition, str]:
    """Partitions owned by the same single member just before ``start`` and at ``settle``, with
    that member."""
    before = _owners_before(intervals, start)
    kept = {}
    for tp, owners in before.items():
        if len(owners) == 1 and _owners_at(intervals[tp], settle) == owners:
            kept[tp] = owners[0]
    return dict(sorted(kept.items()))


def processed_ranges(
    events: Iterable[Event], default_topic: str = DEFAULT_TOPIC
) -> Iterator[tuple[Event, TopicPartition, Sequence[Sequence[int]]]]:
    """``(event, partition, offset ranges)`` for each partition every ``processed`` event reports
    (its ``ranges``: partition -> inclusive ``[first, last]`` offset ranges)."""
    for e in events:
        if e.ev != "processed":
            continue
        ranges = e.extra.get("ranges")
        if not isinstance(ranges, Mapping):
            raise ValueError(f"processed event of {e.id} at {e.t} has no ranges mapping: {ranges!r}")
        for key, spans in ranges.items():
            yield e, partition_of(key, default_topic), spans


def processing_times(events: Iterable[Event], default_topic: str = DEFAULT_TOPIC) -> dict[TopicPartition, list[float]]:
    """Partition -> sorted times of the ``processed`` events that report records of it: when its
    records were seen being processed."""
    out: dict[TopicPartition, list[float]] = {}
    for e, tp, _ in processed_ranges(events, default_topic):
        out.setdefault(tp, []).append(e.t)
    for times in out.values():
        times.sort()
    return out


def longest_processing_gap(
    times: Mapping[TopicPartition, Sequence[float]], partitions: Iterable[TopicPartition], lo: float, hi: float
) -> float:
    """The longest stretch of ``[lo, hi]`` in which one of ``partitions`` had no records processed
    (from :func:`processing_times`; the stretches from ``lo`` to its first report and from its last
    report to ``hi`` count). 0.0 for no partitions. Compare with the same measure over a steady
    stretch: reports come at the members' reporting rhythm, so that is the floor."""
    longest = 0.0
    for tp in set(partitions):
        inside = [t for t in times.get(tp, ()) if lo <= t <= hi]
        edges = [lo, *inside, hi]
        longest = max(longest, max(b - a for a, b in zip(edges, edges[1:])))
    return round(longest, 6)


def delivery_counts(
    processed: Mapping[TopicPartition, Counter[int]], produced: Mapping[TopicPartition, Iterable[int]]
) -> tuple[int, int]:
    """(duplicates, lost): extra processings of records processed more than once, and produced
    records never processed. ``processed``: partition -> offset -> times processed."""
    duplicates = sum(n - 1 for counts in processed.values() for n in counts.values() if n > 1)
    lost = sum(1 for tp, offsets in produced.items() for o in set(offsets) if processed.get(tp, Counter())[o] == 0)
    return duplicates, lost
