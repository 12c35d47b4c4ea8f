"""The demo's live view, drawn from a group whose members' ownership is set by hand (no broker)."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("aiokafka")

from aiokafka import TopicPartition  # noqa: E402

from kassign.demo.group import DemoGroup, DemoMember, KeyedStream  # noqa: E402
from kassign.demo.view import LiveView  # noqa: E402


class _Running:
    """Stands in for a member's task that is still running."""

    def done(self) -> bool:
        return False


def _group() -> DemoGroup:
    group = DemoGroup("127.0.0.1:1", "g", "t", 4, consumer_factory=None, protocol_name="test")
    for name, parts in (("m1", {0, 1}), ("m2", {2})):
        member = DemoMember(name, group, owned={TopicPartition("t", p) for p in parts})
        member.task = _Running()
        group.members[name] = member
    return group


def test_terminal_frame_shows_members_and_unowned_partitions():
    group = _group()
    out = io.StringIO()
    view = LiveView("coop", group, KeyedStream("127.0.0.1:1", "t", group.ledger, rate=10), out, tty=True)
    view.step = "scale out"
    view.draw()
    frame = out.getvalue()
    assert frame.startswith("\x1b[H")
    assert "scale out" in frame and "1 partition(s) without owner" in frame
    assert "m1" in frame and "##.." in frame and "..#." in frame


def test_progress_lines_only_when_something_changes():
    group = _group()
    out = io.StringIO()
    view = LiveView(
        "coop", group, KeyedStream("127.0.0.1:1", "t", group.ledger, rate=10), out, tty=False, line_every=3600
    )
    view.draw()
    view.draw()
    assert len(out.getvalue().splitlines()) == 1
    group.members["m2"].owned.add(TopicPartition("t", 3))  # now every partition has one owner
    view.draw()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "settled" in lines[1] and "\x1b" not in lines[1]


def test_the_last_frames_say_the_members_are_leaving_not_that_partitions_lack_an_owner():
    group = _group()  # partition 3 has no owner, as while members close
    out = io.StringIO()
    view = LiveView("coop", group, KeyedStream("127.0.0.1:1", "t", group.ledger, rate=10), out, tty=True)
    for step, expected in (
        ("closing members", "closing: the members leave the group"),
        ("done", "done: every member has left"),
    ):
        view.step = step
        view.draw()
        frame = out.getvalue().rsplit("\x1b[H", 1)[-1]
        assert expected in frame and "without owner" not in frame and "(none)" not in frame
