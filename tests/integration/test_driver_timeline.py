"""The driver's timeline: what its waits poll (no broker)."""

from __future__ import annotations

import random

from integration.driver import STEADY_REPORTS, _Timeline
from integration.timeline_checks import current_assignment, is_settled
from kassign.model import TopicPartition
from kassign.timeline.events import Event

PARTS = [TopicPartition("t", p) for p in range(6)]


def _run(seed: int) -> list[Event]:
    """Three members taking, handing over and reporting, the events added out of order (reader threads
    deliver them interleaved; the timeline orders them by time)."""
    rng = random.Random(seed)
    events = [Event(m, 0.01 * i, "subscribed") for i, m in enumerate("abc")]
    events += [Event("a", 1.0, "cb_assigned", PARTS[:3]), Event("b", 1.0, "cb_assigned", PARTS[3:])]
    events += [Event("b", 2.0, "cb_revoked", PARTS[5:]), Event("c", 2.1, "cb_assigned", PARTS[5:])]
    events += [
        Event("a", 3.0, "closing"),
        Event("b", 3.2, "cb_assigned", PARTS[:2]),
        Event("c", 3.2, "cb_assigned", PARTS[2:3]),
    ]
    for step in range(200):
        member = "abc"[step % 3]
        events.append(Event(member, 0.5 + step * 0.02, rng.choice(sorted(STEADY_REPORTS)), extra={"n": step}))
    rng.shuffle(events)
    return events


def test_the_changes_leave_out_the_steady_reports_only_and_come_in_time_order() -> None:
    timeline = _Timeline()
    events = _run(1)
    for event in events:
        timeline.add(event)
    everything, changes = timeline.snapshot(), timeline.snapshot(changes_only=True)
    assert len(everything) == len(events)
    assert [e.t for e in everything] == sorted(e.t for e in events)
    assert [e.t for e in changes] == sorted(e.t for e in changes)
    assert {e.ev for e in changes}.isdisjoint(STEADY_REPORTS)
    assert sorted(map(repr, changes)) == sorted(repr(e) for e in events if e.ev not in STEADY_REPORTS)


def test_ownership_read_from_the_changes_is_the_ownership_read_from_everything() -> None:
    for seed in range(5):
        timeline = _Timeline()
        for event in _run(seed):
            timeline.add(event)
        everything, changes = timeline.snapshot(), timeline.snapshot(changes_only=True)
        assert current_assignment(changes) == current_assignment(everything)
        assert current_assignment(changes) == {"b": PARTS[:2] + PARTS[3:5], "c": PARTS[2:3] + PARTS[5:]}
        for members in (["b", "c"], ["a", "b", "c"]):
            assert is_settled(changes, PARTS, members) == is_settled(everything, PARTS, members)
