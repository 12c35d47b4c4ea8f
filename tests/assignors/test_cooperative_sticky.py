"""CooperativeStickyAssignor: no partition revoked and added in one round; rounds converge to eager's balance."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from kassign import RebalanceProtocol, Subscription, TopicPartition
from kassign.assignors import CooperativeStickyAssignor, StickyAssignor
from kassign.protocol import decode_cooperative_user_data, encode_cooperative_user_data, encode_sticky_user_data
from tests.assignors.sticky_checks import assert_balanced, assert_valid
from tests.assignors.sticky_scenarios import cooperative_subscriptions, scenarios

TP = TopicPartition
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_cooperative(subscriptions, assignment) -> None:
    """A partition added to a member is claimed by no other member (it was revoked first)."""
    for member, parts in assignment.items():
        mine = set(subscriptions[member].owned_partitions)
        for tp in parts:
            if tp not in mine:
                others = [m for m, s in subscriptions.items() if m != member and tp in s.owned_partitions]
                assert not others, f"{tp} added to {member} while {others} still own it"


@SETTINGS
@given(scenarios())
def test_no_partition_is_revoked_and_added_in_one_round(scenario):
    topics, claims, subs, racks, partition_racks = scenario
    subscriptions = cooperative_subscriptions(subs, claims, racks)
    a = CooperativeStickyAssignor()
    result = a.assign(topics, subscriptions, partition_racks=partition_racks)
    assert_cooperative(subscriptions, result)
    eager = StickyAssignor().assign(
        topics,
        {
            m: Subscription(s.topics, encode_sticky_user_data(*claims[m]), [], None, s.rack_id)
            for m, s in subscriptions.items()
        },
        partition_racks=partition_racks,
    )
    for m, parts in result.items():
        assert set(parts) <= set(eager[m])
    held_back = {tp for m in eager for tp in set(eager[m]) - set(result[m])}
    assert held_back == set(a.partitions_transferring_ownership)


@SETTINGS
@given(scenarios(racks=False))
def test_rounds_converge_to_a_balanced_assignment(scenario):
    """Members revoke what they lost and rejoin; within a few rounds nothing is held back any more."""
    topics, claims, subs, racks, _ = scenario
    subscriptions = cooperative_subscriptions(subs, claims, racks)
    a = CooperativeStickyAssignor()
    generation = 10
    for _ in range(4):
        result = a.assign(topics, subscriptions)
        assert_cooperative(subscriptions, result)
        if not a.partitions_transferring_ownership:
            break
        generation += 1
        subscriptions = {m: Subscription(s.topics, None, result[m], generation) for m, s in subscriptions.items()}
    else:
        raise AssertionError("still moving partitions after 4 rounds")
    plain = {m: Subscription(s.topics) for m, s in subscriptions.items()}
    assert_valid(topics, plain, result)
    assert_balanced(topics, plain, result)
    eager = StickyAssignor().assign(topics, plain)
    if len({frozenset(t for t in s.topics if topics.get(t)) for s in plain.values()}) == 1:
        assert sorted(map(len, result.values())) == sorted(map(len, eager.values()))


def test_generation_from_user_data_when_the_subscription_has_none():
    a = CooperativeStickyAssignor()
    old = Subscription(["t"], encode_cooperative_user_data(2), [TP("t", 0)])
    new = Subscription(["t"], encode_cooperative_user_data(3), [TP("t", 0)])
    a.assign({"t": 2}, {"old": old, "new": new})
    assert a.member_data("old", old) == ([TP("t", 0)], 2)
    result = a.assign({"t": 2}, {"old": old, "new": new})
    assert TP("t", 0) in result["new"]


def test_librdkafka_sticky_layout_user_data():
    sub = Subscription(["t"], encode_sticky_user_data([TP("t", 1)], 6), [TP("t", 1)])
    assert CooperativeStickyAssignor().member_data("m", sub) == ([TP("t", 1)], 6)


def test_garbage_user_data_means_generation_minus_one():
    result = CooperativeStickyAssignor().assign(
        {"t": 2},
        {"a": Subscription(["t"], b"\x01\x02\x03", [TP("t", 0)]), "b": Subscription(["t"], None, [TP("t", 0)], 1)},
    )
    assert TP("t", 0) in result["b"] and result["a"] == [TP("t", 1)]


def test_contract():
    a, b = CooperativeStickyAssignor(), CooperativeStickyAssignor()
    assert a.name == "cooperative-sticky"
    assert RebalanceProtocol.COOPERATIVE in a.supported_protocols and RebalanceProtocol.EAGER in a.supported_protocols
    assert decode_cooperative_user_data(a.subscription_user_data({"t"})) == -1
    a.on_assignment([TP("t", 0)], 9)
    assert decode_cooperative_user_data(a.subscription_user_data(["t"])) == 9
    assert decode_cooperative_user_data(b.subscription_user_data(["t"])) == -1
