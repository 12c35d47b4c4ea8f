"""DelayedCooperativeStickyAssignor: KIP-415's scheduled rebalance delay for consumer groups.

A small in-memory group drives real assignor instances (one per member, as in a real group): each
member sends its own subscription user data, the leader's ``assign`` answers, every member takes its
partitions and the leader's state. Time is a fake clock shared by the members. The six cases are
the ones KIP-415 (and the seed article) walk through, with partitions in place of Connect's tasks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kassign.assignors.delayed import DelayedCooperativeStickyAssignor
from kassign.assignors.sticky.cooperative import CooperativeStickyAssignor
from kassign.model import RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol import ProtocolError, encode_cooperative_user_data
from kassign.protocol.delay_user_data import (
    DelayState,
    DelaySubscriptionData,
    MemberIdentity,
    WorkerPartitions,
    decode_delay_state,
    decode_delay_subscription_data,
    encode_delay_state,
    encode_delay_subscription_data,
)

TOPIC = "t"
DELAY = 300_000


class FakeClock:
    """Seconds, advanced by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


class Worker:
    """One consumer process of the group: its assignor and what it owns."""

    def __init__(
        self,
        name: str,
        member_id: str,
        assignor: DelayedCooperativeStickyAssignor,
        instance_id: str | None,
        topics: list[str],
    ) -> None:
        self.name = name
        self.topics = topics
        self.member_id = member_id
        self.assignor = assignor
        self.instance_id = instance_id
        self.owned: list[TopicPartition] = []
        self.generation = -1


class Group:
    """A consumer group of delayed assignors; the leader is the longest-present member."""

    def __init__(
        self, delay_ms: int = DELAY, partitions: int = 6, *, eager: bool = False, topics: dict[str, int] | None = None
    ) -> None:
        self.delay_ms = delay_ms
        self.partitions = partitions
        self.topics = topics or {TOPIC: partitions}
        self.eager = eager
        self.clock = FakeClock()
        self.workers: dict[str, Worker] = {}
        self.generation = 0
        self.joins = 0
        self.last_result: dict[str, list[TopicPartition]] = {}
        self.last_subscriptions: dict[str, Subscription] = {}

    def join(
        self,
        name: str,
        *,
        worker_id: str | None = None,
        instance_id: str | None = None,
        topics: list[str] | None = None,
    ) -> Worker:
        """A new process (fresh assignor, new member id) joins under ``name``."""
        self.joins += 1
        assignor = DelayedCooperativeStickyAssignor(self.delay_ms, worker_id=worker_id or name, clock=self.clock)
        worker = Worker(name, f"{name}-{self.joins}", assignor, instance_id, topics or sorted(self.topics))
        self.workers[name] = worker
        return worker

    def leave(self, name: str) -> None:
        del self.workers[name]

    @property
    def leader(self) -> Worker:
        return next(iter(self.workers.values()))

    def rebalance(self) -> dict[str, list[TopicPartition]]:
        """One JoinGroup/SyncGroup round; returns worker name -> assigned partitions."""
        subscriptions = {
            w.member_id: Subscription(
                list(w.topics),
                w.assignor.subscription_user_data(set(w.topics)),
                [] if self.eager else list(w.owned),  # eager members revoke everything before joining
                w.generation if w.generation >= 0 else None,
                None,
                w.instance_id,
            )
            for w in self.workers.values()
        }
        self.last_subscriptions = subscriptions
        self.generation += 1
        leader = self.leader.assignor
        assignments = leader.assign_group(self.topics, subscriptions)
        result = {}
        for w in self.workers.values():
            assigned = sorted(assignments[w.member_id].partitions)
            result[w.name] = assigned
            w.owned = assigned
            w.assignor.on_assignment(assigned, self.generation)
            w.assignor.on_assignment_user_data(assignments[w.member_id].user_data)
        self.last_result = result
        return result

    def settle(self) -> dict[str, list[TopicPartition]]:
        """Rebalance until no member revoked anything and no immediate follow-up is asked for."""
        for _ in range(10):
            before = {name: set(w.owned) for name, w in self.workers.items()}
            result = self.rebalance()
            revoked = not self.eager and any(before[name] - set(parts) for name, parts in result.items())
            if not revoked and self.leader.assignor.next_rebalance_delay_ms != 0:
                return result
        raise AssertionError("group did not settle in 10 rounds")

    @property
    def delay_ms_left(self) -> int | None:
        return self.leader.assignor.next_rebalance_delay_ms


