"""An aiokafka group member: ``python -m integration.members.aiokafka_member --bootstrap ... --id m1 ...``.

``--strategy`` takes aiokafka's names (``range``, ``roundrobin``, ``sticky``) or ``module:attr`` import
paths (an assignor class or instance, e.g. ``kassign.adapters.aiokafka:StickyAssignor``);
``--consumer-factory module:attr`` replaces :class:`aiokafka.AIOKafkaConsumer` by any callable taking
the same keyword arguments (e.g. a cooperative consumer class).

Fault injection (the churn soak's faults, :mod:`integration.churn.faults`): ``--slow-revoke-ms N``
makes ``on_partitions_revoked`` take ``N`` ms more before committing (an application slower than
the rebalance timeout); after a SIGSTOP, the SIGCONT that resumes the member makes it commit what it
processed at once and report whether the broker took that late commit (``late_commit``).

``--commit-every-batch`` (issue 27's benchmark, ``benchmarks/commits_under_churn.py``): the member
commits as most applications do, ``await consumer.commit()`` after every non-empty batch (after its
``--process-ms`` work), instead of in the background every ``--progress-ms``. Every commit the member
makes (after a batch, in ``on_partitions_revoked``, on close) is reported: ``commit`` when it
succeeded, ``commit_err`` (with ``error``, the exception's class name) when it failed, both with
``parts`` (the partitions committed; for ``commit()`` the assignment when it was issued), ``began``
(unix time it was issued), ``lat`` (ms), ``why`` (``batch``, ``revoke``, ``close``,
``background``) and ``whole: true`` for ``commit()`` without offsets. Without the option only
failed commits are reported, as before.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from integration.members.reporting import (
    BatchProcessing,
    EventWriter,
    ProcessedOffsets,
    common_arguments,
    group_debug_wanted,
    watch_stdin,
)
from kassign.adapters.aiokafka.commits import SerialCommitter
from kassign.adapters.aiokafka.live_group import consumer_generation, positions

_BUILTIN_ASSIGNORS = {
    "range": "aiokafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "aiokafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "aiokafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
}


def load_object(path: str) -> Any:
    """Import ``module:attr`` (attr may be dotted)."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected module:attr, got {path!r}")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_assignors(strategy: str) -> tuple[Any, ...]:
    """The ``partition_assignment_strategy`` tuple for a comma-separated strategy list."""
    names = [s.strip() for s in strategy.split(",") if s.strip()]
    if not names:
        raise ValueError(f"empty strategy list {strategy!r}")
    return tuple(load_object(_BUILTIN_ASSIGNORS.get(n, n)) for n in names)


class _Listener(ConsumerRebalanceListener):
    """Records every callback; commits what was processed on the revoked partitions before giving them up."""

    def __init__(self, member: AiokafkaMember) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked) -> None:
        m = self.member
        parts = [(tp.topic, tp.partition) for tp in revoked]
        if not parts:
            return  # aiokafka's first join "revokes" nothing; that is no revocation
        slow = {"slow_ms": m.args.slow_revoke_ms} if m.args.slow_revoke_ms else {}
        m.writer.parts("cb_revoked", parts, gen=m.generation(), **slow)
        m.processed.report(m.writer, parts)
        offsets = m.commit_offsets(parts)
        # Forgotten before awaiting: the poll loop keeps running meanwhile and its background
        # commits must not carry these partitions past this one (their next owner's commits win).
        m.processed.forget(parts)
        if m.args.slow_revoke_ms:
            # The application's slow clean-up (flushing its output, say) before it commits: longer
            # than the rebalance timeout, so the group may go on without this member meanwhile.
            await asyncio.sleep(m.args.slow_revoke_ms / 1000)
        await m.commit_now(offsets, "revoke")
        m.writer.emit("cb_revoked_done")

    async def on_partitions_assigned(self, assigned) -> None:
        m = self.member
        m.writer.parts("cb_assigned", [(tp.topic, tp.partition) for tp in assigned], gen=m.generation())

    async def on_partitions_lost(self, lost) -> None:
        # Not called by aiokafka itself; cooperative consumers plugged in through --consumer-factory may.
        m = self.member
        parts = [(tp.topic, tp.partition) for tp in lost]
        m.writer.parts("cb_lost", parts, gen=m.generation())
        m.processed.report(m.writer, parts)
        m.processed.forget(parts)


