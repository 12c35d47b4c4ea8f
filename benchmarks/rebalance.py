"""Eager vs cooperative rebalancing of aiokafka consumers on the same scale-out.

Both runs use kassign's ``CooperativeConsumer`` on a fresh topic and group: *eager* with
``StickyAssignor`` (everything revoked on every rebalance), *cooperative* with
``CooperativeStickyAssignor`` (KIP-429). A producer writes at a steady rate; N members start and
settle, then M more join. From each run's timeline (the group driver's member callbacks) it prints

* partition-seconds without an owner between the first revocation and the settle (``unowned_ps``),
* records processed per second from the scale-out until the settle (``rebalance_rps``),

and the cooperative/eager ratios. Run it alone on the broker (it is the only group there)::

    flock /tmp/kassign-broker.lock python benchmarks/rebalance.py --partitions 12 --before 3 --after 6

The broker is ``integration.broker.open_broker``'s: ``KAFKA_BOOTSTRAP_SERVERS``, else a Kafka
container, else the embedded Tansu broker (where every join is held for half the session timeout,
so absolute numbers compare behaviours, not brokers).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from integration.broker import open_broker  # noqa: E402
from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.timeline_checks import assert_exclusive, processed_offsets  # noqa: E402
from integration.topics import create_topic  # noqa: E402
from kassign.events import Event  # noqa: E402
from kassign.metrics import NOISE_EVENTS, phase_metrics  # noqa: E402

log = logging.getLogger("benchmarks.rebalance")

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
MODES = {
    "eager": "kassign.adapters.aiokafka:StickyAssignor",
    "cooperative": "kassign.adapters.aiokafka:CooperativeStickyAssignor",
}


@dataclass(frozen=True)
class RunResult:
    """One scale-out, measured from its timeline."""

    mode: str
    unowned_ps: float
    window_s: float
    settle_s: float
    rebalance_rps: float
    steady_rps: float
    moved: int
    kept: int
    rounds: int


def _records_between(events: list[Event], start: float, end: float, topic: str) -> int:
    inside = [e for e in events if e.ev == "processed" and start < e.t <= end]
    return sum(sum(counter.values()) for counter in processed_offsets(inside, topic).values())


def run_scale_out(bootstrap: str, mode: str, *, partitions: int, before: int, after: int, rate: float,
                  timing: GroupTiming, steady_s: float = 3.0) -> RunResult:
    """Run one scale-out ``before -> after`` members in ``mode`` and measure it."""
    strategy = MODES[mode]
    topic = create_topic(bootstrap, f"bench-{mode}-{uuid.uuid4().hex[:8]}", partitions)
    group_id = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
    with GroupDriver(bootstrap, group_id, topic, timing=timing) as group:
        producer = group.start_producer(rate=rate)
        group.start_members(before, "aiokafka", strategy, consumer_factory=CONSUMER)
        group.wait_settled(90)
        time.sleep(steady_s)
        scale_out = time.time()
        group.start_members(after - before, "aiokafka", strategy, consumer_factory=CONSUMER)
        group.wait_settled(120)
        time.sleep(steady_s)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    metrics = phase_metrics(events, scale_out)
    first = min(e.t for e in events if e.t >= scale_out and e.ev not in NOISE_EVENTS)
    settle = first + metrics.settle_s
    window = max(settle - scale_out, 1e-3)
    steady = _records_between(events, scale_out - steady_s, scale_out, topic) / steady_s
    return RunResult(mode, metrics.unowned_ps, metrics.window_s, metrics.settle_s,
                     _records_between(events, scale_out, settle, topic) / window, steady,
                     metrics.moved, metrics.kept, metrics.rounds)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else ("1.000" if a == b else "inf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--before", type=int, default=3, help="members before the scale-out")
    ap.add_argument("--after", type=int, default=6, help="members after the scale-out")
    ap.add_argument("--rate", type=float, default=600.0, help="records produced per second")
    ap.add_argument("--session-ms", type=int, default=1500)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    if not 0 < args.before < args.after:
        ap.error(f"need 0 < --before < --after, got {args.before} and {args.after}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Fine progress ticks: records/s during a rebalance of a few seconds needs sub-second resolution.
    timing = GroupTiming(session_ms=args.session_ms, heartbeat_ms=args.heartbeat_ms, progress_ms=200)

    with open_broker() as broker:
        print(f"broker: {broker.describe()}")
        results = {mode: run_scale_out(broker.bootstrap, mode, partitions=args.partitions, before=args.before,
                                       after=args.after, rate=args.rate, timing=timing)
                   for mode in MODES}

    print(f"scale-out {args.before} -> {args.after} members, {args.partitions} partitions, {args.rate:.0f} records/s")
    print(f"{'mode':<12} {'unowned_ps':>10} {'window_s':>9} {'settle_s':>9} {'rebalance_rps':>14} "
          f"{'steady_rps':>11} {'moved':>6} {'kept':>5} {'rounds':>7}")
    for r in results.values():
        print(f"{r.mode:<12} {r.unowned_ps:>10.2f} {r.window_s:>9.2f} {r.settle_s:>9.2f} {r.rebalance_rps:>14.1f} "
              f"{r.steady_rps:>11.1f} {r.moved:>6} {r.kept:>5} {r.rounds:>7}")
    eager, coop = results["eager"], results["cooperative"]
    print(f"cooperative/eager: unowned partition-seconds {_ratio(coop.unowned_ps, eager.unowned_ps)}, "
          f"records/s during the rebalance {_ratio(coop.rebalance_rps, eager.rebalance_rps)}")
    if args.json:
        args.json.write_text(json.dumps({m: vars(r) for m, r in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
