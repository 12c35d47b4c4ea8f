"""How long a fresh kassign consumer on aiokafka takes from ``subscribe()`` to its first JoinGroup.

The simulator's ``startup_ms`` (:data:`kassign.sim.config.KAFKA44_PRESETS`) is this delay: between
``subscribe()`` + ``start()`` and the JoinGroup, aiokafka bootstraps, fetches the cluster's metadata,
finds the group coordinator and connects to it. Measured here as the rebalance benchmark's
replacements meet it: the consumer is built beforehand, then subscribes and starts; the time of the
JoinGroup is when kassign's coordinator logs "(Re-)joining group", just before sending it.

Each trial replaces a static member (``group.instance.id``) of a group with two other members, so
the broker answers the JoinGroup at once and gives the member its old partitions back; the trial
also times the JoinGroup to the partitions, which the simulator models as two round trips.

    flock /tmp/kassign-broker.lock python benchmarks/aiokafka_startup.py [--trials 40]

Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else a local Apache Kafka (``kassign.broker.open_broker``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # noqa: E402

from integration.topics import create_topic  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.broker import open_broker  # noqa: E402

PARTITIONS = 24
SESSION_MS, HEARTBEAT_MS = 1500, 250  # the rebalance benchmark's
#: The logger of each client's coordinator; both log "(Re-)joining group" just before the JoinGroup.
JOIN_LOGGERS = {"kassign": "kassign.adapters.aiokafka.coordinator", "aiokafka": "aiokafka.consumer.group_coordinator"}


class _JoinTimes(logging.Handler):
    """Wall-clock times of the coordinator's "(Re-)joining group" records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("(Re-)joining group"):
            self.times.append(record.created)


class _Assigned(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.at: float | None = None
        self.event = asyncio.Event()

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned and self.at is None:
            self.at = time.time()
            self.event.set()


def _consumer(bootstrap: str, group: str, name: str, instance: str | None, client: str = "kassign") -> Any:
    config: dict[str, Any] = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        auto_offset_reset="earliest",
    )
    if instance:
        config["group_instance_id"] = instance
    return CooperativeConsumer(**config) if client == "kassign" else AIOKafkaConsumer(**config)


async def _join(consumer: Any, topic: str, joins: _JoinTimes) -> tuple[float, float]:
    """Subscribe and start ``consumer``; (subscribe -> JoinGroup, JoinGroup -> partitions) in ms."""
    listener = _Assigned()
    first_join = len(joins.times)
    t0 = time.time()
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    await asyncio.wait_for(listener.event.wait(), 30)
    join = joins.times[first_join]
    assert listener.at is not None
    return (join - t0) * 1e3, (listener.at - join) * 1e3


async def _polling(consumer: Any, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await consumer.getmany(timeout_ms=50)


async def measure(bootstrap: str, trials: int, client: str = "kassign") -> dict[str, list[float]]:
    """``trials`` replacements of a static member of ``client`` (``kassign``'s CooperativeConsumer or
    plain ``aiokafka``, eager): their subscribe -> JoinGroup and JoinGroup -> partitions, in ms."""
    topic = f"startup-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    group = f"startup-{uuid.uuid4().hex[:8]}"
    joins = _JoinTimes()
    logger = logging.getLogger(JOIN_LOGGERS[client])
    logger.addHandler(joins)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # printing the coordinator's lines would slow down what is timed
    stop = asyncio.Event()
    others = [_consumer(bootstrap, group, f"o{i}", f"o{i}", client) for i in range(2)]
    for other in others:
        other.subscribe([topic])
        await other.start()
    pollers = [asyncio.ensure_future(_polling(o, stop)) for o in others]
    out: dict[str, list[float]] = {"subscribe_to_join_ms": [], "join_to_assigned_ms": []}
    try:
        member = _consumer(bootstrap, group, "s", "s", client)
        await _join(member, topic, joins)
        pollers.append(asyncio.ensure_future(_polling(member, stop)))
        await asyncio.sleep(1.0)
        for trial in range(trials):
            replacement = _consumer(bootstrap, group, "s", "s", client)  # built before its predecessor goes
            pollers[-1].cancel()
            await member.stop()
            to_join, to_assigned = await _join(replacement, topic, joins)
            out["subscribe_to_join_ms"].append(to_join)
            out["join_to_assigned_ms"].append(to_assigned)
            print(
                f"trial {trial + 1:3d}: subscribe -> JoinGroup {to_join:6.1f} ms, "
                f"JoinGroup -> partitions {to_assigned:6.1f} ms",
                flush=True,
            )
            member = replacement
            pollers[-1] = asyncio.ensure_future(_polling(member, stop))
            await asyncio.sleep(0.3)
        pollers[-1].cancel()
        await member.stop()
    finally:
        stop.set()
        await asyncio.gather(*pollers, return_exceptions=True)
        for other in others:
            await other.stop()
        logger.removeHandler(joins)
        logger.propagate = True
    return out


def _summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values):.1f} ms (quartiles {q[0]:.1f}, {q[2]:.1f}; n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument(
        "--client",
        choices=tuple(JOIN_LOGGERS),
        default="kassign",
        help="kassign's CooperativeConsumer (default) or plain aiokafka (the eager protocol)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the samples here")
    args = ap.parse_args(argv)
    if args.trials < 2:
        ap.error(f"--trials must be at least 2, got {args.trials}")
    logging.basicConfig(level=logging.WARNING)
    with open_broker() as broker:
        out = asyncio.run(measure(broker.bootstrap, args.trials, args.client))
    print(f"{args.client}: subscribe -> JoinGroup:", _summary(out["subscribe_to_join_ms"]))
    print(f"{args.client}: JoinGroup -> partitions:", _summary(out["join_to_assigned_ms"]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
