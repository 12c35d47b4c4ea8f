"""RoundRobinAssignor: identical results to Java's RoundRobinAssignor on random groups (static
members, uneven subscriptions, missing topics), plus round-robin invariants on generated input."""

from __future__ import annotations

import random

import pytest
from eager_scenarios import parse_answer, random_scenario, run_java_batch, to_request
from hypothesis import given, settings
from hypothesis import strategies as st

from kassign import Subscription
from kassign.assignors.roundrobin import RoundRobinAssignor

SCENARIOS = 400


@pytest.mark.java
def test_matches_java_on_random_groups() -> None:
    rng = random.Random(429)
    scenarios = [random_scenario(rng) for _ in range(SCENARIOS)]
    answers = run_java_batch([to_request("roundrobin", s) for s in scenarios])
    for scenario, answer in zip(scenarios, answers):
        ours = RoundRobinAssignor().assign(
            scenario.partitions_per_topic, scenario.subscriptions, partition_racks=scenario.partition_racks
        )
        # Round robin hands out partitions in (topic, partition) order, so even list order matches.
        assert ours == parse_answer(answer), scenario


def test_kafka_javadoc_example() -> None:
    """RoundRobinAssignor's javadoc: C0 on t0; C1 on t0, t1; C2 on t0, t1, t2 (1, 2, 3 partitions)."""
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]), "C2": Subscription(["t0", "t1", "t2"])}
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert got == {"C0": [("t0", 0)], "C1": [("t1", 0)], "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]}


def test_static_members_are_ordered_by_instance_id() -> None:
    subs = {
        "a": Subscription(["t"], group_instance_id="2"),
        "b": Subscription(["t"], group_instance_id="1"),
        "c": Subscription(["t"]),
    }
    assert RoundRobinAssignor().assign({"t": 4}, subs) == {"b": [("t", 0), ("t", 3)], "a": [("t", 1)], "c": [("t", 2)]}


def test_empty_group_and_missing_topics() -> None:
    assert RoundRobinAssignor().assign({"t": 3}, {}) == {}
    assert RoundRobinAssignor().assign({}, {"a": Subscription(["t"]), "b": Subscription([])}) == {"a": [], "b": []}


def test_rejects_bad_input() -> None:
    with pytest.raises(TypeError, match="member 'a'"):
        RoundRobinAssignor().assign({"t": 1}, {"a": ["t"]})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="partition_racks"):
        RoundRobinAssignor().assign({"t": 1}, {"a": Subscription(["t"])}, partition_racks=["r1"])  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["t0", "t1", "t2", "t3"]), st.integers(0, 25)),
    st.lists(st.text("xyz", min_size=1, max_size=4), min_size=1, max_size=9, unique=True),
    st.lists(st.sampled_from(["t0", "t1", "t2", "t3"]), unique=True),
)
def test_identical_subscriptions_balance_within_one(partitions_per_topic, members, topics) -> None:
    subs = {m: Subscription(topics) for m in members}
    got = RoundRobinAssignor().assign(partitions_per_topic, subs)
    everything = sorted((t, p) for t in topics for p in range(partitions_per_topic.get(t, 0)))
    assert sorted(tp for ps in got.values() for tp in ps) == everything
    sizes = [len(ps) for ps in got.values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 12)),
    st.dictionaries(
        st.text("xyz", min_size=1, max_size=4),
        st.lists(st.sampled_from(["t0", "t1", "t2"]), unique=True),
        min_size=1,
        max_size=8,
    ),
)
def test_each_partition_goes_once_to_a_subscriber(partitions_per_topic, topics_by_member) -> None:
    got = RoundRobinAssignor().assign(partitions_per_topic, {m: Subscription(t) for m, t in topics_by_member.items()})
    subscribed = {t for ts in topics_by_member.values() for t in ts}
    everything = sorted((t, p) for t in subscribed for p in range(partitions_per_topic.get(t, 0)))
    assert sorted(tp for ps in got.values() for tp in ps) == everything
    for member, partitions in got.items():
        assert all(t in topics_by_member[member] for t, _ in partitions)
