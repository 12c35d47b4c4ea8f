"""kassign.placement.assign_replicas_to_brokers: Kafka's vectors, Kafka's answers on random
clusters (kafka_vectors.jsonl, from Kafka's own AdminUtils), and placement properties."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kassign.placement import assign_replicas_to_brokers, rack_alternated_broker_list, reassignment_json

VECTORS = Path(__file__).with_name("kafka_vectors.jsonl")


def test_kafka_rack_unaware_vector() -> None:
    """AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0."""
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0) == expected
    assert assign_replicas_to_brokers({b: None for b in range(5)}, 10, 3, fixed_start_index=0) == expected


def test_kafka_rack_aware_vector() -> None:
    """AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers."""
    racks = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    expected = {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}
    assert assign_replicas_to_brokers(racks, 7, 3, fixed_start_index=0, start_partition_id=0) == expected
    # Rack-aware placement does not depend on the order brokers are listed in.
    assert assign_replicas_to_brokers(dict(reversed(racks.items())), 7, 3, fixed_start_index=0) == expected


def _cases() -> list[dict]:
    return [json.loads(line) for line in VECTORS.read_text().splitlines()]


def test_matches_kafka_admin_utils_on_random_clusters() -> None:
    cases = _cases()
    assert len(cases) >= 200
    for case in cases:
        brokers = {b: r for b, r in case["brokers"]}
        args = (brokers, case["partitions"], case["replication_factor"])
        kwargs = {"fixed_start_index": case["fixed_start_index"], "start_partition_id": case["start_partition_id"]}
        if "error" in case:
            with pytest.raises(ValueError) as info:
                assign_replicas_to_brokers(*args, **kwargs)
            assert str(info.value) == case["error"]
        else:
            expected = {int(p): replicas for p, replicas in case["expected"].items()}
            assert assign_replicas_to_brokers(*args, **kwargs) == expected, case


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "reason"),
    [
        ([0, 1, 2], 0, 1, "Number of partitions must be larger than 0."),
        ([0, 1, 2], 3, 0, "Replication factor must be larger than 0."),
        ([0, 1, 2], 3, 4, "Replication factor: 4 larger than available brokers: 3."),
        (
            {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: None},
            10,
            5,
            "Not all brokers have rack information for replica rack aware assignment.",
        ),
    ],
)
def test_kafka_errors(brokers, partitions, rf, reason) -> None:
    with pytest.raises(ValueError) as info:
        assign_replicas_to_brokers(brokers, partitions, rf)
    assert str(info.value) == reason


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(TypeError, match="'b1'"):
        assign_replicas_to_brokers(["b1"], 1, 1)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="listed twice"):
        assign_replicas_to_brokers([1, 1], 1, 1)
    with pytest.raises(ValueError, match="-2"):
        assign_replicas_to_brokers([1], 1, 1, fixed_start_index=-2)
    with pytest.raises(TypeError, match="rack of broker 1"):
        assign_replicas_to_brokers({1: 5}, 1, 1)  # type: ignore[dict-item]


def test_random_start_draws_from_rng() -> None:
    brokers = list(range(7))
    outcomes = {json.dumps(assign_replicas_to_brokers(brokers, 9, 3, rng=random.Random(seed))) for seed in range(60)}
    assert len(outcomes) > 7  # start index and shift are drawn independently: up to 49 outcomes
    assert assign_replicas_to_brokers(brokers, 9, 3, rng=random.Random(5)) == assign_replicas_to_brokers(
        brokers, 9, 3, rng=random.Random(5)
    )
    # Whatever was drawn, leaders still walk the broker list in order from a start index.
    for outcome in map(json.loads, outcomes):
        first = brokers.index(outcome["0"][0])
        assert [outcome[str(p)][0] for p in range(9)] == [brokers[(first + p) % 7] for p in range(9)]
    # Kafka's fixed-start outcomes are among the random ones (start index == shift).
    assert any(json.dumps(assign_replicas_to_brokers(brokers, 9, 3, fixed_start_index=s)) in outcomes for s in range(7))


clusters = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 99), min_size=n, max_size=n, unique=True),
        st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(clusters, st.integers(1, 60), st.data())
def test_placement_properties(cluster, n_partitions, data) -> None:
    ids, racks = cluster
    rack_aware = data.draw(st.booleans())
    brokers = dict(zip(ids, racks)) if rack_aware else ids
    rf = data.draw(st.integers(1, len(ids)))
    start = data.draw(st.integers(-1, 3 * len(ids)))
    result = assign_replicas_to_brokers(
        brokers, n_partitions, rf, fixed_start_index=start, rng=random.Random(data.draw(st.integers(0, 1000)))
    )
    assert sorted(result) == list(range(n_partitions))
    for replicas in result.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in result.values())
    n = len(ids)
    # Leaders go round robin over the brokers: counts differ by at most one.
    assert max(leaders.get(b, 0) for b in ids) - min(leaders.get(b, 0) for b in ids) <= 1
    if rack_aware:
        n_racks = len(set(racks))
        for replicas in result.values():  # as many racks as possible, at most one replica per rack until all have one
            assert len({brokers[b] for b in replicas}) == min(rf, n_racks)
    if not rack_aware and n_partitions % n == 0:
        # Full passes over the brokers: every broker holds the same number of replicas.
        counts = Counter(b for replicas in result.values() for b in replicas)
        assert len(set(counts[b] for b in ids)) == 1


def test_replicas_spread_evenly_when_racks_are_balanced() -> None:
    """AdminRackAwareTest.testAssignmentWithRackAware's checks: 6 brokers in 3 racks, RF 3."""
    brokers = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    for start in range(6):
        result = assign_replicas_to_brokers(brokers, 6, 3, fixed_start_index=start, start_partition_id=0)
        assert Counter(r[0] for r in result.values()) == Counter(dict.fromkeys(brokers, 1))
        assert Counter(b for r in result.values() for b in r) == Counter(dict.fromkeys(brokers, 3))
        assert all(len({brokers[b] for b in r}) == 3 for r in result.values())


def test_reassignment_json_shape() -> None:
    doc = reassignment_json("orders", {1: [2, 0], 0: [0, 1]})
    assert doc == {
        "version": 1,
        "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [0, 1]},
            {"topic": "orders", "partition": 1, "replicas": [2, 0]},
        ],
    }
    with pytest.raises(ValueError):
        reassignment_json("", {})


def test_negative_broker_ids_are_rejected():
    with pytest.raises(ValueError, match="-1"):
        assign_replicas_to_brokers([-1, 0, 1], 3, 2, fixed_start_index=0)