def tp(*ps: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in ps]


def assigned_set(result: Mapping[str, Collection[TopicPartition]]) -> set[TopicPartition]:
    return {p for parts in result.values() for p in parts}


def assert_valid(result: Mapping[str, list[TopicPartition]], partitions: int) -> None:
    seen: dict[TopicPartition, str] = {}
    for member, parts in result.items():
        for p in parts:
            assert p not in seen, f"{p} assigned to both {seen[p]} and {member}"
            assert p.topic == TOPIC and 0 <= p.partition < partitions, p
            seen[p] = member


def balanced_group(names=("w1", "w2", "w3"), **kwargs) -> Group:
    group = Group(**kwargs)
    for name in names:
        group.join(name)
    group.settle()
    return group


# ------------------------------------------------------------------ the six cases of KIP-415


def test_case1_first_worker_gets_everything():
    group = Group()
    group.join("w1")
    result = group.rebalance()
    assert result == {"w1": tp(0, 1, 2, 3, 4, 5)}
    assert group.delay_ms_left is None
    assert group.workers["w1"].assignor.rejoin_after_s is None


def test_case2_workers_join_and_take_their_share_in_two_rounds():
    group = Group()
    group.join("w1")
    group.rebalance()
    group.join("w2")
    group.join("w3")
    first = group.rebalance()
    # Cooperative: w1 only revokes in the first round; the new members get the partitions next round.
    assert len(first["w1"]) == 2 and first["w2"] == first["w3"] == []
    assert group.delay_ms_left is None
    second = group.rebalance()
    assert first["w1"] == second["w1"]
    assert sorted(len(parts) for parts in second.values()) == [2, 2, 2]
    assert assigned_set(second) == set(tp(*range(6)))


