"""Commits that meet a rebalance on the classic protocol, against a broker (issues #27 and #28).

The windows made deterministic: member A heartbeats fast, member D slowly (3 s), so when B joins,
A's JoinGroup waits at the join barrier for D.

* A commit A issues while its JoinGroup waits goes on a connection of its own and is answered at
  once: the group is preparing its rebalance and accepts the generation A is leaving, for every
  partition A consumed (A still owns them all). On the coordinator connection it would be read only
  after the join phase, and refused.
* A commit A issues while its SyncGroup waits for the leader D (its assignment held up) is read after
  that SyncGroup, once the group is stable again, and accepted for every partition too.
* A commit that reaches the broker after the join phase all the same (here: held back in the test
  until A's JoinGroup is answered) is refused (ILLEGAL_GENERATION) and goes out again at once under
  the new generation, behind A's SyncGroup: accepted for every partition, none of which A has revoked
  yet.
* A commit that reaches the broker only after the round (held back until A's round completed) is
  refused too, and A has revoked a partition meanwhile. Then ``commit()`` completes for the partitions
  A kept, and the one the round took from A is never committed; ``commit(offsets)`` naming that
  partition commits the kept ones and is refused for it.
* A zombie (its heartbeats stopped past the session timeout) still has its commit refused, and the
  error names the expired session.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka import AIOKafkaProducer  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost, wait_consumers_settled, wait_until  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(240)]

PARTITIONS = 6


class Member:
    """An in-process classic member polling in the background; the test stops its polling to commit
    exactly what it consumed so far."""

    def __init__(
        self, bootstrap: str, group_id: str, topic: str, *, heartbeat_ms: int, session_ms: int, **config: Any
    ) -> None:
        self.listener = ListenerCallsWithLost()
        self.consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=heartbeat_ms,
            session_timeout_ms=session_ms,
            max_poll_records=5,
            max_partition_fetch_bytes=2048,
            **config,
        )
        self.consumer.subscribe([topic], listener=self.listener)
        self.task: asyncio.Task | None = None
        self.poll_errors: list[Exception] = []  # what getmany() raised

    async def start(self) -> None:
        await self.consumer.start()
        self.resume()

    def resume(self) -> None:
        self.task = asyncio.create_task(self._poll())

    async def pause(self) -> dict[TP, int]:
        """Stop polling; the positions consumed so far."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
        assignment = self.consumer._subscription.subscription.assignment
        return {tp: offset.offset for tp, offset in assignment.all_consumed_offsets().items()}

    def positions(self) -> dict[TP, int]:
        """The consumed positions of the partitions this member has read from."""
        assignment = self.consumer._subscription.subscription.assignment
        return {tp: offset.offset for tp, offset in assignment.all_consumed_offsets().items() if offset.offset > 0}

    async def _poll(self) -> None:
        while True:
            try:
                await self.consumer.getmany(timeout_ms=100)
            except Exception as exc:  # recorded for the test to show; the loop goes on as an application's would
                self.poll_errors.append(exc)
            await asyncio.sleep(0.05)  # slow enough that every partition is still being read

    async def stop(self) -> None:
        await self.pause()
        await self.consumer.stop()


