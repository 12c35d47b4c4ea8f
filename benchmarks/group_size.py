"""What a rebalance costs as the group grows: 6, 24 and 96 members over 24, 240 and 960 partitions (issue 28).

    python -m benchmarks.group_size --sizes 6,24,96 --repeat 5 --json results.json --record DIR

Each size is a group of that many members reading several topics of different sizes, as a user's group
would (6: topics of 12, 8, 4 partitions; 24: 120, 60, 40, 20; 96: 480, 240, 160, 80), every member
subscribed to all of them, under a keyed load of ``--rate-per-partition`` records per second and
partition, capped at ``--max-rate`` in all. Scenarios, each a change of a quarter of the group
(rounded up: 2, 6, 24 members):

* ``scale-out``: the last quarter joins a group of the other three quarters. The newcomers'
  processes are started and ready beforehand and subscribe at the trigger: a hundred interpreters
  starting at once on a 2-core machine would starve the running members, which is no part of a
  rebalance;
* ``scale-in``: the last quarter closes cleanly;
* ``crash``: one member is SIGKILLed (the broker notices after the session timeout);
* ``rolling-restart``: the first ``--restart-sample`` members (default all, at most 24) are
  restarted one after the other, as :mod:`benchmarks.rebalance` does.

Modes are :mod:`benchmarks.rebalance`'s (``eager``, ``cooperative+fast-follow-up`` = kassign's
default, ``cooperative+static``, ``consumer`` = kassign on KIP-848's protocol, ``java-cooperative``,
``librdkafka-cooperative``, ...). Every member is a process of its own, unless
``--members-per-process N`` lets aiokafka members share processes, N to one event loop (as on a
fleet's machines; Java and librdkafka members stay alone; no ``crash``). All sizes share one timing:
session 10 s and heartbeat 1 s by default (Kafka's defaults are 45 s and 3 s; 1.5 s and 250 ms, the
small benchmark's, are too tight for 96 processes sharing 2 cores with the broker).

Printed per size: unowned partition-seconds and settle time as mean, 90th percentile and median,
rounds, records lost or processed twice, and the members' memory and CPU over the steady stretch;
then each mode against eager at the same size.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.rebalance import (  # noqa: E402
    MODES,
    PHASES,
    PROFILES,
    SCENARIOS,
    SHORT,
    RunResult,
    _client_versions,
    _csv,
    failed_run_line,
    percentile,
    run_once,
)
from integration.driver import GroupTiming  # noqa: E402
from kassign.broker import open_broker  # noqa: E402

log = logging.getLogger("benchmarks.group_size")

#: members -> partition counts of the group's topics
LAYOUTS: dict[int, tuple[int, ...]] = {6: (12, 8, 4), 24: (120, 60, 40, 20), 96: (480, 240, 160, 80)}
DEFAULT_MODES = ("eager", "cooperative+fast-follow-up", "consumer")


def change_of(members: int) -> int:
    """Members a scale-out adds or a scale-in removes: a quarter of the group, rounded up."""
    return math.ceil(members / 4)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Mean, 90th percentile and median of one cell's values."""
    return {
        "mean": statistics.mean(values),
        "p90": percentile(values, 0.9),
        "median": statistics.median(values),
    }


def _machine_cpu(runs: Sequence[RunResult]) -> str:
    """The machine's CPU, medians over the runs that measured it (steady stretch / change), or a dash."""
    steady = [r.machine_cpu_pct for r in runs if r.machine_cpu_pct is not None]
    change = [r.machine_cpu_change_pct for r in runs if r.machine_cpu_change_pct is not None]
    if not steady or not change:
        return "–"
    return f"{statistics.median(steady):.0f} / {statistics.median(change):.0f}"


