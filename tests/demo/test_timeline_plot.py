"""The PNG timeline renderer, on a hand-written timeline (no broker)."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("matplotlib")

from kassign.model import TopicPartition  # noqa: E402
from kassign.timeline.events import Event  # noqa: E402
from kassign.timeline.plot import TimelinePanel, main, rebalance_times, render_timelines  # noqa: E402


def _tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def _eager_scale_out() -> list[Event]:
    return [
        Event("m1", 10.0, "sync", extra={"gen": 1}),
        Event("m1", 10.0, "cb_assigned", [_tp(0), _tp(1)]),
        Event("m1", 12.0, "cb_revoked", [_tp(0), _tp(1)]),
        Event("m1", 13.0, "sync", extra={"gen": 2}),
        Event("m2", 13.0, "sync", extra={"gen": 2}),
        Event("m1", 13.0, "cb_assigned", [_tp(0)]),
        Event("m2", 13.1, "cb_assigned", [_tp(1)]),
        Event("m1", 15.0, "closed"),
    ]


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    return struct.unpack(">II", head[16:24])


def test_rebalance_times_uses_first_sync_of_each_generation():
    assert rebalance_times(_eager_scale_out()) == [10.0, 13.0]


def test_rebalance_times_without_sync_counts_assign_bursts():
    events = [e for e in _eager_scale_out() if e.ev != "sync"]
    events.append(Event("m2", 20.0, "cb_assigned", [_tp(0)]))
    assert rebalance_times(events) == [10.0, 13.0, 20.0]


def test_render_two_panels(tmp_path):
    out = tmp_path / "timeline.png"
    panels = [
        TimelinePanel(_eager_scale_out(), "eager", {"scale out": 12.0}),
        TimelinePanel(_eager_scale_out(), "again"),
    ]
    assert render_timelines(panels, out) == str(out)
    width, height = _png_size(out)
    assert width > 800 and height > 300


def test_render_needs_a_panel(tmp_path):
    with pytest.raises(ValueError, match="at least one panel"):
        render_timelines([], tmp_path / "x.png")


def test_command_line_reads_jsonl(tmp_path):
    from kassign.timeline.events import write_events

    src = tmp_path / "events.jsonl"
    write_events(src, _eager_scale_out(), single_topic="t")
    out = tmp_path / "cli.png"
    assert main([str(src), "-o", str(out)]) == 0
    assert _png_size(out)[0] > 0


def test_mark_labels_never_overlap_the_panel_titles():
    from matplotlib import pyplot as plt

    from kassign.timeline.plot import build_figure

    marks = {"start 3 members": 10.0, "scale out 3\u21926": 10.5, "restart m1": 14.0}
    fig = build_figure(
        [
            TimelinePanel(_eager_scale_out(), "cooperative-sticky (plain KIP-429)", marks),
            TimelinePanel(_eager_scale_out(), "kassign default (+ fast follow-up)", marks),
        ]
    )
    try:
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            # matplotlib keeps a left-aligned title apart from the centred one (ax.title)
            titles = [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
            labels = [t.get_window_extent(renderer) for t in ax.texts]
            assert titles and labels
            for title in titles:
                box = title.get_window_extent(renderer)
                assert not any(box.overlaps(label) for label in labels), title.get_text()
    finally:
        plt.close(fig)