async def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS) -> None:
    """``per_partition`` records into each of the topic's first ``partitions`` partitions."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(per_partition):
            await asyncio.gather(*(producer.send(topic, b"%d" % i, partition=p) for p in range(partitions)))
        await producer.flush()
    finally:
        await producer.stop()


async def _committed(consumer: CooperativeConsumer, partitions) -> dict[TP, int | None]:
    return {tp: await consumer.committed(tp) for tp in sorted(partitions)}


async def _commit_mid_round(bootstrap: str, group_id: str, topic: str, *, explicit: bool, when: str):
    """A and D settled (3 partitions each, D the leader); B joins; A commits while its JoinGroup waits
    for D (``when="joining"``); or once it was answered, while its SyncGroup waits for D's assignment,
    held up 2 s (``"syncing"``); or while its JoinGroup waits, the commit held back until A's JoinGroup
    is answered, D's assignment held up (``"join-ended"``), or until A's round completed
    (``"round-ended"``). Returns (A's partitions before, A's partitions after, what A
    consumed, the commit's outcome, the committed offsets of A's former partitions, the commit's
    duration, whether A's JoinGroup was still out when the commit returned)."""
    await produce(bootstrap, topic, 2000)
    a = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=10000)
    d = Member(bootstrap, group_id, topic, heartbeat_ms=3000, session_ms=10000)
    b = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=10000)
    partitions = {TP(topic, p) for p in range(PARTITIONS)}
    joining = None
    try:
        # D first: the group's first member leads it for as long as it stays.
        await d.start()
        await wait_consumers_settled([d.consumer], partitions, 60)
        await a.start()
        before_a, _ = await wait_consumers_settled([a.consumer, d.consumer], partitions, 60)
        await wait_until(lambda: set(a.positions()) == before_a, 30, "A reads every partition it owns", every=0.005)
        consumed = await a.pause()
        coordinator = a.consumer._coordinator
        generation = coordinator.generation
        assigned_by_d = []
        leader = d.consumer._coordinator
        # Until A's commit is out, D's JoinGroup waits: A's is the one held at the join barrier (D's slow
        # heartbeat alone leaves a chance that D rejoins first and A's JoinGroup is answered at once).
        d_may_join = asyncio.Event()
        if when == "syncing":
            d_may_join.set()
        send_d = leader._send_req

        async def join_when_let(request: Any) -> Any:
            if type(request).__name__.startswith("JoinGroupRequest"):
                await d_may_join.wait()
            return await send_d(request)

        leader._send_req = join_when_let
        if when in ("syncing", "join-ended"):
            assign = leader._perform_assignment

            async def held_up(response: Any) -> Any:
                assigned_by_d.append(response)
                await asyncio.sleep(2)
                return await assign(response)

            leader._perform_assignment = held_up
        if when in ("join-ended", "round-ended"):
            send_beside = coordinator._send_beside_the_join
            rounds = coordinator._rounds_completed
            if when == "join-ended":
                reached: Any = lambda: coordinator.generation > generation  # noqa: E731
            else:
                reached = lambda: coordinator._rounds_completed > rounds  # noqa: E731

            async def overtaken(request: Any) -> Any:
                coordinator._send_beside_the_join = send_beside  # this commit only
                d_may_join.set()
                await wait_until(reached, 20, f"A's {when}", every=0.005)
                return await send_beside(request)

            coordinator._send_beside_the_join = overtaken
        joining = asyncio.create_task(b.start())
        if when == "syncing":
            await wait_until(
                lambda: (
                    coordinator.generation > generation and coordinator._joining and not coordinator._join_in_flight
                ),
                20,
                "A's JoinGroup answered, its SyncGroup waiting",
                every=0.005,
            )
        else:
            await wait_until(lambda: coordinator._join_in_flight, 20, "A rejoins for B", every=0.005)
        began = time.monotonic()
        try:
            if explicit:
                await a.consumer.commit(dict(consumed))
            else:
                await a.consumer.commit()
            outcome: Any = "ok"
        except Errors.KafkaError as exc:
            outcome = exc
        took = time.monotonic() - began
        # Still out: A's first JoinGroup of the round (a later round's would come with a new generation).
        join_still_out = coordinator._join_in_flight and coordinator.generation == generation
        d_may_join.set()
        a.resume()
        await joining
        after = await wait_consumers_settled([a.consumer, d.consumer, b.consumer], partitions, 60)
        committed = await _committed(a.consumer, before_a)
        if when in ("syncing", "join-ended"):
            assert assigned_by_d, "D did not lead the round"
        return before_a, after[0], consumed, outcome, committed, took, join_still_out
    finally:
        if joining is not None and not joining.done():
            joining.cancel()
        await asyncio.gather(a.stop(), d.stop(), b.stop(), return_exceptions=True)


