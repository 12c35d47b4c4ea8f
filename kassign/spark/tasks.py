"""The work one Spark task does, as plain functions: simulate a spec, or read and measure one
recorded group. Rows are flat dicts (one per phase, one per event) ready for a DataFrame.

Nothing here imports PySpark, so the same functions compute the reference results in tests and
can run anywhere the core runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kassign.sim import SimConfig, SimulationError, make_scenario, simulate
from kassign.timeline.events import Event, merge_events, read_events
from kassign.timeline.metrics import PhaseMetrics, detect_phases, recording_phases, timeline_metrics

__all__ = ["METRIC_FIELDS", "LABEL_FIELDS", "run_spec", "measure_group", "group_sources", "phase_kind"]

#: Metric columns of a phase row, in order (see :mod:`kassign.timeline.metrics`).
METRIC_FIELDS = (
    "settle_s",
    "window_s",
    "unowned_ps",
    "double_owned_ps",
    "moved",
    "unowned_parts",
    "kept",
    "gap_kept_s",
    "rounds",
    "balance",
    "revoke_callbacks",
    "assign_callbacks",
)
FLOAT_METRICS = frozenset({"settle_s", "window_s", "unowned_ps", "double_owned_ps", "gap_kept_s"})
#: Label columns of a phase row, in order.
LABEL_FIELDS = (
    "scenario_id",
    "source",
    "broker",
    "client",
    "assignor",
    "protocol",
    "members",
    "partitions",
    "scenario",
    "seed",
    "phase",
    "kind",
    "settled",
    "sim_ms",
)

log = logging.getLogger(__name__)

RECORDED_STRATEGIES = {
    "range": ("range", "eager"),
    "sticky": ("sticky", "eager"),
    "roundrobin": ("roundrobin", "eager"),
    "coop": ("cooperative-sticky", "cooperative"),
}
RECORDED_CLIENTS = {"ck": "librdkafka"}
RECORDED_PHASE_KINDS = {"initial": "initial", "out": "scale_out", "in": "scale_in"}
TIMELINE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")


def phase_kind(phase: str) -> str:
    """``1:scale_out`` -> ``scale_out``; recorded ``out``/``in`` -> ``scale_out``/``scale_in``."""
    return RECORDED_PHASE_KINDS.get(phase, phase.partition(":")[2] or phase)


def _phase_rows(labels: dict[str, Any], metrics: dict[str, PhaseMetrics]) -> list[dict[str, Any]]:
    rows = []
    for phase, m in metrics.items():
        row = dict(labels, phase=phase, kind=phase_kind(phase))
        row.update({f: float(getattr(m, f)) if f in FLOAT_METRICS else int(getattr(m, f)) for f in METRIC_FIELDS})
        rows.append(row)
    return rows


def _event_rows(scenario_id: int, events: Iterable[Event]) -> list[dict[str, Any]]:
    return [
        {
            "scenario_id": scenario_id,
            "member": e.id,
            "t": float(e.t),
            "ev": e.ev,
            "parts": None if e.parts is None else [f"{tp.topic}:{tp.partition}" for tp in e.parts],
            "extra": json.dumps(e.extra, sort_keys=True) if e.extra else None,
        }
        for e in events
    ]


def run_spec(spec: dict[str, Any], *, with_events: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Simulate one grid spec (see :mod:`kassign.spark.grid`): (phase rows, event rows)."""
    config = SimConfig.from_dict(
        {
            **spec.get("config", {}),
            "assignor": spec["assignor"],
            "protocol": spec["protocol"],
            "broker": spec["broker"],
            "client": spec["client"],
        }
    )
    restart_count = spec.get("restart_count")
    scenario = make_scenario(
        spec["scenario"],
        int(spec["members"]),
        int(spec["partitions"]),
        seed=int(spec["seed"]),
        change_fraction=float(spec.get("change_fraction", 0.5)),
        restart_count=None if restart_count is None else int(restart_count),
    )
    labels = {
        "scenario_id": int(spec["scenario_id"]),
        "source": "sim",
        "broker": spec["broker"],
        "client": spec["client"],
        "assignor": spec["assignor"],
        "protocol": spec["protocol"],
        "members": int(spec["members"]),
        "partitions": int(spec["partitions"]),
        "scenario": spec["scenario"],
        "seed": int(spec["seed"]),
    }
    started = time.perf_counter()
    try:
        result = simulate(scenario, config)
    except SimulationError as exc:
        # One rejected assignment must not sink a sweep: it becomes an "error" row the report counts.
        log.warning("scenario %s: %s", labels["scenario_id"], exc)
        error = dict(labels, settled=False, sim_ms=(time.perf_counter() - started) * 1000, phase="error", kind="error")
        return [dict(error, **{f: 0.0 if f in FLOAT_METRICS else 0 for f in METRIC_FIELDS})], []
    labels.update(settled=bool(result.settled), sim_ms=(time.perf_counter() - started) * 1000)
    events = _event_rows(labels["scenario_id"], result.events) if with_events else []
    return _phase_rows(labels, result.metrics), events


def group_sources(paths: Sequence[str], *, merge: bool = False) -> list[list[str]]:
    """The groups to measure: each run directory or file is one group (a directory's timeline
    files are merged by time); with ``merge`` all the given files are one group."""
    groups: list[list[str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(str(f) for f in path.iterdir() if f.name.endswith(TIMELINE_SUFFIXES))
            if not files:
                raise ValueError(f"{path}: no timeline files (*.jsonl, *.jsonl.gz) in this directory")
            groups.append(files)
        elif path.is_file() and path.name.endswith(TIMELINE_SUFFIXES):
            groups.append([str(path)])
        elif path.is_file():  # e.g. a README caught by a shell glob over run directories
            log.warning("skipping %s: not a timeline file (%s)", path, ", ".join(TIMELINE_SUFFIXES))
        else:
            raise ValueError(f"{path}: no such file or directory")
    if not groups:
        raise ValueError(f"no timeline among {list(paths)}")
    if merge:
        return [[f for g in groups for f in g]]
    return groups


def measure_group(
    scenario_id: int, files: Sequence[str], *, quiet_s: float = 2.0, with_events: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Read one recorded group (its members' files merged by time) and measure every phase.

    A recorder's ``meta.json`` next to the files supplies phases (its marks) and labels; without
    one, phases are detected from the members starting, closing and crashing.
    """
    events = merge_events(*(read_events(f) for f in files))
    meta_path = Path(files[0]).parent / "meta.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    phases = recording_phases(meta) if "marks" in meta else detect_phases(events, quiet_s)
    assignor, protocol = RECORDED_STRATEGIES.get(meta.get("strategy", ""), (meta.get("strategy", "unknown"), "unknown"))
    client = meta.get("client", "unknown")
    labels = {
        "scenario_id": scenario_id,
        "source": meta.get("label") or str(Path(files[0]).parent if len(files) > 1 else files[0]),
        "broker": meta.get("broker", "unknown"),
        "client": RECORDED_CLIENTS.get(client, client),
        "assignor": assignor,
        "protocol": protocol,
        "members": len({e.id for e in events if e.ev == "subscribed"}),
        "partitions": int(meta.get("npart") or len({tp for e in events for tp in (e.parts or ())})),
        "scenario": "recording",
        "seed": int(meta.get("rep", 0)),
        "settled": bool(all(meta.get("settled_ok", {}).values())) if "settled_ok" in meta else True,
        "sim_ms": 0.0,
    }
    rows = _phase_rows(labels, timeline_metrics(events, phases))
    return rows, (_event_rows(scenario_id, events) if with_events else [])
