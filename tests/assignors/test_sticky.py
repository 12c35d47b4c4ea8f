"""StickyAssignor: validity, balance and stickiness on generated scenarios, plus the Java rules."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kassign import Subscription, TopicPartition
from kassign.assignors import StickyAssignor
from kassign.assignors.sticky.user_data_reader import StickyUserDataReader
from kassign.protocol import ProtocolError, decode_sticky_user_data, encode_sticky_user_data
from tests.assignors.sticky_checks import assert_balanced, assert_valid, moves, resolved_owners
from tests.assignors.sticky_scenarios import scenarios

TP = TopicPartition
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sticky_subscriptions(subs, claims, member_racks):
    return {
        m: Subscription(
            list(subs[m]), encode_sticky_user_data(claims[m][0], claims[m][1]), [], None, member_racks.get(m)
        )
        for m in subs
    }


@SETTINGS
@given(scenarios())
def test_valid_and_balanced(scenario):
    topics, claims, subs, racks, partition_racks = scenario
    result = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, racks), partition_racks=partition_racks)
    assert_valid(topics, {m: Subscription(subs[m]) for m in subs}, result)
    assert_balanced(topics, {m: Subscription(subs[m]) for m in subs}, result)


@SETTINGS
@given(scenarios(equal=True, racks=False))
def test_equal_subscriptions_keep_all_they_can(scenario):
    """Each member keeps as many of its (resolved) partitions as its final count allows."""
    topics, claims, subs, racks, _ = scenario
    result = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, racks))
    owners = resolved_owners({m: c for m, c in claims.items()}, {t: n for t, n in topics.items() if t in subs["m0"]})
    for m, parts in result.items():
        owned = {tp for tp, o in owners.items() if o == m}
        assert len(owned & set(parts)) == min(len(owned), len(parts)), (m, owned, parts)


@SETTINGS
@given(scenarios(equal=False, racks=False))
def test_unequal_subscriptions_move_only_for_balance(scenario):
    """An owned partition moves only to a member with more partitions than the one it left keeps:
    moving it back would not make the assignment more balanced."""
    topics, claims, subs, racks, _ = scenario
    result = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, racks))
    now = {tp: m for m, parts in result.items() for tp in parts}
    for tp, owner in resolved_owners(claims, topics).items():
        new_owner = now.get(tp)
        if tp.topic in subs[owner] and new_owner != owner:
            assert len(result[owner]) >= len(result[new_owner]), (tp, owner, new_owner, result)


@SETTINGS
@given(scenarios(racks=False))
def test_stable_assignment_is_kept(scenario):
    """Assigning again from an assignment's own result moves nothing."""
    topics, _, subs, _, _ = scenario
    first = StickyAssignor().assign(topics, {m: Subscription(subs[m]) for m in subs})
    again = StickyAssignor().assign(
        topics, {m: Subscription(subs[m], encode_sticky_user_data(first[m], 5)) for m in subs}
    )
    assert {m: sorted(p) for m, p in again.items()} == {m: sorted(p) for m, p in first.items()}
    assert moves(resolved_owners({m: (first[m], 5) for m in subs}, topics), again) == 0


@SETTINGS
@given(scenarios())
def test_deterministic(scenario):
    topics, claims, subs, racks, partition_racks = scenario
    a = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, racks), partition_racks=partition_racks)
    b = StickyAssignor().assign(
        topics, dict(reversed(sticky_subscriptions(subs, claims, racks).items())), partition_racks=partition_racks
    )
    assert a == b


def test_fresh_round_robin_matches_java_layout():
    """Java's constrained path hands partitions out round-robin in (topic, partition) order."""
    result = StickyAssignor().assign({"a": 3, "b": 2}, {"c1": Subscription(["a", "b"]), "c2": Subscription(["b", "a"])})
    assert result == {"c1": [TP("a", 0), TP("a", 2), TP("b", 1)], "c2": [TP("a", 1), TP("b", 0)]}


