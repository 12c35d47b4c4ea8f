"""The drop-in assignors as aiokafka uses them: on the class or an instance, one state per consumer."""

from __future__ import annotations

import pytest

pytest.importorskip("aiokafka")

from aiokafka.consumer.group_coordinator import GroupCoordinator  # noqa: E402
from aiokafka.coordinator.protocol import (  # noqa: E402
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from kassign.adapters.aiokafka import (  # noqa: E402
    CooperativeConsumer,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from kassign.adapters.aiokafka.assignors import core_assignor_for  # noqa: E402
from kassign.model import RebalanceProtocol, TopicPartition  # noqa: E402
from kassign.protocol import decode_assignment, decode_sticky_user_data, decode_subscription  # noqa: E402
from tests.adapters.fakes import FakeCluster  # noqa: E402

TP = TopicPartition


class FakeCoordinator(GroupCoordinator):
    """Just enough of aiokafka's GroupCoordinator to call assignors the way it does (from its own
    methods, so ``self`` on the stack is the coordinator); no network, no background task."""

    def __init__(self, generation: int) -> None:  # noqa: D107 - deliberately skips the real setup
        self.generation = generation

    def join_metadata(self, assignor, topics):
        return assignor.metadata(topics)

    def complete(self, assignor, partitions):
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        assignor.on_assignment(ConsumerProtocolMemberAssignment(0, sorted(by_topic.items()), b""))

    def lead(self, assignor, cluster, metadata_by_member):
        # aiokafka's leader decodes every member's metadata with its v0 struct.
        decoded = {m: ConsumerProtocolMemberMetadata.decode(b) for m, b in metadata_by_member.items()}
        return assignor.assign(cluster, decoded)


def _previous(metadata: bytes):
    return decode_sticky_user_data(decode_subscription(metadata).user_data)


def test_protocol_names_match_kafka():
    assert [a.name for a in (StickyAssignor, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor)] == [
        "sticky",
        "cooperative-sticky",
        "range",
        "roundrobin",
    ]
    assert StickyAssignor().name == "sticky"
    assert RebalanceProtocol.COOPERATIVE in CooperativeStickyAssignor.supported_protocols
    assert RebalanceProtocol.COOPERATIVE not in StickyAssignor.supported_protocols


@pytest.mark.parametrize("handle", [StickyAssignor, StickyAssignor()], ids=["class", "shared-instance"])
def test_two_consumers_never_share_previous_assignment_or_generation(handle):
    c1, c2 = FakeCoordinator(generation=5), FakeCoordinator(generation=6)
    c1.complete(handle, [("t", 0), ("t", 1)])
    c2.complete(handle, [("t", 2), ("t", 3)])
    assert tuple(_previous(c1.join_metadata(handle, {"t"}))) == ([TP("t", 0), TP("t", 1)], 5)
    assert tuple(_previous(c2.join_metadata(handle, {"t"}))) == ([TP("t", 2), TP("t", 3)], 6)


def test_members_send_v3_subscriptions_with_their_generation():
    c = FakeCoordinator(generation=9)
    c.complete(CooperativeStickyAssignor, [("t", 0)])
    sub = decode_subscription(c.join_metadata(CooperativeStickyAssignor, ["t"]))
    assert sub.topics == ["t"] and sub.generation_id == 9
    # plain aiokafka revoked everything before joining, so it claims nothing
    assert sub.owned_partitions == []


def test_a_failed_round_does_not_change_the_metadata():
    c = FakeCoordinator(generation=9)
    c.complete(CooperativeStickyAssignor, [("t", 0)])
    before = c.join_metadata(CooperativeStickyAssignor, ["t"])
    c.generation = 10  # JoinGroup answered generation 10, SyncGroup then failed
    assert c.join_metadata(CooperativeStickyAssignor, ["t"]) == before
    assert decode_subscription(before).generation_id == 9


def test_class_call_outside_a_consumer_is_refused_but_an_instance_works():
    with pytest.raises(TypeError, match="instance"):
        StickyAssignor.metadata(["t"])
    standalone = StickyAssignor()
    assert decode_subscription(standalone.metadata(["t"])).topics == ["t"]


def test_eager_sticky_through_aiokafkas_v0_leader_keeps_previous_assignments():
    """aiokafka's leader sees only topics and user data; sticky's V1 user data is enough."""
    c1, c2, c3 = FakeCoordinator(4), FakeCoordinator(4), FakeCoordinator(-1)
    c1.complete(StickyAssignor, [("t", 0), ("t", 1), ("t", 2)])
    c2.complete(StickyAssignor, [("t", 3), ("t", 4), ("t", 5)])
    metadata = {m: c.join_metadata(StickyAssignor, {"t"}) for m, c in (("m1", c1), ("m2", c2), ("m3", c3))}
    out = c1.lead(StickyAssignor, FakeCluster({"t": 6}), metadata)
    got = {m: set(decode_assignment(b).partitions) for m, b in out.items()}
    assert all(len(ps) == 2 for ps in got.values())
    assert got["m1"] <= {TP("t", p) for p in (0, 1, 2)}
    assert got["m2"] <= {TP("t", p) for p in (3, 4, 5)}
    assert set().union(*got.values()) == {TP("t", p) for p in range(6)}


def test_leader_survives_a_member_with_garbage_user_data():
    c1 = FakeCoordinator(3)
    c1.complete(StickyAssignor, [("t", 0), ("t", 1)])
    bad = ConsumerProtocolMemberMetadata(0, ["t"], b"\x00\x07garbage").encode()
    out = c1.lead(StickyAssignor, FakeCluster({"t": 4}), {"m1": c1.join_metadata(StickyAssignor, {"t"}), "bad": bad})
    got = {m: set(decode_assignment(b).partitions) for m, b in out.items()}
    assert set(got) == {"m1", "bad"} and set().union(*got.values()) == {TP("t", p) for p in range(4)}


def test_core_assignor_for_gives_each_consumer_a_fresh_assignor():
    shared = CooperativeStickyAssignor()
    a, b = core_assignor_for(shared), core_assignor_for(shared)
    assert a is not b and a.name == b.name == "cooperative-sticky"
    assert core_assignor_for(RangeAssignor).name == "range"
    with pytest.raises(TypeError, match="not a kassign assignor"):
        core_assignor_for(object())


@pytest.mark.asyncio
async def test_cooperative_consumer_picks_the_protocol_from_its_assignors():
    async def protocols():
        out = []
        for strategy in [(CooperativeStickyAssignor,), (RangeAssignor, CooperativeStickyAssignor), (StickyAssignor(),)]:
            consumer = CooperativeConsumer(bootstrap_servers="127.0.0.1:1", partition_assignment_strategy=strategy)
            out.append(consumer.rebalance_protocol)
            await consumer._client.close()
            consumer._closed = True
        return out

    assert await protocols() == [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER, RebalanceProtocol.EAGER]
    with pytest.raises(ValueError, match="must list assignors"):
        CooperativeConsumer(partition_assignment_strategy=())
