"""A live consumer group inside one asyncio loop: a steady keyed producer, aiokafka members that
start and stop on command, and the group's rebalance timeline (:mod:`kassign.timeline.events`).

Every member records its own rebalance callbacks, commits what it processed before giving a
partition up, and reports every record it processed to a shared :class:`RecordLedger`, so the
demo can count records lost (never processed) and processed twice.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from kassign.adapters.aiokafka.commits import SerialCommitter
from kassign.adapters.aiokafka.live_group import consumer_generation, ownership_settled, positions, wait_stable
from kassign.model import TopicPartition
from kassign.timeline.events import Event

log = logging.getLogger(__name__)

__all__ = [
    "GroupTiming",
    "Timeline",
    "RecordLedger",
    "KeyedStream",
    "DemoMember",
    "DemoGroup",
    "MemberFailed",
    "create_topic",
]

#: Builds a consumer from AIOKafkaConsumer's keyword arguments (the class itself, or kassign's).
ConsumerFactory = Callable[..., Any]


@dataclass(frozen=True)
class GroupTiming:
    """Consumer timeouts shared by every member.

    Tansu holds each JoinGroup for half the session timeout, so short timeouts keep the demo's
    rebalances short; Apache Kafka accepts session timeouts below 6 s only when
    ``group.min.session.timeout.ms`` is lowered.
    """

    session_ms: int = 1500
    heartbeat_ms: int = 250
    commit_interval_s: float = 5.0  # Kafka's default auto-commit interval

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_ms < self.session_ms:
            raise ValueError(f"need 0 < heartbeat_ms < session_ms, got {self.heartbeat_ms} and {self.session_ms}")
        if self.commit_interval_s <= 0:
            raise ValueError(f"commit_interval_s must be positive, got {self.commit_interval_s!r}")


class MemberFailed(RuntimeError):
    """Members of a group stopped with an error nobody asked for; ``failures`` maps each one's name to its error."""

    def __init__(self, group_id: str, failures: dict[str, BaseException]) -> None:
        super().__init__(f"group {group_id}: member(s) failed: {failures}")
        self.group_id = group_id
        self.failures = failures


