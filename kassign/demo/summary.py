"""The demo's summary: rebalance metrics (:mod:`kassign.timeline.metrics`) of each run's steps, grouped as
scale-out, scale-in and rolling restart, with the records lost and processed twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kassign.demo.scenario import RunResult
from kassign.timeline.metrics import PhaseMetrics, timeline_metrics

__all__ = ["StepSummary", "summarize", "format_table", "summary_json"]


@dataclass
class StepSummary:
    """The metrics of one kind of step in one run, summed over its occurrences."""

    run: str
    step: str
    unowned_ps: float
    moved: int
    rounds: int
    settle_s: float
    handovers: int = 0


def _kind(phase: str) -> str | None:
    for prefix, kind in (("scale out", "scale out"), ("scale in", "scale in"), ("restart", "rolling restart")):
        if phase.startswith(prefix):
            return kind
    return None  # the initial start-up is not a rebalance the protocols differ on


def summarize(result: RunResult) -> tuple[list[StepSummary], dict[str, PhaseMetrics]]:
    """Per-kind step summaries (in plan order, then a total) and the metrics of every phase."""
    per_phase = timeline_metrics(result.events, result.phases)
    rows: dict[str, StepSummary] = {}
    for name, m in per_phase.items():
        kind = _kind(name)
        if kind is None:
            continue
        row = rows.setdefault(kind, StepSummary(result.label, kind, 0.0, 0, 0, 0.0))
        row.unowned_ps += m.unowned_ps
        row.moved += m.moved
        row.handovers += m.handovers
        row.rounds += m.rounds
        row.settle_s += m.settle_s
    total = StepSummary(
        result.label,
        "total",
        sum(r.unowned_ps for r in rows.values()),
        sum(r.moved for r in rows.values()),
        sum(r.rounds for r in rows.values()),
        sum(r.settle_s for r in rows.values()),
        sum(r.handovers for r in rows.values()),
    )
    return [*rows.values(), total], per_phase


def format_table(results: Sequence[RunResult]) -> str:
    """A plain-text table with the runs side by side: one block per kind of step (plan order, then
    the total) holding one row per run, then each run's record counts."""
    summaries = [(result, {row.step: row for row in summarize(result)[0]}) for result in results]
    steps: list[str] = []
    for _, rows in summaries:
        steps += [step for step in rows if step not in steps and step != "total"]
    steps.append("total")
    width = max([len("run"), *(len(result.title) for result in results)])
    header = f"{'step':<16} {'run':<{width}} {'partition-s unowned':>19} {'handovers':>9} {'rounds':>6} {'settle s':>8}"
    lines = [header, "-" * len(header)]
    for step in steps:
        first = True
        for result, rows in summaries:
            row = rows.get(step)
            if row is None:
                continue
            lines.append(
                f"{step if first else '':<16} {result.title:<{width}} {row.unowned_ps:19.1f} "
                f"{row.handovers:9d} {row.rounds:6d} {row.settle_s:8.1f}"
            )
            first = False
    lines.append("")
    lines.append(
        "partition-s unowned: seconds each partition had no owner, summed; handovers: times a partition "
        "was given to another member than its last owner (a restarted member's partitions handed to "
        "others and back count twice); rounds: rebalance generations; settle s: from each step to its "
        "last ownership change, summed."
    )
    lines.append("")
    for i, result in enumerate(results):
        label = "records" if i == 0 else ""
        if result.interrupted:
            lines.append(
                f"{label:<16} {result.title:<{width}} INTERRUPTED during {result.interrupted_during}: "
                f"{result.produced} produced, {result.duplicates} processed twice, lost not measured "
                f"(the records were not drained)"
            )
        else:
            lines.append(
                f"{label:<16} {result.title:<{width}} {result.produced} produced, {result.lost} lost, "
                f"{result.duplicates} processed twice"
            )
        if result.unsettled:
            lines.append(
                f"{'':<16} {result.title:<{width}} DID NOT SETTLE within the deadline: {', '.join(result.unsettled)}"
            )
    if any(result.broker_group_type for result in results):
        for i, result in enumerate(results):
            label = "group type" if i == 0 else ""
            lines.append(
                f"{label:<16} {result.title:<{width}} {result.broker_group_type or 'not described'} "
                f"(the broker's description; members spoke {result.group_protocol})"
            )
    return "\n".join(lines).rstrip() + "\n"


def summary_json(results: Sequence[RunResult]) -> dict[str, Any]:
    """Everything the table shows plus every phase's full metrics, JSON-ready (an interrupted run's
    ``records.lost`` is null: not measured; ``broker_group_type`` is null when the broker was not asked)."""
    out: dict[str, Any] = {}
    for result in results:
        rows, per_phase = summarize(result)
        out[result.label] = {
            "title": result.title,
            "group_id": result.group_id,
            "topic": result.topic,
            "duration_s": round(result.duration_s, 3),
            "records": {"produced": result.produced, "lost": result.lost, "duplicates": result.duplicates},
            "unsettled": list(result.unsettled),
            "interrupted": result.interrupted,
            "interrupted_during": result.interrupted_during,
            "group_protocol": result.group_protocol,
            "broker_group_type": result.broker_group_type,
            "marks": result.marks,
            "steps": {
                r.step: {
                    "unowned_ps": round(r.unowned_ps, 3),
                    "moved": r.moved,
                    "handovers": r.handovers,
                    "rounds": r.rounds,
                    "settle_s": round(r.settle_s, 3),
                }
                for r in rows
            },
            "phases": {
                name: {"start": a, "end": b, **per_phase[name].as_dict()} for name, (a, b) in result.phases.items()
            },
        }
    return out
