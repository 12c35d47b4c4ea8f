"""Render rebalance timelines (:mod:`kassign.timeline.events`) as a PNG: one row per partition, time across,
each partition's bar coloured by the member that owned it, blank where it had no owner.

Rebalance rounds (the first ``sync`` of each generation, or else each burst of assign callbacks)
are thin dotted lines; labelled marks (a scale-out, a restart...) are solid lines with their name
on top. Several timelines can share one figure as stacked panels (the demo's eager and
cooperative runs). matplotlib (Agg backend) is imported only when rendering.

Command line: ``python -m kassign.timeline.plot events.jsonl [more.jsonl ...] -o timeline.png``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kassign.model import TopicPartition
from kassign.timeline.events import Event, read_events
from kassign.timeline.metrics import ROUND_GAP_S, ownership_intervals

__all__ = ["TimelinePanel", "rebalance_times", "render_timelines", "main"]

#: Distinct colours for up to 20 members (tab20 without its pale halves first); more cycle.
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
)


@dataclass
class TimelinePanel:
    """One timeline to draw: its events, a title, and labelled marks ``name -> time``."""

    events: Sequence[Event]
    title: str = ""
    marks: Mapping[str, float] = field(default_factory=dict)


def rebalance_times(events: Iterable[Event]) -> list[float]:
    """When each rebalance round completed: the first ``sync`` of every generation, or, for
    timelines without ``sync`` events, the first assign callback of every burst."""
    timeline = sorted(events, key=lambda e: e.t)
    first_sync: dict[object, float] = {}
    for e in timeline:
        if e.ev == "sync":
            first_sync.setdefault(e.extra.get("gen"), e.t)
    if first_sync:
        return sorted(first_sync.values())
    assigns = [e.t for e in timeline if e.ev == "cb_assigned"]
    return [t for i, t in enumerate(assigns) if i == 0 or t - assigns[i - 1] > ROUND_GAP_S]


def _natural_key(name: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _member_colours(panels: Sequence[TimelinePanel]) -> dict[str, str]:
    # One colour per member name across all panels (m1, m2, ..., m10 in natural order).
    members = {e.id for panel in panels for e in panel.events if e.ev == "cb_assigned"}
    return {m: _PALETTE[i % len(_PALETTE)] for i, m in enumerate(sorted(members, key=_natural_key))}


def _draw_panel(ax, panel: TimelinePanel, colours: Mapping[str, str]) -> None:
    events = sorted(panel.events, key=lambda e: e.t)
    if not events:
        ax.set_title(f"{panel.title} (no events)")
        return
    t0, t_end = events[0].t, events[-1].t
    intervals = ownership_intervals(events)
    partitions: list[TopicPartition] = sorted(intervals)
    single_topic = len({tp.topic for tp in partitions}) == 1
    for row, tp in enumerate(partitions):
        spans_by_member: dict[str, list[tuple[float, float]]] = {}
        for iv in intervals[tp]:
            end = t_end if math.isinf(iv.end) else iv.end
            if end > iv.start:
                spans_by_member.setdefault(iv.member, []).append((iv.start - t0, end - iv.start))
        for member, spans in spans_by_member.items():
            ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colours.get(member, "#333333"), linewidth=0)
    for t in rebalance_times(events):
        ax.axvline(t - t0, color="#555555", linestyle=":", linewidth=0.7)
    for name, t in sorted(panel.marks.items(), key=lambda item: item[1]):
        x = t - t0
        ax.axvline(x, color="black", linewidth=1.0)
        # Labels sit just above the plot area, in axes coordinates vertically, so they never hide bars.
        ax.text(x, 1.01, name, transform=ax.get_xaxis_transform(), rotation=30, va="bottom", ha="left", fontsize=7)
    ax.set_yticks(range(len(partitions)))
    ax.set_yticklabels(
        [str(tp.partition) if single_topic else f"{tp.topic}:{tp.partition}" for tp in partitions], fontsize=6
    )
    ax.set_ylim(-0.6, len(partitions) - 0.4)
    ax.set_xlim(0, max(t_end - t0, 1e-3))
    ax.set_ylabel("partition")
    # The title sits above the tallest mark label: a label of n characters at fontsize 7 rotated 30
    # degrees rises about 2 points per character plus its own height.
    longest = max((len(name) for name in panel.marks), default=0)
    ax.set_title(
        panel.title, loc="left", fontsize=10, pad=(12 + 2.1 * longest) if panel.marks else 6, fontweight="bold"
    )


def render_timelines(panels: Sequence[TimelinePanel], path: str | os.PathLike[str], *, dpi: int = 110) -> str:
    """Draw ``panels`` stacked in one PNG at ``path``; returns the path written.

    Raises ValueError when there is no panel.
    """
    from matplotlib import pyplot as plt

    fig = build_figure(panels)
    try:
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return str(path)


def build_figure(panels: Sequence[TimelinePanel]):  # -> matplotlib.figure.Figure (matplotlib is optional)
    """The laid-out figure of :func:`render_timelines`; the caller closes it (``pyplot.close``)."""
    if not panels:
        raise ValueError("render_timelines needs at least one panel")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    colours = _member_colours(panels)
    rows = max(len(ownership_intervals(p.events)) for p in panels)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(12, 0.9 + len(panels) * (1.6 + 0.16 * max(rows, 6))), squeeze=False
    )
    try:
        for ax, panel in zip(axes[:, 0], panels, strict=True):
            _draw_panel(ax, panel, colours)
        axes[-1, 0].set_xlabel("seconds (blank = no owner, dotted = rebalance round)")
        handles = [Patch(color=c, label=m) for m, c in colours.items()]
        if handles:
            fig.legend(
                handles=handles,
                loc="upper right",
                ncol=min(len(handles), 10),
                fontsize=7,
                title="owner",
                title_fontsize=7,
                frameon=False,
            )
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    except BaseException:
        plt.close(fig)
        raise
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kassign.timeline.plot FILE... -o OUT.png``: one panel per timeline file."""
    ap = argparse.ArgumentParser(prog="python -m kassign.timeline.plot", description=__doc__.splitlines()[0])
    ap.add_argument("timelines", nargs="+", help="JSON-lines timeline files (.gz read transparently)")
    ap.add_argument("-o", "--out", default="timeline.png", help="PNG to write (default %(default)s)")
    args = ap.parse_args(argv)
    panels = [TimelinePanel(list(read_events(path)), title=os.path.basename(path)) for path in args.timelines]
    print(render_timelines(panels, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
