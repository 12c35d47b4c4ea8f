"""AIOKafkaConsumer's API on CooperativeConsumer in live cooperative groups: ``seek`` on kept
partitions, pattern subscriptions picking up a new topic, ``subscribe()`` changes at runtime, and
manual commits in the revoke listener -- each on both group protocols (the ``group_protocol``
fixture: classic with kassign's cooperative-sticky, consumer with the broker's assignor) -- and a
member closed during a classic rebalance.

The consumers run in this process, so a test can call their API in the middle of a rebalance and
see every record they process. Their listeners run on one event loop, so the order of the callbacks
is the order of events: :class:`Ownership` replays them and reports any partition assigned to one
member while another still owns it. Each test takes about 10-25 s on the embedded broker.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable

import pytest

pytest.importorskip("aiokafka")

from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener  # noqa: E402
from aiokafka.errors import KafkaError  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import wait_consumers_settled  # noqa: E402
from integration.protocols import consumer_config  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

# Short timeouts keep each rebalance quick (the test broker allows sessions down to 500 ms, and
# consumer-protocol groups down to 1000 ms with heartbeats every 100 ms).
SESSION_MS, HEARTBEAT_MS = 1500, 250

RevokeHook = Callable[[frozenset[TP]], Awaitable[None]]


class Ownership:
    """Who owns each partition, replayed from the members' own callbacks."""

    def __init__(self) -> None:
        self.owner: dict[TP, str] = {}
        self.violations: list[str] = []

    def assigned(self, member: str, partitions: Iterable[TP]) -> None:
        for tp in partitions:
            holder = self.owner.get(tp)
            if holder is not None and holder != member:
                self.violations.append(f"{tp} assigned to {member} while {holder} still owned it")
            self.owner[tp] = member

    def released(self, member: str, partitions: Iterable[TP]) -> None:
        for tp in partitions:
            if self.owner.get(tp) == member:
                del self.owner[tp]


class Recorder(ConsumerRebalanceListener):
    """Records every non-empty callback with its time; ``on_revoke`` runs while the member still owns
    the revoked partitions (as a user's listener would commit or seek there). What a closing member
    gives up is kept apart from the revocations of rebalances."""

    def __init__(self, name: str, ownership: Ownership, on_revoke: RevokeHook | None = None) -> None:
        self.name, self.ownership, self.on_revoke = name, ownership, on_revoke
        self.revoked: list[tuple[float, frozenset[TP]]] = []
        self.assigned: list[tuple[float, frozenset[TP]]] = []
        self.lost: list[frozenset[TP]] = []
        self.closing = False
        self.given_up_on_close: set[TP] = set()

    async def on_partitions_revoked(self, revoked) -> None:
        revoked = frozenset(revoked)
        if not revoked:
            return
        if self.closing:
            self.given_up_on_close |= revoked
            self.ownership.released(self.name, revoked)
            return
        self.revoked.append((time.monotonic(), revoked))
        if self.on_revoke is not None:
            await self.on_revoke(revoked)
        self.ownership.released(self.name, revoked)

    async def on_partitions_assigned(self, assigned) -> None:
        assigned = frozenset(assigned)
        if assigned:
            self.assigned.append((time.monotonic(), assigned))
            self.ownership.assigned(self.name, assigned)

    async def on_partitions_lost(self, lost) -> None:
        self.lost.append(frozenset(lost))
        self.ownership.released(self.name, lost)

    def revoked_since(self, since: float) -> list[frozenset[TP]]:
        return [parts for t, parts in self.revoked if t >= since]


