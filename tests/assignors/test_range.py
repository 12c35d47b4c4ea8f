"""RangeAssignor: identical results to Java 3.9's RangeAssignor (rack-aware and co-partitioned
cases included) on random groups, plus the range invariants on generated input."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from eager_scenarios import parse_answer, random_scenario, run_java_batch, to_request
from hypothesis import given, settings
from hypothesis import strategies as st

from kassign import Subscription, TopicPartition
from kassign.assignors.range import RangeAssignor

SCENARIOS = 400


@pytest.mark.java
def test_matches_java_on_random_groups() -> None:
    rng = random.Random(881)
    scenarios = [random_scenario(rng) for _ in range(SCENARIOS)]
    answers = run_java_batch([to_request("range", s) for s in scenarios])
    rack_aware_seen = 0
    for scenario, answer in zip(scenarios, answers):
        ours = RangeAssignor().assign(
            scenario.partitions_per_topic, scenario.subscriptions, partition_racks=scenario.partition_racks
        )
        java = parse_answer(answer)
        assert {m: sorted(p) for m, p in ours.items()} == {m: sorted(p) for m, p in java.items()}, scenario
        without_racks = RangeAssignor().assign(scenario.partitions_per_topic, scenario.subscriptions)
        rack_aware_seen += {m: sorted(p) for m, p in ours.items()} != {m: sorted(p) for m, p in without_racks.items()}
    # The scenarios must exercise the rack-aware path, not just plain ranges.
    assert rack_aware_seen > SCENARIOS // 10


def test_kafka_javadoc_example() -> None:
    """RangeAssignor's javadoc: C0, C1 on t0, t1 with 3 partitions each."""
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert sorted(got["C0"]) == [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]
    assert sorted(got["C1"]) == [("t0", 2), ("t1", 2)]


def test_rack_aware_prefers_local_replicas() -> None:
    """Two members in different racks, each partition replicated on one rack only."""
    subs = {"a": Subscription(["t"], rack_id="r1"), "b": Subscription(["t"], rack_id="r2")}
    racks = {TopicPartition("t", p): {"r1" if p % 2 == 0 else "r2"} for p in range(4)}
    got = RangeAssignor().assign({"t": 4}, subs, partition_racks=racks)
    assert sorted(got["a"]) == [("t", 0), ("t", 2)]
    assert sorted(got["b"]) == [("t", 1), ("t", 3)]


def test_static_members_come_first_in_instance_id_order() -> None:
    subs = {
        "a": Subscription(["t"]),
        "b": Subscription(["t"], group_instance_id="z"),
        "c": Subscription(["t"], group_instance_id="y"),
    }
    got = RangeAssignor().assign({"t": 3}, subs)
    assert got == {"c": [("t", 0)], "b": [("t", 1)], "a": [("t", 2)]}


def test_topics_without_partitions_and_empty_groups() -> None:
    assert RangeAssignor().assign({}, {}) == {}
    assert RangeAssignor().assign({"t": 0}, {"a": Subscription(["t", "missing"])}) == {"a": []}


def test_rejects_bad_input() -> None:
    with pytest.raises(TypeError, match="'t'"):
        RangeAssignor().assign({"t": "3"}, {"a": Subscription(["t"])})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="-1"):
        RangeAssignor().assign({"t": -1}, {"a": Subscription(["t"])})


members = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=3), st.lists(st.sampled_from(["t0", "t1", "t2"]), unique=True), max_size=8
)
counts = st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 30))


@settings(max_examples=150, deadline=None)
@given(counts, members)
def test_each_topic_is_split_into_contiguous_near_equal_ranges(partitions_per_topic, topics_by_member) -> None:
    subs = {m: Subscription(topics) for m, topics in topics_by_member.items()}
    got = RangeAssignor().assign(partitions_per_topic, subs)
    assert set(got) == set(subs)
    for topic, n in partitions_per_topic.items():
        subscribers = sorted(m for m, t in topics_by_member.items() if topic in t)
        owned = {m: sorted(p for t, p in got[m] if t == topic) for m in got}
        if not subscribers:
            assert all(not ps for ps in owned.values())
            continue
        assert sorted(p for m in subscribers for p in owned[m]) == list(range(n))
        sizes = [len(owned[m]) for m in subscribers]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
        flattened = [p for m in subscribers for p in owned[m]]  # in member order: 0..n-1 in sequence
        assert flattened == list(range(n))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(1, 6),
    st.lists(st.sampled_from(["r0", "r1", "r2"]), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_rack_aware_keeps_the_quota_and_assigns_everything(n, k, member_racks, rnd) -> None:
    subs = {f"m{i}": Subscription(["t", "u"], rack_id=member_racks[i % len(member_racks)]) for i in range(k)}
    racks = {TopicPartition(t, p): {rnd.choice(["r0", "r1", "r2"])} for t in ("t", "u") for p in range(n)}
    got = RangeAssignor().assign({"t": n, "u": n}, subs, partition_racks=racks)
    for topic in ("t", "u"):
        per_member = Counter(m for m, ps in got.items() for t, _ in ps if t == topic)
        sizes = [per_member.get(m, 0) for m in subs]
        assert sum(sizes) == n and max(sizes) <= -(-n // k) and min(sizes) >= n // k
    # Co-partitioned topics keep partition p of both topics on the same member.
    for ps in got.values():
        assert sorted(p for t, p in ps if t == "t") == sorted(p for t, p in ps if t == "u")


RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"


def _recorded_range_settles() -> list[tuple[str, str, dict[str, list[int]]]]:
    settles = []
    for meta_path in sorted(RECORDINGS.glob("*-range-*/meta.json")):
        meta = json.loads(meta_path.read_text())
        for phase in ("settle_initial", "settle_out", "settle_in"):
            if meta.get(phase, {}).get("ok"):
                settles.append((meta["label"], phase, meta[phase]["assignment"]))
    return settles


def test_reproduces_the_range_splits_recorded_from_java_and_librdkafka_groups() -> None:
    """Real groups (data/rebalance-timelines, not produced by kassign) settled on Java's and
    librdkafka's range assignment of 24 partitions: with member ids that sort in the same order as
    the recorded members, RangeAssignor gives every member the same partitions."""
    settles = _recorded_range_settles()
    assert len(settles) >= 12, "the recorded range runs are missing"
    for label, phase, recorded in settles:
        # Kafka orders members by member id, which the recording anonymised: recover the order from
        # the split itself (range hands out ascending blocks in member order).
        order = sorted(recorded, key=lambda m: min(recorded[m], default=1 << 30))
        ids = {m: f"member-{i:02d}" for i, m in enumerate(order)}
        got = RangeAssignor().assign({"t": 24}, {ids[m]: Subscription(["t"]) for m in recorded})
        assert {m: sorted(p for _, p in got[ids[m]]) for m in recorded} == recorded, (label, phase)