class Timeline:
    """The group's events in the order they happened (one loop appends, so no lock is needed)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, member: str, ev: str, parts: Iterable[AioTopicPartition] | None = None, **extra: Any) -> None:
        """Append one event stamped with the wall clock (the recorded timelines' unit)."""
        tps = None if parts is None else sorted(TopicPartition(tp.topic, tp.partition) for tp in parts)
        self.events.append(Event(member, time.time(), ev, tps, dict(extra)))


class RecordLedger:
    """Which offsets were produced (acknowledged) and how often each was processed."""

    def __init__(self) -> None:
        self.produced: dict[TopicPartition, set[int]] = collections.defaultdict(set)
        self.processed: dict[TopicPartition, collections.Counter[int]] = collections.defaultdict(collections.Counter)

    def record_produced(self, tp: TopicPartition, offset: int) -> None:
        self.produced[tp].add(offset)

    def record_processed(self, tp: TopicPartition, offset: int) -> None:
        self.processed[tp][offset] += 1

    @property
    def produced_count(self) -> int:
        return sum(map(len, self.produced.values()))

    def lost(self) -> int:
        """Acknowledged records no member has processed (yet)."""
        return sum(1 for tp, offsets in self.produced.items() for o in offsets if o not in self.processed[tp])

    def duplicates(self) -> int:
        """Extra processings of records processed more than once (at-least-once redelivery)."""
        return sum(n - 1 for counts in self.processed.values() for n in counts.values() if n > 1)


async def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 20.0) -> None:
    """Create ``topic`` and wait until its metadata shows every partition with a leader."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions!r}")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while True:
            described = await admin.describe_topics([topic])
            parts = described[0].get("partitions", []) if described else []
            if len(parts) == partitions and all(p.get("leader", -1) >= 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} did not show {partitions} led partitions within {timeout:.0f}s")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


class KeyedStream:
    """Produces keyed records (``k0``..``k{key_space-1}``) to one topic at a steady rate."""

    def __init__(self, bootstrap: str, topic: str, ledger: RecordLedger, *, rate: float, key_space: int = 1000) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self.bootstrap, self.topic, self.ledger, self.rate, self.key_space = bootstrap, topic, ledger, rate, key_space
        self.sent = 0
        self.errors = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _acknowledged(self, future: asyncio.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            self.errors += 1
            return
        meta = future.result()
        self.ledger.record_produced(TopicPartition(meta.topic, meta.partition), meta.offset)

    async def _run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        try:
            start = time.monotonic()
            while not self._stop.is_set():
                due = int((time.monotonic() - start) * self.rate)
                while self.sent < due:
                    key = f"k{self.sent % self.key_space}".encode()
                    ack = await producer.send(self.topic, value=str(self.sent).encode(), key=key)
                    ack.add_done_callback(self._acknowledged)
                    self.sent += 1
                await asyncio.sleep(0.02)
            await producer.flush()
        finally:
            await producer.stop()

    def start(self) -> KeyedStream:
        self._task = asyncio.create_task(self._run(), name=f"producer-{self.topic}")
        return self

    async def stop(self) -> None:
        """Stop producing and wait until every record sent is acknowledged (or failed)."""
        self._stop.set()
        if self._task is not None:
            await self._task


class _Listener(ConsumerRebalanceListener):
    """Records each callback; commits what was processed on revoked partitions before giving them up."""

    def __init__(self, member: DemoMember) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: set[AioTopicPartition]) -> None:
        if not revoked:
            return  # aiokafka "revokes" nothing before a member's first join
        m = self.member
        m.timeline.emit(m.name, "cb_revoked", revoked, gen=m.generation())
        m.owned -= set(revoked)
        await m.commit(revoked)
        m.timeline.emit(m.name, "cb_revoked_done")

    async def on_partitions_assigned(self, assigned: set[AioTopicPartition]) -> None:
        m = self.member
        # Assign callbacks follow every completed SyncGroup, so the round is recorded here.
        m.timeline.emit(m.name, "sync", gen=m.generation(), protocol=m.protocol_name)
        m.timeline.emit(m.name, "cb_assigned", assigned, gen=m.generation())
        m.owned |= set(assigned)

    async def on_partitions_lost(self, lost: set[AioTopicPartition]) -> None:
        # Called by kassign's CooperativeConsumer when a generation reset takes partitions away:
        # they may already be someone else's, so nothing is committed.
        m = self.member
        m.timeline.emit(m.name, "cb_lost", lost, gen=m.generation())
        m.owned -= set(lost)
        for tp in lost:
            m.next_offsets.pop(tp, None)


@dataclass
class DemoMember:
    """One consumer running as a task: poll, process (count), commit every ``commit_interval_s``
    (in the background, so a commit queued behind a rebalance never stalls processing)."""

    name: str
    group: DemoGroup
    owned: set[AioTopicPartition] = field(default_factory=set)
    next_offsets: dict[AioTopicPartition, int] = field(default_factory=dict)
    processed_total: int = 0
    consumer: Any = None
    task: asyncio.Task[None] | None = None
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    committer: SerialCommitter = field(init=False)

    def __post_init__(self) -> None:
        self.committer = SerialCommitter(self._send, self.name)

    @property
    def timeline(self) -> Timeline:
        return self.group.timeline

    @property
    def protocol_name(self) -> str:
        return self.group.protocol_name

    def generation(self) -> int:
        return consumer_generation(self.consumer)

    def _take_offsets(self, only: Iterable[AioTopicPartition] | None) -> dict[AioTopicPartition, int]:
        wanted = set(self.next_offsets) if only is None else set(only) & set(self.next_offsets)
        offsets = {tp: self.next_offsets[tp] for tp in wanted}
        for tp in wanted if only is not None else ():
            del self.next_offsets[tp]
        return offsets

    async def commit(self, only: Iterable[AioTopicPartition] | None = None) -> None:
        """Commit the next offsets of processed records (of ``only``, or all owned partitions), after
        the background commit in flight (if any), so an older commit never lands after this one."""
        await self.committer.commit_now(self._take_offsets(only))

    def commit_in_background(self) -> None:
        """Commit everything processed without blocking the poll loop, at most one commit in flight
        (:class:`~kassign.adapters.aiokafka.commits.SerialCommitter`); a commit still in flight at the
        next interval makes that interval's commit wait for the one after."""
        if not self.committer.busy:
            self.committer.commit_in_background(self._take_offsets(None))

    async def _send(self, offsets: dict[AioTopicPartition, int]) -> None:
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            # The partition's next owner resumes from the last committed offset: records are
            # processed twice, never lost.
            self.timeline.emit(self.name, "commit_err", error=type(exc).__name__)

    async def _progress(self) -> None:
        self.timeline.emit(self.name, "progress", pos=await positions(self.consumer, self.owned))

    async def run(self) -> None:
        g = self.group
        self.consumer = g.consumer_factory(
            bootstrap_servers=g.bootstrap,
            group_id=g.group_id,
            client_id=self.name,
            session_timeout_ms=g.timing.session_ms,
            heartbeat_interval_ms=g.timing.heartbeat_ms,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.consumer.subscribe([g.topic], listener=_Listener(self))
        # Which group protocol the member speaks (aiokafka's own consumer knows only the classic one).
        self.timeline.emit(
            self.name,
            "subscribed",
            topics=[g.topic],
            group_protocol=getattr(self.consumer, "group_protocol", "classic"),
        )
        await self.consumer.start()
        next_commit = time.monotonic() + g.timing.commit_interval_s
        try:
            while not self.stop_requested.is_set():
                batch = await self.consumer.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    if tp not in self.owned:
                        continue  # fetched just before a revocation: the partition's new owner processes these
                    key = TopicPartition(tp.topic, tp.partition)
                    for record in records:
                        g.ledger.record_processed(key, record.offset)
                        self.next_offsets[tp] = record.offset + 1
                    self.processed_total += len(records)
                if time.monotonic() >= next_commit:
                    next_commit += g.timing.commit_interval_s
                    self.commit_in_background()
                    await self._progress()
        finally:
            self.timeline.emit(self.name, "closing")
            await self.commit()
            await self.consumer.stop()
            self.owned.clear()
            self.timeline.emit(self.name, "closed")


class DemoGroup:
    """A consumer group of in-process members reading one topic, with a shared timeline and ledger.

    ``consumer_factory`` builds each member's consumer from AIOKafkaConsumer's keyword arguments;
    ``protocol_name`` labels the group's rounds in the timeline.
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topic: str,
        partitions: int,
        consumer_factory: ConsumerFactory,
        *,
        protocol_name: str,
        timing: GroupTiming = GroupTiming(),
        ledger: RecordLedger | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        self.bootstrap, self.group_id, self.topic = bootstrap, group_id, topic
        self.partitions = [AioTopicPartition(topic, p) for p in range(partitions)]
        self.consumer_factory = consumer_factory
        self.protocol_name = protocol_name
        self.timing = timing
        self.ledger = ledger if ledger is not None else RecordLedger()
        self.timeline = timeline if timeline is not None else Timeline()
        self.members: dict[str, DemoMember] = {}

    def live_members(self) -> list[str]:
        """Names of members whose task is running, in start order."""
        return [name for name, m in self.members.items() if m.task is not None and not m.task.done()]

    def start_member(self, name: str) -> DemoMember:
        """Start a member (a stopped member's name may be reused: that is a restart)."""
        old = self.members.get(name)
        if old is not None and old.task is not None and not old.task.done():
            raise ValueError(f"member {name!r} is already running in group {self.group_id}")
        member = DemoMember(name, self)
        member.task = asyncio.create_task(member.run(), name=f"member-{name}")
        self.members[name] = member
        log.info("started member %s in group %s", name, self.group_id)
        return member

    async def stop_members(self, names: Iterable[str], timeout: float = 20.0) -> None:
        """Close the named members cleanly (commit, LeaveGroup), all at once."""
        members = [self._member(n) for n in names]
        for m in members:
            m.stop_requested.set()
        tasks = [m.task for m in members if m.task is not None]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            for task in done:
                if task.exception() is not None:
                    log.warning("member task %s failed: %r", task.get_name(), task.exception())

    def _member(self, name: str) -> DemoMember:
        try:
            return self.members[name]
        except KeyError:
            raise KeyError(f"no member {name!r} in group {self.group_id}; members: {sorted(self.members)}") from None

    def failed_members(self) -> dict[str, BaseException]:
        """Members whose task ended with an error though nobody asked them to stop."""
        failed: dict[str, BaseException] = {}
        for name, m in self.members.items():
            if m.task is not None and m.task.done() and not m.task.cancelled():
                error = m.task.exception()
                if error is not None:
                    failed[name] = error
        return failed

    def unowned(self) -> list[AioTopicPartition]:
        """Partitions no live member owns right now."""
        owned = {tp for name in self.live_members() for tp in self.members[name].owned}
        return [tp for tp in self.partitions if tp not in owned]

    def is_settled(self) -> bool:
        """Every partition owned by exactly one live member, and every live member owning some
        (when there are at least as many partitions as members)."""
        return ownership_settled([self.members[name].owned for name in self.live_members()], self.partitions)

    async def wait_settled(self, timeout: float, *, stable_for: float = 1.0) -> float:
        """Wait until :meth:`is_settled` has held for ``stable_for`` seconds; returns when it first
        held (wall clock). Raises TimeoutError (describing the group) or :class:`MemberFailed`."""

        def settled() -> bool:
            failed = self.failed_members()
            if failed:
                raise MemberFailed(self.group_id, failed)
            return self.is_settled()

        since = await wait_stable(settled, timeout, stable_for=stable_for)
        if since is None:
            raise TimeoutError(f"group {self.group_id} did not settle within {timeout:.0f}s: {self.describe()}")
        return since

    async def wait_drained(self, timeout: float) -> int:
        """Wait (at most ``timeout`` seconds) until every acknowledged record was processed;
        returns how many still were not."""
        deadline = time.monotonic() + timeout
        while self.ledger.lost() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.ledger.lost()

    def describe(self) -> str:
        """Members and what they own, for error messages."""
        owned = {name: sorted(tp.partition for tp in self.members[name].owned) for name in self.live_members()}
        return f"live members {owned}, unowned partitions {[tp.partition for tp in self.unowned()]}"

    async def close(self) -> None:
        """Stop every member still running."""
        await self.stop_members(self.live_members())