def test_case3_follower_leaves_its_partitions_wait_for_the_delay_then_spread():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w2")
    held = group.rebalance()
    assert held == {"w1": before["w1"], "w3": before["w3"]}
    assert group.delay_ms_left == DELAY
    assert group.workers["w1"].assignor.rejoin_after_s == DELAY / 1000

    group.clock.advance_ms(DELAY // 2)
    incidental = group.rebalance()
    assert incidental == held
    assert group.delay_ms_left == DELAY // 2

    group.clock.advance_ms(DELAY // 2)
    final = group.settle()
    assert assigned_set(final) == set(tp(*range(6)))
    assert sorted(len(parts) for parts in final.values()) == [3, 3]
    assert group.delay_ms_left is None
    assert set(before["w1"]) <= set(final["w1"]) and set(before["w3"]) <= set(final["w3"])


def test_case4_follower_bounces_and_gets_its_partitions_back_at_once():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    group.clock.advance_ms(DELAY // 3)
    group.join("w2")  # a new process: new member id, same worker id
    back = group.rebalance()
    assert back == before
    assert group.delay_ms_left is None
    assert group.leader.assignor.last_state.held_back == ()


def test_case5_leader_leaves_its_partitions_are_reassigned_at_once():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w1")
    assert group.leader.name == "w2"
    result = group.settle()
    assert assigned_set(result) == set(tp(*range(6)))
    assert sorted(len(parts) for parts in result.values()) == [3, 3]
    assert set(before["w2"]) <= set(result["w2"]) and set(before["w3"]) <= set(result["w3"])
    assert group.delay_ms_left is None


def test_case6_follower_bounces_then_leader_bounces():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    assert group.delay_ms_left == DELAY
    group.clock.advance_ms(1000)
    group.join("w2")
    assert group.rebalance() == before  # w2 back within the delay: its own partitions again
    group.clock.advance_ms(1000)
    group.leave("w1")  # then the leader leaves: no delay for it
    after_leader = group.settle()
    assert group.leader.name == "w3"  # as in the seed: w3 has been in the group longest
    assert assigned_set(after_leader) == set(tp(*range(6)))
    assert group.delay_ms_left is None
    group.join("w1")  # and comes back as a new member: balanced again by cooperative rebalancing
    final = group.settle()
    assert assigned_set(final) == set(tp(*range(6)))
    assert sorted(len(parts) for parts in final.values()) == [2, 2, 2]


# ------------------------------------------------------------------ carrying the delay


def test_delay_is_carried_across_a_leader_change():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    group.clock.advance_ms(100_000)
    group.leave("w1")  # the leader leaves: the new leader (w3) only knows the state from user data
    result = group.rebalance()
    assert group.leader.name == "w3"
    assert set(before["w1"]) <= set(result["w3"])  # the leader's partitions move at once
    assert not set(before["w2"]) & assigned_set(result)  # w2's stay held
    assert group.delay_ms_left == DELAY - 100_000
    group.clock.advance_ms(50_000)
    group.join("w2")
    back = group.rebalance()
    assert back["w2"] == before["w2"]
    group.clock.advance_ms(DELAY)
    assert assigned_set(group.settle()) == set(tp(*range(6)))


def test_remaining_delay_counts_down_on_each_member_clock():
    group = balanced_group()
    group.leave("w3")
    group.rebalance()
    group.clock.advance_ms(1234)
    data = decode_delay_subscription_data(group.workers["w2"].assignor.subscription_user_data([TOPIC]))
    assert data.worker_id == "w2"
    assert data.generation == group.generation
    assert data.state.delay_ms == DELAY - 1234
    assert data.state.rejoin_after_ms == DELAY - 1234
    assert [e.worker.worker_id for e in data.state.held_back] == ["w3"]


def test_expired_delay_goes_to_the_member_that_had_nothing():
    group = balanced_group()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    group.clock.advance_ms(1000)
    group.join("w4")  # a replacement with a new identity joins during the delay
    during = group.rebalance()
    assert during == {"w1": before["w1"], "w3": before["w3"], "w4": []}  # no revocation while delayed
    assert [c.worker_id for c in group.leader.assignor.last_state.candidates] == ["w4"]
    group.clock.advance_ms(DELAY)
    after = group.rebalance()
    assert after == {"w1": before["w1"], "w3": before["w3"], "w4": before["w2"]}
    assert group.delay_ms_left is None


def test_expired_delay_without_candidates_is_spread_over_everyone():
    group = balanced_group(("w1", "w2", "w3", "w4"), partitions=8)
    group.leave("w4")
    group.rebalance()
    group.leave("w3")  # a second follower leaves while the delay runs: it joins the same delay
    group.clock.advance_ms(1000)
    group.rebalance()
    assert group.delay_ms_left == DELAY - 1000
    group.clock.advance_ms(DELAY)
    final = group.settle()
    assert sorted(len(parts) for parts in final.values()) == [4, 4]
    assert assigned_set(final) == set(tp(*range(8)))


def test_returning_static_member_is_recognised_by_group_instance_id():
    group = Group()
    group.join("w1", instance_id="i1")
    group.join("w2", instance_id="i2")
    group.settle()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    # Restarted without a stable worker id: only the group.instance.id ties it to its past.
    group.join("w2", worker_id="random-worker-id", instance_id="i2")
    assert group.rebalance() == before


def test_eager_members_keep_their_partitions_and_a_departure_is_delayed():
    group = balanced_group(eager=True)
    before = dict(group.last_result)
    assert group.rebalance() == before  # eager members own nothing when joining; the state keeps them sticky
    group.leave("w2")
    assert group.rebalance() == {"w1": before["w1"], "w3": before["w3"]}
    assert group.delay_ms_left == DELAY
    group.clock.advance_ms(DELAY)
    final = group.settle()
    assert assigned_set(final) == set(tp(*range(6)))
    assert set(before["w1"]) <= set(final["w1"]) and set(before["w3"]) <= set(final["w3"])


def test_expired_partitions_go_only_to_candidates_subscribed_to_their_topic():
    group = Group(topics={"a": 4, "b": 4})
    group.join("w1")
    group.join("w2")
    group.settle()
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    group.join("w3", topics=["b"])
    during = group.rebalance()
    assert during["w3"] == [] and during["w1"] == before["w1"]
    group.clock.advance_ms(DELAY)
    after = group.rebalance()
    lost_b = {p for p in before["w2"] if p.topic == "b"}
    assert set(after["w3"]) == lost_b
    final = group.settle()
    assert {p.topic for p in final["w3"]} == {"b"}
    assert assigned_set(final) == {TopicPartition(t, p) for t in "ab" for p in range(4)}


def test_rolling_restart_of_the_followers_moves_no_partition():
    group = balanced_group(("w1", "w2", "w3", "w4"), partitions=12)
    before = dict(group.last_result)
    for name in ("w2", "w3", "w4"):
        group.leave(name)
        during = group.rebalance()
        assert during == {n: parts for n, parts in before.items() if n != name}
        group.clock.advance_ms(20_000)
        group.join(name)
        assert group.rebalance() == before
        assert group.delay_ms_left is None
    assert list(group.workers) == ["w1", "w2", "w3", "w4"]


def test_given_back_partitions_moved_by_the_base_ask_for_a_follow_up_round():
    group = balanced_group(("w1", "w2"))
    before = dict(group.last_result)
    group.leave("w2")
    group.rebalance()
    group.join("w3")
    group.rebalance()  # w3 joins during the delay and waits
    group.join("w2")
    back = group.rebalance()  # w2 returns: the delay ends and the base rebalances over three members
    assert set(back["w2"]) < set(before["w2"])  # w2 keeps part of its partitions, the rest will move on
    assert group.delay_ms_left == 0  # nobody owns the partition taken from w2's share, so the leader asks
    assert group.workers["w3"].assignor.rejoin_after_s == 0
    final = group.settle()
    assert assigned_set(final) == set(tp(*range(6)))
    assert sorted(len(parts) for parts in final.values()) == [2, 2, 2]


def test_delay_zero_reassigns_at_once():
    group = balanced_group(delay_ms=0)
    group.leave("w2")
    result = group.settle()
    assert assigned_set(result) == set(tp(*range(6)))
    assert group.delay_ms_left is None


def test_unparseable_user_data_counts_as_a_new_member(caplog):
    assignor = DelayedCooperativeStickyAssignor(DELAY, worker_id="w1")
    subs = {"m1": Subscription([TOPIC], b"\x00\x07garbage"), "m2": Subscription([TOPIC], None)}
    result = assignor.assign({TOPIC: 4}, subs)
    assert assigned_set(result) == set(tp(0, 1, 2, 3))
    assert "unparseable" in caplog.text
    assignor.on_assignment_user_data(b"\xff")
    assert assignor.rejoin_after_s is None


def test_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="-1"):
        DelayedCooperativeStickyAssignor(-1)
    with pytest.raises(TypeError, match="'300'"):
        DelayedCooperativeStickyAssignor("300")
    with pytest.raises(TypeError, match="base_assignor"):
        DelayedCooperativeStickyAssignor(base_assignor=object())


def test_name_and_protocols():
    assignor = DelayedCooperativeStickyAssignor()
    assert assignor.name == "kassign-delayed-cooperative-sticky"
    assert RebalanceProtocol.COOPERATIVE in assignor.supported_protocols


# ------------------------------------------------------------------ codec


def _state() -> DelayState:
    a = MemberIdentity("m-1", None, "w1")
    b = MemberIdentity("m-2", "static-2", None)
    return DelayState(
        7,
        1500,
        1500,
        a,
        (WorkerPartitions(b, (TopicPartition("x", 2), TopicPartition("a", 1))), WorkerPartitions(a, ())),
        (MemberIdentity("m-3"),),
    )


def test_state_round_trips_with_partitions_sorted():
    decoded = decode_delay_state(encode_delay_state(_state()))
    assert decoded.held_back[0].partitions == (TopicPartition("a", 1), TopicPartition("x", 2))
    assert decoded.held_back[1:] == _state().held_back[1:]
    expected = _state()
    assert (decoded.epoch, decoded.delay_ms, decoded.leader) == (7, 1500, expected.leader)
    assert decoded.candidates == expected.candidates
    data = DelaySubscriptionData("w1", 12, decoded)
    assert decode_delay_subscription_data(encode_delay_subscription_data(data)) == data


def test_every_truncation_and_trailing_bytes_raise_protocol_error():
    raw = encode_delay_subscription_data(DelaySubscriptionData("w1", 3, _state()))
    for end in range(len(raw)):
        with pytest.raises(ProtocolError):
            decode_delay_subscription_data(raw[:end])
    with pytest.raises(ProtocolError, match="trailing"):
        decode_delay_state(encode_delay_state(_state()) + b"\x00")


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=64), flip=st.integers(0, 400))
def test_garbage_raises_only_protocol_error(data, flip):
    valid = bytearray(encode_delay_subscription_data(DelaySubscriptionData("w1", 3, _state())))
    valid[flip % len(valid)] ^= 0xFF
    for raw in (data, bytes(valid)):
        for decode in (decode_delay_state, decode_delay_subscription_data):
            with contextlib.suppress(ProtocolError):
                decode(raw)