def format_tables(
    cells: Mapping[tuple[int, str, str, str], Sequence[RunResult]],
    failures: Mapping[tuple[int, str, str, str], int],
) -> str:
    """One markdown table of every cell, then the ratios to eager at each size and scenario."""
    lines = [
        "| members | partitions | profile | scenario | mode | runs | unowned ps mean | p90 | median "
        "| settle s mean | p90 | median | rounds (median) | moved | dup | lost | double ps "
        "| members MB | members CPU % | machine CPU % steady / change |",
        "|---:|---:|---|---|---|---:|" + "---:|" * 14,
    ]
    keys = sorted(
        set(cells) | set(failures), key=lambda k: (k[0], k[1], SCENARIOS.index(k[2]), list(MODES).index(k[3]))
    )
    for key in keys:
        members, profile, scenario, mode = key
        runs = cells.get(key, [])
        failed = failures.get(key, 0)
        shown = f"{len(runs)}" + (f" (+{failed} failed)" if failed else "")
        head = f"| {members} | {sum(LAYOUTS[members])} | {profile} | {scenario} | {mode} | {shown} |"
        if not runs:
            lines.append(head + " – |" * 14)
            continue
        u = summary([r.unowned_ps for r in runs])
        st = summary([r.settle_s for r in runs])
        lines.append(
            head + f" {u['mean']:.2f} | {u['p90']:.2f} | {u['median']:.2f} | {st['mean']:.2f} | {st['p90']:.2f} | "
            f"{st['median']:.2f} | {statistics.median(r.rounds for r in runs):g} | "
            f"{statistics.median(r.moved for r in runs):g} | {sum(r.duplicates for r in runs)} | "
            f"{sum(r.lost for r in runs)} | {sum(r.double_ps for r in runs):.2f} | "
            f"{statistics.median(r.members_rss_mb for r in runs):.0f} | "
            f"{statistics.median(r.members_cpu_pct for r in runs):.0f} | {_machine_cpu(runs)} |"
        )
    lines.append("")
    for members, profile, scenario in sorted({k[:3] for k in cells}, key=lambda k: (k[0], k[1], SCENARIOS.index(k[2]))):
        eager = cells.get((members, profile, scenario, "eager"))
        if not eager:
            continue
        base_u = summary([r.unowned_ps for r in eager])
        parts = []
        for mode in MODES:
            runs = cells.get((members, profile, scenario, mode))
            if mode == "eager" or not runs:
                continue
            u = summary([r.unowned_ps for r in runs])
            parts.append(
                f"{SHORT[mode]}/eager unowned ps mean {_ratio(u['mean'], base_u['mean'])}, "
                f"p90 {_ratio(u['p90'], base_u['p90'])}"
            )
        if parts:
            lines.append(f"- {members} members, {profile} {scenario}: " + "; ".join(parts))
    return "\n".join(lines)


def load_runs(paths: Sequence[Path]) -> dict[tuple[int, str, str, str], list[RunResult]]:
    """The cells of earlier ``--json`` outputs, merged (runs of the same cell from several files add up)."""
    fields = set(RunResult.__dataclass_fields__)
    cells: dict[tuple[int, str, str, str], list[RunResult]] = {}
    for path in paths:
        for run in json.loads(path.read_text())["runs"]:
            key = (run["members"], run["profile"], run["scenario"], run["mode"])
            cells.setdefault(key, []).append(RunResult(**{k: v for k, v in run.items() if k in fields}))
    return cells


# A date, and a letter after it for a later set of the same day (after a change to kassign): 2026-11-28b.
_DATED = re.compile(r"(\d{4}-\d{2}-\d{2}[a-z]?)(?![a-z])")


def load_current(paths: Sequence[Path]) -> dict[tuple[int, str, str, str], list[RunResult]]:
    """:func:`load_runs`, each cell from the newest date that measured it (the first ``YYYY-MM-DD`` in a
    file's name, with a letter after it for a later set of that day; undated files count as oldest): a
    cell measured again after a change to kassign replaces its earlier runs, whose files stay as the
    record of before."""
    by_date: dict[str, list[Path]] = {}
    for path in paths:
        found = _DATED.search(path.name)
        by_date.setdefault(found.group(1) if found else "", []).append(path)
    cells: dict[tuple[int, str, str, str], list[RunResult]] = {}
    for date in sorted(by_date):
        cells.update(load_runs(by_date[date]))
    return cells


