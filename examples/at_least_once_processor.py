"""An at-least-once processor on kassign's cooperative-sticky rebalancing (aiokafka).

Run one or more copies against the same group: each copy consumes its share of the topic, and
when a copy joins or leaves only the partitions that move are revoked, the others keep flowing.

    kassign broker start      # a local Apache Kafka; it prints the address to pass
    python examples/at_least_once_processor.py --bootstrap 127.0.0.1:PORT --seconds 30
    python examples/at_least_once_processor.py --bootstrap 127.0.0.1:PORT --seconds 15 --produce 0   # a second copy

At-least-once means: an offset is committed only after its record was processed, and before a
partition is given up (the rebalance listener commits on revocation), so its next owner resumes
exactly after the last processed record. A record can be processed twice (after a crash, or when a
commit fails), never skipped.

Each copy also feeds the topic (``--produce RATE``, 50 records/s by default; ``--produce 0`` only
consumes), so one copy run alone shows records flowing. Every ``--commit-every`` seconds it logs what
it has processed and committed; ``-v`` adds timestamps and kassign's per-generation detail. At the
end the copy prints one JSON line: records produced, processed per partition and the offsets it
committed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import sys
import time

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from _support import check_seconds, common_parser, ensure_topic, produce, setup_logging  # example scaffolding

# The one-line change from plain aiokafka: CooperativeConsumer instead of AIOKafkaConsumer.
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor

log = logging.getLogger("at-least-once")


class Processor:
    """The application's work: here, counting records per key (stand-in for real processing)."""

    def __init__(self) -> None:
        self.per_key: collections.Counter[bytes] = collections.Counter()
        self.per_partition: collections.Counter[int] = collections.Counter()

    def process(self, record) -> None:
        self.per_key[record.key] += 1
        self.per_partition[record.partition] += 1


class CommitOnRevoke(ConsumerRebalanceListener):
    """Commits processed offsets of partitions before they move away (cooperative: only those)."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            log.info("revoked %s: committing them before they move", sorted(tp.partition for tp in revoked))
            await self.app.commit(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        # Under the cooperative protocol these are only the partitions that are new to us.
        log.info("assigned %s", sorted(tp.partition for tp in assigned))

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        # Lost (our session expired): they may be someone else's already, so nothing is committed;
        # their new owner reprocesses from the last commit.
        log.warning("lost %s", sorted(tp.partition for tp in lost))
        for tp in lost:
            self.app.pending.pop(tp, None)


class App:
    """Poll, process, commit every ``commit_every`` seconds and on revocation."""

    def __init__(self, consumer: CooperativeConsumer, commit_every: float = 5.0) -> None:
        self.consumer = consumer
        self.commit_every = commit_every
        self.processor = Processor()
        self.pending: dict[TopicPartition, int] = {}  # next offset to commit, per partition
        self.committed: dict[TopicPartition, int] = {}

    async def commit(self, only: set[TopicPartition] | None = None) -> None:
        offsets = {tp: o for tp, o in self.pending.items() if only is None or tp in only}
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("commit failed (%s): those records will be processed again by their next owner", exc)
            return
        self.committed.update(offsets)
        for tp, offset in offsets.items():
            # The periodic commit and the revocation's can overlap, and records may have been processed
            # meanwhile: forget only what this commit covered.
            if self.pending.get(tp) == offset:
                del self.pending[tp]

    async def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        next_commit = time.monotonic() + self.commit_every
        while time.monotonic() < deadline:
            batches = await self.consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    self.processor.process(record)
                self.pending[tp] = records[-1].offset + 1  # commit only what was processed
            if time.monotonic() >= next_commit:
                next_commit += self.commit_every
                await self.commit()
                self.report()
        await self.commit()

    def report(self) -> None:
        """One progress line: records processed so far, the partitions owned, the offsets committed."""
        owned = sorted(tp.partition for tp in self.consumer.assignment())
        log.info(
            "processed %d records so far; owns partitions %s; committed %d partitions' offsets",
            sum(self.processor.per_partition.values()),
            owned,
            len(self.committed),
        )


async def main_async(args: argparse.Namespace) -> dict:
    await ensure_topic(args.bootstrap, args.topic, args.partitions)
    consumer = CooperativeConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        partition_assignment_strategy=(CooperativeStickyAssignor,),
        enable_auto_commit=False,  # we commit ourselves, after processing
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
    )
    app = App(consumer, commit_every=args.commit_every)
    consumer.subscribe([args.topic], listener=CommitOnRevoke(app))
    await consumer.start()
    producing = (
        asyncio.create_task(produce(args.bootstrap, args.topic, args.produce, args.seconds))
        if args.produce > 0
        else None
    )
    try:
        await app.run(args.seconds)
    finally:
        await consumer.stop()  # revokes (and so commits) what we still own, then leaves the group
    produced = await producing if producing is not None else 0
    return {
        "name": args.name,
        "produced": produced,
        "processed": {str(p): n for p, n in sorted(app.processor.per_partition.items())},
        "committed": {str(tp.partition): o for tp, o in sorted(app.committed.items())},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = common_parser("at-least-once processor with cooperative-sticky rebalancing")
    ap.add_argument("--topic", default="kassign-example-orders")
    ap.add_argument("--partitions", type=int, default=6, help="when the topic has to be created")
    ap.add_argument("--group", default="kassign-example-processor")
    ap.add_argument("--name", default=f"processor-{os.getpid()}")
    ap.add_argument(
        "--produce",
        type=float,
        default=50.0,
        help="also feed the topic with this many records/s (default 50; 0: only consume)",
    )
    ap.add_argument("--commit-every", type=float, default=5.0, help="commit (and log progress) every N seconds")
    # Kafka's default minimum session timeout is 6 s; the embedded broker's tests use shorter ones.
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    args = check_seconds(ap, ap.parse_args(argv))
    if not 0 < args.commit_every <= args.seconds:
        ap.error(f"--commit-every must be in (0, --seconds], got {args.commit_every}")
    if args.produce < 0:
        ap.error(f"--produce must be >= 0 records/s, got {args.produce}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.verbose)
    print(json.dumps(asyncio.run(main_async(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