@pytest.mark.asyncio
async def test_a_commit_issued_while_the_join_waits_is_answered_at_once(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(PARTITIONS)
    before, after, consumed, outcome, committed, took, join_still_out = await _commit_mid_round(
        bootstrap_servers, group_id, topic, explicit=False, when="joining"
    )
    print(f"\nclassic: commit issued while the JoinGroup waits answered in {took:.3f} s")
    assert outcome == "ok", f"the commit failed: {outcome!r}"
    assert join_still_out, f"the commit was answered only after A's JoinGroup ({took:.2f} s)"
    assert before - after, (before, after)
    # Every partition A consumed, the one the round then moved too: A still owned it.
    assert committed == {tp: consumed[tp] for tp in before}, (committed, consumed)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "when",
    [
        "syncing",  # issued while the SyncGroup waits: read after it, once the group is stable
        "join-ended",  # refused at the join phase's end: sent again at once, behind the SyncGroup
    ],
)
async def test_a_commit_that_reaches_the_broker_before_the_member_revokes_is_accepted_whole(
    bootstrap_servers, group_id, topic_factory, when
):
    topic = topic_factory(PARTITIONS)
    before, after, consumed, outcome, committed, took, _ = await _commit_mid_round(
        bootstrap_servers, group_id, topic, explicit=True, when=when
    )
    print(f"\nclassic: commit ({when}) completed in {took:.2f} s")
    assert outcome == "ok", f"the commit failed: {outcome!r}"
    assert before - after, (before, after)
    # Under the new generation, before A revoked anything: the partition the round then moved is
    # committed too (A still owned it).
    assert committed == {tp: consumed[tp] for tp in before}, (committed, consumed)


@pytest.mark.asyncio
async def test_a_commit_issued_mid_round_completes_for_the_kept_partitions(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(PARTITIONS)
    before, after, consumed, outcome, committed, took, _ = await _commit_mid_round(
        bootstrap_servers, group_id, topic, explicit=False, when="round-ended"
    )
    kept, moved = before & after, before - after
    print(f"\nclassic: commit issued mid-round completed in {took:.2f} s; kept {sorted(kept)}, moved {sorted(moved)}")
    assert outcome == "ok", f"the commit of kept partitions failed: {outcome!r}"
    assert kept and moved, (before, after)
    assert {tp: committed[tp] for tp in kept} == {tp: consumed[tp] for tp in kept}
    # The moved partition was never committed by A after the round took it (nobody else commits).
    assert all(committed[tp] is None for tp in moved), committed


@pytest.mark.asyncio
async def test_a_commit_naming_a_partition_lost_mid_round_is_refused_for_it(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(PARTITIONS)
    before, after, consumed, outcome, committed, took, _ = await _commit_mid_round(
        bootstrap_servers, group_id, topic, explicit=True, when="round-ended"
    )
    kept, moved = before & after, before - after
    assert isinstance(outcome, Errors.CommitFailedError), outcome
    assert "revoked" in str(outcome) and all(str(tp) in str(outcome) for tp in moved), str(outcome)
    assert {tp: committed[tp] for tp in kept} == {tp: consumed[tp] for tp in kept}
    assert all(committed[tp] is None for tp in moved), committed


async def _zombie(bootstrap: str, group_id: str, topic: str):
    await produce(bootstrap, topic, 200)
    zombie = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=2000)
    keeper = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=2000)
    partitions = {TP(topic, p) for p in range(PARTITIONS)}
    await asyncio.gather(zombie.start(), keeper.start())
    try:
        before, _ = await wait_consumers_settled([zombie.consumer, keeper.consumer], partitions, 60)
        await asyncio.sleep(0.5)
        consumed = await zombie.pause()
        # Frozen: no heartbeats and no polls, past the session timeout; the keeper takes everything.
        await zombie.consumer._coordinator._stop_heartbeat_task()
        await wait_until(
            lambda: keeper.consumer.assignment() == partitions, 30, "the keeper owns every partition", every=0.005
        )
        try:
            await zombie.consumer.commit()
            outcome: Any = "ok"
        except Errors.KafkaError as exc:
            outcome = exc
        zombie.resume()
        await wait_consumers_settled([zombie.consumer, keeper.consumer], partitions, 60)
        committed = await _committed(keeper.consumer, before)
        return before, consumed, outcome, committed, list(zombie.listener.calls)
    finally:
        await asyncio.gather(zombie.stop(), keeper.stop(), return_exceptions=True)