def draw_figure(
    cells: Mapping[tuple[int, str, str, str], Sequence[RunResult]],
    path: Path,
    profile: str,
    scenarios: Sequence[str] = SCENARIOS,
) -> None:
    """Unowned partition-seconds and settle time (means, with the 90th percentile as a whisker) against the
    group size, one line per mode, one column per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    scenarios = [s for s in scenarios if any(k[1] == profile and k[2] == s for k in cells)]
    # One colour per mode in every panel, whichever modes a panel has.
    colours = {mode: f"C{i % 10}" for i, mode in enumerate(MODES)}
    fig, axes = plt.subplots(2, len(scenarios), figsize=(4.2 * len(scenarios), 6.4), squeeze=False)
    for col, scenario in enumerate(scenarios):
        for row, (metric, label) in enumerate((("unowned_ps", "unowned partition-s"), ("settle_s", "settle s"))):
            ax = axes[row][col]
            for mode in MODES:
                sizes = sorted(n for n, p, s, m in cells if (p, s, m) == (profile, scenario, mode))
                if not sizes:
                    continue
                stats = [summary([getattr(r, metric) for r in cells[(n, profile, scenario, mode)]]) for n in sizes]
                means = [st["mean"] for st in stats]
                ax.errorbar(
                    sizes,
                    means,
                    yerr=[[0] * len(stats), [st["p90"] - st["mean"] for st in stats]],
                    marker="o",
                    capsize=3,
                    label=SHORT[mode],
                    color=colours[mode],
                )
            ax.set_xscale("log")
            ax.set_xticks(sorted(LAYOUTS), [f"{n}\n({sum(LAYOUTS[n])} p)" for n in sorted(LAYOUTS)])
            ax.minorticks_off()
            if metric == "unowned_ps":
                ax.set_yscale("log")
                ax.set_title(scenario)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    axes[0][0].legend(handles.values(), handles.keys(), fontsize=8)
    fig.suptitle(f"rebalance cost against group size ({profile} processing; mean, whisker to the 90th percentile)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else ("1.00" if a == b else "inf")


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be numbers, got {value!r}") from None
    unknown = [s for s in sizes if s not in LAYOUTS]
    if unknown or not sizes:
        raise argparse.ArgumentTypeError(
            f"unknown size {unknown or value!r}; choose from {', '.join(map(str, LAYOUTS))}"
        )
    return sizes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=_sizes, default=list(LAYOUTS), help="comma-separated members: 6, 24, 96")
    ap.add_argument(
        "--profiles",
        type=lambda v: _csv(v, list(PROFILES), "profile"),
        default=["instant"],
        help=f"comma-separated, of {', '.join(PROFILES)} (default instant)",
    )
    ap.add_argument(
        "--scenarios",
        type=lambda v: _csv(v, SCENARIOS, "scenario"),
        default=["scale-out", "scale-in"],
        help=f"comma-separated, of {', '.join(SCENARIOS)} (default scale-out,scale-in)",
    )
    ap.add_argument(
        "--modes",
        type=lambda v: _csv(v, list(MODES), "mode"),
        default=list(DEFAULT_MODES),
        help=f"comma-separated, of {', '.join(MODES)} (default {','.join(DEFAULT_MODES)})",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell (default 5)")
    ap.add_argument(
        "--first-rep",
        type=int,
        default=1,
        help="number of the first repetition (default 1): more runs of a recorded set go on from its last number, "
        "with the seed and trigger phase that repetition would have had",
    )
    ap.add_argument("--rate-per-partition", type=float, default=25.0)
    ap.add_argument("--max-rate", type=float, default=2400.0, help="records per second in all, at most")
    ap.add_argument("--restart-sample", type=int, default=24, help="members a rolling restart restarts, at most")
    ap.add_argument(
        "--members-per-process",
        type=int,
        default=1,
        help="aiokafka members share processes, this many to one (default 1: a process each); not with crash",
    )
    ap.add_argument("--steady-s", type=float, default=3.0)
    ap.add_argument("--session-ms", type=int, default=10000)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-minutes", type=float, default=None, help="stop starting runs after this long")
    ap.add_argument("--json", type=Path, default=None, help="also write every run and the table here")
    ap.add_argument(
        "--record", type=Path, default=None, help="write each run's timeline to DIR/n<members>-<profile>-..."
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="run nothing: print the table of earlier --json outputs, merged (a cell from the newest date "
        "in the file names that has it)",
    )
    ap.add_argument("--figure", type=Path, default=None, help="also draw the figure (PNG) of the runs here")
    args = ap.parse_args(argv)
    if args.from_json:
        missing = [str(p) for p in args.from_json if not p.is_file()]
        if missing:
            ap.error(f"no such file: {', '.join(missing)}")
        cells = load_current(args.from_json)
        print(format_tables(cells, {}))
        if args.figure:
            draw_figure(cells, args.figure, args.profiles[0], args.scenarios)
        return 0
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.first_rep < 1:
        ap.error(f"--first-rep must be at least 1, got {args.first_rep}")
    if args.members_per_process < 1:
        ap.error(f"--members-per-process must be at least 1, got {args.members_per_process}")
    if args.members_per_process > 1 and "crash" in args.scenarios:
        ap.error("--members-per-process above 1 cannot run crash: a crash kills one member's own process")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from tqdm import tqdm

    # Repetitions outermost and cells interleaved: a slow spell of the machine spreads over every cell.
    plan = [
        (k, n, p, s, m)
        for k in range(args.first_rep - 1, args.first_rep - 1 + args.repeat)
        for n in args.sizes
        for p in args.profiles
        for s in args.scenarios
        for m in args.modes
        if MODES[m].scenarios is None or s in MODES[m].scenarios
    ]
    cells: dict[tuple[int, str, str, str], list[RunResult]] = {}
    failures: dict[tuple[int, str, str, str], int] = {}
    started = time.time()
    with open_broker() as broker:
        print(f"broker: {broker.describe()}")
        with tqdm(plan, desc="group-size runs", unit="run") as bar:
            for k, members, profile, scenario, mode in bar:
                if args.max_minutes is not None and time.time() - started > args.max_minutes * 60:
                    tqdm.write(f"--max-minutes {args.max_minutes} reached: {bar.n} of {len(plan)} runs done")
                    break
                bar.set_postfix_str(f"{members} {profile} {scenario} {mode}")
                layout = LAYOUTS[members]
                timing = GroupTiming(
                    session_ms=args.session_ms,
                    heartbeat_ms=args.heartbeat_ms,
                    progress_ms=200,
                    process_ms=PROFILES[profile],
                    seed=args.seed * 1000 + k,
                )
                key = (members, profile, scenario, mode)
                record = (
                    args.record / f"n{members}-{profile}-{scenario}-{SHORT[mode]}-r{k + 1}" if args.record else None
                )
                try:
                    result = run_once(
                        broker.bootstrap,
                        scenario,
                        mode,
                        partitions=sum(layout),
                        rate=min(args.max_rate, args.rate_per_partition * sum(layout)),
                        timing=timing,
                        steady_s=args.steady_s,
                        phase=PHASES[k % len(PHASES)],
                        profile=profile,
                        record=record,
                        broker=broker.describe(),
                        members=members,
                        change=change_of(members),
                        topics=layout,
                        restart_sample=min(members, args.restart_sample),
                        held_newcomers=True,
                        members_per_process=args.members_per_process,
                    )
                except Exception as exc:  # one failed run must not end the table
                    failures[key] = failures.get(key, 0) + 1
                    tqdm.write(failed_run_line(f"{members} {profile} {scenario} {mode}", exc))
                    continue
                cells.setdefault(key, []).append(result)
                tqdm.write(
                    f"{members} {profile} {scenario} {mode}: unowned {result.unowned_ps:.2f} ps, settle "
                    f"{result.settle_s:.2f} s, rounds {result.rounds}, moved {result.moved}, dup "
                    f"{result.duplicates}, lost {result.lost}, members {result.members_rss_mb:.0f} MB "
                    f"{result.members_cpu_pct:.0f}% CPU, machine {result.machine_cpu_pct}% / "
                    f"{result.machine_cpu_change_pct}% CPU"
                )
    table = format_tables(cells, failures)
    if args.figure and cells:
        draw_figure(cells, args.figure, args.profiles[0], args.scenarios)
    print(
        f"\nsession {args.session_ms} ms, heartbeat {args.heartbeat_ms} ms, {args.rate_per_partition:g} records/s "
        f"per partition (at most {args.max_rate:g}); {time.time() - started:.0f} s in all\n"
    )
    print(table)
    if args.json:
        out: dict[str, Any] = {
            "broker": broker.describe(),
            "clients": _client_versions(),
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "json"},
            "layouts": {str(n): list(t) for n, t in LAYOUTS.items()},
            "runs": [
                {"members": n, "profile": p, "scenario": s, "mode": m, **asdict(r)}
                for (n, p, s, m), rs in cells.items()
                for r in rs
            ],
            "failures": [
                {"members": n, "profile": p, "scenario": s, "mode": m, "count": c}
                for (n, p, s, m), c in failures.items()
            ],
            "table": table,
        }
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
