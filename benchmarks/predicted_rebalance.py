"""Predicted rebalance cost of eager, cooperative and kassign's cooperative + fast follow-up.

The simulator (:mod:`kassign.sim`, calibrated against recorded Java and librdkafka groups) plays
three changes of a 24-partition group of Java-latency consumers:

* scale-out 3 -> 6, scale-in 6 -> 3 (the 3 newest close), rolling restart of 6 members;

for four strategies: eager range (aiokafka's default), eager sticky, cooperative-sticky, and
cooperative-sticky with kassign's fast follow-up (:mod:`kassign.protocol.follow_up_mark`); on two brokers:
Apache Kafka (session 10 s, heartbeat 1 s, as the recordings) and Tansu (session 1.5 s, heartbeat
250 ms). Each cell is the median over seeds; a seed sets the trigger's phase within the heartbeat
interval. It prints Markdown tables and the fast follow-up / eager ratios::

    python benchmarks/predicted_rebalance.py --seeds 7
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from kassign.sim import RollingRestart, ScaleIn, ScaleOut, Scenario, SimConfig, simulate  # noqa: E402

PARTITIONS = 24
TOPIC = "topic"
#: broker -> (session.timeout.ms, heartbeat.interval.ms)
BROKERS: dict[str, tuple[float, float]] = {"kafka": (10000.0, 1000.0), "tansu": (1500.0, 250.0)}
#: label -> SimConfig settings
STRATEGIES: dict[str, dict[str, object]] = {
    "eager range": {"assignor": "range"},
    "eager sticky": {"assignor": "sticky"},
    "cooperative-sticky": {"assignor": "cooperative-sticky"},
    "coop + fast follow-up": {"assignor": "cooperative-sticky", "fast_follow_up": True},
}
BASELINE, FAST = "eager range", "coop + fast follow-up"
#: (column, PhaseMetrics attribute, format)
COLUMNS = (
    ("unowned partition-s", "unowned_ps", "{:.2f}"),
    ("gap_kept_s", "gap_kept_s", "{:.3f}"),
    ("settle s", "settle_s", "{:.2f}"),
    ("rounds", "rounds", "{:g}"),
    ("moved", "moved", "{:g}"),
    ("double-owned ps", "double_owned_ps", "{:g}"),
)
#: The design's target on Kafka: fast follow-up unowned partition-s <= this share of eager's.
TARGET_RATIO = 0.5
TARGET_SCENARIOS = ("scale-out 3->6", "rolling restart 6")


def _scale_out(seed: int, phase: float) -> Scenario:
    return Scenario(3, {TOPIC: PARTITIONS}, seed=seed, name="scale_out").then(ScaleOut(3, phase=phase))


def _scale_in(seed: int, phase: float) -> Scenario:
    return Scenario(6, {TOPIC: PARTITIONS}, seed=seed, name="scale_in").then(ScaleIn(3, phase=phase))


def _rolling_restart(seed: int, phase: float) -> Scenario:
    return Scenario(6, {TOPIC: PARTITIONS}, seed=seed, name="rolling_restart").then(RollingRestart(phase=phase))


def _one_leaves(seed: int, phase: float) -> Scenario:
    return Scenario(6, {TOPIC: PARTITIONS}, seed=seed, name="one_leaves").then(ScaleIn(1, phase=phase))


def _one_joins(seed: int, phase: float) -> Scenario:
    return Scenario(5, {TOPIC: PARTITIONS}, seed=seed, name="one_joins").then(ScaleOut(1, phase=phase))


SCENARIOS: dict[str, Callable[[int, float], Scenario]] = {
    "scale-out 3->6": _scale_out,
    "scale-in 6->3": _scale_in,
    "rolling restart 6": _rolling_restart,
}
#: The two halves of one restart, to explain the rolling restart's figures.
RESTART_HALVES: dict[str, Callable[[int, float], Scenario]] = {
    "one leaves 6->5": _one_leaves,
    "one joins 5->6": _one_joins,
}


@dataclass(frozen=True)
class Cell:
    """The medians of one (broker, scenario, strategy) over the seeds."""

    broker: str
    scenario: str
    strategy: str
    medians: dict[str, float]
    settled: bool


def config_for(broker: str, strategy: str) -> SimConfig:
    """The simulator settings of one broker and strategy (Java latencies, max.poll 30 s)."""
    session, heartbeat = BROKERS[broker]
    return SimConfig(
        broker=broker,
        client="java",
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        rebalance_timeout_ms=30000.0,
        **STRATEGIES[strategy],
    )  # type: ignore[arg-type]


def measure(broker: str, scenario: str, strategy: str, seeds: Sequence[int]) -> Cell:
    """Simulate every seed and take the median of each metric of the scenario's phase."""
    samples: dict[str, list[float]] = {attr: [] for attr in (*(a for _, a, _ in COLUMNS), "unowned_parts")}
    settled = True
    config = config_for(broker, strategy)
    for seed in seeds:
        phase = random.Random(seed).random()
        result = simulate(SCENARIOS[scenario](seed, phase), config)
        settled = settled and result.settled
        metrics = next(m for name, m in result.metrics.items() if name.startswith("1:"))  # the one step's phase
        for attr, values in samples.items():
            values.append(float(getattr(metrics, attr)))
    return Cell(broker, scenario, strategy, {a: statistics.median(v) for a, v in samples.items()}, settled)


def measure_scenario(
    build: Callable[[int, float], Scenario], broker: str, strategy: str, seeds: Sequence[int]
) -> float:
    """Median unowned partition-seconds of ``build``'s one step."""
    config = config_for(broker, strategy)
    values = []
    for seed in seeds:
        result = simulate(build(seed, random.Random(seed).random()), config)
        values.append(next(m for name, m in result.metrics.items() if name.startswith("1:")).unowned_ps)
    return statistics.median(values)


