"""Ride through a rolling restart with delayed reassignment (Kafka Connect's KIP-415 idea for
consumer groups): when a member leaves, its partitions are held back for a while instead of being
handed to the others, and a member that comes back under the same ``worker_id`` takes them back
at once. In a rolling deploy, partitions then move only once (back to where they were) instead of
twice, and the other members are never interrupted.

Each member gets its own :class:`kassign.assignors.DelayedCooperativeStickyAssignor` with
a stable ``worker_id`` (here the member's name; in production the pod name or host:port). All
members of the group must use it: it has its own protocol name.

The example's scaffolding (producer, restartable members, settle detection) is the demo's
:class:`kassign.demo.group.DemoGroup`.

    python examples/delayed_rolling_restart.py --bootstrap localhost:9092 --seconds 60

It prints one JSON line: each bounce's partitions that changed owner (besides the restarted
member giving its own up and taking them back) and the record counts.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid

from _support import common_parser, run_example
from kassign.adapters.aiokafka import CooperativeConsumer
from kassign.assignors import DelayedCooperativeStickyAssignor
from kassign.demo.group import DemoGroup, GroupTiming, KeyedStream, create_topic

log = logging.getLogger("delayed-restart")


def delayed_consumer_factory(delay_ms: int):
    """Consumers whose assignor holds a departed member's partitions back for ``delay_ms``."""

    def make(**config):
        assignor = DelayedCooperativeStickyAssignor(
            scheduled_rebalance_max_delay_ms=delay_ms, worker_id=config["client_id"]
        )
        return CooperativeConsumer(partition_assignment_strategy=(assignor,), **config)

    return make


def owners(group: DemoGroup) -> dict[int, str]:
    return {tp.partition: name for name in group.live_members() for tp in group.members[name].owned}


async def main_async(args) -> dict:
    suffix = uuid.uuid4().hex[:8]
    topic, group_id = f"kassign-example-delayed-{suffix}", f"kassign-example-delayed-{suffix}"
    await create_topic(args.bootstrap, topic, args.partitions)
    timing = GroupTiming(session_ms=args.session_ms, heartbeat_ms=args.heartbeat_ms)
    group = DemoGroup(
        args.bootstrap,
        group_id,
        topic,
        args.partitions,
        delayed_consumer_factory(args.delay_ms),
        protocol_name="delayed-cooperative-sticky",
        timing=timing,
    )
    stream = KeyedStream(args.bootstrap, topic, group.ledger, rate=100).start()
    names = [f"m{i}" for i in range(1, args.members + 1)]
    deadline = time.monotonic() + args.seconds
    bounces = []

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"--seconds {args.seconds} ran out before the rolling restart finished")
        return left

    try:
        for name in names:
            group.start_member(name)
        await group.wait_settled(remaining())
        for name in names:
            before = owners(group)
            await group.stop_members([name])
            group.start_member(name)  # a quick restart: same name, so same worker_id
            await group.wait_settled(remaining())
            after = owners(group)
            others_moved = sorted(p for p, m in after.items() if before.get(p) != m and name not in (m, before.get(p)))
            bounces.append({"restarted": name, "before": before, "after": after, "others_moved": others_moved})
            log.info("restarted %s: partitions moved between other members: %s", name, others_moved)
        await stream.stop()
        lost = await group.wait_drained(min(remaining(), 20.0))
    finally:
        await stream.stop()
        await group.close()
    return {
        "topic": topic,
        "group": group_id,
        "bounces": bounces,
        "records": {"produced": group.ledger.produced_count, "lost": lost, "duplicates": group.ledger.duplicates()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = common_parser("a rolling restart with delayed reassignment (KIP-415 style)", seconds=60.0)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--delay-ms", type=int, default=10_000, help="how long a departed member's partitions wait")
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    return run_example(ap, argv, main_async)


if __name__ == "__main__":
    sys.exit(main())