class Member:
    """One in-process CooperativeConsumer that processes records in a background task, on
    ``protocol``; ``config`` (classic only for the timing) overrides the short defaults."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        group_id: str,
        ownership: Ownership,
        *,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        on_revoke: RevokeHook | None = None,
        protocol: str = "classic",
        **config,
    ) -> None:
        self.name = name
        self.listener = Recorder(name, ownership, on_revoke)
        timing = consumer_config(bootstrap, group_id, protocol, session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS)
        self.consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            client_id=name,
            **{"auto_offset_reset": "earliest", **timing, **config},
        )
        self.consumer.subscribe(list(topics), pattern=pattern, listener=self.listener)
        self.records: list[tuple[TP, int]] = []  # in processing order
        self.next_offset: dict[TP, int] = {}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.create_task(self._process())

    async def _process(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=100)
            for tp, records in batch.items():
                for record in records:
                    self.records.append((tp, record.offset))
                    self.next_offset[tp] = record.offset + 1

    def offsets(self, tp: TP, since: int = 0, until: int | None = None) -> list[int]:
        """Offsets of ``tp`` processed in ``records[since:until]``, in order."""
        return [offset for p, offset in self.records[since:until] if p == tp]

    async def stop(self) -> None:
        self.listener.closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.stop()


async def _produce(bootstrap: str, partitions: Iterable[TP], count: int) -> dict[TP, list[int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        pending = {
            tp: [await producer.send(tp.topic, b"v", partition=tp.partition) for _ in range(count)] for tp in partitions
        }
        return {tp: [(await f).offset for f in futures] for tp, futures in pending.items()}
    finally:
        await producer.stop()


async def _settled(members: list[Member], partitions: set[TP], timeout: float = 60.0) -> dict[str, set[TP]]:
    owned = await wait_consumers_settled([m.consumer for m in members], partitions, timeout)
    return {m.name: parts for m, parts in zip(members, owned)}


async def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.1)


async def _all_processed(members: list[Member], sent: dict[TP, list[int]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        seen = defaultdict(set)
        for m in members:
            for tp, offset in m.records:
                seen[tp].add(offset)
        missing = {tp: sorted(set(offs) - seen[tp])[:5] for tp, offs in sent.items() if set(offs) - seen[tp]}
        if not missing:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"records never processed (first few per partition): {missing}")
        await asyncio.sleep(0.1)


def _merge(*sent: dict[TP, list[int]]) -> dict[TP, list[int]]:
    out: dict[TP, list[int]] = defaultdict(list)
    for part in sent:
        for tp, offsets in part.items():
            out[tp] += offsets
    return out


async def _stop_all(members: list[Member]) -> None:
    for m in members:
        await m.stop()


@pytest.mark.asyncio
async def test_seek_on_kept_partitions_during_and_after_a_cooperative_rebalance(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """A seeks one kept partition back from its revoke listener (mid-rebalance), and once settled the
    other one forward: consumption continues from the sought positions, and through the rebalance
    the position of the kept partition nobody sought is untouched."""
    topic = topic_factory(4)
    partitions = {TP(topic, p) for p in range(4)}
    ownership = Ownership()
    sought_back: dict[TP, int] = {}  # partition -> index into A.records at the seek

    async def scenario():
        first = await _produce(bootstrap_servers, partitions, 20)

        async def seek_back(revoked: frozenset[TP]) -> None:
            if sought_back:
                return
            kept = set(a.consumer.assignment()) - revoked
            tp = min(kept)
            a.consumer.seek(tp, 5)
            sought_back[tp] = len(a.records)

        a = Member(
            "A", bootstrap_servers, group_id, ownership, topics=[topic], on_revoke=seek_back, protocol=group_protocol
        )
        b = Member("B", bootstrap_servers, group_id, ownership, topics=[topic], protocol=group_protocol)
        try:
            await a.start()
            await _settled([a], partitions)
            await _all_processed([a], first)
            await b.start()
            owned = await _settled([a, b], partitions)
            (back,) = sought_back
            steady = min(owned["A"] - {back})
            await _wait_for(lambda: 19 in a.offsets(back, sought_back[back]), f"A re-reads {back} up to 19")
            positions = {tp: await a.consumer.position(tp) for tp in owned["A"]}
            # Paused while the new records arrive, so the seek lands inside the log.
            a.consumer.pause(steady)
            second = await _produce(bootstrap_servers, partitions, 10)
            forward_at = len(a.records)
            a.consumer.seek(steady, 25)
            a.consumer.resume(steady)
            await _all_processed([a, b], {tp: offs for tp, offs in second.items() if tp != steady})
            await _all_processed([a], {steady: second[steady][5:]})
            return a, b, owned, back, steady, positions, forward_at
        finally:
            await _stop_all([a, b])

    a, b, owned, back, steady, positions, forward_at = await scenario()
    assert not ownership.violations, ownership.violations
    assert [parts for _, parts in a.listener.revoked[:1]] == [frozenset(owned["B"])], (
        "A's first revocation must be exactly what B ends up with"
    )
    assert positions == {back: 20, steady: 20}, f"kept partitions' positions after the rebalance: {positions}"
    # Sought back to 5 from the revoke listener: 5..19 processed again, in order, then the new records.
    assert a.offsets(back, sought_back[back]) == list(range(5, 30))
    # Never sought during the rebalance: each record once, no restart from a committed offset.
    assert a.offsets(steady, 0, forward_at) == list(range(0, 20))
    assert a.offsets(steady, forward_at) == list(range(25, 30)), "seek forward must skip offsets 20..24"
    # B resumes the moved partitions where A's revocation committed them (auto-commit on).
    for tp in owned["B"]:
        assert b.offsets(tp) == list(range(20, 30)), (tp, b.offsets(tp))


@pytest.mark.asyncio
async def test_pattern_subscription_picks_up_a_new_topic_without_revoking_kept_partitions(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """Both members subscribe by pattern; a matching topic created later is spread over the group and
    no partition of the first topic changes owner."""
    prefix = f"pat-{uuid.uuid4().hex[:8]}-"
    first_topic = topic_factory(4, name=prefix + "a")
    old = {TP(first_topic, p) for p in range(4)}
    ownership = Ownership()

    async def scenario():
        members = [
            Member(
                name,
                bootstrap_servers,
                group_id,
                ownership,
                pattern=f"^{re.escape(prefix)}.*",
                metadata_max_age_ms=1000,
                protocol=group_protocol,
            )
            for name in ("A", "B")
        ]
        try:
            await asyncio.gather(*(m.start() for m in members))
            before = await _settled(members, old)
            sent = await _produce(bootstrap_servers, old, 10)
            await _all_processed(members, sent)
            created = time.monotonic()
            second_topic = await asyncio.to_thread(topic_factory, 2, prefix + "b")
            new = {TP(second_topic, p) for p in range(2)}
            after = await _settled(members, old | new)
            sent = _merge(sent, await _produce(bootstrap_servers, old | new, 10))
            await _all_processed(members, sent)
            return members, before, after, new, created, sent
        finally:
            await _stop_all(members)

    members, before, after, new, created, sent = await scenario()
    assert not ownership.violations, ownership.violations
    for m in members:
        assert before[m.name] <= after[m.name], f"{m.name} lost a partition of the first topic: {before} -> {after}"
        moved = [parts & old for parts in m.listener.revoked_since(created) if parts & old]
        assert not moved, f"{m.name} revoked partitions of the first topic: {moved}"
        assert not m.listener.lost
    assert sorted(len(parts) for parts in after.values()) == [3, 3]
    assert set().union(*after.values()) >= new
    # Kept partitions kept their positions: every record of the first topic processed exactly once.
    for tp in old:
        processed = sorted(o for m in members for p, o in m.records if p == tp)
        assert processed == sorted(sent[tp]), f"{tp}: {processed}"


@pytest.mark.asyncio
async def test_subscribe_change_revokes_only_the_dropped_topics_partitions(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """One member changes its topic list at runtime: it revokes exactly its partitions of the topic it
    dropped, the other member revokes nothing and takes them, and no position moves.

    Topic x has 4 partitions and y 1, so the group of two splits 5 partitions 3/2. The member that
    owns y-0 drops y when it holds 3 (it keeps 2, the other gets 3) and drops x otherwise (it keeps
    y-0, the only partition it can take): either way no further move can improve the balance, so
    cooperative-sticky must move exactly the dropped partitions.
    """
    x, y = topic_factory(4), topic_factory(1)
    partitions = {TP(x, p) for p in range(4)} | {TP(y, 0)}
    ownership = Ownership()

    async def scenario():
        members = [
            Member(name, bootstrap_servers, group_id, ownership, topics=[x, y], protocol=group_protocol)
            for name in ("A", "B")
        ]
        try:
            await asyncio.gather(*(m.start() for m in members))
            before = await _settled(members, partitions)
            sent = await _produce(bootstrap_servers, partitions, 10)
            await _all_processed(members, sent)
            changer = next(m for m in members if TP(y, 0) in before[m.name])
            dropped = y if len(before[changer.name]) == 3 else x
            changed = time.monotonic()
            changer.consumer.subscribe([t for t in (x, y) if t != dropped], listener=changer.listener)
            expected = {m.name: before[m.name] for m in members}
            moving = {tp for tp in before[changer.name] if tp.topic == dropped}
            expected[changer.name] = before[changer.name] - moving
            other = next(m for m in members if m is not changer)
            expected[other.name] = before[other.name] | moving
            after = await _settled(members, partitions)
            sent = _merge(sent, await _produce(bootstrap_servers, partitions, 10))
            await _all_processed(members, sent)
            return members, changer, other, moving, expected, after, changed, sent
        finally:
            await _stop_all(members)

    members, changer, other, moving, expected, after, changed, sent = await scenario()
    assert not ownership.violations, ownership.violations
    assert changer.listener.revoked_since(changed) == [frozenset(moving)]
    assert other.listener.revoked_since(changed) == []
    assert after == expected
    for tp in partitions:
        processed = sorted(o for m in members for p, o in m.records if p == tp)
        assert processed == sorted(sent[tp]), f"{tp} processed {processed}"


@pytest.mark.asyncio
async def test_manual_commits_in_the_revoke_listener_hand_over_exactly(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    """Auto-commit off; the user commits what it processed in ``on_partitions_revoked``. Records flow
    during the scale-out, and every record is processed exactly once: the new owner resumes at the
    offset the old owner committed."""
    topic = topic_factory(4)
    partitions = {TP(topic, p) for p in range(4)}
    ownership = Ownership()
    committed: dict[TP, int] = {}
    commit_errors: list[str] = []

    def committing(member_ref: list[Member]) -> RevokeHook:
        async def commit(revoked: frozenset[TP]) -> None:
            member = member_ref[0]
            offsets = {tp: OffsetAndMetadata(member.next_offset[tp], "") for tp in revoked if tp in member.next_offset}
            try:
                await member.consumer.commit(offsets)
            except KafkaError as exc:
                commit_errors.append(repr(exc))
                return
            committed.update({tp: meta.offset for tp, meta in offsets.items()})

        return commit

    async def scenario():
        ref_a: list[Member] = []
        a = Member(
            "A",
            bootstrap_servers,
            group_id,
            ownership,
            topics=[topic],
            enable_auto_commit=False,
            on_revoke=committing(ref_a),
            protocol=group_protocol,
        )
        ref_a.append(a)
        b = Member(
            "B",
            bootstrap_servers,
            group_id,
            ownership,
            topics=[topic],
            enable_auto_commit=False,
            protocol=group_protocol,
        )
        try:
            await a.start()
            await _settled([a], partitions)
            sent = await _produce(bootstrap_servers, partitions, 20)
            await _all_processed([a], sent)
            producing = asyncio.create_task(_produce(bootstrap_servers, partitions, 20))
            await b.start()
            owned = await _settled([a, b], partitions)
            sent = _merge(sent, await producing)
            sent = _merge(sent, await _produce(bootstrap_servers, partitions, 10))
            await _all_processed([a, b], sent)
            broker_committed = {tp: (await b.consumer.committed(tp)) for tp in owned["B"]}
            return a, b, owned, sent, broker_committed
        finally:
            await _stop_all([a, b])

    a, b, owned, sent, broker_committed = await scenario()
    assert not ownership.violations, ownership.violations
    assert not commit_errors, commit_errors
    assert [parts for _, parts in a.listener.revoked] == [frozenset(owned["B"])]
    assert broker_committed == {tp: committed[tp] for tp in owned["B"]}
    for tp in owned["B"]:
        assert a.offsets(tp) == list(range(committed[tp])), f"A must stop at what it committed on {tp}"
        assert b.offsets(tp) == list(range(committed[tp], len(sent[tp]))), f"B must resume at {committed[tp]} on {tp}"
    for tp in owned["A"]:
        assert a.offsets(tp) == sorted(sent[tp]) and not b.offsets(tp), f"{tp} kept by A, each record once"


@pytest.mark.asyncio
async def test_a_member_closed_during_a_rebalance_leaves_at_once(bootstrap_servers, group_id, topic_factory):
    """As Java's close: a member closed while its JoinGroup waits at the broker's join barrier sends
    LeaveGroup at once instead of finishing the round (aiokafka's way), so the round goes on without
    it and the group settles in that one round, not in a second one that takes back what the closed
    member was handed."""
    topic = topic_factory(12)
    partitions = {TP(topic, p) for p in range(12)}

    async def scenario() -> tuple[int, int]:
        ownership = Ownership()
        # m1 notices rebalances late (long heartbeat), m2 early: m2 waits for m1 at the barrier.
        m1 = Member(
            "m1",
            bootstrap_servers,
            group_id,
            ownership,
            topics=[topic],
            session_timeout_ms=6000,
            heartbeat_interval_ms=1500,
        )
        m2 = Member("m2", bootstrap_servers, group_id, ownership, topics=[topic], heartbeat_interval_ms=100)
        members = [m1, m2]
        for m in members:
            await m.start()
        await _settled(members, partitions)
        c1, c2 = m1.consumer._coordinator, m2.consumer._coordinator
        for attempt in range(4):
            joiner = Member(f"j{attempt}", bootstrap_servers, group_id, ownership, topics=[topic])
            members.append(joiner)
            before = c1.generation
            starting = asyncio.create_task(joiner.start())  # start() may return only once it has joined
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not (
                c2._join_in_flight and not c1._joining and c1.generation == before
            ):
                await asyncio.sleep(0.002)
            hit = c2._join_in_flight and not c1._joining and c1.generation == before
            if hit:
                break
            await starting
            await _settled(members, partitions)  # m1 was first this time; another join, another try
        else:
            raise AssertionError("m2 never waited at the join barrier for m1")
        await m2.stop()
        await starting
        members.remove(m2)
        await _settled(members, partitions)
        after = c1.generation
        await _stop_all(members)
        assert not ownership.violations, ownership.violations
        return before, after

    before, after = await scenario()
    assert after == before + 1, f"the group took {after - before} rounds to settle after the close (one expected)"
