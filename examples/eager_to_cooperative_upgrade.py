"""Upgrade a running group from eager to cooperative rebalancing in two rolling bounces, without
stopping consumption (KIP-429's upgrade path, as for Java consumers).

1. The group runs plain aiokafka (eager, ``range``).
2. First bounce: every member restarts with ``(CooperativeStickyAssignor, RangeAssignor)``. While
   old members remain, ``range`` is the only protocol everyone supports, so the broker keeps
   choosing it; once all have bounced, the members' votes pick ``cooperative-sticky``, but the
   rebalance protocol stays EAGER because every member still lists an eager-only assignor.
3. Second bounce: every member restarts with ``(CooperativeStickyAssignor,)`` alone; from then on
   rebalances are cooperative.

Choosing among several protocols by the members' votes is Apache Kafka's group coordinator's job,
so run this against Kafka (e.g. the repository's docker-compose, or ``KAFKA_BOOTSTRAP_SERVERS``).
The example's scaffolding (a steady producer, members that can be restarted, waiting until the
group has settled) is the demo's :class:`kassign.demo.group.DemoGroup`.

    python examples/eager_to_cooperative_upgrade.py --bootstrap localhost:9092 --seconds 120

It prints one JSON line: per stage, the members' rebalance protocol and the settled assignment.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from _support import common_parser, run_example
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor, RangeAssignor
from kassign.demo.group import DemoGroup, GroupTiming, KeyedStream, create_topic

log = logging.getLogger("upgrade")


def eager_consumer(**config):
    """Stage 1: plain aiokafka with its range assignor (eager). Named explicitly: aiokafka 0.14's default
    is round-robin, which the bounced members (cooperative-sticky, range) would share no protocol with."""
    return AIOKafkaConsumer(partition_assignment_strategy=(RangePartitionAssignor,), **config)


def bridge_consumer(**config):
    """Stage 2 (first bounce): cooperative-sticky preferred, range still listed, so still EAGER."""
    return CooperativeConsumer(partition_assignment_strategy=(CooperativeStickyAssignor, RangeAssignor), **config)


def cooperative_consumer(**config):
    """Stage 3 (second bounce): cooperative-sticky alone: COOPERATIVE."""
    return CooperativeConsumer(partition_assignment_strategy=(CooperativeStickyAssignor,), **config)


def snapshot(group: DemoGroup) -> dict:
    """Each live member's rebalance protocol and partitions."""
    out = {}
    for name in group.live_members():
        member = group.members[name]
        protocol = getattr(member.consumer, "rebalance_protocol", None)
        out[name] = {
            "protocol": protocol.name if protocol is not None else "EAGER (plain aiokafka)",
            "partitions": sorted(tp.partition for tp in member.owned),
        }
    return out


async def main_async(args) -> dict:
    suffix = uuid.uuid4().hex[:8]
    topic, group_id = f"kassign-example-upgrade-{suffix}", f"kassign-example-upgrade-{suffix}"
    await create_topic(args.bootstrap, topic, args.partitions)
    timing = GroupTiming(session_ms=args.session_ms, heartbeat_ms=args.heartbeat_ms)
    group = DemoGroup(
        args.bootstrap, group_id, topic, args.partitions, eager_consumer, protocol_name="upgrade", timing=timing
    )
    stream = KeyedStream(args.bootstrap, topic, group.ledger, rate=100).start()
    names = [f"m{i}" for i in range(1, args.members + 1)]
    deadline = time.monotonic() + args.seconds
    stages = {}

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"--seconds {args.seconds} ran out before the upgrade finished")
        return left

    try:
        for name in names:
            group.start_member(name)
        await group.wait_settled(remaining())
        stages["eager"] = snapshot(group)
        for stage, factory in (("first bounce", bridge_consumer), ("second bounce", cooperative_consumer)):
            group.consumer_factory = factory  # members started from now on are the new version
            for name in names:  # rolling: one member at a time, waiting for the group to settle
                await group.stop_members([name])
                group.start_member(name)
                await group.wait_settled(remaining())
            stages[stage] = snapshot(group)
            log.info("%s done: %s", stage, stages[stage])
        await stream.stop()
        lost = await group.wait_drained(min(remaining(), 20.0))
    finally:
        await stream.stop()
        await group.close()
    return {
        "topic": topic,
        "group": group_id,
        "stages": stages,
        "records": {"produced": group.ledger.produced_count, "lost": lost},
    }


def main(argv: list[str] | None = None) -> int:
    ap = common_parser("eager -> cooperative in two rolling bounces (needs Apache Kafka)", seconds=120.0)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    return run_example(ap, argv, main_async)


if __name__ == "__main__":
    sys.exit(main())