def test_higher_generation_wins_and_same_generation_claims_are_dropped():
    topics = {"t": 4}
    subs = {
        "old": Subscription(["t"], encode_sticky_user_data([TP("t", 0), TP("t", 1)], 3)),
        "new": Subscription(["t"], encode_sticky_user_data([TP("t", 0)], 5)),
        "x": Subscription(["t"], encode_sticky_user_data([TP("t", 2)], 4)),
        "y": Subscription(["t"], encode_sticky_user_data([TP("t", 2), TP("t", 3)], 4)),
    }
    a = StickyAssignor()
    result = a.assign(topics, subs)
    assert TP("t", 0) in result["new"]  # generation 5 beats 3
    assert TP("t", 1) in result["old"]
    assert TP("t", 3) in result["y"]
    # t-2 was claimed by x and y in the same generation: ownership changes whoever gets it
    assert a.partitions_transferring_ownership.get(TP("t", 2)) is not None


def test_unparseable_user_data_is_no_previous_assignment(caplog):
    subs = {
        "a": Subscription(["t"], b"\x00\x00\x00\x05garbage"),
        "b": Subscription(["t"], encode_sticky_user_data([TP("t", 0)], 1)),
    }
    result = StickyAssignor().assign({"t": 2}, subs)
    assert result == {"a": [TP("t", 1)], "b": [TP("t", 0)]}
    assert "unparseable" in caplog.text


def test_user_data_round_trip():
    a = StickyAssignor()
    assert a.subscription_user_data({"t"}) is None
    a.on_assignment([TP("t", 1), TP("u", 0)], 7)
    assert decode_sticky_user_data(a.subscription_user_data({"t", "u"})) == ([TP("t", 1), TP("u", 0)], 7)


def test_rack_aware_prefers_replica_racks():
    topics = {"t": 4}
    racks = {TP("t", p): {"r0"} if p < 2 else {"r1"} for p in range(4)}
    subs = {"a": Subscription(["t"], rack_id="r1"), "b": Subscription(["t"], rack_id="r0")}
    result = StickyAssignor().assign(topics, subs, partition_racks=racks)
    assert sorted(result["a"]) == [TP("t", 2), TP("t", 3)]
    assert sorted(result["b"]) == [TP("t", 0), TP("t", 1)]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"t": -1}, "-1"),
        ({"t": "3"}, "'3'"),
    ],
)
def test_bad_input_names_the_value(bad, message):
    with pytest.raises((TypeError, ValueError), match=message):
        StickyAssignor().assign(bad, {"m": Subscription(["t"])})


def test_no_members_and_no_topics():
    assert StickyAssignor().assign({"t": 3}, {}) == {}
    assert StickyAssignor().assign({}, {"m": Subscription(["t"])}) == {"m": []}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["t", "topic-é", "x" * 40]), st.integers(-5, 2**31 - 1)), max_size=20),
    st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
    st.binary(max_size=6),
    st.booleans(),
)
def test_fast_user_data_reader_agrees_with_the_codec(partitions, generation, tail, truncate):
    data = encode_sticky_user_data([TP(t, p) for t, p in partitions], generation)
    data = data[: len(data) // 2] if truncate else data + tail
    try:
        expected = decode_sticky_user_data(data)
    except ProtocolError:
        with pytest.raises(ProtocolError):
            StickyUserDataReader().read(data)
        return
    got = StickyUserDataReader().read(data)
    assert (list(got[0]), got[1]) == (list(expected[0]), expected[1])


@SETTINGS
@given(scenarios(), st.randoms(use_true_random=False))
def test_order_of_owned_partitions_does_not_matter(scenario, rnd):
    """The same claims listed in another order (as the user data groups them by topic) give the same assignment."""
    topics, claims, subs, racks, partition_racks = scenario
    shuffled = {m: (rnd.sample(parts, len(parts)), gen) for m, (parts, gen) in claims.items()}
    a = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, racks), partition_racks=partition_racks)
    b = StickyAssignor().assign(topics, sticky_subscriptions(subs, shuffled, racks), partition_racks=partition_racks)
    assert {m: sorted(p) for m, p in a.items()} == {m: sorted(p) for m, p in b.items()}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(1, 6))
