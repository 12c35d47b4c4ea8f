"""kassign simulate: simulate one scenario (or replay a recorded group under another assignor) and print its metrics.

Examples:

    kassign simulate --scenario scale_out --members 3 --partitions 24 --assignor cooperative-sticky
    kassign simulate --scenario crash --broker tansu --session-timeout-ms 2000 --heartbeat-interval-ms 300
    kassign simulate --scenario rolling_restart --static --set initial_rebalance_delay_ms=3000 --json
    kassign simulate --replay data/rebalance-timelines/kafka-java-range-r1 --assignor cooperative-sticky
    kassign simulate --replay telemetry/m1.jsonl telemetry/m2.jsonl --broker kafka \
        --session-ms 45000 --heartbeat-ms 3000
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from kassign.cli_errors import handles_errors
from kassign.cli_options import MAX_PARTITIONS_PER_TOPIC, ArgumentParser, bounded_int, finite_float
from kassign.sim.config import BROKER_MODELS, CLIENT_PRESETS, GROUP_PROTOCOLS, MAX_MS, SimConfig
from kassign.sim.scenarios import SCENARIO_KINDS, make_scenario
from kassign.sim.simulator import ASSIGNOR_CLASSES, simulate
from kassign.timeline.metrics import PhaseMetrics

__all__ = ["main"]

log = logging.getLogger(__name__)

#: Most members a simulated group starts with.
MAX_MEMBERS = 10_000

COLUMNS = ("settle_s", "window_s", "unowned_ps", "moved", "rounds", "balance", "gap_kept_s", "double_owned_ps")


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="kassign simulate",
        description=__doc__.split("\n", 1)[0].split(": ", 1)[1],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scenario", choices=SCENARIO_KINDS, default="scale_out")
    p.add_argument(
        "--members",
        type=bounded_int("the member count", 1, MAX_MEMBERS),
        default=3,
        help=f"members at the start, 1 to {MAX_MEMBERS:,} (default 3)",
    )
    p.add_argument(
        "--partitions",
        type=bounded_int("the partition count", 1, MAX_PARTITIONS_PER_TOPIC),
        default=24,
        help=f"partitions of the topic, 1 to {MAX_PARTITIONS_PER_TOPIC:,} (default 24)",
    )
    p.add_argument("--seed", type=int, default=0, help="drives the trigger's heartbeat phase and jitter")
    p.add_argument("--assignor", choices=sorted(ASSIGNOR_CLASSES), help="default: cooperative-sticky")
    p.add_argument("--protocol", choices=("eager", "cooperative"), help="default: the assignor's most capable")
    # Defaults are applied later, so that a replay can tell given settings from the recording's own.
    p.add_argument("--broker", choices=BROKER_MODELS, help="default: kafka (a replay: the recording's)")
    p.add_argument("--client", choices=sorted(CLIENT_PRESETS), help="default: java (a replay: the recording's)")
    p.add_argument(
        "--session-timeout-ms",
        "--session-ms",
        dest="session_timeout_ms",
        type=finite_float("the session timeout (ms)", 1, MAX_MS),
        help="default: 45000 (a replay: the recording's)",
    )
    p.add_argument(
        "--heartbeat-interval-ms",
        "--heartbeat-ms",
        dest="heartbeat_interval_ms",
        type=finite_float("the heartbeat interval (ms)", 1, MAX_MS),
        help="default: 3000 (a replay: the recording's)",
    )
    p.add_argument("--static", action="store_true", help="static membership (group.instance.id per member)")
    p.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        help="classic (JoinGroup/SyncGroup, default) or consumer (KIP-848: the broker assigns, "
        "with Kafka 4.4's uniform assignor and 1 s assignment interval)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other SimConfig setting, e.g. --set initial_rebalance_delay_ms=3000",
    )
    p.add_argument("--events", metavar="FILE", help="write the timeline as JSON lines (.gz to compress)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument(
        "--replay",
        metavar="RECORDING",
        nargs="+",
        help="replay a recorded group (timeline files of its members, a directory of them, or a "
        "recorded run directory) with --assignor/--protocol and print both side by side",
    )
    return p


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items; values are read as JSON when they parse (numbers, true, null)."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return values


#: ``kassign simulate``'s defaults for the settings a replay takes from the recording instead.
DEFAULTS = {
    "assignor": "cooperative-sticky",
    "broker": "kafka",
    "client": "java",
    "session_timeout_ms": 45000.0,
    "heartbeat_interval_ms": 3000.0,
}


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line (None: not given)."""
    return {
        "assignor": args.assignor,
        "protocol": args.protocol,
        "broker": args.broker,
        "client": args.client,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "static_membership": args.static or None,
        "group_protocol": args.group_protocol,
        **_overrides(args.set),
    }


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    given = {k: v for k, v in _given(args).items() if v is not None}
    return {**DEFAULTS, "protocol": args.protocol, "static_membership": args.static, **given}


def _table(rows: dict[str, PhaseMetrics], out: Any) -> None:
    width = max([len("phase")] + [len(n) for n in rows])
    out.write(f"{'phase':<{width}}  " + "  ".join(f"{c:>15}" for c in COLUMNS) + "\n")
    for name, m in rows.items():
        out.write(f"{name:<{width}}  " + "  ".join(f"{getattr(m, c):>15}" for c in COLUMNS) + "\n")


def _replay(paths: Sequence[str], args: argparse.Namespace) -> int:
    from kassign.sim.replay import load_recording, replay

    recording = load_recording(*paths)
    log.info("replaying %s (-v for every round)", ", ".join(paths))
    report = replay(recording, **_given(args))
    if args.events:
        report.result.write_events(args.events)
    if args.json:
        rows = {}
        for phase in report.phases:
            rows[f"{phase.name} recorded"] = _plain(phase.recorded)
            rows[f"{phase.name} simulated"] = _plain(phase.simulated)
        print(json.dumps(rows, indent=2))
    else:
        sys.stdout.write(report.format())
    return 0


def _plain(m: PhaseMetrics) -> dict[str, Any]:
    d = m.as_dict()
    d.pop("final")
    return d


@handles_errors("simulate")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of kassign simulate; returns the exit code."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.replay:
        return _replay(args.replay, args)
    config = SimConfig.from_dict(_settings(args))
    scenario = make_scenario(args.scenario, args.members, args.partitions, seed=args.seed)
    # The progress line; each round's detail (the leader's assignments) only at -v.
    log.info(
        "simulating %s: %d members, %d partitions on %s (-v for every round)",
        scenario.name,
        args.members,
        args.partitions,
        config.broker,
    )
    result = simulate(scenario, config)
    if args.events:
        result.write_events(args.events)
    if args.json:
        print(
            json.dumps(
                {
                    "settled": result.settled,
                    "end_s": result.end_s,
                    "protocol": result.protocol.name.lower(),
                    "phases": result.summary(),
                },
                indent=2,
            )
        )
    else:
        how = (
            "the broker's uniform assignor (KIP-848)"
            if config.group_protocol == "consumer"
            else f"{config.assignor} ({result.protocol.name.lower()})"
        )
        print(
            f"{scenario.name}: {args.members} members, {args.partitions} partitions, {how} on {config.broker}; "
            f"settled={result.settled} after {result.end_s:.3f} s"
        )
        _table(result.metrics, sys.stdout)
    return 0
