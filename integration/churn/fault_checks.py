"""What the churn soak's faults (issue 16, :mod:`integration.churn.faults`) must and may do, read
from a run's timeline.

A *zombie window* is a stretch in which a member still believes it owns partitions the broker has
already handed to others, and cannot know better:

* frozen: from its ``freeze`` (SIGSTOP) until its ``cb_lost`` once resumed, if that comes within
  ``grace`` seconds of the ``thaw`` (else until the ``thaw``);
* stuck in a slow revocation (a ``cb_revoked`` carrying ``slow_ms``): from that callback's start
  until its ``cb_lost``, if that comes within ``grace`` seconds of the callback's end
  (``cb_revoked_done``; else until that end). Java's consumer would show the same window: a member
  learns that the group went on without it only after its callback returns.

Double ownership inside a zombie's window, with the zombie as one of the two owners, is excused
(and measured apart); anywhere else it breaks the invariant. A zombie must also, after resuming,
try its late commit and see it rejected, and be told its partitions were lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from integration.timeline_checks import END_OF_OWNERSHIP, Overlap
from kassign.timeline.events import Event

__all__ = ["FaultReport", "zombie_windows", "split_overlaps", "fault_report"]

Window = tuple[float, float]


@dataclass
class FaultReport:
    """The faults a timeline shows and what they did."""

    #: coordinator nodes killed; of them, killed while the broker reported the group rebalancing
    failovers: int = 0
    failovers_mid_rebalance: int = 0
    #: members frozen; of their late commits after resuming, how many the broker (or client) rejected
    zombies: int = 0
    late_commits_rejected: int = 0
    #: slow revocations; of them, how many came in a rebalance (not while closing), and how many
    #: outlasted the round (the member then lost its partitions)
    slow_revocations: int = 0
    slow_in_rebalance: int = 0
    slow_revokers_expelled: int = 0
    #: double-owned partition-seconds inside zombie windows (excused)
    zombie_ps: float = 0.0
    problems: list[str] = field(default_factory=list)


def _first(events: Sequence[Event], member: str, kinds: Iterable[str], after: float) -> Event | None:
    wanted = set(kinds)
    return next((e for e in events if e.id == member and e.ev in wanted and e.t >= after), None)


def _resumed(ordered: Sequence[Event], freeze: Event, thaw: Event) -> float:
    """When a frozen member ran again: the driver's ``thaw`` is written after SIGCONT, and a member
    that resumes at once writes its own ``resumed`` (and may commit and lose) before that."""
    own = _first(ordered, freeze.id, ("resumed",), freeze.t)
    return min(thaw.t, own.t) if own is not None else thaw.t


def zombie_windows(events: Iterable[Event], grace: float) -> dict[str, list[Window]]:
    """Member -> its zombie windows (see the module docstring), in time order."""
    ordered = sorted(events, key=lambda e: e.t)
    out: dict[str, list[Window]] = {}
    for e in ordered:
        if e.ev == "freeze":
            thaw = _first(ordered, e.id, ("thaw", "crash", "exit"), e.t)
            resumed = _resumed(ordered, e, thaw) if thaw is not None else ordered[-1].t
            lost = _first(ordered, e.id, ("cb_lost",), resumed)
            end = lost.t if lost is not None and lost.t <= resumed + grace else resumed
            out.setdefault(e.id, []).append((e.t, end))
        elif e.ev == "cb_revoked" and e.extra.get("slow_ms"):
            done = _first(ordered, e.id, ("cb_revoked_done", *END_OF_OWNERSHIP), e.t)
            finished = done.t if done is not None else ordered[-1].t
            lost = _first(ordered, e.id, ("cb_lost",), e.t)
            end = lost.t if lost is not None and lost.t <= finished + grace else finished
            out.setdefault(e.id, []).append((e.t, end))
    return out


def _covered(start: float, end: float, windows: Iterable[Window]) -> float:
    """How much of [start, end) the union of ``windows`` covers."""
    total, reach = 0.0, start
    for w_start, w_end in sorted(windows):
        lo, hi = max(w_start, reach), min(w_end, end)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def split_overlaps(
    overlaps: Iterable[Overlap], windows: dict[str, list[Window]]
) -> tuple[list[tuple[Overlap, float]], float]:
    """Each overlap with its partition-seconds outside its members' zombie windows (only those with
    some), and the partition-seconds inside them."""
    counted, excused = [], 0.0
    for o in overlaps:
        inside = _covered(o.start, o.end, [w for m in o.members for w in windows.get(m, ())])
        excused += inside
        outside = (o.end - o.start) - inside
        if outside > 1e-9:
            counted.append((o, outside))
    return counted, excused


def fault_report(
    events: Sequence[Event], overlaps: Iterable[Overlap], grace: float
) -> tuple[FaultReport, list[tuple[Overlap, float]]]:
    """The faults in ``events`` and the double ownership left after excusing zombie windows."""
    ordered = sorted(events, key=lambda e: e.t)
    windows = zombie_windows(ordered, grace)
    counted, excused = split_overlaps(overlaps, windows)
    report = FaultReport(zombie_ps=excused)
    closing: set[str] = set()
    for e in ordered:
        if e.ev == "closing":
            closing.add(e.id)
        elif e.ev == "subscribed":
            closing.discard(e.id)  # the same name started again
        if e.ev == "node_killed":
            report.failovers += 1
            report.failovers_mid_rebalance += e.extra.get("group_state") in (
                "PREPARING_REBALANCING",
                "COMPLETING_REBALANCING",
            )
        elif e.ev == "freeze":
            report.zombies += 1
            _judge_zombie(ordered, e, grace, report)
        elif e.ev == "cb_revoked" and e.extra.get("slow_ms"):
            report.slow_revocations += 1
            report.slow_in_rebalance += e.id not in closing
            end = next(w_end for w_start, w_end in windows[e.id] if w_start == e.t)
            lost = _first(ordered, e.id, ("cb_lost",), e.t)
            report.slow_revokers_expelled += lost is not None and lost.t == end
    return report, counted


def _judge_zombie(ordered: Sequence[Event], freeze: Event, grace: float, report: FaultReport) -> None:
    member = freeze.id
    thaw = _first(ordered, member, ("thaw",), freeze.t)
    ended = _first(ordered, member, ("crash", "exit"), freeze.t)
    if thaw is None or (ended is not None and ended.t < thaw.t):
        return  # killed while frozen (a stalled sequence's cleanup): nothing more to expect
    resumed = _resumed(ordered, freeze, thaw)
    late = _first(ordered, member, ("late_commit",), resumed)
    if late is None:
        report.problems.append(f"zombie {member} (frozen at {freeze.t:.3f}) never tried its late commit")
    elif late.extra.get("ok") is True:
        report.problems.append(f"zombie {member}: its late commit at {late.t:.3f} was ACCEPTED by the broker")
    elif late.extra.get("ok") is False:
        report.late_commits_rejected += 1
    else:
        report.problems.append(f"zombie {member}: late commit at {late.t:.3f} not judged ({late.extra.get('error')})")
    lost = _first(ordered, member, ("cb_lost",), resumed)
    if lost is None or lost.t > resumed + grace:
        when = "never" if lost is None else f"only {lost.t - resumed:.1f}s after resuming"
        report.problems.append(f"zombie {member} (frozen at {freeze.t:.3f}) was told its partitions were lost {when}")
