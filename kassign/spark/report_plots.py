"""The report's figures: which panels have something to show, and drawing them (matplotlib, Agg).

One figure per metric, one panel per phase kind (scale out, crash...), one box (or bar) per
strategy. A panel is drawn only when it has data worth a picture: kinds where the metric has no
finite value, or is 0 in every run of every strategy, are left out and named in the caption
instead (an all-zero panel renders as an empty frame, which reads as a bug).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FigureSpec",
    "Panel",
    "FigurePanels",
    "FIGURES",
    "strategy_keys",
    "strategy_label",
    "kind_title",
    "figure_panels",
    "draw_figure",
]


@dataclass(frozen=True)
class FigureSpec:
    """One figure: the metric it plots, its file, title, y-axis label, what to read from it
    (``reading``) and how its marks are drawn (``marks``); the caption is the two together."""

    metric: str
    file: str
    title: str
    ylabel: str
    reading: str
    marks: str
    bars: bool = False  # small integers: mean as a bar, worst run as a marker, instead of a box

    @property
    def caption(self) -> str:
        """The figure's one-line caption."""
        return f"{self.reading}; {self.marks}."


_BOXES = "a box spans the middle half of the runs, its line is the median, dots are single runs"
FIGURES = (
    FigureSpec(
        "unowned_ps",
        "ownership_gap.png",
        "Ownership gap",
        "unowned partition-seconds",
        "Lower is better: how long partitions went without an owner (nobody consuming them)",
        _BOXES,
    ),
    FigureSpec(
        "moved",
        "movement.png",
        "Partition movement",
        "partitions that changed owner",
        "Lower is better: how many partitions changed owner per phase (a sticky assignor moves only "
        "those that must move)",
        _BOXES,
    ),
    FigureSpec(
        "settle_s",
        "settle_time.png",
        "Settle time",
        "seconds to settle",
        "Lower is better: seconds from the trigger (members joining, leaving, crashing) to the last "
        "partition hand-over",
        _BOXES,
    ),
    FigureSpec(
        "balance",
        "balance.png",
        "Balance after settling",
        "max - min partitions per member",
        "0 is perfect: the busiest minus the idlest member's partition count once the group settled",
        "bars are the mean over runs, triangles the worst run",
        bars=True,
    ),
)

#: Phase kinds as a reader would say them.
KIND_TITLES = {
    "scale_out": "scale out (members join)",
    "scale_in": "scale in (members leave)",
    "scale_out_in": "scale out, then in",
    "rolling_restart": "rolling restart",
    "crash": "crash (found by session timeout)",
    "flap": "flapping member",
    "subscription_change": "subscription change",
    "partition_increase": "partitions added",
}
#: Box colour per protocol, the same in every figure.
PROTOCOL_COLOURS = {"eager": "#e6862e", "cooperative": "#2b8cbe"}
OTHER_COLOUR = "#999999"


def kind_title(kind: str) -> str:
    """``scale_out`` -> ``scale out (members join)``; unknown kinds with spaces for underscores."""
    return KIND_TITLES.get(kind, kind.replace("_", " "))


def strategy_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The label fields that tell strategies apart: assignor and protocol, plus broker and client
    when the rows hold more than one of them."""
    keys = ["assignor", "protocol"]
    for extra in ("client", "broker"):
        if len({r.get(extra) for r in rows}) > 1:
            keys.insert(0, extra)
    return keys


def strategy_label(row: Mapping[str, Any], keys: Sequence[str], *, sep: str = " ") -> str:
    """``range (eager)``, or ``kafka java range (eager)`` when broker/client vary; ``sep`` goes
    between the prefix, the assignor and the protocol (a newline for axis labels)."""
    prefix = [str(row[k]) for k in keys if k not in ("assignor", "protocol")]
    return sep.join([*([" ".join(prefix)] if prefix else []), str(row["assignor"]), f"({row['protocol']})"])


@dataclass(frozen=True)
class Panel:
    """One phase kind's values of a metric, per strategy label (finite values only)."""

    kind: str
    series: dict[str, list[float]]
    protocols: dict[str, str]  # strategy label -> protocol, for the colour


@dataclass
class FigurePanels:
    """The panels worth drawing, and the kinds left out (all zero, or no finite value)."""

    spec: FigureSpec
    panels: list[Panel] = field(default_factory=list)
    all_zero: list[str] = field(default_factory=list)
    no_data: list[str] = field(default_factory=list)

    def note(self) -> str:
        """What was left out and why, as one sentence ('' when nothing was)."""
        parts = []
        if self.all_zero:
            parts.append(f"{', '.join(kind_title(k) for k in self.all_zero)}: 0 in every run of every strategy")
        if self.no_data:
            parts.append(f"{', '.join(kind_title(k) for k in self.no_data)}: no measured value")
        return ("Not drawn: " + "; ".join(parts) + ".") if parts else ""


