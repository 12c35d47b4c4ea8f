"""kassign telemetry RECORDING...: Java's coordinator rebalance metrics of recorded members, as JSON.

A recording is a timeline file (JSON lines, .gz read transparently), a directory of members'
telemetry files (rotated ones included), or a recorded run directory (events.jsonl.gz), as
kassign simulate --replay and kassign analyze take them. Prints {member: {metric: value}}; a member
on the consumer group protocol (its subscribed event says protocol "consumer") also gets the
heartbeat metrics and failed-rebalance-rate-per-hour.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence

from kassign.cli_errors import handles_errors
from kassign.cli_options import ArgumentParser, bounded_int, finite_float
from kassign.telemetry.coordinator_metrics import PROTOCOLS, metrics_from_events
from kassign.telemetry.stats import MetricConfig
from kassign.timeline.events import MAX_EVENT_TIME, merge_events, read_events, timeline_files

__all__ = ["main"]

#: Longest sample window accepted (a day).
MAX_WINDOW_MS = 86_400_000


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="kassign telemetry",
        description=__doc__.split("\n", 1)[0].split(": ", 1)[1],
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument(
        "recordings", nargs="+", metavar="RECORDING", help="timeline files (.jsonl, .jsonl.gz) or directories of them"
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="eager",
        help="rules when a recording does not say (its subscribed event does): eager or "
        "cooperative (classic group protocol), consumer (KIP-848)",
    )
    parser.add_argument(
        "--now",
        type=finite_float("the time", -MAX_EVENT_TIME, MAX_EVENT_TIME),
        default=None,
        help="unix time to measure at (default: the last event)",
    )
    parser.add_argument(
        "--window-ms",
        type=bounded_int("the window", 1, MAX_WINDOW_MS),
        default=30_000,
        help="Java's metrics.sample.window.ms (default 30000)",
    )
    return parser


@handles_errors("telemetry")
def main(argv: Sequence[str] | None = None) -> int:
    """Print {member: {metric: value}} for the recordings given; returns the exit code."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    files = [f for path in args.recordings for f in timeline_files(path)]
    events = merge_events(*(read_events(path) for path in files))
    result = metrics_from_events(
        events, now=args.now, protocol=args.protocol, config=MetricConfig(time_window_ms=args.window_ms)
    )
    # JSON has no NaN: an empty sampled window is null.
    clean = {m: {k: (None if math.isnan(v) else v) for k, v in values.items()} for m, values in result.items()}
    print(json.dumps(clean, indent=2))
    return 0
