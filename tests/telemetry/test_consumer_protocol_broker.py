"""A recorder attached to kassign's consumer on the consumer group protocol (KIP-848) against Apache
Kafka: a second member joins, and the first member's metrics are Java's AsyncKafkaConsumer's --
rebalance-total counts the reconciliation the join caused, latencies are positive and bounded,
heartbeats are counted and timed, the callbacks' latencies are recorded, and the recording written
to disk replays to the same numbers."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import wait_consumers_held  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.broker.group_config import set_consumer_group_timing  # noqa: E402
from kassign.telemetry import RebalanceRecorder, metrics_from_events  # noqa: E402
from kassign.timeline.events import read_events  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.consumer_protocol, pytest.mark.timeout(300)]

HEARTBEAT_MS = 500


def _consumer(bootstrap: str, group_id: str) -> CooperativeConsumer:
    return CooperativeConsumer(
        bootstrap_servers=bootstrap, group_id=group_id, group_protocol="consumer", auto_offset_reset="earliest"
    )


def _brief(metrics: dict[str, float]) -> str:
    names = (
        "rebalance-total",
        "rebalance-latency-max",
        "failed-rebalance-total",
        "heartbeat-total",
        "heartbeat-response-time-max",
        "partition-revoked-latency-max",
        "partition-assigned-latency-max",
    )
    return ", ".join(f"{name} {metrics[name]:.1f}" for name in names)


@pytest.mark.asyncio
async def test_recorded_member_reports_java_s_consumer_protocol_metrics(
    bootstrap_servers, group_id, topic_factory, tmp_path
):
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=6000, heartbeat_ms=HEARTBEAT_MS)
    path = tmp_path / "m1.jsonl"
    recorder = RebalanceRecorder(path, member="m1")

    async def scenario():
        first = recorder.attach(_consumer(bootstrap_servers, group_id))
        first.subscribe([topic])
        await first.start()
        await wait_consumers_held([first], partitions)
        alone = recorder.metrics()
        second = _consumer(bootstrap_servers, group_id)
        second.subscribe([topic])
        joined_at = time.monotonic()
        await second.start()
        await wait_consumers_held([first, second], partitions)
        settle_s = time.monotonic() - joined_at
        await asyncio.sleep(3 * HEARTBEAT_MS / 1000)  # a few more heartbeats
        await first.getmany(timeout_ms=10)
        shared = recorder.metrics()
        await second.stop()
        await first.stop()
        return alone, shared, settle_s

    alone, shared, settle_s = await scenario()
    assert recorder.close()
    print(f"\nKIP-848 telemetry, first member: alone {_brief(alone)}; after the second joined {_brief(shared)}")
    assert recorder.protocol == "consumer", "attach() saw group_protocol='consumer'"

    # Alone: the first assignment is a rebalance, from the broker's answer to the acknowledgement.
    assert alone["rebalance-total"] in (1, 2)  # 2 when the first answer carried no partitions yet
    assert 0 < alone["rebalance-latency-max"] < 10_000
    assert alone["heartbeat-total"] >= 2 and alone["last-heartbeat-seconds-ago"] >= 0
    assert not math.isnan(alone["partition-assigned-latency-max"])

    # The second member's join took partitions away: one more reconciliation for the first member.
    assert shared["rebalance-total"] - alone["rebalance-total"] in (1, 2), shared
    assert 0 < shared["rebalance-latency-avg"] <= shared["rebalance-latency-max"] < settle_s * 1000 + 1000
    assert shared["rebalance-latency-total"] > alone["rebalance-latency-total"]
    assert shared["failed-rebalance-total"] == 0
    assert shared["last-rebalance-seconds-ago"] >= 0
    assert not math.isnan(shared["partition-revoked-latency-max"]), "the first member revoked partitions"
    assert shared["partition-assigned-latency-max"] >= 0
    # Heartbeats: every HEARTBEAT_MS (more while joining and acknowledging), answered by a local broker.
    assert shared["heartbeat-total"] >= alone["heartbeat-total"] + 3
    assert 0 < shared["heartbeat-response-time-max"] < 5000
    assert shared["heartbeat-rate"] > 0
    assert shared["last-heartbeat-seconds-ago"] in (0, 1)

    # The file says which protocol the member used, and replays to the same counts.
    events = list(read_events(path))
    assert next(e for e in events if e.ev == "subscribed").extra["protocol"] == "consumer"
    assert not any(e.ev in ("join", "sync") for e in events), "no JoinGroup/SyncGroup on this protocol"
    replayed = metrics_from_events(events)["m1"]
    assert replayed["rebalance-total"] == shared["rebalance-total"]
    assert replayed["rebalance-latency-total"] == pytest.approx(shared["rebalance-latency-total"], abs=1.0)
    assert replayed["heartbeat-total"] >= shared["heartbeat-total"]  # the leave heartbeat came after
