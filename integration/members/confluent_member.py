"""A confluent-kafka (librdkafka) group member with librdkafka's built-in assignors:
``python -m integration.members.confluent_member --strategy range|roundrobin|cooperative-sticky ...``.

The poll loop runs in the main thread; the rebalance callbacks run inside ``poll``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTP

from integration.members.reporting import (
    BatchProcessing,
    EventWriter,
    ProcessedOffsets,
    common_arguments,
    group_debug_wanted,
    tp_key,
    watch_stdin,
)

LIBRDKAFKA_STRATEGIES = ("range", "roundrobin", "cooperative-sticky")


class ConfluentMember:
    """One librdkafka consumer; same reporting and commit discipline as the other members."""

    def __init__(self, args) -> None:
        strategies = [s.strip() for s in args.strategy.split(",") if s.strip()]
        unknown = [s for s in strategies if s not in LIBRDKAFKA_STRATEGIES]
        if unknown or not strategies:
            raise ValueError(f"librdkafka strategies are {LIBRDKAFKA_STRATEGIES}, got {args.strategy!r}")
        self.args = args
        self.writer = EventWriter(args.id)
        self.processed = ProcessedOffsets()
        self.processing = BatchProcessing(args.process_ms, args.seed, args.id)
        config = {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.id,
            "partition.assignment.strategy": ",".join(strategies),
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": args.heartbeat_ms,
            "max.poll.interval.ms": args.max_poll_ms,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
        if args.group_protocol == "consumer":
            # KIP-848: the broker assigns and owns the timing; librdkafka refuses the classic settings.
            for classic_only in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
                del config[classic_only]
            config["group.protocol"] = "consumer"
            if args.remote_assignor:
                config["group.remote.assignor"] = args.remote_assignor
        if args.rack:
            config["client.rack"] = args.rack
        if args.instance_id:
            config["group.instance.id"] = args.instance_id
        if group_debug_wanted():
            config.update({"debug": "cgrp", "log_level": 7})  # librdkafka logs to stderr
        self.consumer = Consumer(config)

    def commit(self, only=None) -> None:
        wanted = None if only is None else set(only)
        offsets = [
            CkTP(t, p, o)
            for (t, p), o in sorted(self.processed.next_offset.items())
            if wanted is None or (t, p) in wanted
        ]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]  # a KafkaError
            self.writer.emit("commit_err", error=error.name() if hasattr(error, "name") else str(error))

    def on_assign(self, consumer, partitions) -> None:
        self.writer.parts("cb_assigned", [(tp.topic, tp.partition) for tp in partitions])

    def on_revoke(self, consumer, partitions) -> None:
        parts = [(tp.topic, tp.partition) for tp in partitions]
        self.writer.parts("cb_revoked", parts)
        self.processed.report(self.writer, parts)
        self.commit(parts)
        self.processed.forget(parts)
        self.writer.emit("cb_revoked_done")

    def on_lost(self, consumer, partitions) -> None:
        parts = [(tp.topic, tp.partition) for tp in partitions]
        self.writer.parts("cb_lost", parts)
        self.processed.report(self.writer, parts)
        self.processed.forget(parts)

    def report_progress(self) -> None:
        pos = {}
        try:
            for tp in self.consumer.position(self.consumer.assignment()):
                if tp.offset >= 0:  # negative: no position yet
                    pos[tp_key(tp.topic, tp.partition)] = tp.offset
        except KafkaException:
            pass
        self.writer.emit("progress", pos=pos)

    def run(self) -> None:
        stop, go = threading.Event(), threading.Event()
        watch_stdin(lambda: (stop.set(), go.set()), go.set)
        topics = [t for t in self.args.topics.split(",") if t]
        if self.args.hold:
            self.writer.emit("ready")
            go.wait()
            if stop.is_set():
                self.consumer.close()
                return
        self.consumer.subscribe(topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)
        self.writer.emit("subscribed", topics=topics)
        tick = self.args.progress_ms / 1000.0
        next_tick = time.monotonic() + tick
        try:
            while not stop.is_set():
                batch = self.consumer.consume(num_messages=500, timeout=0.1)
                for msg in batch:
                    if msg.error() is None:
                        self.processed.add(msg.topic(), msg.partition(), msg.offset())
                delay = self.processing.next_delay() if batch else 0.0
                if delay:
                    time.sleep(delay)  # the application's work on this batch: callbacks wait for the next consume
                if time.monotonic() >= next_tick:
                    next_tick += tick
                    self.report_progress()
                    self.processed.report(self.writer)
                    self.commit()
        finally:
            self.writer.emit("closing")
            self.processed.report(self.writer)
            self.commit()
            self.consumer.close()
            self.writer.emit("closed")


def main(argv: Sequence[str] | None = None) -> int:
    ap = common_arguments("confluent-kafka consumer-group member for kassign's group driver")
    ap.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="consumer: KIP-848's group protocol (librdkafka 2.12+)",
    )
    ap.add_argument("--remote-assignor", default=None, help="the broker-side assignor with --group-protocol consumer")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    ConfluentMember(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
