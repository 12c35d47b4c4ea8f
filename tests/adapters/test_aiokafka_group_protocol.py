"""The consumer-protocol pieces of the aiokafka adapter: protocol selection, member metadata, the
leader's lenient decoding, the cooperative rule and the encoded assignments."""

from __future__ import annotations

import logging
import struct

import pytest

pytest.importorskip("aiokafka")

from kassign.adapters.aiokafka.group_protocol import (  # noqa: E402
    IllegalCooperativeAssignment,
    decode_member_subscriptions,
    leader_assignment,
    member_metadata,
    read_member_subscriptions,
    select_rebalance_protocol,
)
from kassign.membership import IllegalCooperativeAssignment as CooperativeRuleBroken  # noqa: E402
from kassign.membership import check_cooperative_assignment  # noqa: E402
from kassign.model import RebalanceProtocol, Subscription, TopicPartition  # noqa: E402
from kassign.protocol import decode_assignment, decode_subscription, encode_subscription  # noqa: E402
from tests.adapters.fakes import FakeCluster  # noqa: E402

EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE
TP = TopicPartition


class StubAssignor:
    """Stands in for a kassign assignor: fixed protocols, fixed answer, records what it was given."""

    def __init__(self, name="stub", protocols=(EAGER,), answer=None, user_data=None):
        self.name = name
        self.supported_protocols = protocols
        self.answer = answer or {}
        self.user_data = user_data
        self.seen = None

    def subscription_user_data(self, topics):
        return self.user_data

    def assign(self, partitions_per_topic, subscriptions, *, partition_racks=None):
        self.seen = (dict(partitions_per_topic), dict(subscriptions), partition_racks)
        return {m: list(self.answer.get(m, [])) for m in subscriptions}


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def java_subscription_v1(topics, user_data, owned) -> bytes:
    """ConsumerProtocolSubscription v1 written field by field as Java lays it out."""
    out = struct.pack(">h", 1) + struct.pack(">i", len(topics)) + b"".join(_string(t) for t in topics)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    by_topic: dict[str, list[int]] = {}
    for topic, p in owned:
        by_topic.setdefault(topic, []).append(p)
    out += struct.pack(">i", len(by_topic))
    for topic, parts in by_topic.items():
        out += _string(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out


def test_protocol_is_the_most_capable_one_every_assignor_supports():
    coop = StubAssignor("cooperative-sticky", (COOPERATIVE, EAGER))
    rng = StubAssignor("range", (EAGER,))
    assert select_rebalance_protocol([coop]) is COOPERATIVE
    assert select_rebalance_protocol([rng, coop]) is EAGER
    assert select_rebalance_protocol([coop, rng]) is EAGER


def test_protocol_selection_rejects_no_assignor_and_disjoint_protocols():
    with pytest.raises(ValueError, match="at least one"):
        select_rebalance_protocol([])
    with pytest.raises(ValueError, match="no common"):
        select_rebalance_protocol([StubAssignor("a", (COOPERATIVE,)), StubAssignor("b", (EAGER,))])


def test_member_metadata_is_a_v3_subscription_with_owned_generation_and_rack():
    data = member_metadata(
        StubAssignor(user_data=b"\x00\x01"), {"b", "a"}, owned=[TP("b", 2), TP("a", 0)], generation=7, rack="rack-1"
    )
    assert struct.unpack(">h", data[:2])[0] == 3
    sub = decode_subscription(data)
    assert sub.topics == ["a", "b"]
    assert sub.user_data == b"\x00\x01"
    assert sorted(sub.owned_partitions) == [TP("a", 0), TP("b", 2)]
    assert sub.generation_id == 7 and sub.rack_id == "rack-1"


def test_member_metadata_without_generation_sends_none():
    sub = decode_subscription(member_metadata(StubAssignor(), ["t"], generation=-1))
    assert sub.generation_id is None and sub.owned_partitions == [] and sub.rack_id is None


def test_leader_reads_owned_partitions_from_java_v1_bytes_and_instance_ids():
    members = [
        ("m1", "static-1", java_subscription_v1(["t"], b"ud", [("t", 0), ("t", 3)])),
        ("m2", None, java_subscription_v1(["t", "u"], None, [])),
    ]
    subs = decode_member_subscriptions(members)
    assert subs["m1"].owned_partitions == [TP("t", 0), TP("t", 3)]
    assert subs["m1"].user_data == b"ud" and subs["m1"].group_instance_id == "static-1"
    assert subs["m2"].topics == ["t", "u"] and subs["m2"].group_instance_id is None


def test_leader_survives_malformed_metadata(caplog):
    good = java_subscription_v1(["t"], None, [("t", 1)])
    truncated = good[:-3]  # topics readable, owned partitions cut short
    members = [("ok", good), ("cut", truncated), ("junk", b"\xff")]
    with caplog.at_level(logging.ERROR):
        subs = decode_member_subscriptions(members)
    assert subs["ok"].owned_partitions == [TP("t", 1)]
    assert subs["cut"].topics == ["t"] and subs["cut"].owned_partitions == [] and subs["cut"].user_data is None
    assert subs["junk"].topics == []
    assert "cut" in caplog.text and "junk" in caplog.text


def test_cooperative_rule_rejects_a_partition_moved_while_owned():
    subs = {"a": Subscription(["t"], None, [TP("t", 0), TP("t", 1)], 3), "b": Subscription(["t"], None, [], 3)}
    check_cooperative_assignment({"a": [TP("t", 0), TP("t", 1)], "b": [TP("t", 2)]}, subs)  # unowned: fine
    check_cooperative_assignment({"a": [TP("t", 0)], "b": [TP("t", 2)]}, subs)  # withheld: fine
    with pytest.raises(CooperativeRuleBroken, match=r"t-1 to b \(owned by a\)"):
        check_cooperative_assignment({"a": [TP("t", 0)], "b": [TP("t", 1)]}, subs)


def test_leader_assignment_encodes_every_member_and_never_empty_bytes():
    assignor = StubAssignor(answer={"a": [TP("t", 1), TP("t", 0)]})
    subs = {"a": Subscription(["t"]), "b": Subscription(["t", "missing"])}
    out = leader_assignment(assignor, FakeCluster({"t": 2}), subs, EAGER)
    assert set(out) == {"a", "b"} and all(len(v) > 0 for v in out.values())
    assert sorted(decode_assignment(out["a"]).partitions) == [TP("t", 0), TP("t", 1)]
    assert list(decode_assignment(out["b"]).partitions) == []
    assert assignor.seen[0] == {"t": 2}  # a topic without metadata has no partitions to hand out


def test_leader_assignment_fails_loudly_on_a_cooperative_violation():
    subs = {"a": Subscription(["t"], None, [TP("t", 0)], 1), "b": Subscription(["t"], None, [], 1)}
    thief = StubAssignor(answer={"b": [TP("t", 0)]})
    with pytest.raises(IllegalCooperativeAssignment):
        leader_assignment(thief, FakeCluster({"t": 1}), subs, COOPERATIVE)
    # The same answer is legal under the eager protocol, where everybody revoked first.
    assert set(leader_assignment(thief, FakeCluster({"t": 1}), subs, EAGER)) == {"a", "b"}


def test_an_unreadable_member_gets_nothing_and_unclaimed_partitions_wait_a_round():
    """Cooperative: ``u``'s metadata does not parse, so it may own partitions nobody can see (here it
    does own t-1 and t-2). Round 1 gives it nothing (it revokes everything) and hands out no partition
    that no readable member claims; round 2, with ``u`` known to own nothing, hands everything out."""
    from kassign.assignors import CooperativeStickyAssignor

    members = [
        ("a", encode_subscription(Subscription(["t"], None, [TP("t", 0)], 4))),
        ("b", encode_subscription(Subscription(["t"], None, [], 4))),
        ("u", b"\x00\x03\xff\xff"),
    ]
    subs, unreadable = read_member_subscriptions(members)
    assert unreadable == {"u"}
    first = leader_assignment(
        CooperativeStickyAssignor(), FakeCluster({"t": 4}), subs, COOPERATIVE, unreadable=unreadable, may_own=unreadable
    )
    got = {m: set(decode_assignment(b).partitions) for m, b in first.items()}
    assert got == {"a": {TP("t", 0)}, "b": set(), "u": set()}, got
    second = leader_assignment(
        CooperativeStickyAssignor(), FakeCluster({"t": 4}), subs, COOPERATIVE, unreadable=unreadable, may_own=()
    )
    got = {m: set(decode_assignment(b).partitions) for m, b in second.items()}
    assert got["u"] == set() and got["a"] | got["b"] == {TP("t", p) for p in range(4)} and not got["a"] & got["b"]


def test_eager_rounds_need_no_withholding_for_unreadable_members():
    members = [("a", java_subscription_v1(["t"], None, [])), ("u", b"\xff")]
    subs, unreadable = read_member_subscriptions(members)
    out = leader_assignment(
        StubAssignor(answer={"a": [TP("t", 0), TP("t", 1)]}),
        FakeCluster({"t": 2}),
        subs,
        EAGER,
        unreadable=unreadable,
        may_own=unreadable,
    )
    assert sorted(decode_assignment(out["a"]).partitions) == [TP("t", 0), TP("t", 1)]
