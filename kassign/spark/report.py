"""The sweep/analysis report: ``report.html`` with a computed summary, the run's parameters, one
figure per metric (PNGs from :mod:`kassign.spark.report_plots`) and the aggregates table.

Every figure has a title and a caption saying what to read from it; panels without data are left
out and named in the caption, a figure with no panel at all is replaced by that note.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kassign.spark.report_plots import FIGURES, FigurePanels, draw_figure, figure_panels, kind_title
from kassign.spark.report_summary import SUMMARY_METRICS, checks, findings, headline

__all__ = ["write_report", "FIGURES", "TABLE_COLUMNS"]

log = logging.getLogger(__name__)

TABLE_COLUMNS = (
    "n",
    "unowned_ps_p50",
    "unowned_ps_p95",
    "moved_mean",
    "settle_s_p50",
    "settle_s_p95",
    "rounds_p50",
    "balance_max",
    "double_owned_ps_max",
    "unsettled",
)
_KEYS = ("broker", "client", "assignor", "protocol", "kind")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1340px;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f4f4f4} td.l,th.l{text-align:left}
figure{margin:1.5em 0} figure h3{margin:.2em 0} img{max-width:100%;display:block}
figcaption,.caption{color:#444;font-size:14px;margin-top:.3em} .note{color:#666;font-style:italic}
.lede{color:#444} .wide{overflow-x:auto} .wide td{white-space:nowrap}
"""


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return html.escape(", ".join(str(v) for v in value))
    if isinstance(value, Mapping):
        return html.escape(", ".join(f"{k}={v}" for k, v in value.items()))
    return html.escape(str(value))


def _summary_html(aggregates: Sequence[Mapping[str, Any]], phase_rows: Sequence[Mapping[str, Any]]) -> str:
    found = findings(aggregates)
    if not found:
        return '<p class="note">No measured phase: nothing to compare.</p>'
    cells: dict[str, dict[str, str]] = {}
    for f in found:
        cells.setdefault(f.kind, {})[f.metric] = html.escape(f.text())
    head = '<th class="l">phase</th>' + "".join(
        f'<th class="l">{html.escape(what)} <small>({html.escape(unit)})</small></th>'
        for what, unit in SUMMARY_METRICS.values()
    )
    body = "\n".join(
        f'<tr><td class="l">{html.escape(kind_title(kind))}</td>'
        + "".join(f'<td class="l">{row.get(m, "-")}</td>' for m in SUMMARY_METRICS)
        + "</tr>"
        for kind, row in cells.items()
    )
    facts = "".join(f"<li>{html.escape(line)}</li>" for line in checks(aggregates, phase_rows))
    return (
        f"<p><b>{html.escape(headline(found))}</b></p>\n"
        f'<p class="lede">Best strategy per phase and metric (lower is better); values within 1% of the '
        f"best count as a tie.</p>\n<table><tr>{head}</tr>\n{body}\n</table>\n<ul>{facts}</ul>"
    )


def _dl(items: Mapping[str, Any]) -> str:
    return (
        "<table>"
        + "".join(
            f'<tr><th class="l">{html.escape(str(k))}</th><td class="l">{_fmt(v)}</td></tr>' for k, v in items.items()
        )
        + "</table>"
    )


def _figure_html(figure: FigurePanels, drawn: bool) -> str:
    spec = figure.spec
    note = figure.note()
    note_html = f' <span class="note">{html.escape(note)}</span>' if note else ""
    if not drawn:
        return (
            f'<section class="figure" data-metric="{spec.metric}" data-panels="">'
            f"<h3>{html.escape(spec.title)}</h3>"
            f'<p class="caption">{html.escape(spec.reading)}.{note_html}</p></section>'
        )
    kinds = ",".join(p.kind for p in figure.panels)
    return (
        f'<figure data-metric="{spec.metric}" data-panels="{html.escape(kinds)}"><h3>{html.escape(spec.title)}'
        f'</h3><img src="{spec.file}" alt="{html.escape(spec.title)}">'
        f"<figcaption>{html.escape(spec.caption)}{note_html}</figcaption></figure>"
    )


def write_report(
    out: Path,
    phase_rows: Sequence[Mapping[str, Any]],
    aggregates: Sequence[Mapping[str, Any]],
    *,
    title: str,
    summary: Mapping[str, Any],
    parameters: Mapping[str, Any] | None = None,
) -> Path:
    """Write the PNGs and ``report.html`` (plus ``aggregates.json``) into ``out``; returns the page.

    ``summary``: facts about the run (timings, counts); ``parameters``: what the run was asked to
    do (the grid's axes, the inputs), shown as given.
    """
    out.mkdir(parents=True, exist_ok=True)
    measured = [r for r in phase_rows if r["kind"] not in ("initial", "error")]
    figures = []
    for spec in FIGURES:
        figure = figure_panels(measured, spec)
        stale = out / spec.file
        if figure.panels:
            draw_figure(figure, stale)
        elif stale.exists():
            stale.unlink()  # a PNG from an earlier run into the same directory would be mistaken for this one's
        if figure.note():
            log.debug("%s: %s", spec.title, figure.note())
        figures.append(_figure_html(figure, bool(figure.panels)))
    (out / "aggregates.json").write_text(json.dumps(list(aggregates), indent=1, default=str))
    # <wbr> after each underscore lets the long column names wrap, so the table fits the page.
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in _KEYS + TABLE_COLUMNS)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{_fmt(a.get(c))}</td>" for c in _KEYS + TABLE_COLUMNS) + "</tr>" for a in aggregates
    )
    strategies = {(r["assignor"], r["protocol"], r.get("client"), r.get("broker")) for r in measured}
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="lede">{len(measured)} measured phases of {len(strategies)} strategies (assignor and protocol).
Every metric is lower-is-better.</p>
<h2>Summary</h2>
{_summary_html(aggregates, phase_rows)}
<h2>Run</h2>
<h3>Parameters</h3>
{_dl(parameters or {})}
<h3>Measured</h3>
{_dl(summary)}
<h2>Figures</h2>
{chr(10).join(figures)}
<h2>Aggregates</h2>
<p>Per phase: <b>unowned_ps</b> partition-seconds without owner between the first revocation and the
settle; <b>moved</b> partitions that changed owner; <b>settle_s</b> seconds from the trigger to the last
hand-over; <b>balance</b> max - min partitions per member; <b>double_owned_ps</b> must be 0.</p>
<div class="wide"><table><tr>{head}</tr>
{body}
</table></div>
</body></html>
"""
    page_path = out / "report.html"
    page_path.write_text(page, encoding="utf-8")
    return page_path