def figure_panels(rows: Sequence[Mapping[str, Any]], spec: FigureSpec) -> FigurePanels:
    """Group ``rows`` (measured phase rows) into the figure's panels, leaving out empty ones."""
    keys = strategy_keys(rows)
    result = FigurePanels(spec)
    for kind in sorted({r["kind"] for r in rows}):
        series: dict[str, list[float]] = defaultdict(list)
        protocols: dict[str, str] = {}
        for r in rows:
            if r["kind"] != kind:
                continue
            label = strategy_label(r, keys, sep="\n")
            protocols[label] = str(r["protocol"])
            value = r.get(spec.metric)
            if value is not None and math.isfinite(float(value)):
                series[label].append(float(value))
        if not series:
            result.no_data.append(kind)
        elif all(v == 0 for values in series.values() for v in values):
            result.all_zero.append(kind)
        else:
            result.panels.append(Panel(kind, dict(sorted(series.items())), protocols))
    return result


def _draw_panel(ax: Any, panel: Panel, spec: FigureSpec) -> None:
    labels = list(panel.series)
    positions = list(range(1, len(labels) + 1))
    colours = [PROTOCOL_COLOURS.get(panel.protocols[lb], OTHER_COLOUR) for lb in labels]
    if spec.bars:
        ax.bar(
            positions,
            [sum(panel.series[lb]) / len(panel.series[lb]) for lb in labels],
            color=colours,
            alpha=0.8,
            width=0.6,
        )
        ax.plot(positions, [max(panel.series[lb]) for lb in labels], "kv", markersize=7)
        ax.yaxis.get_major_locator().set_params(integer=True)
    else:
        boxes = ax.boxplot(
            [panel.series[lb] for lb in labels],
            positions=positions,
            patch_artist=True,
            widths=0.6,
            medianprops={"color": "black", "linewidth": 1.5},
        )
        for box, colour in zip(boxes["boxes"], colours):
            box.set_facecolor(colour)
            box.set_alpha(0.8)
        for position, lb in zip(positions, labels):
            # The runs themselves as dots, spread evenly (no randomness: the same report twice is
            # the same picture), so a run of zeros or a single run still shows.
            values = panel.series[lb]
            offsets = [0.0] if len(values) == 1 else [-0.15 + 0.3 * i / (len(values) - 1) for i in range(len(values))]
            ax.scatter([position + o for o in offsets], values, s=10, color="black", alpha=0.6, zorder=3)
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, fontsize=9)
    n = min(len(v) for v in panel.series.values())
    ax.set_title(f"{kind_title(panel.kind)}, {n} run{'s' if n != 1 else ''} per strategy", fontsize=11)
    ax.set_ylabel(spec.ylabel, fontsize=10)
    ax.set_ylim(bottom=0)  # comparisons of "lower is better" read honestly only from zero
    ax.grid(axis="y", alpha=0.3)


def draw_figure(figure: FigurePanels, path: Path) -> Path:
    """Draw ``figure``'s panels (two per row, about 1300 px wide) into ``path``; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if not figure.panels:
        raise ValueError(f"{figure.spec.title}: no panel to draw")
    cols = min(2, len(figure.panels))
    rows = math.ceil(len(figure.panels) / cols)
    widest = max(len(p.series) for p in figure.panels)
    width = 13.0 if cols == 2 or widest > 3 else 7.0
    fig, axes = plt.subplots(rows, cols, figsize=(width, 0.6 + 4.2 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, figure.panels):
        _draw_panel(ax, panel, figure.spec)
    for ax in list(axes.flat)[len(figure.panels) :]:
        ax.remove()  # an odd panel count leaves one grid cell: no empty frame
    used = {p for panel in figure.panels for p in panel.protocols.values()}
    handles: list[Any] = [
        Patch(color=PROTOCOL_COLOURS.get(p, OTHER_COLOUR), alpha=0.8, label=f"{p} protocol") for p in sorted(used)
    ]
    if figure.spec.bars:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="black", marker="v", linestyle="", label="worst run"))
    if not figure.spec.bars:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="black", marker=".", linestyle="", label="one run"))
    # The page gives the figure its title; the legend takes the top strip.
    fig.legend(handles=handles, loc="upper right", fontsize=9, frameon=False, ncols=len(handles))
    fig.tight_layout(rect=(0, 0, 1, 0.97 if rows > 1 else 0.93))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
