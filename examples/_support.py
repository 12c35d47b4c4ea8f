"""Scaffolding shared by the examples: create their topic, feed it keyed records, parse the
options every example takes. Not part of what the examples demonstrate."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time

__all__ = ["ensure_topic", "produce", "common_parser", "check_seconds", "setup_logging", "run_example"]


async def produce(bootstrap: str, topic: str, rate: float, seconds: float) -> int:
    """Feed the topic with keyed records (so the example runs on an empty cluster)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    sent, start = 0, time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            while sent < (time.monotonic() - start) * rate:
                await producer.send(topic, key=f"k{sent % 100}".encode(), value=b"x")
                sent += 1
            await asyncio.sleep(0.02)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic unless it exists."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


def common_parser(description: str, *, seconds: float = 20.0) -> argparse.ArgumentParser:
    """``--bootstrap`` (default $KAFKA_BOOTSTRAP_SERVERS or localhost:9092), a bounded ``--seconds`` and
    ``-v``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092"))
    ap.add_argument("--seconds", type=float, default=seconds, help="run this long (at most 3600), then close cleanly")
    ap.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="timestamps, and kassign's per-round detail (each generation's partitions)",
    )
    return ap


def setup_logging(verbose: bool = False) -> None:
    """The example's own lines on stderr, plain; ``verbose`` adds timestamps and kassign's INFO detail
    (every generation's assigned, added and revoked partitions). aiokafka's logs stay at WARNING."""
    fmt = "%(asctime)s %(name)s: %(message)s" if verbose else "%(name)s: %(message)s"
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=fmt)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    logging.getLogger("kassign").setLevel(logging.INFO if verbose else logging.WARNING)


def check_seconds(ap: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """Reject an unbounded or silly ``--seconds``."""
    if not 0 < args.seconds <= 3600:
        ap.error(f"--seconds must be in (0, 3600], got {args.seconds}")
    return args


def run_example(ap: argparse.ArgumentParser, argv: list[str] | None, main_async) -> int:
    """Parse the command line, set up logging (:func:`setup_logging`), run ``main_async(args)`` and
    print its result as one JSON line: the shared tail of every example's ``main``."""
    args = check_seconds(ap, ap.parse_args(argv))
    setup_logging(args.verbose)
    print(json.dumps(asyncio.run(main_async(args))), flush=True)
    return 0