def test_newer_version_is_read_as_v0():
    raw = bytearray(encode_delay_state(_state()))
    raw[1] = 1  # version 1, with a field v0 does not know appended
    assert decode_delay_state(bytes(raw) + b"\x00\x01") == decode_delay_state(encode_delay_state(_state()))


# ------------------------------------------------------------------ properties

_events = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 5)),
        st.tuples(st.just("leave"), st.integers(0, 5)),
        st.tuples(st.just("advance"), st.sampled_from([1_000, 40_000, 120_000, 310_000])),
        st.tuples(st.just("rebalance"), st.just(0)),
    ),
    max_size=25,
)


def _run_scenario(group: Group, events) -> None:
    """Drive ``events``; after every round check validity and that held partitions stay held."""
    previous_state: DelayState | None = None
    previous_time = group.clock.now
    previous_owners: dict[TopicPartition, str] = {}
    previous_leader = None
    for kind, arg in events:
        name = f"w{arg}"
        if kind == "join" and name not in group.workers:
            group.join(name)
        elif kind == "leave" and name in group.workers and len(group.workers) > 1:
            group.leave(name)
        elif kind == "advance":
            group.clock.advance_ms(arg)
        if not group.workers:
            continue
        result = group.rebalance()
        assert_valid(result, group.partitions)
        state = group.leader.assignor.last_state
        held = {p for entry in state.held_back for p in entry.partitions}
        assert not held & assigned_set(result), "a held-back partition was assigned"
        elapsed_ms = (group.clock.now - previous_time) * 1000
        if previous_state is not None and elapsed_ms < previous_state.delay_ms:
            # Before expiry a partition held for a departed member goes to nobody else.
            for entry in previous_state.held_back:
                for name, parts in result.items():
                    if set(entry.partitions) & set(parts):
                        assert name == entry.worker.worker_id, f"{entry.worker} held partitions went to {name}"
        if group.delay_ms > 0:
            # A follower that just left starts a delay: its partitions go to nobody else this round.
            for p, owner in previous_owners.items():
                if owner not in group.workers and owner != previous_leader:
                    assert p not in assigned_set(result), f"{p} of departed {owner} reassigned at once"
        previous_state, previous_time = state, group.clock.now
        previous_owners = {p: name for name, parts in result.items() for p in parts}
        previous_leader = group.leader.name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events, partitions=st.integers(1, 9), delay=st.sampled_from([0, 100_000, DELAY]), eager=st.booleans())
