"""``python -m kassign.sim.calibration``: the simulator's calibration on the Apache Kafka 4.4
benchmark recordings from the command line -- recorded vs simulated medians per cell
(:mod:`kassign.sim.calibration.benchmark`), a refit of the presets (:mod:`kassign.sim.calibration.fit`), or
the markdown report; ``--protocol consumer`` does the same for the KIP-848 model
(:mod:`kassign.sim.calibration.consumer_protocol`); ``--recordings DIR`` predicts every run of
``benchmarks/group_size.py`` recorded there (:mod:`kassign.sim.calibration.group_size`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kassign.sim.bench_meta import bench_config, client_of
from kassign.sim.calibration.benchmark import (
    BENCH_RECORDINGS,
    compare_cells,
    format_cells,
    is_held_out,
    load_bench_runs,
    report,
    summary,
)
from kassign.sim.calibration.consumer_protocol import (
    CONSUMER_HELD_OUT_REPS,
    KIP848_RECORDINGS,
    compare_consumer_protocol,
    consumer_protocol_report,
    consumer_protocol_runs,
    fit_consumer_presets,
)
from kassign.sim.calibration.fit import FITTED_BY_CLIENT, fit_presets
from kassign.sim.calibration.group_size import (
    compare_group_sizes,
    contention_configure,
    format_group_sizes,
    format_summary,
    group_size_report,
    selected_runs,
)
from kassign.sim.config import KAFKA44_PRESETS

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print recorded vs simulated medians per cell for the given repetitions (``--fit``: refit the
    presets on them first and print those; ``--report FILE``: write the calibration report)."""
    ap = argparse.ArgumentParser(prog="python -m kassign.sim.calibration", description=main.__doc__)
    ap.add_argument(
        "--protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="calibrate the classic model (default) or the KIP-848 one (consumer-protocol runs)",
    )
    ap.add_argument(
        "--root",
        type=Path,
        default=None,
        help="recordings (default data/rebalance-bench-kafka44, or -kip848 with --protocol consumer)",
    )
    ap.add_argument(
        "--reps",
        default=None,
        help="comma-separated repetitions (default: the held-out ones: classic 21-30 of the aiokafka "
        "modes and 11-20 of Java's and librdkafka's, consumer 4-5)",
    )
    ap.add_argument("--fit", action="store_true", help="fit each client's presets on --reps and use them")
    ap.add_argument(
        "--report", type=Path, default=None, help="write the markdown report (held-out and fitted repetitions) here"
    )
    ap.add_argument(
        "--recordings",
        type=Path,
        action="append",
        default=None,
        help="predict every run of benchmarks/group_size.py recorded in this directory with the presets as "
        "they are and compare each cell's mean and median with the recordings (with --report: write it there); "
        "repeat for several directories (each measured on its own groups of 6, one report section each)",
    )
    ap.add_argument(
        "--cells",
        default=None,
        help="with --recordings: comma-separated parts of run names to compare (e.g. "
        "n96-instant-scale-out-eager,n24-instant-scale-in-fast; default all)",
    )
    ap.add_argument(
        "--no-revocation-commit",
        action="store_true",
        help="with --recordings: revocations take the preset's revocation_ms (no commit round trip)",
    )
    ap.add_argument(
        "--members", default=None, help="with --recordings: comma-separated group sizes to compare (default all)"
    )
    ap.add_argument(
        "--no-contention",
        action="store_true",
        help="with --recordings: simulate without CPU contention (measured on the groups of 6 otherwise)",
    )
    args = ap.parse_args(argv)
    if args.recordings is not None:
        try:
            sizes = None if args.members is None else [int(m) for m in args.members.split(",") if m.strip()]
        except ValueError:
            ap.error(f"--members must be comma-separated numbers, got {args.members!r}")
        names = None if args.cells is None else [c.strip() for c in args.cells.split(",") if c.strip()]
        return _group_sizes(
            args.recordings,
            sizes,
            names,
            report_to=args.report,
            contention=not args.no_contention,
            revocation_commit=not args.no_revocation_commit,
        )
    reps: list[int] | None = None
    if args.reps is not None:
        try:
            reps = [int(r) for r in args.reps.split(",") if r.strip()]
        except ValueError:
            ap.error(f"--reps must be comma-separated numbers, got {args.reps!r}")
    if args.protocol == "consumer":
        return _consumer_protocol(
            args.root or KIP848_RECORDINGS,
            list(CONSUMER_HELD_OUT_REPS) if reps is None else reps,
            fit=args.fit,
            report_to=args.report,
        )
    root = args.root or BENCH_RECORDINGS
    if args.report is not None:
        args.report.write_text(report(root))
        return 0
    if reps is not None:
        runs = load_bench_runs(root, reps=reps)
    else:
        runs = [r for r in load_bench_runs(root) if is_held_out(r)]
    presets = {client: dict(values) for client, values in KAFKA44_PRESETS.items()}
    if args.fit:
        for client in presets:
            mine = [r for r in runs if client_of(r.meta) == client]
            presets[client], loss = fit_presets(mine, presets[client], names=FITTED_BY_CLIENT[client])
            print(f"{client}: {json.dumps(presets[client])} (loss {loss:.3f})", file=sys.stderr)
    rows = compare_cells(runs, lambda run: bench_config(run.meta, **presets[client_of(run.meta) or "java"]))
    print(format_cells(rows))
    print(json.dumps(summary(rows), indent=1))
    return 0


def _group_sizes(
    roots: Sequence[Path],
    sizes: list[int] | None,
    names: list[str] | None = None,
    *,
    report_to: Path | None,
    contention: bool = True,
    revocation_commit: bool = True,
) -> int:
    if report_to is not None:
        sections = [
            group_size_report(
                root, members=sizes, names=names, contention=contention, revocation_commit=revocation_commit
            )
            for root in roots
        ]
        report_to.write_text("\n".join(sections))
        return 0
    for root in roots:
        every = load_bench_runs(root)
        runs = selected_runs(every, sizes, names)
        # None: not measurable there
        configure = contention_configure(every, revocation_commit=revocation_commit)[1] if contention else None
        rows = compare_group_sizes(runs, configure, progress=lambda name: print(name, file=sys.stderr))
        print(f"## {root}")
        print(format_summary(rows))
        print()
        print(format_group_sizes(rows))
    return 0


def _consumer_protocol(root: Path, reps: list[int], *, fit: bool, report_to: Path | None) -> int:
    if report_to is not None:
        report_to.write_text(consumer_protocol_report(root))
        return 0
    runs = consumer_protocol_runs(root, reps=reps)
    presets = fit_consumer_presets(runs) if fit else None
    if presets is not None:
        for client, values in presets.items():
            print(f"{client}: {json.dumps(values)}", file=sys.stderr)
    rows = compare_consumer_protocol(runs, presets)
    print(format_cells(rows))
    print(json.dumps(summary(rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
