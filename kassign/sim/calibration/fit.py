"""Fitting a client's latency presets to benchmark recordings (:mod:`kassign.sim.calibration.benchmark`).

``spawn_ms`` (from the harness's stop signal to the member's ``closing``) is read off the recordings
(:func:`measured_spawn_ms`). The other latencies are fitted by a deterministic coordinate descent
(each tried at a few multiples of its current value and a few absolute values, in turn, for a few
sweeps) that minimises, over the cells, the log-ratio between simulated and recorded medians of
unowned partition-seconds, settle time and per-restart settle time, the relative error in
partitions moved, and half the mean per-run log-ratio (so that no setting wins by getting one
repetition of a cell badly wrong, which a median hides). Only the runs passed are used, so fitting
on repetitions r1-r5 (:data:`~kassign.sim.calibration.benchmark.FITTED_REPS`) leaves the later ones held out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence

from kassign.sim.bench_meta import bench_config
from kassign.sim.calibration.benchmark import BenchRun, CellComparison, compare_cells
from kassign.timeline.events import Event

__all__ = [
    "FITTED_LATENCIES",
    "FITTED_BY_CLIENT",
    "measured_spawn_ms",
    "measured_heartbeat_lag_ms",
    "cell_loss",
    "fit_loss",
    "fit_presets",
]

#: The latencies fitted, in the order a sweep visits them.
FITTED_LATENCIES = ("startup_ms", "poll_ms", "revocation_ms", "assign_ms", "network_ms", "id_rejoin_ms")
#: ``id_rejoin_ms`` is fitted only where the recordings show a delay after MEMBER_ID_REQUIRED
#: (librdkafka); Java and aiokafka send the JoinGroup with the id at once (Java: in the same
#: ``joinGroupIfNeeded`` loop), so theirs stays 0.
#: aiokafka's ``startup_ms`` is measured on a live broker (``benchmarks/aiokafka_startup.py``), not fitted.
FITTED_BY_CLIENT = {"librdkafka": FITTED_LATENCIES, "java": FITTED_LATENCIES[:-1], "aiokafka": FITTED_LATENCIES[1:-1]}
#: Event times are written to the millisecond, the triggers exactly: a ``closing`` this much before
#: its trigger belongs to it.
ROUNDING_S = 0.001
#: Multiples of a latency's current value, and absolute values (ms), a sweep tries.
FACTORS = (0.25, 0.5, 0.7, 0.85, 1.2, 1.5, 2.0, 4.0)
ABSOLUTE_MS = (0.0, 1.0, 5.0, 20.0, 50.0, 100.0, 200.0, 300.0)
#: Floors (partition-seconds, seconds) that keep near-zero medians from dominating the log-ratios.
FLOOR_PS, FLOOR_S = 0.05, 0.02


def measured_spawn_ms(runs: Sequence[BenchRun]) -> float:
    """The median time from a stop signal to the member's ``closing`` in the instant-profile scale-ins
    and rolling restarts among ``runs`` (with no batch to finish, that is the client's reaction)."""
    delays = []
    for run in runs:
        if run.meta.get("profile") != "instant" or run.meta.get("scenario") not in ("scale-in", "rolling-restart"):
            continue
        closings = [e.t for e in run.events() if e.ev == "closing"]
        for trigger in run.meta["triggers"]:
            after = [t for t in closings if t >= trigger - ROUNDING_S]
            if after:
                delays.append(max(0.0, min(after) - trigger))
    if not delays:
        raise ValueError("no instant scale-in or rolling restart among the runs to measure spawn_ms on")
    return round(statistics.median(delays) * 1000, 1)


def leaving_after(events: Iterable[Event], trigger: float) -> set[str]:
    """The members that close or crash at or after ``trigger``: not survivors of the change."""
    return {e.id for e in events if e.ev in ("closing", "crash") and e.t >= trigger}


def measured_heartbeat_lag_ms(
    runs: Sequence[BenchRun], reaction_ms: float, *, scenarios: Collection[str] = ("crash",)
) -> float:
    """How late, per interval, the heartbeats of eager survivors of a crash (or of the other
    ``scenarios``: a scale-in, a scale-out) among ``runs`` run: each survivor revokes at the heartbeat
    that tells it of the change, ``k`` intervals after its last assign callback plus ``reaction_ms``
    (heartbeat to revocation) plus ``k`` times the lateness; the median over survivors of that
    lateness (ms). Members that close or crash after the trigger are not survivors."""
    lags: list[float] = []
    for run in runs:
        if run.meta.get("scenario") not in scenarios or run.meta.get("mode") != "eager":
            continue
        interval, trigger = float(run.meta.get("heartbeat_ms", 250)) / 1000, float(run.meta["triggers"][0])
        assigned: dict[str, float] = {}
        revoked: dict[str, float] = {}
        events = run.events()
        leaving = leaving_after(events, trigger)
        for e in events:
            if e.ev == "cb_assigned" and e.t < trigger:
                assigned[e.id] = e.t
            elif e.ev == "cb_revoked" and e.t > trigger and e.id not in leaving:
                revoked.setdefault(e.id, e.t)
        for member, t in revoked.items():
            waited = t - assigned[member]
            k = round(waited / interval)
            if k > 0:
                lags.append(((waited - k * interval) * 1000 - reaction_ms) / k)
    if not lags:
        raise ValueError(f"no eager {' or '.join(sorted(scenarios))} among the runs to measure heartbeat lateness on")
    return round(statistics.median(lags), 2)


def _log_ratio(simulated: float, recorded: float, floor: float) -> float:
    return abs(math.log((simulated + floor) / (recorded + floor)))


def cell_loss(row: CellComparison) -> float:
    """How far one cell's simulated medians (and, at half weight, its runs) are from the recorded ones."""
    rec, sim = row.recorded, row.simulated
    medians = (
        _log_ratio(sim["unowned_ps"], rec["unowned_ps"], FLOOR_PS)
        + _log_ratio(sim["settle_s"], rec["settle_s"], FLOOR_S)
        + 0.5 * _log_ratio(sim["step_settle_s"], rec["step_settle_s"], FLOOR_S)
        + abs(sim["moved"] - rec["moved"]) / max(rec["moved"], 1.0)
    )
    runs = statistics.fmean(
        _log_ratio(s.unowned_ps, r.unowned_ps, FLOOR_PS) + _log_ratio(s.settle_s, r.settle_s, FLOOR_S)
        for _, r, s in row.per_run
    )
    return medians + 0.5 * runs


def fit_loss(runs: Sequence[BenchRun], latencies: Mapping[str, float]) -> float:
    """The summed :func:`cell_loss` of ``runs`` simulated with ``latencies`` (inf if a run fails)."""
    try:
        rows = compare_cells(runs, lambda run: bench_config(run.meta, **latencies))
    except RuntimeError:
        return math.inf
    return sum(cell_loss(row) for row in rows)


def _candidates(value: float) -> list[float]:
    return sorted({round(max(0.0, value * f), 2) for f in FACTORS} | set(ABSOLUTE_MS))


def fit_presets(
    runs: Sequence[BenchRun], start: Mapping[str, float], *, sweeps: int = 3, names: Sequence[str] = FITTED_LATENCIES
) -> tuple[dict[str, float], float]:
    """``spawn_ms`` measured on ``runs`` and the other latencies (from ``start``) that minimise
    :func:`fit_loss` on them, and that loss."""
    if not runs:
        raise ValueError("no runs to fit on")
    best = {**start, "spawn_ms": measured_spawn_ms(runs)}
    best_loss = fit_loss(runs, best)
    for _ in range(sweeps):
        improved = False
        for name in names:
            for value in _candidates(best.get(name, 0.0)):
                trial = {**best, name: value}
                loss = fit_loss(runs, trial)
                if loss < best_loss - 1e-9:
                    best, best_loss, improved = trial, loss, True
        if not improved:
            break
    return best, best_loss
