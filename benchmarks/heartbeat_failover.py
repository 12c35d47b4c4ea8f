"""How long a KIP-848 member goes without a successful heartbeat when its group coordinator dies.

A replicated 3-node Apache Kafka cluster (three controllers, internal topics replicated 3 times, a
dead node fenced after 2 s); one ``CooperativeConsumer(group_protocol="consumer")`` owning a
6-partition topic, with the broker's default timing (heartbeat interval 5 s, session 45 s). Each
trial SIGKILLs the node coordinating the group ``--phase-s`` after a successful heartbeat, then
times, from the kill:

* ``first_failure_s`` -- the member's first failed heartbeat (it learns of the loss);
* ``recovered_s`` -- its first successful heartbeat to the new coordinator;
* ``retry_gap_s`` -- recovered_s - first_failure_s: what the retry rule adds to the failover itself.

The member keeps its partitions throughout (its session outlives the failover); the node is
restarted between trials, and the group moved back to the same kind of start (the coordinator is
wherever the cluster puts it). Run it through the broker lock; ``--label`` names the result file::

    flock /tmp/broker-tests.lock python benchmarks/heartbeat_failover.py --label after

To measure another checkout (the code before a change), run this file from that checkout's root.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka.errors import KafkaError  # noqa: E402

from integration.topics import create_topic  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.broker import start_kafka  # noqa: E402
from kassign.broker.kafka import replicated_settings  # noqa: E402

PARTITIONS = 6


class HeartbeatLog:
    """Wraps a coordinator's ``_send_heartbeat``: (monotonic time answered, ok) per heartbeat."""

    def __init__(self, coordinator: Any) -> None:
        self.entries: list[tuple[float, bool]] = []
        send = coordinator._send_heartbeat

        async def logged(request: Any) -> Any:
            before = coordinator.member.fatal_error
            try:
                actions = await send(request)
            except KafkaError:
                self.entries.append((time.monotonic(), False))
                raise
            failed = any(type(a).__name__ in ("Backoff", "FindCoordinator", "Report") for a in actions)
            self.entries.append((time.monotonic(), not failed and coordinator.member.fatal_error is before))
            return actions

        coordinator._send_heartbeat = logged

    def first(self, after: float, ok: bool) -> float | None:
        return next((t for t, good in self.entries if t > after and good is ok), None)


async def _poll(consumer: CooperativeConsumer) -> None:
    while True:
        await consumer.getmany(timeout_ms=100)


async def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.02)


async def run_trials(cluster: Any, trials: int, phase_s: float) -> list[dict[str, float]]:
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    group = f"g-failover-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, PARTITIONS, replication_factor=3)
    consumer = CooperativeConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, group_protocol="consumer")
    consumer.subscribe([topic])
    await consumer.start()
    log = HeartbeatLog(consumer._coordinator)
    poller = asyncio.ensure_future(_poll(consumer))
    results: list[dict[str, float]] = []
    loop = asyncio.get_running_loop()
    try:
        await _wait(lambda: len(consumer.assignment()) == PARTITIONS, 60, "the member owning the topic")
        for trial in range(trials):
            # Kill at the same point of the interval every time: phase_s after a successful heartbeat.
            mark = time.monotonic()
            await _wait(lambda: log.first(mark, True) is not None, 30, "a successful heartbeat")  # noqa: B023 - awaited here
            await asyncio.sleep(max(0.0, log.first(mark, True) + phase_s - time.monotonic()))
            node = await loop.run_in_executor(None, cluster.coordinator_node, group)
            killed = time.monotonic()
            await loop.run_in_executor(None, cluster.kill_node, node)
            await _wait(
                lambda: log.first(killed, True) is not None,  # noqa: B023 - awaited here
                120,
                "a heartbeat answered after the kill",
            )
            failed = log.first(killed, False)
            recovered = log.first(killed, True)
            owned = len(consumer.assignment())
            row = {
                "trial": trial,
                "killed_node": node,
                "first_failure_s": round(failed - killed, 3) if failed else None,
                "recovered_s": round(recovered - killed, 3),
                "retry_gap_s": round(recovered - failed, 3) if failed else None,
                "owned_after": owned,
            }
            print(json.dumps(row), flush=True)
            results.append(row)
            await loop.run_in_executor(None, cluster.restart_node, node)
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
        await consumer.stop()
    return results


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--phase-s", type=float, default=1.0, help="kill this long after a successful heartbeat")
    parser.add_argument("--label", required=True, help="names the result file (e.g. before, after)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    with start_kafka(brokers=3, controllers=3, settings=replicated_settings(3)) as cluster:
        results = asyncio.run(run_trials(cluster, args.trials, args.phase_s))
        version = cluster.version
    recovered = [r["recovered_s"] for r in results]
    gaps = [r["retry_gap_s"] for r in results if r["retry_gap_s"] is not None]
    summary = {
        "label": args.label,
        "code": _commit(),
        "kafka": version,
        "brokers": 3,
        "trials": results,
        "phase_s": args.phase_s,
        "heartbeat_interval_ms": 5000,
        "session_timeout_ms": 45000,
        "recovered_s": {"median": statistics.median(recovered), "max": max(recovered)},
        "retry_gap_s": {"median": statistics.median(gaps), "max": max(gaps)} if gaps else None,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    day, kafka = time.strftime("%Y-%m-%d"), version.replace(".", "")
    path = args.out / f"heartbeat-failover-{day}-kafka{kafka}-{args.label}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{args.label}: recovered after a median {summary['recovered_s']['median']:.2f} s "
        f"(max {summary['recovered_s']['max']:.2f} s); retry gap median "
        f"{summary['retry_gap_s']['median'] if gaps else float('nan'):.2f} s -> {path}"
    )


if __name__ == "__main__":
    main()