def test_property_valid_and_held_partitions_stay_held(events, partitions, delay, eager):
    group = Group(delay_ms=delay, partitions=partitions, eager=eager)
    group.join("w0")
    _run_scenario(group, events)
    # With no more events the group converges once the delay is over: everything assigned.
    group.clock.advance_ms(delay + 1)
    final = group.settle()
    assert_valid(final, partitions)
    assert assigned_set(final) == set(tp(*range(partitions)))
    sizes = sorted(len(parts) for parts in final.values())
    assert sizes[-1] - sizes[0] <= 1, final


# ------------------------------------------------------------------ delay 0 is cooperative-sticky


def _as_cooperative_sticky(sub: Subscription, *, v1: bool) -> Subscription:
    """The same member's subscription as a cooperative-sticky member would send it."""
    generation = decode_delay_subscription_data(sub.user_data).generation
    # Protocol v1 has no generation field: cooperative-sticky then reads it from its user data.
    generation_id = None if v1 else sub.generation_id
    return replace(sub, user_data=encode_cooperative_user_data(generation), generation_id=generation_id)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events, partitions=st.integers(1, 12), v1=st.booleans())
def test_delay_zero_matches_cooperative_sticky_round_by_round(events, partitions, v1):
    group = Group(delay_ms=0, partitions=partitions)
    group.join("w0")
    for kind, arg in [*events, ("rebalance", 0), ("rebalance", 0)]:
        name = f"w{arg}"
        if kind == "join" and name not in group.workers:
            group.join(name)
        elif kind == "leave" and name in group.workers and len(group.workers) > 1:
            group.leave(name)
        result = group.rebalance()
        reference = CooperativeStickyAssignor()
        expected = reference.assign(
            group.topics, {m: _as_cooperative_sticky(sub, v1=v1) for m, sub in group.last_subscriptions.items()}
        )
        leader = group.leader.assignor
        got = {w.member_id: result[w.name] for w in group.workers.values()}
        assert got == {m: sorted(p) for m, p in expected.items()}
        assert leader.partitions_transferring_ownership == reference.partitions_transferring_ownership
        assert leader.next_rebalance_delay_ms is None