def test_dealt_topics_expand_to_the_counts_the_deal_gave(sizes, n_members):
    """The general path deals whole topics by slicing; when it must balance afterwards it recounts
    the deal per (topic, member): both must agree."""
    from collections import Counter
    from itertools import chain

    from kassign.assignors.rack_info import RackInfo
    from kassign.assignors.sticky.constrained import topic_partitions
    from kassign.assignors.sticky.general import _GeneralAssignment
    from kassign.assignors.sticky.ownership import resolve_ownership

    topics = {f"t{i}": n for i, n in enumerate(sizes)}
    members = list(range(n_members))
    ownership = resolve_ownership(topics, [[] for _ in members], [-1] * n_members, [str(i) for i in members])
    racks = RackInfo([None] * n_members, topics, None)
    general = _GeneralAssignment(topics, [frozenset(topics)] * n_members, ownership, racks)
    general.count = [0] * n_members
    general._deal(members, list(topics))
    dealt = list(chain.from_iterable(topic_partitions(t, range(n)) for t, n in topics.items()))
    expected = {t: Counter() for t in topics}
    for pos in members:
        for tp in dealt[pos::n_members]:
            expected[tp.topic][pos] += 1
    general._expand_deals()
    assert {t: Counter({i: k for i, k in d.items() if k}) for t, d in general.added.items()} == expected
    assert general.count == [sum(expected[t][i] for t in topics) for i in members]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=9, max_size=60), st.integers(1, 7), st.data())
def test_pouring_a_few_partitions_matches_water_filling(counts, units, data):
    """Few partitions among many subscribers take a shortcut (only the least loaded are looked at);
    it must hand out exactly what pouring one at a time to the least loaded does."""
    from kassign.assignors.rack_info import RackInfo
    from kassign.assignors.sticky.general import _GeneralAssignment
    from kassign.assignors.sticky.ownership import resolve_ownership

    n = len(counts)
    returning = data.draw(st.sets(st.integers(0, n - 1), max_size=3))
    topics = {"t": units}
    ownership = resolve_ownership(topics, [[] for _ in range(n)], [-1] * n, [str(i) for i in range(n)])
    expected = list(counts)
    for _ in range(units):  # one at a time: least loaded, then members giving back first, then index
        i = min(range(n), key=lambda m: (expected[m], m not in returning, m))
        expected[i] += 1
    for shortcut in (True, False):
        general = _GeneralAssignment(topics, [frozenset(topics)] * n, ownership, RackInfo([None] * n, topics, None))
        general.count = list(counts)
        general.returning = {"t": set(returning)}
        if shortcut:
            general._pour_few("t", units, list(counts))
        else:
            general._pour("t", units)
        assert general.count == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=12), st.integers(1, 60), st.data())
def test_water_filling_matches_one_at_a_time(counts, units, data):
    from kassign.assignors.rack_info import RackInfo
    from kassign.assignors.sticky.general import _GeneralAssignment
    from kassign.assignors.sticky.ownership import resolve_ownership

    n = len(counts)
    returning = data.draw(st.sets(st.integers(0, n - 1), max_size=3))
    expected = list(counts)
    for _ in range(units):
        i = min(range(n), key=lambda m: (expected[m], m not in returning, m))
        expected[i] += 1
    topics = {"t": units}
    ownership = resolve_ownership(topics, [[] for _ in range(n)], [-1] * n, [str(i) for i in range(n)])
    general = _GeneralAssignment(topics, [frozenset(topics)] * n, ownership, RackInfo([None] * n, topics, None))
    general.count = list(counts)
    general.returning = {"t": set(returning)}
    general._pour("t", units)
    assert general.count == expected


def _gen_claims(claims: dict[str, tuple[list[int], int]]) -> dict[str, Subscription]:
    return {
        m: Subscription(["t"], encode_sticky_user_data([TP("t", p) for p in ps], gen))
        for m, (ps, gen) in claims.items()
    }


def test_members_returning_from_an_older_generation_get_their_partitions_back():
    """kafka-python's and aiokafka's test_assignment_with_multiple_generations2: C2 at generation 2
    claims all six; C1 and C3 return with their generation-1 partitions. The owner gives up exactly
    the older claims, which go back to their claimers (Java reshuffles: C1 {2,4}, C2 {0,1}, C3 {3,5})."""
    subs = _gen_claims({"C1": ([0, 3], 1), "C2": ([0, 1, 2, 3, 4, 5], 2), "C3": ([2, 5], 1)})
    assignor = StickyAssignor()
    result = assignor.assign({"t": 6}, subs)
    assert {m: sorted(p.partition for p in ps) for m, ps in result.items()} == {
        "C1": [0, 3],
        "C2": [1, 4],
        "C3": [2, 5],
    }
    # Ownership moves from C2 to the older claimers: the cooperative protocol must revoke first.
    assert set(assignor.partitions_transferring_ownership) == {TP("t", p) for p in (0, 2, 3, 5)}


