"""The report's summary, computed from the aggregates: per phase kind and metric, which strategy
does best and by how much over the next best; plus the run-wide checks (double ownership,
phases that never settled, scenarios that failed)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kassign.spark.report_plots import kind_title, strategy_keys, strategy_label

__all__ = ["SUMMARY_METRICS", "Finding", "findings", "headline", "checks", "TIE_RELATIVE"]

#: aggregate column -> (what it is, its unit): the metrics the summary compares, lower is better.
SUMMARY_METRICS = {
    "unowned_ps_p50": ("ownership gap", "unowned partition-s, median"),
    "moved_mean": ("movement", "partitions moved, mean"),
    "settle_s_p50": ("settle time", "s, median"),
}
#: Values within 1 % of the best count as a tie: simulated eager strategies often score the same.
TIE_RELATIVE = 0.01


@dataclass(frozen=True)
class Finding:
    """The best strategies (ties included) of one phase kind on one metric, and the next best."""

    kind: str
    metric: str
    best: tuple[str, ...]
    best_value: float
    runner_up: str | None = None
    runner_up_value: float | None = None

    @property
    def margin(self) -> float | None:
        """How much lower the best is than the next best, as a fraction of the next best (0..1)."""
        if self.runner_up_value is None or self.runner_up_value <= 0:
            return None
        return 1.0 - self.best_value / self.runner_up_value

    def text(self) -> str:
        """``range (eager): 0.576, 91% lower than cooperative-sticky (cooperative) (6.204)``."""
        value = _num(self.best_value)
        if self.runner_up is None:
            if len(self.best) == 1:
                return f"{self.best[0]}: {value} (the only strategy)"
            return f"all tie at {value}"
        who = self.best[0] if len(self.best) == 1 else f"{', '.join(self.best)} tie"
        margin = self.margin
        how = f"{margin:.0%} lower than" if margin is not None else "lower than"
        return f"{who}: {value}, {how} {self.runner_up} ({_num(self.runner_up_value)})"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _ties(best: float, value: float) -> bool:
    return value - best <= max(1e-9, TIE_RELATIVE * abs(best))


def findings(aggregates: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """One finding per (phase kind, metric of :data:`SUMMARY_METRICS`), kinds in name order.

    Aggregates of failed scenarios (kind ``error``) and non-finite values are left out.
    """
    rows = [a for a in aggregates if a.get("kind") not in ("error", "initial")]
    keys = strategy_keys(rows)
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for a in rows:
        by_kind[a["kind"]].append(a)
    out = []
    for kind in sorted(by_kind):
        for metric in SUMMARY_METRICS:
            scored = sorted(
                (float(a[metric]), strategy_label(a, keys))
                for a in by_kind[kind]
                if a.get(metric) is not None and math.isfinite(float(a[metric]))
            )
            if not scored:
                continue
            best_value = scored[0][0]
            best = tuple(label for value, label in scored if _ties(best_value, value))
            rest = [(value, label) for value, label in scored if not _ties(best_value, value)]
            runner = rest[0] if rest else (None, None)
            out.append(Finding(kind, metric, best, best_value, runner[1], runner[0]))
    return out


def headline(found: Sequence[Finding], metric: str = "unowned_ps_p50") -> str:
    """One sentence: which strategy (or tied strategies) has the lowest ``metric`` in which phase kinds."""
    wins: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for f in found:
        if f.metric == metric and f.runner_up is not None:  # an all-way tie is no win
            wins[f.best].append(kind_title(f.kind).split(" (")[0])
    what = SUMMARY_METRICS[metric][0]
    if not wins:
        return f"Every strategy has the same {what} in every phase kind."
    ranked = sorted(wins.items(), key=lambda item: (-len(item[1]), item[0]))
    return f"Lowest {what}: " + "; ".join(f"{' = '.join(best)} in {', '.join(kinds)}" for best, kinds in ranked) + "."


def checks(aggregates: Sequence[Mapping[str, Any]], phase_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Run-wide facts a reader must not miss: double ownership, unsettled phases, failed scenarios."""
    measured = [a for a in aggregates if a.get("kind") not in ("error", "initial")]
    lines = []
    doubled = [a for a in measured if (a.get("double_owned_ps_max") or 0) > 0]
    if doubled:
        keys = strategy_keys(measured)
        lines.append(
            "Partitions owned by two members at once in: "
            + ", ".join(f"{strategy_label(a, keys)} {kind_title(a['kind'])}" for a in doubled)
            + "."
        )
    elif measured:
        lines.append("No partition was owned by two members at once in any run.")
    unsettled = sum(int(a.get("unsettled") or 0) for a in measured)
    if unsettled:
        lines.append(f"{unsettled} phase(s) did not settle before the run ended (see the 'unsettled' column).")
    errors = sum(1 for r in phase_rows if r.get("kind") == "error")
    if errors:
        lines.append(f"{errors} scenario(s) failed in the simulator and are left out (see the log).")
    return lines
