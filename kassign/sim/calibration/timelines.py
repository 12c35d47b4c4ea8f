"""Calibration against recorded real groups (``data/rebalance-timelines``).

A recorded run directory holds ``meta.json`` (settings and wall-clock marks), ``events.jsonl.gz``
and ``metrics.json``. :func:`scenario_for` and :func:`config_for` turn a run's meta into the
simulator's equivalent (same group sizes, topic, timeouts, strategy, client and trigger phase),
:func:`recorded_metrics` recomputes the run's phase metrics from its events, and
:func:`compare` sets the medians of both side by side per configuration.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kassign.sim.config import SimConfig
from kassign.sim.scenarios import ScaleIn, ScaleOut, Scenario
from kassign.sim.simulator import SimResult, simulate
from kassign.timeline.events import read_events
from kassign.timeline.metrics import PhaseMetrics, recording_phases, timeline_metrics

__all__ = [
    "RecordedRun",
    "load_runs",
    "scenario_for",
    "config_for",
    "recorded_metrics",
    "simulated_metrics",
    "compare",
    "CALIBRATED_METRICS",
]

STRATEGY_ASSIGNORS = {"range": "range", "sticky": "sticky", "coop": "cooperative-sticky", "roundrobin": "roundrobin"}
CLIENTS = {"java": "java", "ck": "librdkafka"}
#: Recorded phase name -> the simulated phase it corresponds to.
PHASES = {"out": "1:scale_out", "in": "2:scale_in"}
CALIBRATED_METRICS = ("unowned_ps", "settle_s", "rounds")


@dataclass(frozen=True)
class RecordedRun:
    """One recorded run: its directory and parsed ``meta.json``."""

    path: Path
    meta: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str]:
        """(broker, client, strategy): the configuration repetitions share."""
        return (self.meta["broker"], self.meta["client"], self.meta["strategy"])


def load_runs(root: str | Path) -> list[RecordedRun]:
    """Every run directory under ``root`` (those with a meta.json), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no recordings directory at {root}")
    return [
        RecordedRun(d, json.loads((d / "meta.json").read_text()))
        for d in sorted(root.iterdir())
        if (d / "meta.json").is_file()
    ]


#: How often the recorded members committed (async, every second).
RECORDED_COMMIT_MS = 1000.0


def config_for(meta: Mapping[str, Any], **overrides: Any) -> SimConfig:
    """The simulator configuration of a recorded run (broker, client, strategy, timeouts)."""
    try:
        values: dict[str, Any] = {
            "assignor": STRATEGY_ASSIGNORS[meta["strategy"]],
            "broker": meta["broker"],
            "client": CLIENTS[meta["client"]],
            "session_timeout_ms": float(meta["sess"]),
            "heartbeat_interval_ms": float(meta["hb"]),
            "rebalance_timeout_ms": float(meta["mp"]),
            # The recorded applications commit asynchronously every second (the recordings' README);
            # a commit is what wakes librdkafka's main thread to send a heartbeat that is due.
            "commit_interval_ms": RECORDED_COMMIT_MS,
        }
    except KeyError as exc:
        raise ValueError(f"recording {meta.get('label', '?')!r}: unknown or missing {exc.args[0]!r}") from None
    values.update(overrides)
    return SimConfig(**values)


def scenario_for(meta: Mapping[str, Any]) -> Scenario:
    """3 members settle, 3 more start, settle, the 3 newest close: at the run's heartbeat phase
    and with its gaps between marks."""
    marks = meta["marks"]
    phase = float(meta.get("phase_frac", 0.5))
    out_after = marks["scale_out"] - marks["start3"]
    in_after = marks["scale_in"] - marks["scale_out"]
    return Scenario(
        members=3,
        topics={"topic": int(meta["npart"])},
        steps=(ScaleOut(3, after_s=out_after, phase=phase), ScaleIn(3, after_s=in_after, phase=phase)),
        seed=int(meta.get("rep", 0)),
        name=str(meta.get("label", "recording")),
    )


def recorded_metrics(run: RecordedRun) -> dict[str, PhaseMetrics]:
    """The run's phase metrics (``out``, ``in``...) recomputed from its events."""
    return timeline_metrics(read_events(run.path / "events.jsonl.gz"), recording_phases(run.meta))


def simulated_metrics(
    run: RecordedRun, *, assignor_factory: Callable[[str], Any] | None = None, **overrides: Any
) -> dict[str, PhaseMetrics]:
    """The simulator's metrics for the run's scenario, under the recorded phase names."""
    result: SimResult = simulate(
        scenario_for(run.meta), config_for(run.meta, **overrides), assignor_factory=assignor_factory
    )
    # Recordings have no sync events, so count rounds the way they must be counted there: from
    # bursts of assign callbacks.
    observable = [e for e in result.events if e.ev != "sync"]
    phases = {rec: result.phases[sim] for rec, sim in PHASES.items() if sim in result.phases}
    return timeline_metrics(observable, phases)


def compare(
    runs: Iterable[RecordedRun],
    *,
    assignor_factory: Callable[[str], Any] | None = None,
    metrics: Iterable[str] = CALIBRATED_METRICS,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Median recorded vs median simulated, per (broker, client, strategy), phase and metric.

    Each row: ``broker, client, strategy, phase, metric, recorded, simulated, rel_err``
    (``rel_err`` relative to the recorded median).
    """
    recorded: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    simulated: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    names = tuple(metrics)
    for run in runs:
        rec = recorded_metrics(run)
        sim = simulated_metrics(run, assignor_factory=assignor_factory, **overrides)
        for phase in PHASES:
            for name in names:
                key = (*run.key, phase, name)
                recorded[key].append(float(getattr(rec[phase], name)))
                simulated[key].append(float(getattr(sim[phase], name)))
    rows = []
    for key in sorted(recorded):
        r, s = statistics.median(recorded[key]), statistics.median(simulated[key])
        rows.append(
            dict(
                zip(("broker", "client", "strategy", "phase", "metric"), key),
                recorded=r,
                simulated=s,
                rel_err=(s - r) / r if r else (0.0 if s == r else float("inf")),
            )
        )
    return rows