def test_an_older_claim_yields_to_balance_and_to_same_generation_rules():
    """The older claimer gets a partition back only while below its quota; a claim lost in a tie of the
    newest generation (KAFKA-14639) is not an older claim."""
    subs = _gen_claims({"A": ([0, 1, 2, 3], 1), "B": ([0, 1, 2, 3], 2), "C": ([], -1)})
    result = StickyAssignor().assign({"t": 4}, subs)
    counts = sorted(len(ps) for ps in result.values())
    assert counts == [1, 1, 2]
    assert {p.partition for p in result["A"]} <= {0, 1, 2, 3} and len(result["A"]) >= 1
    tie = _gen_claims({"A": ([0], 3), "B": ([0], 3), "C": ([0], 1)})
    out = StickyAssignor().assign({"t": 3}, tie)
    assert sorted(len(ps) for ps in out.values()) == [1, 1, 1]


def test_cooperative_returns_older_claims_in_the_follow_up_round():
    """Cooperative-sticky: round 1 withholds what C2 must revoke; round 2 (C2 revoked, C1/C3 still
    claiming generation 1) gives each back to its older claimer."""
    from kassign.assignors import CooperativeStickyAssignor
    from kassign.protocol import encode_cooperative_user_data

    def sub(ps, gen):
        return Subscription(["t"], encode_cooperative_user_data(gen), [TP("t", p) for p in ps], gen)

    first = CooperativeStickyAssignor().assign(
        {"t": 6}, {"C1": sub([0, 3], 1), "C2": sub(range(6), 2), "C3": sub([2, 5], 1)}
    )
    assert {m: sorted(p.partition for p in ps) for m, ps in first.items()} == {"C1": [], "C2": [1, 4], "C3": []}
    second = CooperativeStickyAssignor().assign(
        {"t": 6}, {"C1": sub([0, 3], 1), "C2": sub([1, 4], 3), "C3": sub([2, 5], 1)}
    )
    assert {m: sorted(p.partition for p in ps) for m, ps in second.items()} == {
        "C1": [0, 3],
        "C2": [1, 4],
        "C3": [2, 5],
    }


def test_rack_aware_unequal_subscriptions_place_the_remainder_on_rack():
    """Issue 15's smallest KIP-881 case: t1-0 on rack a, t2-0 on rack b; c1 [t1] on b, c2 [t1, t2] on a,
    c3 [t1, t2] on b. Equally balanced with no cross-rack partition: c2 t1-0, c3 t2-0."""
    subs = {
        "c1": Subscription(["t1"], None, [], None, "b"),
        "c2": Subscription(["t1", "t2"], None, [], None, "a"),
        "c3": Subscription(["t1", "t2"], None, [], None, "b"),
    }
    racks = {TP("t1", 0): {"a"}, TP("t2", 0): {"b"}}
    result = StickyAssignor().assign({"t1": 1, "t2": 1}, subs, partition_racks=racks)
    assert result == {"c1": [], "c2": [TP("t1", 0)], "c3": [TP("t2", 0)]}


def test_a_move_balancing_no_longer_needs_is_undone():
    """Found by the explore profile: m3 gives up a t3 partition to m2 early in balancing; a later chain
    (m2 takes t3 from m5, m5 takes t1 from m4) leaves m2 one above m3. Giving the partition back
    swaps their counts, keeps the balance and moves one partition fewer."""
    topics = {"t0": 0, "t1": 5, "t2": 3, "t3": 7}
    subs = {"m0": ["t0"], "m1": ["t0"], "m2": ["t3"], "m3": ["t3"], "m4": ["t1"], "m5": ["t0", "t1", "t2", "t3"]}
    claims = {m: ([], -1) for m in subs}
    claims["m3"] = ([TP("t1", 0), TP("t1", 1), TP("t1", 2), TP("t3", 0), TP("t3", 1), TP("t3", 2), TP("t3", 4)], -1)
    claims["m5"] = ([TP("t3", 3)], -1)
    result = StickyAssignor().assign(topics, sticky_subscriptions(subs, claims, {}))
    assert sorted(map(len, result.values())) == [0, 0, 3, 4, 4, 4]
    # m3's t1 partitions (no longer subscribed) and t3-3 from m5 to m2, nothing else (5 before the fix)
    assert moves(resolved_owners(claims, topics), result) == 4
    assert sorted(result["m3"]) == [TP("t3", p) for p in (0, 1, 2, 4)]
