"""Rack-aware assignment (KIP-881) on a real 3-broker Apache Kafka cluster with ``broker.rack``.

Each partition has one replica (replication factor 1), so its rack is its broker's. Members on racks
r1, r2, r3 of a mixed group (kassign, Java, librdkafka; each leading once) must end with only
partitions of their own rack, each partition owned once.
"""

from __future__ import annotations

import pytest

pytest.importorskip("aiokafka")

from integration.driver import GroupDriver  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from integration.topics import wait_for_partitions  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(300)]

COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
RACKS = ("r1", "r2", "r3")


def _topic_three_per_rack(rack_cluster, name: str) -> dict[int, str]:
    """Create ``name`` with 9 partitions, partition p on broker p % 3 + 1; returns each one's rack as
    the cluster's metadata reports it (node ids are 1..3 in the order of the cluster's racks)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": rack_cluster.bootstrap})
    new = NewTopic(name, num_partitions=9, replica_assignment=[[p % 3 + 1] for p in range(9)])
    admin.create_topics([new])[name].result(timeout=20)
    # The metadata that showed all 9 partitions: another client may ask a broker that has not yet
    # learnt of the topic from the controller (each learns at its own pace).
    meta = wait_for_partitions(rack_cluster.bootstrap, name, 9)
    return {p: rack_cluster.racks[part.replicas[0] - 1] for p, part in meta.partitions.items()}


@pytest.mark.parametrize("leader", ["aiokafka", "java", "confluent"])
def test_mixed_group_takes_only_partitions_of_its_own_rack(rack_cluster, group_id, leader):
    topic = f"racks-{group_id}"
    racks_of = _topic_three_per_rack(rack_cluster, topic)
    assert sorted(racks_of.values()) == sorted(RACKS * 3), racks_of
    kinds = [leader] + [k for k in ("aiokafka", "java", "confluent") if k != leader]
    with GroupDriver(rack_cluster.bootstrap, group_id, topic) as group:
        producer = group.start_producer(rate=100)
        member_rack = {}
        for kind, rack in zip(kinds, RACKS):
            if kind == "aiokafka":
                name = group.start_member(kind, COOP, consumer_factory=CONSUMER, rack=rack)
            else:
                name = group.start_member(kind, "cooperative-sticky", rack=rack)
            member_rack[name] = rack
            if kind == leader:  # the first member forms the group and leads it
                group.wait_settled(60)
        settled = group.wait_settled(90, balanced=True, stable_for=1.0)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert_exclusive(events)
    cross = {m: [tp.partition for tp in tps if racks_of[tp.partition] != member_rack[m]] for m, tps in settled.items()}
    assert all(not parts for parts in cross.values()), f"cross-rack partitions with {leader} leading: {cross}"
    assert sorted(len(tps) for tps in settled.values()) == [3, 3, 3]
