"""The simulator's prediction of a rebalance's cost at 500 and 2,000 members, through ``kassign sweep`` (issue 28).

For each group size (members, partitions: 500 over 5,000 and 2,000 over 20,000, one topic, 10 partitions
per member) and each strategy, one ``kassign sweep`` run (PySpark ``local[*]``) over four changes:

* scale-out by a quarter (``--change-fraction 0.25``: 500 -> 625, 2,000 -> 2,500),
* scale-in by a quarter (the newest quarter closes),
* crash of one member (no LeaveGroup: the session timeout),
* rolling restart of a sample of 24 members (``--restart-count 24``; each down 1 s, the next 5 s later),

and three strategies: *aiokafka eager* (roundrobin, eager: aiokafka's default), *plain KIP-429*
(cooperative-sticky without the fast follow-up) and *kassign default* (cooperative-sticky with the fast
follow-up). Every member is an aiokafka-latency client with the Kafka 4.4 presets fitted on the 6-member
recordings (:data:`kassign.sim.config.KAFKA44_PRESETS`) on Kafka's classic coordinator, session 1.5 s,
heartbeat 250 ms, rebalance timeout 30 s, commits every 200 ms, no processing: the broker benchmarks'
settings (:func:`kassign.sim.bench_meta.bench_config`). ``--seeds`` seeds per cell (a seed draws the
trigger's heartbeat phase and the latency jitter); the medians are Spark's ``percentile_approx``.

Each sweep runs under ``flock LOCK`` (``--lock``, default ``/tmp/broker-tests.lock``) so that it never
overlaps a broker benchmark on the machine, and releases it between sweeps.

    python -m benchmarks.sweep_at_scale [--sizes 500,2000] [--seeds 3] [--json OUT.json] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kassign.sim.bench_meta import BENCH_COMMIT_MS
from kassign.sim.config import kafka44_presets

__all__ = ["SIZES", "STRATEGIES", "SCENARIOS", "grid", "run", "markdown", "main"]

ROOT = Path(__file__).resolve().parent.parent
#: members -> partitions
SIZES: dict[int, int] = {500: 5000, 2000: 20000}
#: label -> (assignor, protocol, fast follow-up)
STRATEGIES: dict[str, tuple[str, str, bool]] = {
    "aiokafka eager": ("roundrobin", "eager", False),
    "plain KIP-429": ("cooperative-sticky", "cooperative", False),
    "kassign default": ("cooperative-sticky", "cooperative", True),
}
#: scenario kind -> its label in the tables
SCENARIOS: dict[str, str] = {
    "scale_out": "scale-out by 1/4",
    "scale_in": "scale-in by 1/4",
    "crash": "crash of 1",
    "rolling_restart": "rolling restart of 24",
}
CHANGE_FRACTION = 0.25
RESTART_COUNT = 24
SESSION_MS, HEARTBEAT_MS = 1500.0, 250.0


def leader_ms(members: int, assignor: str, reps: int = 3) -> float:
    """kassign's leader time (ms, median of ``reps``) for the scale-out round of the sweep's group: decoding
    every member's JoinGroup metadata, ``assignor``'s assign() and encoding the assignments, with the
    ``members`` owners holding a fresh assignment and a quarter more joining. The presets' ``assign_ms``
    (2.5 ms) was fitted on 6-member groups; this is what a group of this size costs its leader."""
    import statistics

    from kassign import Assignment, Subscription
    from kassign.protocol import (
        decode_subscription,
        encode_assignment,
        encode_cooperative_user_data,
        encode_subscription,
    )
    from kassign.sim.simulator import ASSIGNOR_CLASSES

    module, cls = ASSIGNOR_CLASSES[assignor]
    factory = getattr(__import__(module, fromlist=[cls]), cls)
    topics = {"topic": SIZES[members]}
    names = [f"m{i}" for i in range(1, members + int(members * CHANGE_FRACTION) + 1)]
    prior = factory().assign(topics, {m: Subscription(["topic"]) for m in names[:members]})
    cooperative = assignor == "cooperative-sticky"
    metadata = {
        m: encode_subscription(
            Subscription(
                ["topic"],
                encode_cooperative_user_data(3 if m in prior else -1) if cooperative else None,
                prior.get(m, []) if cooperative else [],
                3 if (cooperative and m in prior) else None,
            )
        )
        for m in names
    }
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        subs = {m: decode_subscription(b) for m, b in metadata.items()}
        result = factory().assign(topics, subs)
        for tps in result.values():
            encode_assignment(Assignment(tps))
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def grid(members: int, strategy: str, seeds: int, assign_ms: float | None = None) -> dict[str, Any]:
    """The sweep grid of one size and strategy (``assign_ms`` None: the calibrated preset's)."""
    assignor, protocol, fast = STRATEGIES[strategy]
    presets = kafka44_presets("aiokafka")
    if assign_ms is not None:
        presets["assign_ms"] = assign_ms
    return {
        "assignors": [assignor],
        "protocols": [protocol],
        "brokers": ["kafka"],
        "clients": ["aiokafka"],
        "members": [members],
        "partitions": [SIZES[members]],
        "scenarios": list(SCENARIOS),
        "seeds": seeds,
        "config": {
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "rebalance_timeout_ms": 30000.0,
            "commit_interval_ms": BENCH_COMMIT_MS,
            "fast_follow_up": fast,
            **presets,
        },
    }


def sweep_command(grid_file: Path, out: Path, lock: str) -> list[str]:
    """``kassign sweep`` with the scale options, under ``flock`` when ``lock`` is given."""
    cmd = [
        sys.executable,
        "-m",
        "kassign.cli",
        "sweep",
        str(grid_file),
        "--out",
        str(out),
        "--json",
        "--no-progress",
        "--no-events",
        "--change-fraction",
        str(CHANGE_FRACTION),
        "--restart-count",
        str(RESTART_COUNT),
    ]
    return (["flock", lock] if lock else []) + cmd


def run(
    members: int, strategy: str, seeds: int, work: Path, lock: str, assign_ms: float | None = None
) -> dict[str, Any]:
    """One sweep; its summary and aggregates (the JSON ``kassign sweep --json`` prints)."""
    import yaml

    name = f"{members}-{strategy.replace(' ', '-')}-{'preset' if assign_ms is None else 'measured'}"
    grid_file = work / f"{name}.yaml"
    grid_file.write_text(yaml.safe_dump(grid(members, strategy, seeds, assign_ms)))
    started = time.perf_counter()
    proc = subprocess.run(sweep_command(grid_file, work / name, lock), capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"kassign sweep ({name}) exited {proc.returncode}: {proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout[proc.stdout.index("{") :])
    out["elapsed_s_with_lock_wait"] = round(time.perf_counter() - started, 1)
    return out


def _cell(result: dict[str, Any], kind: str) -> dict[str, Any]:
    rows = [a for a in result["aggregates"] if a["kind"] == kind]
    if len(rows) != 1:
        raise RuntimeError(f"expected one aggregate of kind {kind!r}, got {len(rows)}")
    return rows[0]


def markdown(results: dict[int, dict[str, dict[str, Any]]], leader: dict[str, float] | None = None) -> str:
    """Per size: unowned partition-seconds and settle time (medians), moved, rounds; ratios to eager."""
    lines: list[str] = []
    for members, by_strategy in results.items():
        lines += [
            f"**{members:,} members, {SIZES[members]:,} partitions** (median over seeds; unowned partition-s / "
            "settle s / rounds / mean moved):",
            "",
            "| change | " + " | ".join(by_strategy) + " | kassign default / eager | plain KIP-429 / eager |",
            "|---|" + "---:|" * (len(by_strategy) + 2),
        ]
        for kind, label in SCENARIOS.items():
            cells = {s: _cell(r, kind) for s, r in by_strategy.items()}
            row = [
                f"{c['unowned_ps_p50']:.2f} / {c['settle_s_p50']:.2f} / {c['rounds_p50']:.0f} / {c['moved_mean']:.0f}"
                + (f" ({c['unsettled']} unsettled)" if c["unsettled"] else "")
                for c in cells.values()
            ]
            eager = cells["aiokafka eager"]["unowned_ps_p50"]

            def ratio(s: str, eager: float = eager, cells: dict[str, dict[str, Any]] = cells) -> str:
                return f"{cells[s]['unowned_ps_p50'] / eager:.2f}" if eager > 0 and s in cells else "–"

            lines.append(
                f"| {label} | " + " | ".join(row) + f" | {ratio('kassign default')} | {ratio('plain KIP-429')} |"
            )
        if leader:
            used = ", ".join(
                f"{a} {ms:.0f} ms" for key, ms in leader.items() for m, a in [key.split(" ", 1)] if int(m) == members
            )
            lines += ["", f"Leader time per round (`assign_ms`): {used}."]
        lines.append("")
    return "\n".join(lines)


def measured_leader_ms(members: int, assignor: str, lock: str) -> float:
    """:func:`leader_ms` in a child process under the lock (it is a timing)."""
    cmd = [sys.executable, "-m", "benchmarks.sweep_at_scale", "--measure-leader", f"{members},{assignor}"]
    proc = subprocess.run((["flock", lock] if lock else []) + cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"leader timing exited {proc.returncode}: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweeps; print the tables; optionally write the JSON and the markdown."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sweep_at_scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,2000", help=f"group sizes, from {sorted(SIZES)}")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per cell (default 3)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated, from the default")
    ap.add_argument(
        "--leader-time",
        choices=("preset", "measured", "both"),
        default="both",
        help="assign_ms: the calibrated preset's, kassign's leader time measured at each size, or both runs",
    )
    ap.add_argument("--lock", default="/tmp/broker-tests.lock", help="flock this file around each sweep ('' for none)")
    ap.add_argument("--json", type=Path, help="write every sweep's summary and aggregates here")
    ap.add_argument("--md", type=Path, help="write the tables here")
    ap.add_argument("--measure-leader", help=argparse.SUPPRESS)  # MEMBERS,ASSIGNOR: print leader_ms and exit
    args = ap.parse_args(argv)
    if args.measure_leader:
        members, assignor = args.measure_leader.split(",", 1)
        print(f"{leader_ms(int(members), assignor):.3f}")
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    strategies = [s for s in args.strategies.split(",") if s]
    if set(sizes) - set(SIZES) or set(strategies) - set(STRATEGIES) or "aiokafka eager" not in strategies:
        ap.error(f"sizes from {sorted(SIZES)}, strategies from {list(STRATEGIES)} (aiokafka eager included)")
    variants = ["preset", "measured"] if args.leader_time == "both" else [args.leader_time]
    leader: dict[str, float] = {}
    if "measured" in variants:
        for members in sizes:
            for assignor in sorted({STRATEGIES[s][0] for s in strategies}):
                leader[f"{members} {assignor}"] = measured_leader_ms(members, assignor, args.lock)
                print(
                    f"leader time, {members} members, {assignor}: {leader[f'{members} {assignor}']:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    results: dict[str, dict[int, dict[str, dict[str, Any]]]] = {}

    def write() -> str:
        # After every sweep, so that a run cut short keeps what it measured.
        parts = []
        for variant, by_size in results.items():
            title = (
                "Calibrated presets (assign_ms 2.5 ms, fitted at 6 members)"
                if variant == "preset"
                else "Leader time measured at each size (assign_ms below)"
            )
            parts += [f"### {title}", "", markdown(by_size, leader if variant == "measured" else None)]
        table = "\n".join(parts)
        if args.md:
            args.md.write_text(table)
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "command": "python -m benchmarks.sweep_at_scale "
                        + " ".join(sys.argv[1:] if argv is None else argv),
                        "sizes": {str(m): SIZES[m] for m in sizes},
                        "change_fraction": CHANGE_FRACTION,
                        "restart_count": RESTART_COUNT,
                        "leader_ms": leader,
                        "grids": {
                            f"{v} {m} {s}": grid(
                                m, s, args.seeds, leader.get(f"{m} {STRATEGIES[s][0]}") if v == "measured" else None
                            )
                            for v in variants
                            for m in sizes
                            for s in strategies
                        },
                        "results": {v: {str(m): r for m, r in by_size.items()} for v, by_size in results.items()},
                    },
                    indent=1,
                    default=str,
                )
            )
        return table

    with tempfile.TemporaryDirectory(prefix="sweep-at-scale-") as tmp:
        for variant in variants:
            for members in sizes:
                for strategy in strategies:
                    assign_ms = leader[f"{members} {STRATEGIES[strategy][0]}"] if variant == "measured" else None
                    print(f"{variant}: {members} members, {strategy} ...", file=sys.stderr, flush=True)
                    result = run(members, strategy, args.seeds, Path(tmp), args.lock, assign_ms)
                    results.setdefault(variant, {}).setdefault(members, {})[strategy] = result
                    print(f"  {result['wall time (s)']:.0f} s in Spark", file=sys.stderr, flush=True)
                    if "aiokafka eager" in results[variant][members]:
                        write()
    print(write())
    return 0


if __name__ == "__main__":
    sys.exit(main())