@pytest.mark.asyncio
async def test_a_zombies_commit_is_still_refused_naming_its_expired_session(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(PARTITIONS)
    before, consumed, outcome, committed, calls = await _zombie(bootstrap_servers, group_id, topic)
    assert isinstance(outcome, Errors.CommitFailedError), outcome
    assert "session expired (session_timeout_ms=2000)" in str(outcome), str(outcome)
    assert all(committed[tp] is None for tp in before), committed  # nothing of the zombie's went in
    assert ("lost", before) in calls, calls


class RoundCounter(ListenerCallsWithLost):
    """Records the listener calls and, through kassign's telemetry hook, every round the member starts."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds: list[float] = []

    def rebalance_started(self, generation: int | None) -> None:
        self.rounds.append(time.monotonic())


async def commit_after_processing(slow, keeper, partitions: set[TP]) -> tuple[float, Any, bool]:
    """``slow`` stops polling to process one batch for 7 s, past max_poll_interval_ms=4000, then
    commits. Returns when the processing began, the commit's outcome ("ok" or the error raised) and
    whether ``keeper`` owned every partition by then. Members of either protocol (Member, Polled)."""
    await slow.pause()
    began = time.monotonic()
    await asyncio.sleep(7.0)
    try:
        await slow.consumer.commit()
        outcome: Any = "ok"
    except Errors.KafkaError as exc:
        outcome = exc
    return began, outcome, keeper.consumer.assignment() == partitions


async def _long_processing(bootstrap: str, group_id: str, topic: str):
    await produce(bootstrap, topic, 200)
    slow = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=6000, max_poll_interval_ms=4000)
    keeper = Member(bootstrap, group_id, topic, heartbeat_ms=200, session_ms=6000)
    slow.listener = RoundCounter()
    slow.consumer.subscribe([topic], listener=slow.listener)
    partitions = {TP(topic, p) for p in range(PARTITIONS)}
    await asyncio.gather(slow.start(), keeper.start())
    try:
        before, _ = await wait_consumers_settled([slow.consumer, keeper.consumer], partitions, 60)
        began, outcome, keeper_had_all = await commit_after_processing(slow, keeper, partitions)
        resumed = time.monotonic()
        slow.resume()
        try:
            await wait_consumers_settled([slow.consumer, keeper.consumer], partitions, 60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the slow member's getmany() raised {slow.poll_errors[:3]!r}") from None
        settled = time.monotonic()
        await asyncio.sleep(5.0)  # polling normally: no more rounds
        rounds = [t - began for t in slow.listener.rounds if t >= began]
        calls = list(slow.listener.calls)  # before stop() revokes
        return before, outcome, keeper_had_all, calls, rounds, resumed - began, settled - began
    finally:
        await asyncio.gather(slow.stop(), keeper.stop(), return_exceptions=True)


def assert_left_once(records, outcome, keeper_had_all: bool, calls, before) -> None:
    """A member whose batch outlasted max_poll_interval_ms=4000 left once: one WARNING naming the
    setting, its partitions taken by the keeper, lost (never revoked), its late commit refused naming
    the cause."""
    warnings = [
        r.getMessage()
        for r in records
        if r.levelname == "WARNING" and r.name.startswith("kassign") and "max_poll_interval_ms" in r.getMessage()
    ]
    assert len(warnings) == 1 and "max_poll_interval_ms=4000" in warnings[0], warnings
    assert keeper_had_all, "the keeper did not take the slow member's partitions"
    assert isinstance(outcome, Errors.CommitFailedError), outcome
    assert "max_poll_interval_ms=4000 exceeded" in str(outcome), outcome
    assert ("lost", before) in calls and not any(kind == "revoked" and parts & before for kind, parts in calls), calls


@pytest.mark.asyncio
async def test_long_processing_leaves_once_loses_its_partitions_and_rejoins_once(
    bootstrap_servers, group_id, topic_factory, caplog
):
    topic = topic_factory(PARTITIONS)
    with caplog.at_level("INFO"):
        before, outcome, keeper_had_all, calls, rounds, resumed, settled = await _long_processing(
            bootstrap_servers, group_id, topic
        )
    print(
        f"\nclassic: the slow member resumed after {resumed:.1f} s, rounds it started after that at "
        f"{[round(t, 2) for t in rounds]} s, settled at {settled:.1f} s"
    )
    assert_left_once(caplog.records, outcome, keeper_had_all, calls, before)
    # It rejoined on its next getmany() (not before), in at most a join and its cooperative follow-up.
    assert rounds and all(t >= resumed for t in rounds) and len(rounds) <= 2, rounds
