"""kassign's KIP-848 rebalance metrics against Java 4's own: a group of kafka-clients 4.4.0 members
with ``group.protocol=consumer`` grows from one member to three on Apache Kafka 4.4.0; before closing,
each Java member reports its ``consumer-coordinator-metrics``, and kassign's telemetry, replaying the
same member's callbacks with the consumer protocol's rules, must count the same rebalances."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from kassign.broker.group_config import set_consumer_group_timing  # noqa: E402
from kassign.telemetry import metrics_from_events  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.consumer_protocol, pytest.mark.timeout(300)]

TIMING = GroupTiming(session_ms=3000, heartbeat_ms=300)
JAVA_CLIENTS = "4.4.0"


def test_rebalance_counts_match_the_java_consumers_own(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(6)
    set_consumer_group_timing(
        bootstrap_servers, group_id, session_ms=TIMING.session_ms, heartbeat_ms=TIMING.heartbeat_ms
    )
    with GroupDriver(bootstrap_servers, group_id, topic, timing=TIMING) as group:
        producer = group.start_producer(rate=100)
        members = []
        for _ in range(3):
            members.append(group.start_member("java", "range", kafka_clients=JAVA_CLIENTS, group_protocol="consumer"))
            group.wait_settled(90, balanced=True)
        producer.stop()
        group.stop_members(members)
        events = group.events()
    compared = []
    for member in members:
        reports = [e for e in events if e.id == member and e.ev == "client_metrics"]
        assert reports, f"{member} reported no metrics"
        java = reports[-1].extra["metrics"]
        until = reports[-1].t
        mine = metrics_from_events(
            [e for e in events if e.id == member and e.t <= until and e.ev != "client_metrics"],
            protocol="consumer",
            now=until,
        )[member]
        compared.append((member, java["rebalance-total"], mine["rebalance-total"]))
        assert mine["rebalance-total"] == java["rebalance-total"], (member, java, mine)
        assert mine["failed-rebalance-total"] == java["failed-rebalance-total"] == 0
    print(f"\nKIP-848 rebalance-total, Java 4.4's own vs kassign's from the callbacks: {compared}")
    assert [j for _, j, _ in compared] != [0, 0, 0]
