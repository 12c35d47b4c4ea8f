"""Scenarios from other Kafka clients' sticky-assignor suites (aiokafka's and kafka-python's
``test_assignors.py``), written for kassign: the same groups and changes, checked for what those
suites expect: validity, balance, the exact layouts where they pin one, and stickiness (a member
keeps what it owned unless balance needs it elsewhere)."""

from __future__ import annotations

import pytest

from kassign import Subscription, TopicPartition
from kassign.assignors import CooperativeStickyAssignor, StickyAssignor
from kassign.protocol import encode_sticky_user_data
from tests.assignors.sticky_checks import assert_balanced, assert_valid

TP = TopicPartition


def _assign(topics: dict[str, int], subscriptions: dict[str, list[str]],
            previous: dict[str, list[TopicPartition]] | None = None, generations: dict[str, int] | None = None
            ) -> dict[str, list[TopicPartition]]:
    previous, generations = previous or {}, generations or {}
    subs = {m: Subscription(sorted(ts), encode_sticky_user_data(previous.get(m, []), generations.get(m, 1)))
            for m, ts in subscriptions.items()}
    result = StickyAssignor().assign(topics, subs)
    plain = {m: Subscription(sorted(ts)) for m, ts in subscriptions.items()}
    assert_valid(topics, plain, result)
    assert_balanced(topics, plain, result)
    return {m: sorted(ps) for m, ps in result.items()}


def _kept_everything_it_could(before: dict[str, list[TopicPartition]], after: dict[str, list[TopicPartition]]) -> None:
    """No surviving member lost a partition while another survivor ended with fewer partitions than it."""
    for m, owned in before.items():
        if m not in after:
            continue
        for tp in set(owned) - set(after[m]):
            new = next((o for o, ps in after.items() if tp in ps), None)
            assert new is None or len(after[new]) > len(after[m]), (tp, m, new, after)


def _tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TP(topic, p) for p in partitions]


def test_prefix_subscriptions_and_the_first_member_leaving():
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    first = _assign(topics, subs)
    assert first == {"C0": _tps("t0", 0), "C1": _tps("t1", 0, 1), "C2": _tps("t2", 0, 1, 2)}
    del subs["C0"]
    second = _assign(topics, subs, first)
    assert second == {"C1": _tps("t0", 0) + _tps("t1", 0, 1), "C2": _tps("t2", 0, 1, 2)}


@pytest.mark.parametrize(("topics", "subscribed", "expected"), [
    ({}, [], []),
    ({}, ["t"], []),
    ({"t": 3}, ["t"], _tps("t", 0, 1, 2)),
    ({"t": 3, "other-t": 3}, ["t"], _tps("t", 0, 1, 2)),
    ({"t1": 3, "t2": 3}, ["t1", "t2"], _tps("t1", 0, 1, 2) + _tps("t2", 0, 1, 2)),
    ({"t1": 1, "t3": 100}, ["t1", "t2", "t3"], _tps("t1", 0) + _tps("t3", *range(100))),  # t2 deleted
], ids=["no-topic", "missing-topic", "one-topic", "only-subscribed", "two-topics", "deleted-topic"])
def test_one_member(topics, subscribed, expected):
    assert _assign(topics, {"C": subscribed}) == {"C": expected}


def test_only_subscribed_topic_deleted_leaves_an_empty_assignment():
    first = _assign({"t": 3}, {"C": ["t"]})
    assert _assign({}, {"C": []}, first) == {"C": []}


def test_two_members_one_partition_and_two_partitions():
    one = _assign({"t": 1}, {"C1": ["t"], "C2": ["t"]})
    assert sorted(map(len, one.values())) == [0, 1]
    assert _assign({"t": 2}, {"C1": ["t"], "C2": ["t"]}) == {"C1": _tps("t", 0), "C2": _tps("t", 1)}


def test_mixed_subscriptions_give_the_only_t2_subscriber_all_of_t2():
    result = _assign({"t1": 3, "t2": 2}, {"C1": ["t1"], "C2": ["t1", "t2"], "C3": ["t1"]})
    assert result["C2"] == _tps("t2", 0, 1)
    assert sorted(result["C1"] + result["C3"]) == _tps("t1", 0, 1, 2)


def test_add_and_remove_a_member_of_one_topic():
    first = _assign({"t": 3}, {"C1": ["t"]})
    second = _assign({"t": 3}, {"C1": ["t"], "C2": ["t"]}, first)
    assert set(second["C1"]) <= set(first["C1"]) and len(second["C1"]) == 2
    assert _assign({"t": 3}, {"C2": ["t"]}, second) == {"C2": _tps("t", 0, 1, 2)}


def test_add_and_remove_a_topic_of_two_members():
    topics = {"t1": 3, "t2": 3}
    first = _assign(topics, {"C1": ["t1"], "C2": ["t1"]})
    second = _assign(topics, {"C1": ["t1", "t2"], "C2": ["t1", "t2"]}, first)
    for m in first:
        assert set(first[m]) <= set(second[m])
    assert sorted(map(len, second.values())) == [3, 3]
    third = _assign(topics, {"C1": ["t2"], "C2": ["t2"]}, second)
    for m in second:
        assert {tp for tp in second[m] if tp.topic == "t2"} <= set(third[m])


