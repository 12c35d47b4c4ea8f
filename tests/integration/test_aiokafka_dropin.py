"""kassign's drop-in assignors in plain AIOKafkaConsumers on a live broker: several consumers of one
process using the same assignor class keep their own state (aiokafka #1175/#1176), and kassign's
sticky agrees with Java's StickyAssignor in one group."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiokafka")

from aiokafka import AIOKafkaConsumer  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import wait_consumers_settled  # noqa: E402
from integration.driver import GroupDriver  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.adapters.aiokafka import CooperativeStickyAssignor, StickyAssignor  # noqa: E402

pytestmark = pytest.mark.timeout(180)


async def _consumer(bootstrap, group_id, topic, strategy):
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        partition_assignment_strategy=strategy,
        session_timeout_ms=1500,
        heartbeat_interval_ms=250,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    return consumer


async def _keep_polling(consumers, stop):
    # aiokafka rejoins only while its consumer is being polled
    while not stop.is_set():
        await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))


@pytest.mark.asyncio
@pytest.mark.parametrize("strategy", [(StickyAssignor,), (StickyAssignor(),)], ids=["class", "shared-instance"])
async def test_consumers_in_one_process_keep_their_own_sticky_state(
    bootstrap_servers, group_id, topic_factory, strategy
):
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}

    async def scenario():
        stop = asyncio.Event()
        first = [await _consumer(bootstrap_servers, group_id, topic, strategy) for _ in range(2)]
        poller = asyncio.create_task(_keep_polling(first, stop))
        try:
            before = await wait_consumers_settled(first, partitions)
            third = await _consumer(bootstrap_servers, group_id, topic, strategy)
            stop.set()
            await poller
            stop.clear()
            poller = asyncio.create_task(_keep_polling([*first, third], stop))
            after = await wait_consumers_settled([*first, third], partitions)
            stop.set()
            await poller
            await third.stop()
            return before, after
        finally:
            stop.set()
            for c in first:
                await c.stop()

    before, after = await scenario()
    # With shared state both consumers would claim the same previous assignment and the sticky
    # leader could not keep them; with their own, each keeps 2 of its 3 partitions.
    assert sorted(map(len, after)) == [2, 2, 2]
    assert after[0] <= before[0] and after[1] <= before[1], (before, after)


@pytest.mark.asyncio
async def test_cooperative_sticky_drop_in_runs_eager_in_a_plain_consumer(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(4)
    partitions = {TP(topic, p) for p in range(4)}

    async def scenario():
        stop = asyncio.Event()
        consumers = [
            await _consumer(bootstrap_servers, group_id, topic, (CooperativeStickyAssignor,)) for _ in range(2)
        ]
        poller = asyncio.create_task(_keep_polling(consumers, stop))
        try:
            return await wait_consumers_settled(consumers, partitions)
        finally:
            stop.set()
            await poller
            for c in consumers:
                await c.stop()

    assert sorted(map(len, await scenario())) == [2, 2]


@pytest.mark.java
def test_sticky_agrees_with_java_sticky(bootstrap_servers, group_id, topic_factory):
    """Plain aiokafka members with kassign's StickyAssignor and Java StickyAssignor members in one
    eager group: whoever leads, previous assignments are kept."""
    topic = topic_factory(12)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", "kassign.adapters.aiokafka:StickyAssignor")
        group.wait_settled(40)
        group.start_member("java", "sticky")
        group.start_member("aiokafka", "kassign.adapters.aiokafka:StickyAssignor")
        before = group.wait_settled(90)
        group.start_member("java", "sticky")
        after = group.wait_settled(60)
        producer.stop()
        events = group.wait_all_processed(producer, 30)
    assert_exclusive(events)
    assert sorted(map(len, after.values())) == [3, 3, 3, 3]
    for member, parts in before.items():
        assert len(set(parts) & set(after[member])) == 3, f"{member} lost stickiness: {before} -> {after}"
