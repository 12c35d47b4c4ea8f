"""Benchmark of ``kassign sweep``: scenarios per second on local[1] vs local[2], and how much of
the time is Spark's (scheduling, serialisation, Python workers) rather than simulation.

    python -m benchmarks.sweep                      # 10,000 scenarios
    python -m benchmarks.sweep --scenarios 500      # a quick run

The scenarios cycle through assignors x protocols x scenario kinds x group sizes x seeds on
Kafka's coordinator with the recorded groups' timeouts. "simulation" is the summed wall time the
tasks spent inside :func:`kassign.sim.simulate`; the Spark share is the rest of the cores' time:
``1 - simulation / (wall x cores)``.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from kassign.sim import SimConfig, make_scenario, simulate
from kassign.spark.grid import expand_grid

PAIRS = (
    ("range", "eager"),
    ("sticky", "eager"),
    ("cooperative-sticky", "eager"),
    ("cooperative-sticky", "cooperative"),
)
KINDS = ("scale_out", "scale_in", "crash", "rolling_restart", "flap", "partition_increase", "random")
CONFIG = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000, "metadata_max_age_ms": 5000}


def make_specs(n: int) -> list[dict[str, Any]]:
    """``n`` scenario specs cycling over the benchmark's axes (seeds grow as needed)."""
    base = expand_grid(
        {
            "assignors": sorted({a for a, _ in PAIRS}),
            "protocols": ["eager", "cooperative"],
            "members": [3, 6],
            "partitions": [24, 96],
            "scenarios": list(KINDS),
            "config": CONFIG,
        }
    )
    specs = []
    for i, spec in zip(range(n), itertools.cycle(base)):
        specs.append(dict(spec, seed=i // len(base), scenario_id=i))
    return specs


def direct_rate(specs: Sequence[dict[str, Any]]) -> float:
    """Scenarios per second simulated in this process, without Spark."""
    started = time.perf_counter()
    for s in specs:
        config = SimConfig.from_dict({**CONFIG, "assignor": s["assignor"], "protocol": s["protocol"]})
        simulate(make_scenario(s["scenario"], s["members"], s["partitions"], seed=s["seed"]), config)
    return len(specs) / (time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", type=int, default=10_000, help="scenarios per run (default 10,000)")
    p.add_argument("--masters", default="local[1],local[2]", help="comma-separated Spark masters")
    p.add_argument("--direct-sample", type=int, default=200, help="scenarios for the no-Spark baseline")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from kassign.spark.pipeline import run_sweep, spark_session

    specs = make_specs(args.scenarios)
    sample = specs[: args.direct_sample]
    print(
        f"{len(specs)} scenarios; baseline without Spark: {direct_rate(sample):.1f} scenarios/s "
        f"(1 core, {len(sample)} scenarios)"
    )
    print(f"{'master':<10} {'cores':>5} {'startup s':>10} {'wall s':>8} {'scen/s':>8} {'sim s':>8} {'Spark share':>12}")
    for master in args.masters.split(","):
        started = time.perf_counter()
        spark = spark_session(master, "kassign-bench")
        startup = time.perf_counter() - started
        cores = spark.sparkContext.defaultParallelism
        try:
            result = run_sweep(spark, specs, None, with_events=False, progress=sys.stderr.isatty())
        finally:
            spark.stop()
        share = 1 - result.task_s / (result.wall_s * cores)
        print(
            f"{master:<10} {cores:>5} {startup:>10.1f} {result.wall_s:>8.1f} {len(specs) / result.wall_s:>8.1f} "
            f"{result.task_s:>8.1f} {share:>11.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