def test_one_of_nineteen_prefix_subscribers_leaves():
    topics = {f"t{i}": i for i in range(1, 20)}
    subs = {f"C{i}": [f"t{j}" for j in range(1, i + 1)] for i in range(1, 20)}
    first = _assign(topics, subs)
    del subs["C10"]
    _kept_everything_it_could(first, _assign(topics, subs, first))


def test_a_tenth_member_joins_nine_on_twenty_partitions():
    subs = {f"C{i}": ["t"] for i in range(1, 10)}
    first = _assign({"t": 20}, subs)
    subs["C10"] = ["t"]
    second = _assign({"t": 20}, subs, first)
    moved = sum(len(set(first[m]) - set(second[m])) for m in first)
    assert moved == len(second["C10"]) == 2  # exactly the newcomer's share moves


def test_same_subscriptions_and_a_member_leaving():
    topics = {f"t{i}": i for i in range(1, 15)}
    subs = {f"C{i}": list(topics) for i in range(1, 9)}
    first = _assign(topics, subs)
    del subs["C5"]
    second = _assign(topics, subs, first)
    for m in second:
        assert set(first[m]) <= set(second[m]), m  # survivors keep everything (no one is above quota)


def test_existing_assignments_move_only_as_balance_needs():
    topics = {f"t{i}": 1 for i in range(1, 7)}
    subs = {"C1": ["t1", "t2"], "C2": ["t1", "t2", "t3", "t4"], "C3": ["t2", "t3", "t4", "t5", "t6"]}
    previous = {"C1": _tps("t1", 0), "C2": _tps("t2", 0) + _tps("t3", 0),
                "C3": _tps("t4", 0) + _tps("t5", 0) + _tps("t6", 0)}
    result = _assign(topics, subs, previous)
    assert sorted(map(len, result.values())) == [2, 2, 2]


def test_stickiness_when_the_leader_leaves():
    subs = {f"C{i}": ["t"] for i in range(1, 5)}
    first = _assign({"t": 3}, subs)
    del subs["C1"]
    second = _assign({"t": 3}, subs, first)
    for m in second:
        assert len(second[m]) == 1
        assert not first[m] or first[m] == second[m], m


def test_conflicting_claims_in_the_same_generation():
    subs = {"C1": ["t"], "C2": ["t"]}
    result = _assign({"t": 2}, subs, {"C1": _tps("t", 0, 0), "C2": _tps("t", 0, 0)}, {"C1": 1, "C2": 1})
    assert sorted(map(len, result.values())) == [1, 1]


def test_multiple_generations_a_member_leaves_then_returns():
    """aiokafka's multiple_generations1: C3 leaves (C1 and C2 keep theirs, 3 each); C3 returns with its
    generation-1 claims while C2 holds generation 2: balanced again, C2 keeps its own."""
    subs = {"C1": ["t"], "C2": ["t"], "C3": ["t"]}
    first = _assign({"t": 6}, subs)
    second = _assign({"t": 6}, {"C1": ["t"], "C2": ["t"]}, first)
    for m in ("C1", "C2"):
        assert set(first[m]) <= set(second[m]) and len(second[m]) == 3
    third = _assign({"t": 6}, {"C2": ["t"], "C3": ["t"]}, {"C2": second["C2"], "C3": first["C3"]},
                    {"C2": 2, "C3": 1})
    assert third["C2"] == second["C2"] and len(third["C3"]) == 3


@pytest.mark.parametrize("seed", range(10))
def test_random_subscriptions_change_and_stay_valid_balanced_and_sticky(seed):
    import random

    rng = random.Random(seed)
    names = [f"t{i}" for i in range(1, rng.randint(10, 20) + 1)]
    topics = {t: i for i, t in enumerate(names)}
    members = [f"C{i}" for i in range(rng.randint(20, 40))]
    first = _assign(topics, {m: rng.sample(names, rng.randint(1, len(names) - 1)) for m in members})
    changed = {m: rng.sample(names, rng.randint(1, len(names) - 1)) for m in members}
    second = _assign(topics, changed, first)
    # A partition still subscribed by its owner moves only to a member that ends with fewer partitions.
    for m in members:
        for tp in first[m]:
            if tp.topic in changed[m] and tp not in second[m]:
                new = next(o for o, ps in second.items() if tp in ps)
                assert len(second[new]) < len(second[m]) + 1, (seed, tp, m, new)


def test_cooperative_sticky_reaches_the_same_layout_in_two_rounds():
    """The prefix-subscription scenario under cooperative-sticky: round 1 withholds what changes owner,
    round 2 (after revocation) hands it out; the end state equals the sticky assignor's."""
    from kassign.protocol import encode_cooperative_user_data

    topics = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    owned = {"C1": _tps("t1", 0, 1), "C2": _tps("t2", 0, 1, 2)}
    coop = {m: Subscription(ts, encode_cooperative_user_data(3), owned[m], 3) for m, ts in subs.items()}
    result = CooperativeStickyAssignor().assign(topics, coop)
    assert {m: sorted(ps) for m, ps in result.items()} == {"C1": _tps("t0", 0) + _tps("t1", 0, 1),
                                                           "C2": _tps("t2", 0, 1, 2)}
