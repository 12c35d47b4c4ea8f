"""The sweep/analysis report: PNG plots (matplotlib, Agg backend) and an HTML page around them.

Plots, one panel per phase kind (scale_out, crash...), one box per assignor/protocol (and
broker/client when those vary): the ownership gap (unowned partition-seconds), partition
movement, settle time, and the balance after settling.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_report", "PLOTS"]

#: metric -> (file name, title, axis label)
PLOTS = {
    "unowned_ps": ("ownership_gap.png", "Ownership gap", "unowned partition-seconds"),
    "moved": ("movement.png", "Partition movement", "partitions that changed owner"),
    "settle_s": ("settle_time.png", "Settle time", "seconds from trigger to last hand-over"),
    "balance": ("balance.png", "Balance after settling", "max - min partitions per member"),
}
TABLE_COLUMNS = ("n", "unowned_ps_p50", "unowned_ps_p95", "moved_mean", "settle_s_p50", "settle_s_p95",
                 "rounds_p50", "balance_max", "double_owned_ps_max", "unsettled")


def _label_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = ["assignor", "protocol"]
    for extra in ("broker", "client"):
        if len({r[extra] for r in rows}) > 1:
            keys.insert(0, extra)
    return keys


def _plot(rows: Sequence[Mapping[str, Any]], metric: str, path: Path, title: str, ylabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = _label_keys(rows)
    kinds = sorted({r["kind"] for r in rows})
    fig, axes = plt.subplots(1, len(kinds), figsize=(max(6.0, 4.5 * len(kinds)), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        series: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if r["kind"] == kind:
                series["/".join(str(r[k]) for k in keys)].append(float(r[metric]))
        labels = sorted(series)
        positions = list(range(1, len(labels) + 1))
        if metric == "balance":
            ax.bar(positions, [sum(series[lb]) / len(series[lb]) for lb in labels], label="mean")
            ax.plot(positions, [max(series[lb]) for lb in labels], "kv", label="max")
            ax.legend(fontsize=7)
        else:
            ax.boxplot([series[lb] for lb in labels], positions=positions)
        ax.set_xticks(positions)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_title(kind, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def write_report(out: Path, phase_rows: Sequence[Mapping[str, Any]], aggregates: Sequence[Mapping[str, Any]], *,
                 title: str, summary: Mapping[str, Any]) -> Path:
    """Write the PNGs and ``report.html`` (plus ``aggregates.json``) into ``out``; returns the page."""
    out.mkdir(parents=True, exist_ok=True)
    measured = [r for r in phase_rows if r["kind"] not in ("initial", "error")]
    images = []
    if measured:
        for metric, (name, plot_title, ylabel) in PLOTS.items():
            _plot(measured, metric, out / name, plot_title, ylabel)
            images.append(name)
    (out / "aggregates.json").write_text(json.dumps(list(aggregates), indent=1, default=str))
    keys = ("broker", "client", "assignor", "protocol", "kind")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in keys + TABLE_COLUMNS)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{_fmt(a.get(c))}</td>" for c in keys + TABLE_COLUMNS) + "</tr>" for a in aggregates)
    facts = "".join(f"<li>{html.escape(str(k))}: {_fmt(v)}</li>" for k, v in summary.items())
    imgs = "\n".join(f'<figure><img src="{n}" alt="{n}"><figcaption>{n}</figcaption></figure>' for n in images)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}} img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title)}</h1>
<ul>{facts}</ul>
<p>Per phase: <b>unowned_ps</b> partition-seconds without owner between the first revocation and the
settle; <b>moved</b> partitions that changed owner; <b>settle_s</b> seconds from the trigger to the last
hand-over; <b>balance</b> max - min partitions per member; <b>double_owned_ps</b> must be 0.</p>
<h2>Aggregates</h2>
<table><tr>{head}</tr>
{body}
</table>
<h2>Distributions</h2>
{imgs}
</body></html>
"""
    page_path = out / "report.html"
    page_path.write_text(page)
    return page_path