class AiokafkaMember:
    """One consumer: poll, record processed offsets, report progress and commit every ``progress_ms``
    (in the background; synchronously only when giving partitions up and when closing)."""

    def __init__(self, args, consumer_factory: Any = AIOKafkaConsumer) -> None:
        self.args = args
        self.consumer_factory = consumer_factory
        self.writer = EventWriter(args.id)
        self.processed = ProcessedOffsets()
        self.processing = BatchProcessing(args.process_ms, args.seed, args.id)
        self.consumer: Any = None
        self.committer = SerialCommitter(self._send_commit, args.id)
        self.commit_every_batch: bool = getattr(args, "commit_every_batch", False)

    def make_consumer(self) -> Any:
        """Build the consumer (aiokafka needs the running loop, so this happens inside :meth:`run`)."""
        args = self.args
        config: dict[str, Any] = dict(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            client_id=args.id,
            max_poll_interval_ms=args.max_poll_ms,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        if args.group_protocol == "consumer":
            # KIP-848: the broker assigns and owns the session timeout and heartbeat interval.
            config["group_protocol"] = "consumer"
            if args.remote_assignor:
                config["group_remote_assignor"] = args.remote_assignor
        else:
            config.update(
                partition_assignment_strategy=resolve_assignors(args.strategy),
                session_timeout_ms=args.session_ms,
                heartbeat_interval_ms=args.heartbeat_ms,
            )
        if args.rack:
            config["client_rack"] = args.rack
        if args.instance_id:
            config["group_instance_id"] = args.instance_id
        return self.consumer_factory(**config)

    def generation(self) -> int:
        return consumer_generation(self.consumer)

    def commit_offsets(self, only: Iterable[tuple[str, int]] | None = None) -> dict[Any, int]:
        """The next offsets to commit of every processed partition (of ``only``, or all), taken now:
        callers report the processed ranges first, so nothing committed is ever unreported."""
        from aiokafka import TopicPartition as AioTP

        wanted = None if only is None else set(only)
        return {
            AioTP(t, p): o for (t, p), o in self.processed.next_offset.items() if wanted is None or (t, p) in wanted
        }

    def commit_in_background(self) -> None:
        """Commit everything processed without blocking the poll loop, at most one commit in flight
        (:class:`~kassign.adapters.aiokafka.commits.SerialCommitter`); a tick that finds a commit
        still in flight skips its own, the next tick commits the newer offsets."""
        if not self.committer.busy:
            self.committer.commit_in_background(self.commit_offsets())

    async def commit_now(self, offsets: dict[Any, int], why: str) -> None:
        """Commit ``offsets`` once the background commit in flight (if any) is answered (as
        :meth:`SerialCommitter.commit_now`, with the reason reported)."""
        await self.committer.wait()
        if offsets:
            await self._send_commit(offsets, why)

    async def _send_commit(self, offsets: dict[Any, int], why: str = "background") -> None:
        await self.timed_commit([(tp.topic, tp.partition) for tp in offsets], why, offsets, catch=(KafkaError,))

    async def timed_commit(
        self,
        parts: list[tuple[str, int]],
        why: str,
        offsets: dict[Any, int] | None = None,
        catch: tuple[type[BaseException], ...] = (Exception,),
    ) -> bool:
        """``consumer.commit(offsets)`` (``commit()`` when None), reported: a failure always as
        ``commit_err`` (its ``parts`` say which processed offsets their next owner may redo), a success
        as ``commit`` with ``--commit-every-batch``. Returns whether it succeeded."""
        began = time.time()
        # commit() without offsets commits the whole assignment (kassign leaves what was revoked meanwhile out)
        whole = {"whole": True} if offsets is None else {}
        try:
            if offsets is None:
                await self.consumer.commit()
            else:
                await self.consumer.commit(offsets)
        except catch as exc:
            self.writer.parts(
                "commit_err",
                parts,
                error=type(exc).__name__,
                began=round(began, 6),
                lat=round((time.time() - began) * 1000, 3),
                why=why,
                **whole,
            )
            return False
        if self.commit_every_batch:
            self.writer.parts(
                "commit", parts, began=round(began, 6), lat=round((time.time() - began) * 1000, 3), why=why, **whole
            )
        return True

    async def commit_batch(self) -> None:
        """What most applications do after each batch: report what was processed, then ``await
        consumer.commit()`` (the consumed positions of the whole assignment)."""
        self.processed.report(self.writer)
        parts = sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())
        await self.timed_commit(parts, "batch")

    def on_resumed(self) -> None:
        """SIGCONT after a SIGSTOP (a zombie): commit everything processed right away, before the
        consumer can hear from the broker that it was expired meanwhile, and report the answer."""
        self.writer.emit("resumed")
        self.processed.report(self.writer)  # reported before committed, as every commit here
        offsets = self.commit_offsets()
        asyncio.ensure_future(self._late_commit(offsets))

    async def _late_commit(self, offsets: dict[Any, int]) -> None:
        parts = [(tp.topic, tp.partition) for tp in offsets]
        if not parts:
            self.writer.emit("late_commit", parts=[], ok=None, error="nothing to commit")
            return
        try:
            await asyncio.wait_for(self.consumer.commit(offsets), timeout=15)
        except TimeoutError:
            self.writer.parts("late_commit", parts, ok=None, error="no answer within 15 s")
        except Exception as exc:  # a commit refused locally (IllegalStateError) is a rejection too
            self.writer.parts("late_commit", parts, ok=False, error=type(exc).__name__)
        else:
            self.writer.parts("late_commit", parts, ok=True)

    async def report_progress(self) -> None:
        self.writer.emit("progress", pos=await positions(self.consumer, self.consumer.assignment()))

    async def run(self, stop: asyncio.Event | None = None, go: asyncio.Event | None = None) -> None:
        """Consume until ``stop`` is set, then commit and close; a held member subscribes once ``go`` is
        set. Without them the member owns its process: end of stdin stops it, a ``go`` line releases it
        and SIGCONT (after a SIGSTOP) makes it commit at once."""
        loop = asyncio.get_running_loop()
        own_process = stop is None
        stop = stop or asyncio.Event()
        go = go or asyncio.Event()
        if own_process:
            watch_stdin(lambda: loop.call_soon_threadsafe(stop.set), lambda: loop.call_soon_threadsafe(go.set))
        topics = [t for t in self.args.topics.split(",") if t]
        self.consumer = self.make_consumer()
        if own_process:
            loop.add_signal_handler(signal.SIGCONT, self.on_resumed)
        if self.args.hold:
            # A replacement made ready before its predecessor goes: only the group protocol is timed.
            self.writer.emit("ready")
            await asyncio.wait(
                [asyncio.ensure_future(go.wait()), asyncio.ensure_future(stop.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if stop.is_set():
                return
        self.consumer.subscribe(topics, listener=_Listener(self))
        self.writer.emit("subscribed", topics=topics)
        await self.consumer.start()
        tick = self.args.progress_ms / 1000.0
        next_tick = time.monotonic() + tick
        try:
            while not stop.is_set():
                batch = await self.consumer.getmany(timeout_ms=100)
                for tp, records in batch.items():
                    for record in records:
                        self.processed.add(tp.topic, tp.partition, record.offset)
                delay = self.processing.next_delay() if batch else 0.0
                if delay:
                    await asyncio.sleep(delay)  # the application's work on this batch; the loop stays free
                if batch and self.commit_every_batch:
                    await self.commit_batch()
                if time.monotonic() >= next_tick:
                    next_tick += tick
                    await self.report_progress()
                    if not self.commit_every_batch:
                        self.processed.report(self.writer)
                        self.commit_in_background()
        finally:
            self.writer.emit("closing")
            self.processed.report(self.writer)
            await self.commit_now(self.commit_offsets(), "close")
            await self.consumer.stop()
            self.writer.emit("closed")


def member_arguments() -> argparse.ArgumentParser:
    """The options of one aiokafka member (also what :mod:`integration.members.aiokafka_host` takes per member)."""
    ap = common_arguments("aiokafka consumer-group member for kassign's group driver")
    ap.add_argument("--consumer-factory", default=None, help="module:attr replacing AIOKafkaConsumer")
    ap.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="consumer: KIP-848's group protocol (needs a consumer factory that takes group_protocol)",
    )
    ap.add_argument("--remote-assignor", default=None, help="the broker-side assignor with --group-protocol consumer")
    ap.add_argument(
        "--slow-revoke-ms",
        type=int,
        default=0,
        help="extra time on_partitions_revoked takes before committing (a slow application)",
    )
    ap.add_argument(
        "--commit-every-batch",
        action="store_true",
        help="await consumer.commit() after every non-empty batch and report every commit",
    )
    return ap


def configure_logging() -> None:
    """Warnings on stderr; the group protocol's traffic too when the driver asks for it."""
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if group_debug_wanted():
        for name in ("kassign", "aiokafka.consumer.group_coordinator"):
            logging.getLogger(name).setLevel(logging.DEBUG)


def build_member(args: argparse.Namespace) -> AiokafkaMember:
    """The member ``args`` describe, with its consumer factory loaded."""
    factory = load_object(args.consumer_factory) if args.consumer_factory else AIOKafkaConsumer
    return AiokafkaMember(args, factory)


def main(argv: Sequence[str] | None = None) -> int:
    args = member_arguments().parse_args(argv)
    configure_logging()
    asyncio.run(build_member(args).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
