"""``kassign simulate``: simulate one scenario (or replay a recorded run) and print its metrics.

Examples::

    kassign simulate --scenario scale_out --members 3 --partitions 24 --assignor cooperative-sticky
    kassign simulate --scenario crash --broker tansu --session-timeout-ms 2000 --heartbeat-interval-ms 300
    kassign simulate --scenario rolling_restart --static --set initial_rebalance_delay_ms=3000 --json
    kassign simulate --replay shared/data/rebalance-timelines/kafka-java-coop-r1
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kassign.metrics import PhaseMetrics
from kassign.sim.config import BROKER_MODELS, CLIENT_PRESETS, SimConfig
from kassign.sim.scenarios import SCENARIO_KINDS, make_scenario
from kassign.sim.simulator import ASSIGNOR_CLASSES, simulate

__all__ = ["main"]

COLUMNS = ("settle_s", "window_s", "unowned_ps", "moved", "rounds", "balance", "gap_kept_s", "double_owned_ps")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kassign simulate", description="Simulate a consumer-group rebalance scenario.")
    p.add_argument("--scenario", choices=SCENARIO_KINDS, default="scale_out")
    p.add_argument("--members", type=int, default=3, help="members at the start (default 3)")
    p.add_argument("--partitions", type=int, default=24, help="partitions of the topic (default 24)")
    p.add_argument("--seed", type=int, default=0, help="drives the trigger's heartbeat phase and jitter")
    p.add_argument("--assignor", choices=sorted(ASSIGNOR_CLASSES), default="cooperative-sticky")
    p.add_argument("--protocol", choices=("eager", "cooperative"), help="default: the assignor's most capable")
    p.add_argument("--broker", choices=BROKER_MODELS, default="kafka")
    p.add_argument("--client", choices=sorted(CLIENT_PRESETS), default="java")
    p.add_argument("--session-timeout-ms", type=float, default=45000.0)
    p.add_argument("--heartbeat-interval-ms", type=float, default=3000.0)
    p.add_argument("--static", action="store_true", help="static membership (group.instance.id per member)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other SimConfig setting, e.g. --set initial_rebalance_delay_ms=3000")
    p.add_argument("--events", metavar="FILE", help="write the timeline as JSON lines (.gz to compress)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument("--replay", metavar="RUN_DIR",
                   help="simulate a recorded run (a directory with meta.json and events.jsonl.gz) and "
                        "print the simulated metrics next to the recorded ones")
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


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "assignor": args.assignor,
        "protocol": args.protocol,
        "broker": args.broker,
        "client": args.client,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "static_membership": args.static,
        **_overrides(args.set),
    }


def _table(rows: dict[str, PhaseMetrics], out: Any) -> None:
    width = max([len("phase")] + [len(n) for n in rows])
    out.write(f"{'phase':<{width}}  " + "  ".join(f"{c:>15}" for c in COLUMNS) + "\n")
    for name, m in rows.items():
        out.write(f"{name:<{width}}  " + "  ".join(f"{getattr(m, c):>15}" for c in COLUMNS) + "\n")


def _replay(run_dir: str, args: argparse.Namespace) -> int:
    from kassign.sim.calibration import RecordedRun, recorded_metrics, simulated_metrics

    path = Path(run_dir)
    if not (path / "meta.json").is_file():
        print(f"kassign simulate: {path} is not a recorded run (no meta.json)", file=sys.stderr)
        return 2
    run = RecordedRun(path, json.loads((path / "meta.json").read_text()))
    recorded, simulated = recorded_metrics(run), simulated_metrics(run, **_overrides(args.set))
    rows = {}
    for phase in simulated:
        rows[f"{phase} recorded"] = recorded[phase]
        rows[f"{phase} simulated"] = simulated[phase]
    if args.json:
        print(json.dumps({k: _plain(m) for k, m in rows.items()}, indent=2))
    else:
        _table(rows, sys.stdout)
    return 0


def _plain(m: PhaseMetrics) -> dict[str, Any]:
    d = m.as_dict()
    d.pop("final")
    return d


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kassign simulate``; returns the exit code."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.replay:
            return _replay(args.replay, args)
        config = SimConfig.from_dict(_settings(args))
        scenario = make_scenario(args.scenario, args.members, args.partitions, seed=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"kassign simulate: {exc}", file=sys.stderr)
        return 2
    result = simulate(scenario, config)
    if args.events:
        result.write_events(args.events)
    if args.json:
        print(json.dumps({"settled": result.settled, "end_s": result.end_s, "protocol": result.protocol.name.lower(),
                          "phases": result.summary()}, indent=2))
    else:
        print(f"{scenario.name}: {args.members} members, {args.partitions} partitions, {config.assignor} "
              f"({result.protocol.name.lower()}) on {config.broker}; settled={result.settled} after {result.end_s:.3f} s")
        _table(result.metrics, sys.stdout)
    return 0
