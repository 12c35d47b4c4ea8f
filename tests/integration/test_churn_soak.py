"""Random churn (issue 9): the seeded sequence generator and timeline analysis on hand-made
timelines, and five short churn sequences of kassign cooperative aiokafka members on the broker.

A failing broker sequence prints its seed, its steps and the replay command
(``python -m benchmarks.churn_soak --seed N --profile small``); the 100-sequence soak is
``benchmarks/churn_soak.py``.
"""

from __future__ import annotations

import math

import pytest

from integration.churn import (
    ACTIONS,
    FAULT_ACTIONS,
    PROFILES,
    ChurnFailure,
    ChurnProfile,
    ChurnResult,
    analyse,
    check,
    churn_problems,
    excused_partitions,
    generate_sequence,
    run_sequence,
    settle_problems,
    unowned_partition_seconds,
)
from kassign.model import TopicPartition
from kassign.timeline.events import Event

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, parts, extra)


# -- generator ---------------------------------------------------------------------------------


def test_a_seed_always_gives_the_same_sequence_and_seeds_differ():
    assert generate_sequence(11).describe() == generate_sequence(11).describe()
    assert len({generate_sequence(s).describe() for s in range(20)}) == 20


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_sequences_respect_the_group_bounds_and_name_members_consistently(profile):
    shape = PROFILES[profile]
    seen_actions = set()
    for seed in range(200):
        seq = generate_sequence(seed, profile)
        assert f"--seed {seed} --profile {profile}" in seq.describe()
        live = {m.name: m for m in seq.initial}
        assert shape.min_members <= len(live) <= shape.max_members
        assert seq.initial[0].kind == "aiokafka"
        assert shape.min_steps <= len(seq.steps) <= shape.max_steps
        ever = set(live)
        for step in seq.steps:
            seen_actions.add(step.action)
            assert (step.gap == 0) == step.settle
            if step.action == "join" or (step.action == "failover" and step.start is not None):
                assert step.start.name not in ever and step.start.kind == "aiokafka"
                live[step.start.name] = step.start
                ever.add(step.start.name)
                continue
            target = live[step.member]  # every other step acts on a live member
            if step.action == "zombie":
                assert target.kind == "aiokafka" and not target.slow_revoke and step.fault_s >= 1.0
            elif step.action in ("leave", "crash", "failover"):
                assert step.start is None
                del live[step.member]
            elif step.action == "restart_same":
                assert step.start == target
            elif step.action == "restart_new":
                assert step.start.name not in ever and step.start.kind == target.kind
                del live[step.member]
                live[step.start.name] = step.start
                ever.add(step.start.name)
            else:
                assert step.action == "resubscribe"
                assert step.start.name == target.name and step.start.subscription != target.subscription
                live[step.member] = step.start
            assert shape.min_members <= len(live) <= shape.max_members
            assert sum(m.slow_revoke for m in live.values()) <= 1  # two slow revokers could keep expelling each other
    assert seen_actions == set(ACTIONS) | (set(FAULT_ACTIONS) if shape.fault_probability else set())


def test_the_soak_profile_sometimes_mixes_in_librdkafka_and_java_members_and_small_never_does():
    soak = [{m.kind for m in generate_sequence(s, "soak").initial} for s in range(100)]
    assert any("confluent" in kinds for kinds in soak) and any("java" in kinds for kinds in soak)
    assert all({m.kind for m in generate_sequence(s, "small").initial} == {"aiokafka"} for s in range(100))


def test_profiles_reject_groups_larger_than_the_always_read_topic():
    with pytest.raises(ValueError, match="partitions_a"):
        ChurnProfile(max_members=8, partitions_a=6)
    with pytest.raises(ValueError, match="unknown churn profile 'huge'"):
        generate_sequence(1, "huge")


# -- timeline analysis -------------------------------------------------------------------------


def test_settled_needs_one_live_reader_per_partition_and_something_for_every_member():
    parts = {"a": [A0, A1], "b": [B0]}
    events = [ev("m1", 1, "cb_assigned", [A0, B0]), ev("m2", 1.5, "cb_assigned", [A1])]
    assert settle_problems(events, {"m1": ["a", "b"], "m2": ["a"]}, parts) == []
    # m2 reads only a, so b:0 must not be its
    wrong = [ev("m1", 1, "cb_assigned", [A0]), ev("m2", 1.5, "cb_assigned", [A1, B0])]
    assert settle_problems(wrong, {"m1": ["a", "b"], "m2": ["a"]}, parts) == [
        "b:0 owned by m2, not a live member reading it"
    ]
    # nobody reads b any more: b:0 must be released
    assert settle_problems(events, {"m1": ["a"], "m2": ["a"]}, parts) == [
        "b:0 owned by ['m1'] though no live member reads it"
    ]
    # a crashed member owns nothing, and a newcomer without partitions is not settled yet
    crashed = events + [ev("m2", 2, "crash")]
    assert settle_problems(crashed, {"m1": ["a", "b"], "m3": ["a"]}, parts) == [
        "a:1 owned by nobody",
        "m3 owns nothing",
    ]


