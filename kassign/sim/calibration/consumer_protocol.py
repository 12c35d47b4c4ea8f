"""The simulator's KIP-848 model against the Kafka 4.4.0 benchmark recordings of the consumer protocol
(``data/rebalance-bench-kafka44-kip848``: kassign, kafka-clients 4.4.0 and librdkafka members with
``group.protocol=consumer``, recorded by ``benchmarks/rebalance.py`` beside eager and kassign's classic
default in the same run).

The same procedure as the classic calibration (:mod:`kassign.sim.calibration.benchmark`): each run replayed
through the harness's own inputs, the benchmark's own metrics; the client latencies of this protocol
(:data:`~kassign.sim.config.KAFKA44_CONSUMER_PRESETS`) fitted on repetitions r1-r3, r4-r5 held out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kassign.sim.bench_meta import BENCH_MODES, bench_config, client_of, mode_of
from kassign.sim.calibration.benchmark import (
    DRAWS,
    BenchRun,
    CellComparison,
    compare_cells,
    format_cells,
    load_bench_runs,
    summary,
)
from kassign.sim.calibration.fit import fit_presets
from kassign.sim.config import KAFKA44_CONSUMER_PRESETS

__all__ = [
    "KIP848_RECORDINGS",
    "CONSUMER_FITTED",
    "CONSUMER_FITTED_REPS",
    "CONSUMER_HELD_OUT_REPS",
    "consumer_protocol_runs",
    "compare_consumer_protocol",
    "fit_consumer_presets",
    "consumer_protocol_report",
]

KIP848_RECORDINGS = Path(__file__).resolve().parents[3] / "data" / "rebalance-bench-kafka44-kip848"
#: The latencies fitted on this protocol: no leader computes an assignment (``assign_ms``) and no
#: MEMBER_ID_REQUIRED round trip happens (``id_rejoin_ms``).
CONSUMER_FITTED = ("startup_ms", "poll_ms", "revocation_ms", "network_ms")
#: The KIP-848 recordings' repetitions the presets were fitted on, and those held out.
CONSUMER_FITTED_REPS = (1, 2, 3)
CONSUMER_HELD_OUT_REPS = (4, 5)


def consumer_protocol_runs(
    root: str | Path = KIP848_RECORDINGS, *, reps: Sequence[int] | None = None
) -> list[BenchRun]:
    """The runs of the consumer-protocol modes under ``root`` (the classic rows recorded beside them
    are left to the classic calibration)."""
    return [r for r in load_bench_runs(root, reps=reps) if BENCH_MODES[mode_of(r.meta)].group_protocol == "consumer"]


def compare_consumer_protocol(
    runs: Sequence[BenchRun], presets: Mapping[str, Mapping[str, float]] | None = None, *, draws: int = DRAWS
) -> list[CellComparison]:
    """Recorded vs simulated medians per cell, with ``presets`` (client -> latencies; default the
    shipped :data:`KAFKA44_CONSUMER_PRESETS`)."""
    table = presets or KAFKA44_CONSUMER_PRESETS
    return compare_cells(runs, lambda run: bench_config(run.meta, **table[client_of(run.meta) or "java"]), draws=draws)


def fit_consumer_presets(runs: Sequence[BenchRun]) -> dict[str, dict[str, float]]:
    """Each client's latencies on this protocol fitted on ``runs`` (``spawn_ms`` measured)."""
    fitted = {client: dict(values) for client, values in KAFKA44_CONSUMER_PRESETS.items()}
    for client in fitted:
        mine = [r for r in runs if client_of(r.meta) == client]
        if mine:
            fitted[client], _ = fit_presets(mine, fitted[client], names=CONSUMER_FITTED)
    return fitted


def consumer_protocol_report(root: Path = KIP848_RECORDINGS) -> str:
    """The markdown report: the presets, then held-out r4-r5 and fitted r1-r3 per cell."""
    sections = [
        (
            "Held out: repetitions r4-r5",
            compare_consumer_protocol(consumer_protocol_runs(root, reps=CONSUMER_HELD_OUT_REPS)),
        ),
        (
            "Fitted on: repetitions r1-r3",
            compare_consumer_protocol(consumer_protocol_runs(root, reps=CONSUMER_FITTED_REPS)),
        ),
    ]
    lines = [
        "# The simulator's KIP-848 model against the Kafka 4.4.0 consumer-protocol recordings",
        "",
        "Written by `python -m kassign.sim.calibration --protocol consumer --report FILE` from "
        "`data/rebalance-bench-kafka44-kip848` (see its README); medians per cell, recorded vs simulated "
        f"(runs with processing simulated with {DRAWS} seeds of the batch times, their median taken). A "
        "metric passes within 25 % of the recorded median; `moved` must be equal.",
        "",
        "Client latencies on this protocol (`KAFKA44_CONSUMER_PRESETS`, ms; `spawn_ms` measured, "
        f"{', '.join(CONSUMER_FITTED)} fitted on r1-r3):",
        "",
    ]
    shown = ("spawn_ms", *CONSUMER_FITTED)
    lines += [
        f"- {client}: " + ", ".join(f"{k} {v:g}" for k, v in values.items() if k in shown)
        for client, values in KAFKA44_CONSUMER_PRESETS.items()
    ]
    for title, rows in sections:
        totals = summary(rows)
        lines += [
            "",
            f"## {title}",
            "",
            "; ".join(
                f"{m}: {t['passing']}/{t['cells']} cells pass (worst {t['worst']['cell']}, "
                f"{t['worst']['rel_err']:+.0%})"
                for m, t in totals.items()
            ),
            "",
            format_cells(rows),
        ]
    return "\n".join(lines) + "\n"
