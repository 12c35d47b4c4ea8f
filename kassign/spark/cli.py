"""kassign sweep and kassign analyze.

    kassign sweep examples/grids/small.yaml --master 'local[*]' --out out/sweep
    kassign sweep GRID.yaml --change-fraction 0.25 --restart-count 24 --out out/at-scale
    kassign analyze data/rebalance-timelines/* --out out/recorded

A sweep's scale_out adds and its scale_in closes --change-fraction of the members (default half); its
rolling_restart restarts --restart-count members (default all), for large groups.

Both write phases/ (one row per scenario phase), events/ (the timelines) and aggregates/ as
Parquet under --out, plus report.html with its PNG plots and aggregates.json. --master takes any
Spark master URL; the paths given to analyze must then be readable by the executors (a shared
filesystem). --json prints the run's summary and aggregates as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kassign.cli_errors import CLIError, handles_errors
from kassign.cli_options import ArgumentParser, finite_float, libraries_verbose

__all__ = ["sweep_main", "analyze_main"]

EPILOG = __doc__.split("\n\n", 1)[1]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--out", required=True, type=Path, help="output directory (Parquet, report.html, PNGs)")
    p.add_argument("--no-events", action="store_true", help="do not write the event timelines")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary and aggregates as one JSON object")


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file", "give a directory (it is created when missing)")


def _measured(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without what the report already shows among the run's parameters."""
    return {k: v for k, v in summary.items() if k not in ("grid", "master")}


def _print_json(summary: dict[str, Any], page: Any, aggregates: Sequence[dict]) -> None:
    print(json.dumps({**summary, "report": str(page), "aggregates": list(aggregates)}, indent=2, default=str))


def _print_aggregates(aggregates: Sequence[dict]) -> None:
    for a in aggregates:
        print(
            f"  {a['broker']:<6} {a['client']:<10} {a['assignor']:<20} {a['protocol']:<11} {a['kind']:<20} "
            f"n={a['n']:<5} unowned_ps p50={a['unowned_ps_p50']:.3f} p95={a['unowned_ps_p95']:.3f}  "
            f"moved mean={a['moved_mean']:.2f}  settle_s p50={a['settle_s_p50']:.3f}  "
            f"balance max={a['balance_max']:.0f}  double_owned max={a['double_owned_ps_max']:.3f}"
        )


@handles_errors("sweep")
def sweep_main(argv: Sequence[str] | None = None) -> int:
    """kassign sweep GRID.yaml --out DIR [--master URL]; returns the exit code."""
    p = ArgumentParser(
        prog="kassign sweep",
        description="Simulate a scenario grid on Spark and report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("grid", type=Path, help="grid YAML (see examples/grids)")
    p.add_argument(
        "--change-fraction",
        type=finite_float("the change fraction", 0, 1, low_inclusive=False),
        default=0.5,
        help="share of the members a scale_out adds and a scale_in closes (default 0.5)",
    )
    p.add_argument(
        "--restart-count",
        type=int,
        default=None,
        help="a rolling_restart restarts only this many members (default: every member)",
    )
    _common(p)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    _check_out(args.out)
    if args.restart_count is not None and args.restart_count < 1:
        raise CLIError(f"--restart-count {args.restart_count}", "give at least 1")
    from kassign.spark.grid import expand_grid, grid_axes, load_grid

    grid = load_grid(args.grid)
    specs = expand_grid(grid)
    if not specs:
        raise CLIError(f"{args.grid} expands to no scenario", "give each axis at least one value")
    for spec in specs:
        spec.update(change_fraction=args.change_fraction, restart_count=args.restart_count)
    from kassign.spark.pipeline import run_sweep, spark_session
    from kassign.spark.report import write_report

    spark = spark_session(args.master, "kassign sweep", quiet=not libraries_verbose())
    try:
        result = run_sweep(spark, specs, args.out, with_events=not args.no_events, progress=not args.no_progress)
    finally:
        spark.stop()
    summary = {
        "grid": str(args.grid),
        "scenarios": result.scenarios,
        "master": args.master,
        "wall time (s)": result.wall_s,
        "simulation time in tasks (s)": result.task_s,
        "scenarios per second": result.scenarios / result.wall_s if result.wall_s else 0.0,
    }
    parameters = {
        "grid file": str(args.grid),
        **grid_axes(grid),
        "config": grid.get("config") or {},
        "scale-out/scale-in fraction": args.change_fraction,
        "members restarted": "all" if args.restart_count is None else args.restart_count,
        "Spark master": args.master,
    }
    page = write_report(
        args.out,
        result.phase_rows,
        result.aggregates,
        title=f"kassign sweep: {args.grid.name}",
        summary=_measured(summary),
        parameters=parameters,
    )
    if args.json:
        _print_json(summary, page, result.aggregates)
        return 0
    print(
        f"{result.scenarios} scenarios in {result.wall_s:.1f} s ({result.scenarios / result.wall_s:.1f}/s); "
        f"report: {page}"
    )
    _print_aggregates(result.aggregates)
    return 0


@handles_errors("analyze")
def analyze_main(argv: Sequence[str] | None = None) -> int:
    """kassign analyze EVENTS... --out DIR: the sweep's aggregation and report over recorded timelines."""
    p = ArgumentParser(
        prog="kassign analyze",
        description="Aggregate recorded rebalance timelines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "events",
        nargs="+",
        help="run directories (events.jsonl.gz + meta.json, or several member "
        "files) or timeline files (.jsonl, .jsonl.gz)",
    )
    p.add_argument("--merge", action="store_true", help="all the given files are members of one group")
    p.add_argument(
        "--quiet-s",
        type=finite_float("the quiet time (s)", 0, 86400, low_inclusive=False),
        default=2.0,
        help="without a meta.json, a member starting/closing/crashing after this many quiet "
        "seconds opens a new phase (default 2)",
    )
    _common(p)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    _check_out(args.out)
    from kassign.spark.tasks import group_sources

    groups = group_sources(args.events, merge=args.merge)
    from kassign.spark.pipeline import run_analysis, spark_session
    from kassign.spark.report import write_report

    spark = spark_session(args.master, "kassign analyze", quiet=not libraries_verbose())
    try:
        result = run_analysis(
            spark, groups, args.out, quiet_s=args.quiet_s, with_events=not args.no_events, progress=not args.no_progress
        )
    finally:
        spark.stop()
    summary = {"groups": result.scenarios, "master": args.master, "wall time (s)": result.wall_s}
    parameters = {
        "inputs": list(args.events),
        "merged into one group": args.merge,
        "quiet time for phase detection (s)": args.quiet_s,
        "Spark master": args.master,
    }
    page = write_report(
        args.out,
        result.phase_rows,
        result.aggregates,
        title="kassign analyze",
        summary=_measured(summary),
        parameters=parameters,
    )
    if args.json:
        _print_json(summary, page, result.aggregates)
        return 0
    print(f"{result.scenarios} recorded groups analysed in {result.wall_s:.1f} s; report: {page}")
    _print_aggregates(result.aggregates)
    return 0