def run(seeds: Sequence[int], brokers: Sequence[str]) -> list[Cell]:
    """Every (broker, scenario, strategy) cell."""
    return [measure(b, sc, st, seeds) for b in brokers for sc in SCENARIOS for st in STRATEGIES]


def markdown(cells: Sequence[Cell], seeds: Sequence[int]) -> str:
    """One Markdown table per broker, then the ratio lines, the target's verdict and, on Kafka,
    where the fast follow-up's remaining unowned time comes from."""
    lines: list[str] = []
    for broker in dict.fromkeys(c.broker for c in cells):
        session, heartbeat = BROKERS[broker]
        lines.append(
            f"**{broker}** (session {session / 1000:g} s, heartbeat {heartbeat / 1000:g} s; "
            f"{PARTITIONS} partitions, Java latencies; median of {len(seeds)} seeds)"
        )
        lines.append("")
        lines.append("| scenario | strategy | " + " | ".join(name for name, _, _ in COLUMNS) + " |")
        lines.append("|---|---|" + "---:|" * len(COLUMNS))
        for c in (c for c in cells if c.broker == broker):
            values = " | ".join(fmt.format(c.medians[attr]) for _, attr, fmt in COLUMNS)
            lines.append(f"| {c.scenario} | {c.strategy}{'' if c.settled else ' (unsettled)'} | {values} |")
        lines.append("")
        for scenario in SCENARIOS:
            ratio = _ratio(cells, broker, scenario, FAST, BASELINE)
            coop = _ratio(cells, broker, scenario, FAST, "cooperative-sticky")
            lines.append(
                f"- {broker}, {scenario}: unowned partition-s, fast follow-up / eager range = {ratio}; "
                f"fast follow-up / cooperative-sticky = {coop}"
            )
        lines.append("")
    if any(c.broker == "kafka" for c in cells):
        for scenario in TARGET_SCENARIOS:
            fast = _cell(cells, "kafka", scenario, FAST).medians["unowned_ps"]
            eager = _cell(cells, "kafka", scenario, BASELINE).medians["unowned_ps"]
            met = fast <= TARGET_RATIO * eager
            lines.append(
                f"- target on Kafka, {scenario}: fast follow-up {fast:.2f} <= {TARGET_RATIO:g} x eager "
                f"{eager:.2f}: {'met' if met else 'NOT met'}"
            )
        lines += ["", *_why(cells, seeds)]
    return "\n".join(lines)


def _why(cells: Sequence[Cell], seeds: Sequence[int]) -> list[str]:
    """Kafka: what each strategy's unowned time is made of, from further simulations."""
    out = ["Where the unowned time goes on Kafka:"]
    eager = _cell(cells, "kafka", "scale-out 3->6", BASELINE).medians
    fast = _cell(cells, "kafka", "scale-out 3->6", FAST).medians
    if eager["unowned_parts"] and fast["unowned_parts"]:
        per_eager = eager["unowned_ps"] / eager["unowned_parts"]
        per_fast = fast["unowned_ps"] / fast["unowned_parts"]
        out.append(
            f"- scale-out: eager leaves {eager['unowned_parts']:g} partitions unowned for one join/sync round "
            f"({per_eager * 1000:.0f} ms each); the fast follow-up only the {fast['unowned_parts']:g} "
            f"that move, but for their revocation, a poll and a second join/sync round "
            f"({per_fast * 1000:.0f} ms each): "
            f"ratio {fast['unowned_parts']:g} x {per_fast * 1000:.0f} / ({eager['unowned_parts']:g} x "
            f"{per_eager * 1000:.0f}) = {fast['unowned_ps'] / eager['unowned_ps']:.2f}; below 0.5 only if the "
            f"second round were faster than eager's only one."
        )
    halves = {
        (h, st): measure_scenario(build, "kafka", st, seeds)
        for h, build in RESTART_HALVES.items()
        for st in (BASELINE, FAST)
    }
    leave_e, join_e = halves[("one leaves 6->5", BASELINE)], halves[("one joins 5->6", BASELINE)]
    leave_f, join_f = halves[("one leaves 6->5", FAST)], halves[("one joins 5->6", FAST)]
    out.append(
        f"- rolling restart = 6 x (one member leaves + it joins again): eager {leave_e:.2f} + {join_e:.2f}, "
        f"fast follow-up {leave_f:.2f} + {join_f:.2f} partition-s per restart. The leave dominates and no "
        f"client can shorten it: the survivors learn of a LeaveGroup only from their next heartbeat (on "
        f"average half an interval), meanwhile the leaver's partitions have no owner under every strategy. "
        f"Floor of the ratio with the join free: {leave_f / (leave_e + join_e):.2f}."
    )
    return out


def _cell(cells: Sequence[Cell], broker: str, scenario: str, strategy: str) -> Cell:
    return next(c for c in cells if (c.broker, c.scenario, c.strategy) == (broker, scenario, strategy))


def _ratio(cells: Sequence[Cell], broker: str, scenario: str, top: str, bottom: str) -> str:
    a = _cell(cells, broker, scenario, top).medians["unowned_ps"]
    b = _cell(cells, broker, scenario, bottom).medians["unowned_ps"]
    return f"{a / b:.2f}" if b else ("1.00" if a == b else "inf")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=7, help="seeds (trigger phases) per cell, >= 5 for the README")
    parser.add_argument(
        "--broker",
        choices=sorted(BROKERS),
        action="append",
        help="broker model(s) to simulate (default: kafka and tansu)",
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    seeds = list(range(args.seeds))
    brokers = args.broker or list(BROKERS)
    print(markdown(run(seeds, brokers), seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
