"""Commits that meet a rebalance, and long processing, on the consumer group protocol (KIP-848, issue
#27), against Apache Kafka's group coordinator.

* The broker moves a member to a new epoch when the group's target changes, even when the member
  keeps every partition; Kafka 4.0-4.2 answer a commit the member sends before its heartbeat has
  brought the new epoch STALE_MEMBER_EPOCH (Java's commitSync: CommitFailedException), Kafka 4.3+
  take it (KIP-1251). Made deterministic here by holding back the heartbeat answer that carries the
  new epoch: the commit waits for it and completes under the new epoch
  (``KASSIGN_KAFKA_VERSION=4.0.2`` shows the refusal and the completion).
* A member whose processing outlasts max_poll_interval_ms (the poll timer) leaves once, says so
  once naming the setting, loses its partitions (no commit), its late commit names the cause, and
  it joins again once on its next getmany().

    KASSIGN_BROKER=kafka python -m pytest tests/integration/test_commits_during_rebalance_kip848.py
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost, wait_consumers_settled, wait_until  # noqa: E402
from integration.group_config import set_consumer_group_timing  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.protocol.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from kassign.protocol.offset_commit import OffsetCommitRequest  # noqa: E402
from tests.integration.test_commits_during_rebalance import (  # noqa: E402
    assert_left_once,
    commit_after_processing,
    produce,
)

pytestmark = [pytest.mark.realkafka, pytest.mark.consumer_protocol, pytest.mark.timeout(240)]

PARTITIONS = 4


class Polled:
    """A consumer-protocol member polling in the background (pause() stops it: processing)."""

    def __init__(self, bootstrap: str, group_id: str, topic: str, **config: Any) -> None:
        self.listener = ListenerCallsWithLost()
        self.consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            max_poll_records=5,
            max_partition_fetch_bytes=2048,
            **config,
        )
        self.consumer.subscribe([topic], listener=self.listener)
        self.task: asyncio.Task | None = None
        self.poll_errors: list[Exception] = []

    async def start(self) -> None:
        await self.consumer.start()
        self.resume()

    def resume(self) -> None:
        self.task = asyncio.ensure_future(self._poll())

    async def pause(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None

    async def _poll(self) -> None:
        while True:
            try:
                await self.consumer.getmany(timeout_ms=100)
            except Exception as exc:  # recorded; the loop goes on as an application's would
                self.poll_errors.append(exc)
            await asyncio.sleep(0.05)

    def positions(self) -> dict[TP, int]:
        assignment = self.consumer._subscription.subscription.assignment
        return {tp: o.offset for tp, o in assignment.all_consumed_offsets().items() if o.offset > 0}

    async def stop(self) -> None:
        await self.pause()
        await self.consumer.stop()


class NewEpochHeldBack:
    """Wraps a member's coordinator connection: once armed, the first heartbeat answer carrying a newer
    epoch than the member has waits until :meth:`release`; every OffsetCommit answer's error codes
    are recorded with the epoch it was sent with."""

    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator
        self.armed = False
        self.held = asyncio.Event()  # an answer with a new epoch is being held back
        self._release = asyncio.Event()
        self.commits: list[tuple[int, list[int]]] = []  # (epoch sent, error codes)
        self._send = coordinator._send_req
        coordinator._send_req = self._send_req

    def release(self) -> None:
        self._release.set()

    async def _send_req(self, request: Any) -> Any:
        message = getattr(request, "message", None)
        response = await self._send(request)
        if (
            isinstance(message, ConsumerGroupHeartbeatRequest)
            and self.armed
            and not self._release.is_set()
            and response.error_code == 0
            and response.member_epoch > self.coordinator.member.member_epoch > 0
        ):
            self.held.set()
            await self._release.wait()
        if isinstance(message, OffsetCommitRequest):
            self.commits.append(
                (message.generation_id_or_member_epoch, [p.error_code for t in response.topics for p in t.partitions])
            )
        return response


async def _commit_with_a_stale_epoch(bootstrap: str, group_id: str, topic: str, other_topic: str):
    await produce(bootstrap, topic, 200, PARTITIONS)
    a = Polled(bootstrap, group_id, topic)
    b = Polled(bootstrap, group_id, other_topic)
    partitions = {TP(topic, p) for p in range(PARTITIONS)}
    await a.start()
    try:
        await wait_until(lambda: a.consumer.assignment() == partitions, 60, "A owns every partition")
        await wait_until(lambda: set(a.positions()) == partitions, 30, "A reads every partition", every=0.005)
        wire = NewEpochHeldBack(a.consumer._coordinator)
        epoch_before = a.consumer._coordinator.member.member_epoch
        wire.armed = True
        # B joins on another topic: the group's epoch moves; A's target is unchanged, so the broker
        # moves A to the new epoch at its next heartbeat -- whose answer A does not see yet.
        await b.start()
        await wait_until(lambda: wire.held.is_set(), 30, "the broker moving A to a new epoch")
        await a.pause()
        consumed = {
            tp: o.offset for tp, o in a.consumer._subscription.subscription.assignment.all_consumed_offsets().items()
        }
        asyncio.get_running_loop().call_later(1.0, wire.release)
        began = time.monotonic()
        try:
            await a.consumer.commit()
            outcome: Any = "ok"
        except Errors.KafkaError as exc:
            outcome = exc
        took = time.monotonic() - began
        a.resume()
        committed = {tp: await a.consumer.committed(tp) for tp in sorted(partitions)}
        epoch_after = a.consumer._coordinator.member.member_epoch
        return epoch_before, epoch_after, wire.commits, outcome, consumed, committed, took
    finally:
        await asyncio.gather(a.stop(), b.stop(), return_exceptions=True)


@pytest.mark.asyncio
async def test_a_commit_sent_with_the_epoch_before_completes_under_the_new_one(
    bootstrap_servers, group_id, topic_factory
):
    topic, other = topic_factory(PARTITIONS), topic_factory(1)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)
    before, after, commits, outcome, consumed, committed, took = await _commit_with_a_stale_epoch(
        bootstrap_servers, group_id, topic, other
    )
    print(f"\nconsumer protocol: epoch {before} -> {after}; commits (epoch, errors) {commits}; took {took:.2f} s")
    assert outcome == "ok", f"the commit of partitions A kept failed: {outcome!r}"
    assert after > before
    assert commits[0][0] == before, commits
    if set(commits[0][1]) == {0}:
        # Kafka 4.3+ (KIP-1251, assignment epochs): an epoch at least each partition's assignment epoch is taken.
        assert len(commits) == 1, commits
    else:
        # Kafka 4.0-4.2 refuse the epoch before (STALE_MEMBER_EPOCH); the commit went again under the new one.
        assert set(commits[0][1]) == {113} and len(commits) == 2, commits
        assert commits[1][0] > before and set(commits[1][1]) == {0}, commits
    assert committed == consumed, (committed, consumed)


async def _long_processing(bootstrap: str, group_id: str, topic: str):
    await produce(bootstrap, topic, 200, PARTITIONS)
    slow = Polled(bootstrap, group_id, topic, max_poll_interval_ms=4000)
    keeper = Polled(bootstrap, group_id, topic)
    partitions = {TP(topic, p) for p in range(PARTITIONS)}
    joins: list[float] = []
    await asyncio.gather(slow.start(), keeper.start())
    try:
        before, _ = await wait_consumers_settled([slow.consumer, keeper.consumer], partitions, 60)
        wire = slow.consumer._coordinator._send_req

        async def counting(request: Any) -> Any:  # every join (epoch 0) the slow member sends from now on
            message = getattr(request, "message", None)
            if isinstance(message, ConsumerGroupHeartbeatRequest) and message.member_epoch == 0:
                joins.append(time.monotonic())
            return await wire(request)

        slow.consumer._coordinator._send_req = counting
        began, outcome, keeper_had_all = await commit_after_processing(slow, keeper, partitions)
        resumed = time.monotonic()
        slow.resume()
        await wait_consumers_settled([slow.consumer, keeper.consumer], partitions, 60)
        await asyncio.sleep(5.0)  # polling normally: no more joins
        calls = list(slow.listener.calls)
        return before, outcome, keeper_had_all, calls, [t - began for t in joins], resumed - began
    finally:
        await asyncio.gather(slow.stop(), keeper.stop(), return_exceptions=True)


@pytest.mark.asyncio
async def test_long_processing_leaves_once_loses_its_partitions_and_joins_again_once(
    bootstrap_servers, group_id, topic_factory, caplog
):
    topic = topic_factory(PARTITIONS)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)
    with caplog.at_level("INFO"):
        before, outcome, keeper_had_all, calls, joins, resumed = await _long_processing(
            bootstrap_servers, group_id, topic
        )
    print(
        f"\nconsumer protocol: the slow member resumed after {resumed:.1f} s, joined at "
        f"{[round(t, 2) for t in joins]} s"
    )
    assert_left_once(caplog.records, outcome, keeper_had_all, calls, before)
    # It joined again on its next getmany() (not before), once.
    assert len(joins) == 1 and joins[0] >= resumed, joins
