"""``kassign telemetry RECORDING...``: Java's coordinator rebalance metrics of recorded members, as JSON."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence

from kassign.events import merge_events, read_events
from kassign.telemetry.coordinator_metrics import PROTOCOLS, metrics_from_events
from kassign.telemetry.stats import MetricConfig


def main(argv: Sequence[str] | None = None) -> int:
    """Print ``{member: {metric: value}}`` for the recordings given; returns the exit code."""
    parser = argparse.ArgumentParser(prog="kassign telemetry", description=__doc__)
    parser.add_argument("recordings", nargs="+", help="JSON-lines timelines (.gz read transparently)")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="eager",
                        help="inference rules when a recording does not say (its subscribed event does)")
    parser.add_argument("--now", type=float, default=None, help="unix time to measure at (default: the last event)")
    parser.add_argument("--window-ms", type=int, default=30_000, help="Java's metrics.sample.window.ms")
    args = parser.parse_args(argv)
    events = merge_events(*(read_events(path) for path in args.recordings))
    result = metrics_from_events(events, now=args.now, protocol=args.protocol,
                                 config=MetricConfig(time_window_ms=args.window_ms))
    # JSON has no NaN: an empty sampled window is null.
    clean = {m: {k: (None if math.isnan(v) else v) for k, v in values.items()} for m, values in result.items()}
    print(json.dumps(clean, indent=2))
    return 0
