"""What the rebalance recorder costs a consumer at full speed: records/s with and without it, same run.

Fills one topic, then lets fresh single-member groups read it all from the earliest offset,
alternating plain and recorded consumers in ABBA order (so drift in the machine's load hits both
alike), for confluent-kafka and aiokafka. Prints each run and, per client, the ratio of the
medians (recorded / plain; 1.0 = free, the target is above 0.98), both in wall-clock records/s and
in records per CPU-second of the consumer's process (which other load on the machine disturbs
less). The recorder adds no per-record work (it runs only inside rebalance callbacks), so the
ratio measures noise around 1.0; the cost of one recorded callback is timed separately first.

    flock /tmp/kassign-broker.lock python benchmarks/telemetry_overhead.py [--records N] [--repeats R]

Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else a local Apache Kafka (``kassign.broker.open_broker``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from integration.topics import create_topic  # noqa: E402
from kassign.broker import open_broker  # noqa: E402
from kassign.telemetry import RebalanceRecorder  # noqa: E402

PARTITIONS = 6
SESSION_MS = 4000  # Tansu holds a first join for half the session timeout; keep the waits short


def fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000, "log_level": 3})
    payload = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def event_cost_us(out_dir: Path, events: int = 50_000) -> float:
    """Microseconds per recorded callback, writer thread included (it shares the GIL with the caller)."""
    recorder = RebalanceRecorder(out_dir / "events.jsonl", member="m", queue_size=events + 1)
    recorder.subscribed(["t"])
    parts = [type("TP", (), {"topic": "t", "partition": p})() for p in range(3)]
    t0 = time.perf_counter()
    for i in range(events):
        recorder.record_callback("cb_assigned", parts, i, i)
    cost = (time.perf_counter() - t0) / events * 1e6
    recorder.close(60)
    return cost


def run_confluent(bootstrap: str, topic: str, records: int, recorder: RebalanceRecorder | None) -> tuple[float, float]:
    from confluent_kafka import Consumer

    from kassign.telemetry.confluent_glue import close

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
        }
    )
    if recorder is None:
        consumer.subscribe([topic])
    else:
        recorder.subscribe(consumer, [topic])
    seen, first, cpu0 = 0, None, 0.0
    while seen < records:
        for msg in consumer.consume(1000, 1.0):
            if msg.error() is None:
                if first is None:
                    first, cpu0 = time.perf_counter(), time.process_time()
                seen += 1
    rates = (seen / (time.perf_counter() - first), seen / (time.process_time() - cpu0))
    if recorder is None:
        consumer.close()
    else:
        close(recorder, consumer)
    return rates


async def _aiokafka(
    bootstrap: str, topic: str, records: int, recorder: RebalanceRecorder | None
) -> tuple[float, float]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    if recorder is not None:
        recorder.attach(consumer)
    consumer.subscribe([topic])
    await consumer.start()
    seen, first, cpu0 = 0, None, 0.0
    while seen < records:
        batches = await consumer.getmany(timeout_ms=1000, max_records=5000)
        n = sum(len(b) for b in batches.values())
        if n:
            if first is None:
                first, cpu0 = time.perf_counter(), time.process_time()
            seen += n
    rates = (seen / (time.perf_counter() - first), seen / (time.process_time() - cpu0))
    await consumer.stop()
    return rates


def run_aiokafka(bootstrap: str, topic: str, records: int, recorder: RebalanceRecorder | None) -> tuple[float, float]:
    return asyncio.run(_aiokafka(bootstrap, topic, records, recorder))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--clients", default="confluent,aiokafka")
    args = parser.parse_args(argv)
    # The recordings are only written to be paid for: none outlives the run.
    with tempfile.TemporaryDirectory(prefix="kassign-bench-") as tmp:
        return _measure(args, Path(tmp))


def _measure(args: argparse.Namespace, out_dir: Path) -> int:
    runners = {"confluent": run_confluent, "aiokafka": run_aiokafka}
    print(f"one recorded callback event costs the consumer's thread {event_cost_us(out_dir):.1f} us")
    with open_broker() as broker:
        topic = create_topic(broker.bootstrap, f"bench-{uuid.uuid4().hex[:8]}", PARTITIONS)
        t0 = time.perf_counter()
        fill(broker.bootstrap, topic, args.records)
        print(f"broker {broker.describe()}; {args.records} records filled in {time.perf_counter() - t0:.1f}s")
        for client in args.clients.split(","):
            wall: dict[str, list[float]] = {"plain": [], "recorded": []}
            cpu: dict[str, list[float]] = {"plain": [], "recorded": []}
            for i in range(args.repeats):
                # Alternate which mode goes first, so a warm-up or drift effect does not favour one.
                for mode in ("plain", "recorded") if i % 2 == 0 else ("recorded", "plain"):
                    recorder = None
                    if mode == "recorded":
                        recorder = RebalanceRecorder(out_dir / f"{client}-{i}.jsonl", member=f"{client}-{i}")
                    wall_rate, cpu_rate = runners[client](broker.bootstrap, topic, args.records, recorder)
                    if recorder is not None:
                        recorder.close()
                    wall[mode].append(wall_rate)
                    cpu[mode].append(cpu_rate)
                    print(
                        f"{client:9s} {mode:8s} run {i + 1}: {wall_rate:10.0f} records/s, "
                        f"{cpu_rate:10.0f} records per CPU-second"
                    )
            for label, rates in (("records/s", wall), ("records per CPU-s", cpu)):
                plain, recorded = statistics.median(rates["plain"]), statistics.median(rates["recorded"])
                print(
                    f"{client:9s} {label}: median plain {plain:.0f}, recorded {recorded:.0f}, "
                    f"ratio recorded/plain = {recorded / plain:.4f} (cost {100 * (1 - recorded / plain):+.2f}%)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
