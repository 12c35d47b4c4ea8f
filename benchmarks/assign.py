"""Benchmark kassign's sticky assignors beside aiokafka, Java 3.9.1 and Kafka 4, on identical case files.

    python -m benchmarks.assign [--cases S1,S2,...] [--impls kassign-sticky,java-sticky,...] [--quick]
                                [--json OUT] [--reuse EARLIER.json] [--case-dir .bench-cases] [--timebox 60]

Cases (see :mod:`benchmarks.cases`): S1 10 x 1k, S2 100 x 10k, S20K 1,000 x 20k, S3 1,000 x 100k, S4 2,000 x 1M,
each also ``_last1`` (last consumer on one topic), and NU2 (500 x 100 topics x 100, random quarter
subscriptions); steps fresh, leave, join. Implementations: ``floor`` (CPython: build the TopicPartitions,
gc off), ``kassign-sticky``, ``kassign-coop``, ``aiokafka-sticky``, ``java-sticky``, ``java-coop``,
``k4-uniform``. One run prints times, ratios, quality and memory side by side, then the targets as
PASS/FAIL lines. Runs one thing at a time (never two measurements in parallel).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.cases import CASE_NAMES, QUICK_CASES, STEPS, ensure_case_files
from benchmarks.impls import (
    ALL_IMPLS,
    JAVA_IMPLS,
    K4_IMPL,
    PYTHON_IMPLS,
    Row,
    k4_built,
    python_impl,
    run_java,
    run_k4,
    run_python,
)
from benchmarks.report import Results, render, targets

log = logging.getLogger("benchmarks.assign")


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.assign", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=lambda s: _names(s, CASE_NAMES, "case"), help=f"default all: {','.join(CASE_NAMES)}")
    p.add_argument(
        "--impls",
        type=lambda s: _names(s, ALL_IMPLS, "implementation"),
        default=list(ALL_IMPLS),
        help=f"default all: {','.join(ALL_IMPLS)}",
    )
    p.add_argument("--steps", type=lambda s: _names(s, STEPS, "step"), default=list(STEPS))
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small cases only ({','.join(QUICK_CASES)}), at most 3 timed calls, 5 s time box, short Java warm-up",
    )
    p.add_argument("--json", type=Path, help="write every result row and target line to this file")
    p.add_argument("--case-dir", type=Path, default=Path(".bench-cases"), help="where case files are written/read")
    p.add_argument(
        "--timebox",
        type=float,
        help="seconds one call may take before the step is reported as skipped (default 60, --quick 5)",
    )
    p.add_argument("--warmup-seconds", type=float, help="Java warm-up per step (default 3, --quick 0.5)")
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass over kassign's assign()")
    p.add_argument(
        "--reuse",
        type=Path,
        metavar="JSON",
        action="append",
        default=[],
        help="show rows of an earlier --json run for implementations not selected by --impls "
        "(e.g. re-time kassign only, keep Java/aiokafka/Kafka 4 numbers); repeatable, "
        "a later file's measured rows replace an earlier one's",
    )
    args = p.parse_args(argv)
    for path in args.reuse:
        if not path.is_file():
            p.error(f"--reuse: no such file {str(path)!r}")
    if args.cases is None:
        args.cases = list(QUICK_CASES if args.quick else CASE_NAMES)
    if args.warmup_seconds is None:
        args.warmup_seconds = 0.5 if args.quick else 3.0
    if args.timebox is None:
        args.timebox = 5.0 if args.quick else 60.0
    return args


def collect(args: argparse.Namespace) -> list[Row]:
    """Run every selected implementation on every selected case, one at a time."""
    steps = tuple(args.steps)
    cases = ensure_case_files(args.cases, args.case_dir)
    rows: list[Row] = []
    python_impls = []
    for name in (i for i in PYTHON_IMPLS if i in args.impls):
        try:
            python_impls.append(python_impl(name))
        except ImportError as exc:
            log.warning("%s unavailable: %s", name, exc)
            rows += [
                {"impl": name, "case": c, "step": s, "skipped": f"unavailable ({exc})"} for c in cases for s in steps
            ]
    # A time-boxed implementation is not retried on a case at least as large.
    boxed_at: dict[str, tuple[int, str]] = {}
    for case in cases.values():
        for impl in python_impls:
            if impl.name in boxed_at and case.n_partitions >= boxed_at[impl.name][0]:
                why = f"not run (>{args.timebox:.0f}s on {boxed_at[impl.name][1]})"
                rows += [{"impl": impl.name, "case": case.name, "step": s, "skipped": why} for s in steps]
                continue
            new = run_python(
                impl,
                case,
                steps,
                args.timebox,
                not args.no_memory and impl.name.startswith("kassign"),
                max_reps=3 if args.quick else 9,
            )
            if any(str(r.get("skipped", "")).startswith("skipped (>") for r in new):
                boxed_at[impl.name] = (case.n_partitions, case.name)
            rows += new
        for impl_name in (i for i in JAVA_IMPLS if i in args.impls):
            try:
                rows += run_java(
                    impl_name, args.case_dir / f"{case.name}.txt", steps, args.timebox, args.warmup_seconds
                )
            except Exception as exc:  # no Java on this machine is a result to print, not a crash
                log.warning("%s on %s unavailable: %s", impl_name, case.name, exc)
                rows += [
                    {"impl": impl_name, "case": case.name, "step": s, "skipped": f"unavailable ({exc})"} for s in steps
                ]
    if K4_IMPL in args.impls:
        if not k4_built():
            log.warning(
                "kafka4-uniform is not available (set KAFKA4_UNIFORM_TOOL to its built directory): "
                "showing the figures quoted from its README"
            )
        try:
            with tempfile.TemporaryDirectory() as tmp:
                rows += run_k4(args.case_dir, list(cases), steps, Path(tmp) / "k4.json")
        except Exception as exc:
            log.warning("%s unavailable: %s", K4_IMPL, exc)
    return rows


def _reused_rows(paths: list[Path], impls: list[str], cases: list[str]) -> list[Row]:
    """Rows of earlier runs for implementations not re-run now; a measured row beats a skipped one."""
    kept: dict[tuple[str, str, str], Row] = {}
    for path in paths:
        for r in json.loads(path.read_text())["results"]:
            key = (r["impl"], r["case"], r["step"])
            if r["impl"] in impls or r["case"] not in cases:
                continue
            if key not in kept or "medianMs" in r or "medianMs" not in kept[key]:
                kept[key] = r
    return list(kept.values())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the tables and target lines; returns the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    args = parse_args(argv)
    started = time.time()
    rows = collect(args)
    rows += _reused_rows(args.reuse, args.impls, args.cases)
    results = Results(rows)
    cases = list(ensure_case_files(args.cases, args.case_dir).values())
    print(
        f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{platform.system()}; cases {','.join(args.cases)}; {time.time() - started:.0f} s"
    )
    print(render(results, cases, tuple(args.steps)))
    lines = targets(results, args.cases, tuple(args.steps))
    if lines:
        print("\nTargets")
        for line in lines:
            print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "python": platform.python_version(),
                    "cases": args.cases,
                    "steps": args.steps,
                    "impls": args.impls,
                    "timebox": args.timebox,
                    "results": rows,
                    "targets": [{"status": t.status, "text": t.text} for t in lines],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