def test_duplicates_are_excused_only_where_the_owner_crashed_lost_or_failed_to_commit():
    events = [
        ev("m1", 1, "cb_assigned", [A0, A1]),
        ev("m2", 1, "cb_assigned", [B0]),
        ev("m1", 2, "cb_revoked", [A1]),  # a clean cooperative revocation excuses nothing
        ev("m3", 3, "cb_assigned", [A1]),
        ev("m3", 4, "commit_err", error="RebalanceInProgressError"),
        ev("m1", 5, "crash"),
        ev("m2", 6, "closing"),
        ev("m2", 7, "exit", code=0),
    ]
    excused = excused_partitions(events)
    assert sorted(excused) == [A0, A1]
    assert "crashed" in excused[A0] and "commit" in excused[A1]
    assert sorted(excused_partitions([ev("m2", 1, "cb_assigned", [B0]), ev("m2", 2, "exit", code=1)])) == [B0]
    assert sorted(excused_partitions([ev("m2", 1, "cb_assigned", [B0]), ev("m2", 2, "cb_lost", [B0])])) == [B0]


def test_unowned_partition_seconds_count_only_while_someone_reads_the_topic():
    parts = {"a": [A0], "b": [B0]}
    events = [
        ev("m1", 0, "subscribed", topics=["a"]),
        ev("m1", 1, "cb_assigned", [A0]),
        ev("m1", 4, "cb_revoked", [A0]),
        ev("m2", 5, "subscribed", topics=["a", "b"]),
        ev("m2", 6, "cb_assigned", [A0, B0]),
    ]
    # window [0, 10]: a:0 unowned over [0,1) and [4,6) = 3 s; b read from 5, owned from 6 = 1 s
    assert math.isclose(unowned_partition_seconds(events, parts, 0, 10), 4.0)
    assert math.isclose(unowned_partition_seconds(events, parts, 2, 3), 0.0)


def test_a_broken_timeline_fails_with_the_seed_the_steps_and_the_replay_command():
    sequence = generate_sequence(5, "small")
    events = [
        ev("m1", 1, "cb_assigned", [A0, A1]),
        ev("m1", 2, "processed", ranges={"a:0": [[0, 4]], "a:1": [[0, 1]]}),
        ev("m2", 3, "cb_assigned", [A1]),  # m1 never gave a:1 up
        ev("m2", 4, "processed", ranges={"a:1": [[0, 2]]}),
        ev("m1", 5, "cb_revoked", [A1]),
    ]
    result = ChurnResult(sequence, events, {A0: [0, 1, 2, 3, 4, 5], A1: [0, 1, 2]}, [], {}, (0.0, 6.0))
    analyse(result, {"a": [A0, A1]})
    assert math.isclose(result.double_owned_ps, 2.0)
    assert result.lost == {A0: [5]}
    assert result.duplicates == 2 and result.unexcused_duplicates == {A1: 2}
    with pytest.raises(ChurnFailure) as failure:
        check(result)
    message = str(failure.value)
    assert "a:1 owned by both m1 and m2" in message and "never processed" in message
    assert sequence.describe() in message and "--seed 5 --profile small" in message
    result.stalled = "final settle: group settled: not within 30s"
    assert churn_problems(result)[0] == "group did not settle (lost records not checked): " + result.stalled


# -- on the broker -----------------------------------------------------------------------------


@pytest.mark.timeout(150)
@pytest.mark.parametrize("seed", range(5))
def test_churn_sequence_keeps_ownership_exclusive_and_loses_nothing(seed, kafka_broker, tmp_path):
    pytest.importorskip("aiokafka")
    sequence = generate_sequence(seed, "small")
    result = run_sequence(sequence, kafka_broker.bootstrap, log_dir=tmp_path)
    check(result)  # raises with the seed, the steps and the replay command
    assert result.records > 0 and result.generations >= 1, result.summary()
