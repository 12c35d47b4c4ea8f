"""Cooperative rebalances that go wrong inside a member: a rebalance listener that raises, and a
commit that fails while partitions are being revoked. The group must still settle and no record may
be lost (a failed commit may cause records to be processed twice, never skipped). Both run on both
group protocols (the ``group_protocol`` fixture: classic with kassign's cooperative-sticky, consumer
with the broker's assignor).

The consumers run in this process so the test can break their listener or their commits.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import wait_consumers_settled  # noqa: E402
from integration.protocols import consumer_config  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402

pytestmark = pytest.mark.timeout(180)

SESSION_MS, HEARTBEAT_MS = 1500, 250


class RaisingListener(ConsumerRebalanceListener):
    def __init__(self):
        self.calls = 0

    def on_partitions_revoked(self, revoked):
        self.calls += 1
        raise RuntimeError("listener bug on revoke")

    def on_partitions_assigned(self, assigned):
        self.calls += 1
        raise RuntimeError("listener bug on assign")


class Member:
    """One in-process consumer that records every (partition, offset) it processes."""

    def __init__(self, bootstrap, group_id, topic, protocol, *, listener=None, commit_failure=None, **config):
        # Cooperative-sticky on the classic protocol (CooperativeConsumer's default), the broker's on consumer.
        timing = consumer_config(bootstrap, group_id, protocol, session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS)
        self.consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest", **timing, **config
        )
        self.consumer.subscribe([topic], listener=listener)
        self.seen: dict[TP, list[int]] = defaultdict(list)
        self.task: asyncio.Task | None = None
        self.commit_failure = commit_failure
        self.listener_errors: list[str] = []

    async def start(self):
        await self.consumer.start()
        if self.commit_failure is not None:
            # From here on every offset commit of this member fails (its first join revoked nothing).
            self.consumer._coordinator._do_commit_offsets = self.commit_failure
        self.task = asyncio.create_task(self._consume())

    async def _consume(self):
        while True:
            try:
                batch = await self.consumer.getmany(timeout_ms=100)
            except RuntimeError as exc:  # a listener's exception, raised from the next poll as in Java
                self.listener_errors.append(str(exc))
                continue
            for tp, records in batch.items():
                self.seen[tp].extend(r.offset for r in records)

    async def stop(self):
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.stop()


async def _produce(bootstrap, topic, partitions, per_partition):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        sent = defaultdict(list)
        for i in range(per_partition):
            for p in range(partitions):
                meta = await producer.send_and_wait(topic, f"{i}".encode(), partition=p)
                sent[TP(topic, p)].append(meta.offset)
        return sent
    finally:
        await producer.stop()


async def _wait_all_seen(members, sent, timeout):
    deadline = time.monotonic() + timeout
    while True:
        seen = defaultdict(set)
        for m in members:
            for tp, offsets in m.seen.items():
                seen[tp].update(offsets)
        missing = {tp: sorted(set(offs) - seen[tp])[:5] for tp, offs in sent.items() if set(offs) - seen[tp]}
        if not missing:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"records never processed (first few per partition): {missing}")
        await asyncio.sleep(0.2)


async def _scale_out_scenario(bootstrap, group_id, topic, n_partitions, first, second, produce_between=30):
    partitions = {TP(topic, p) for p in range(n_partitions)}
    sent = defaultdict(list)
    # Each wave of members starts together and joins in one rebalance. (Tansu quirk: it fails a held
    # follower's SyncGroup when anyone rejoins meanwhile, so overlapping rounds once cycled there.)
    await asyncio.gather(*(member.start() for member in first))
    try:
        await wait_consumers_settled([m.consumer for m in first], partitions, 40)
        for tp, offs in (await _produce(bootstrap, topic, n_partitions, produce_between)).items():
            sent[tp] += offs
        await _wait_all_seen(first, sent, 30)
        await asyncio.gather(*(member.start() for member in second))
        producing = asyncio.create_task(_produce(bootstrap, topic, n_partitions, produce_between))
        owned = await wait_consumers_settled([m.consumer for m in first + second], partitions, 60)
        for tp, offs in (await producing).items():
            sent[tp] += offs
        await _wait_all_seen(first + second, sent, 30)
        return owned
    finally:
        for member in first + second:
            await member.stop()


@pytest.mark.asyncio
async def test_a_raising_listener_does_not_break_the_group(bootstrap_servers, group_id, topic_factory, group_protocol):
    topic = topic_factory(6)
    listeners = [RaisingListener() for _ in range(4)]

    async def scenario():
        members = [Member(bootstrap_servers, group_id, topic, group_protocol, listener=lst) for lst in listeners]
        owned = await _scale_out_scenario(bootstrap_servers, group_id, topic, 6, members[:2], members[2:])
        return owned, members

    owned, members = await scenario()
    assert sorted(len(o) for o in owned) == [1, 1, 2, 2]
    assert all(lst.calls > 0 for lst in listeners)
    # every member's poll raised its listener's exception, and the member went on
    assert all(any("listener bug" in e for e in m.listener_errors) for m in members), [
        m.listener_errors for m in members
    ]


@pytest.mark.asyncio
async def test_a_commit_failing_during_revocation_loses_nothing(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    topic = topic_factory(6)
    failed: list[set] = []

    async def failing_commit(assignment, offsets):
        failed.append(set(offsets))
        raise Errors.CommitFailedError("injected commit failure")  # not retriable: given up at once

    async def scenario():
        # Auto-commit on, so revoked partitions are committed during revocation; every commit of
        # the first two members fails, as if the coordinator had gone away.
        first = [
            Member(
                bootstrap_servers,
                group_id,
                topic,
                group_protocol,
                enable_auto_commit=True,
                auto_commit_interval_ms=60000,
                commit_failure=failing_commit,
            )
            for _ in range(2)
        ]
        second = [Member(bootstrap_servers, group_id, topic, group_protocol, enable_auto_commit=True) for _ in range(2)]
        owned = await _scale_out_scenario(bootstrap_servers, group_id, topic, 6, first, second, produce_between=20)
        return owned, second

    owned, second = await scenario()
    assert sorted(len(o) for o in owned) == [1, 1, 2, 2]
    assert failed, "no revocation commit was attempted"
    # Nothing was committed for the moved partitions, so their new owners start from the beginning
    # and process again what the first owners had processed: duplicates, not gaps.
    assert any(offs and min(offs) == 0 for m in second for offs in m.seen.values())