_member_ids = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def _one_round(draw):
    """Arbitrary subscriptions: mixed topics, stale generations, conflicting and bogus claims."""
    topics = {"x": draw(st.integers(0, 8)), "y": draw(st.integers(0, 8))}
    members = draw(st.lists(_member_ids, min_size=1, max_size=5, unique=True))
    all_tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n + 1)]  # one beyond the end
    subs = {}
    for m in members:
        subscribed = draw(st.sets(st.sampled_from(["x", "y"]), min_size=1))
        owned = draw(st.lists(st.sampled_from(all_tps), unique=True, max_size=6)) if all_tps else []
        generation = draw(st.sampled_from([-1, 3, 4, 5]))
        rack = draw(st.sampled_from([None, "r1", "r2"]))
        subs[m] = (sorted(subscribed), sorted(owned), generation, rack)
    racks = draw(st.booleans())
    partition_racks = {tp: frozenset({"r1"} if tp.partition % 2 else {"r2"}) for tp in all_tps} if racks else None
    return topics, subs, partition_racks


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_one_round(), v1=st.booleans())
def test_delay_zero_matches_cooperative_sticky_on_arbitrary_input(case, v1):
    topics, subs, partition_racks = case
    ours = {
        m: Subscription(
            t,
            encode_delay_subscription_data(DelaySubscriptionData(f"worker-{m}", g)),
            o,
            None if v1 or g < 0 else g,
            rack,
        )
        for m, (t, o, g, rack) in subs.items()
    }
    theirs = {m: _as_cooperative_sticky(sub, v1=v1) for m, sub in ours.items()}
    delayed = DelayedCooperativeStickyAssignor(0, worker_id="worker-a")
    reference = CooperativeStickyAssignor()
    got = delayed.assign(topics, ours, partition_racks=partition_racks)
    expected = reference.assign(topics, theirs, partition_racks=partition_racks)
    assert {m: sorted(p) for m, p in got.items()} == {m: sorted(p) for m, p in expected.items()}
    assert delayed.partitions_transferring_ownership == reference.partitions_transferring_ownership


# ------------------------------------------------------------------ the base sees compacted partitions


class RecordingCooperativeSticky(CooperativeStickyAssignor):
    """Cooperative-sticky that keeps what it was asked."""

    def _assign(self, partitions_per_topic, subscriptions, partition_racks):
        self.seen = (dict(partitions_per_topic), dict(subscriptions), partition_racks)
        return super()._assign(partitions_per_topic, subscriptions, partition_racks)


def test_base_runs_over_the_partitions_not_held_with_racks_renumbered():
    base = RecordingCooperativeSticky()
    leader = DelayedCooperativeStickyAssignor(DELAY, worker_id="w1", clock=FakeClock(), base_assignor=base)
    other = encode_delay_subscription_data(DelaySubscriptionData("w2"))
    first = leader.assign(
        {TOPIC: 6},
        {"m1": Subscription([TOPIC], leader.subscription_user_data([TOPIC])), "m2": Subscription([TOPIC], other)},
    )
    leader.on_assignment(first["m1"], 1)
    leader.on_assignment_user_data(leader.assignment_user_data)
    racks = {TopicPartition(TOPIC, p): frozenset({f"rack-{p}"}) for p in range(6)}
    # m2 is gone: its partitions are held back and the base sees only m1's, renumbered 0..2.
    sub = Subscription([TOPIC], leader.subscription_user_data([TOPIC]), sorted(first["m1"]), 1)
    result = leader.assign({TOPIC: 6}, {"m1": sub}, partition_racks=racks)
    kept = sorted(p.partition for p in first["m1"])
    counts, seen_subs, seen_racks = base.seen
    assert counts == {TOPIC: 3}
    assert seen_racks == {TopicPartition(TOPIC, i): frozenset({f"rack-{p}"}) for i, p in enumerate(kept)}
    assert sorted(seen_subs["m1"].owned_partitions) == tp(0, 1, 2)
    assert sorted(result["m1"]) == sorted(first["m1"])
    assert {p for e in leader.last_state.held_back for p in e.partitions} == set(first["m2"])


# ------------------------------------------------------------------ whatever the members echo


_identities = st.builds(
    MemberIdentity,
    st.sampled_from(["a", "b", "c", "gone"]),
    st.sampled_from([None, "i-a", "i-gone"]),
    st.sampled_from([None, "w-a", "w-b", "w-gone"]),
)
_partitions = st.lists(st.builds(TopicPartition, st.sampled_from(["x", "y"]), st.integers(-1, 9)), max_size=8)
_INT32 = st.sampled_from([-(2**31), -1, 2**31 - 2, 2**31 - 1])
_states = st.builds(
    DelayState,
    st.integers(0, 5) | _INT32,
    st.integers(-10, DELAY) | _INT32,
    st.integers(-1, DELAY) | _INT32,
    st.none() | _identities,
    st.lists(st.builds(WorkerPartitions, _identities, _partitions.map(tuple)), max_size=3).map(tuple),
    st.lists(_identities, max_size=3).map(tuple),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    echoed=st.lists(st.none() | _states, min_size=3, max_size=3),
    owned=st.lists(_partitions, min_size=3, max_size=3),
    topics=st.lists(st.sampled_from([["x"], ["y"], ["x", "y"]]), min_size=3, max_size=3),
)
def test_any_echoed_state_gives_a_valid_assignment(echoed, owned, topics):
    members = ["a", "b", "c"]
    subscriptions = {
        m: Subscription(
            topics[i], encode_delay_subscription_data(DelaySubscriptionData(f"w-{m}", 4, echoed[i])), owned[i], 4
        )
        for i, m in enumerate(members)
    }
    leader = DelayedCooperativeStickyAssignor(DELAY, worker_id="w-a", clock=FakeClock())
    result = leader.assign({"x": 5, "y": 3}, subscriptions)
    seen: set[TopicPartition] = set()
    for i, m in enumerate(members):
        for p in result[m]:
            assert p not in seen, f"{p} assigned twice"
            seen.add(p)
            assert p.topic in topics[i] and 0 <= p.partition < {"x": 5, "y": 3}[p.topic], (m, p)
    held = {p for entry in leader.last_state.held_back for p in entry.partitions}
    assert not held & seen
    assert decode_delay_state(leader.assignment_user_data) == leader.last_state
    assert 0 <= leader.last_state.delay_ms <= DELAY, "the leader's own configuration bounds every delay"


def _echoing(state: DelayState) -> dict[str, Subscription]:
    return {
        "a": Subscription(["x"], encode_delay_subscription_data(DelaySubscriptionData("w-a", 4, None)), [], 4),
        "b": Subscription(
            ["x"], encode_delay_subscription_data(DelaySubscriptionData("w-b", 4, state)), [TopicPartition("x", 0)], 4
        ),
    }


def test_an_echoed_epoch_at_int32_max_is_unreadable_not_a_crash(caplog):
    """Epoch + 1 would not fit the wire: the leader ignores that member's state instead of failing to encode."""
    state = DelayState(
        2**31 - 1,
        1000,
        -1,
        MemberIdentity("gone", None, "w-gone"),
        (WorkerPartitions(MemberIdentity("gone", None, "w-gone"), (TopicPartition("x", 1),)),),
        (),
    )
    leader = DelayedCooperativeStickyAssignor(DELAY, worker_id="w-a", clock=FakeClock())
    result = leader.assign({"x": 2}, _echoing(state))
    assert sorted(p for ps in result.values() for p in ps) == [TopicPartition("x", 0), TopicPartition("x", 1)]
    assert leader.last_state.epoch == 1
    assert "outside" in caplog.text


def test_an_echoed_delay_beyond_the_leaders_maximum_is_capped():
    """A member echoing a 24.8-day delay cannot hold a departed member's partitions longer than the leader allows."""
    gone = MemberIdentity("gone", None, "w-gone")
    state = DelayState(
        3,
        2**31 - 1,
        2**31 - 1,
        MemberIdentity("a", None, "w-old"),
        (WorkerPartitions(gone, (TopicPartition("x", 1),)),),
        (),
    )
    leader = DelayedCooperativeStickyAssignor(DELAY, worker_id="w-a", clock=FakeClock())
    leader.assign({"x": 2}, _echoing(state))
    assert leader.last_state.delay_ms <= DELAY
    assert leader.rejoin_after_s is None or leader.rejoin_after_s <= DELAY / 1000
