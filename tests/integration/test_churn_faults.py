"""The churn soak's faults (issue 16): the judge of zombie windows, late commits and slow revocations
on hand-made timelines, and on a replicated 3-broker Apache Kafka cluster: its nodes killed and
restarted, then one short fault sequence per fault kind (coordinator failover mid-rebalance, a zombie
frozen past its session timeout, a slow revoker). The long fault soak is
``python -m benchmarks.churn_soak --profile faults``.
"""

from __future__ import annotations

import math
import time

import pytest

from integration.churn import (
    FAULT_KINDS,
    ChurnResult,
    analyse,
    churn_problems,
    excused_partitions,
    fault_sequence,
    generate_sequence,
    hung_closes,
    run_sequence,
    zombie_windows,
)
from integration.churn.faults import slow_revoke_ms
from integration.driver import GroupTiming
from kassign.model import TopicPartition
from kassign.timeline.events import Event

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, parts, extra)


# -- sequences ---------------------------------------------------------------------------------


def test_each_fault_kind_has_a_sequence_that_injects_exactly_it():
    for kind in FAULT_KINDS:
        sequence = fault_sequence(kind, 3)
        assert sequence.fault_kinds() == {kind}
        assert f"fault_sequence('{kind}', 3)" in sequence.describe()
        assert fault_sequence(kind, 3) == sequence
    assert fault_sequence("zombie", 1).steps[0].fault_s != fault_sequence("zombie", 2).steps[0].fault_s
    with pytest.raises(ValueError, match="unknown fault kind"):
        fault_sequence("meteor")


def test_the_fault_profile_mixes_every_fault_into_the_churn():
    kinds = set()
    for seed in range(50):
        kinds |= generate_sequence(seed, "faults").fault_kinds()
        assert not generate_sequence(seed, "soak").fault_kinds()
    assert kinds == set(FAULT_KINDS)


def test_a_slow_revoker_outlasts_the_longest_rebalance_timeout_in_its_group():
    timing = GroupTiming(session_ms=1500, max_poll_ms=6000)
    assert slow_revoke_ms(fault_sequence("slow_revoke"), timing) > 1500  # aiokafka: its session timeout
    mixed = next(
        s
        for s in (generate_sequence(seed, "faults") for seed in range(100))
        if any(m.kind == "java" for m in s.initial)
    )
    assert slow_revoke_ms(mixed, timing) > 6000  # Java: its max.poll.interval.ms


def test_a_fault_sequence_refuses_a_single_broker():
    with pytest.raises(ValueError, match="needs a replicated cluster of 3 brokers"):
        run_sequence(fault_sequence("zombie"), "127.0.0.1:1")


# -- judging -----------------------------------------------------------------------------------


def _judged(events, produced=None):
    result = ChurnResult(fault_sequence("zombie"), events, produced or {}, [], {}, (0.0, 20.0))
    analyse(result, {"a": [A0, A1]}, grace=1.5)
    return result


def _zombie_timeline(late_ok=False, lost_at=8.2):
    return [
        ev("m1", 1, "cb_assigned", [A0]),
        ev("m2", 1, "cb_assigned", [A1]),
        ev("m1", 3, "freeze"),
        ev("m2", 5, "cb_assigned", [A0]),  # the broker expired m1 and gave a:0 to m2
        ev("m1", 8, "thaw"),
        ev("m1", 8.1, "late_commit", [A0], ok=late_ok, error=None if late_ok else "CommitFailedError"),
        ev("m1", lost_at, "cb_lost", [A0]),
        ev("m1", 9, "cb_assigned", []),
    ]


def test_double_ownership_inside_a_zombie_window_is_excused_and_measured_apart():
    result = _judged(_zombie_timeline())
    assert zombie_windows(result.events, 1.5) == {"m1": [(3, 8.2)]}
    assert result.double_owned_ps == 0 and math.isclose(result.faults.zombie_ps, 3.2)
    assert result.faults.zombies == 1 and result.faults.late_commits_rejected == 1
    assert churn_problems(result) == []


def test_a_zombie_told_late_of_its_loss_is_excused_only_until_it_resumed_and_fails():
    result = _judged(_zombie_timeline(lost_at=12))
    assert zombie_windows(result.events, 1.5) == {"m1": [(3, 8)]}
    assert math.isclose(result.double_owned_ps, 4.0) and math.isclose(result.faults.zombie_ps, 3.0)
    problems = churn_problems(result)
    assert any("double-owned" in p and "outside zombie windows" in p for p in problems)
    assert any("told its partitions were lost only 4.0s after resuming" in p for p in problems)


def test_a_zombie_that_resumes_before_the_driver_writes_thaw_is_judged_from_its_own_resumption():
    # SIGCONT, and the member commits and hears of its loss before the driver has written "thaw".
    timeline = [e for e in _zombie_timeline() if e.ev not in ("late_commit", "cb_lost", "thaw")] + [
        ev("m1", 7.90, "resumed"),
        ev("m1", 7.92, "late_commit", [A0], ok=False, error="CommitFailedError"),
        ev("m1", 7.93, "cb_lost", [A0]),
        ev("m1", 7.95, "thaw"),
    ]
    result = _judged(timeline)
    assert zombie_windows(result.events, 1.5) == {"m1": [(3, 7.93)]}
    assert result.faults.late_commits_rejected == 1 and churn_problems(result) == []


def test_an_accepted_or_missing_late_commit_breaks_the_run():
    accepted = churn_problems(_judged(_zombie_timeline(late_ok=True)))
    assert any("late commit at 8.100 was ACCEPTED" in p for p in accepted)
    missing = [e for e in _zombie_timeline() if e.ev != "late_commit"]
    assert any("never tried its late commit" in p for p in churn_problems(_judged(missing)))


def test_a_slow_revoker_expelled_meanwhile_is_a_zombie_until_it_hears_of_its_loss():
    events = [
        ev("m1", 1, "cb_assigned", [A0, A1]),
        ev("m1", 2, "cb_revoked", [A1], slow_ms=3000),
        ev("m2", 4, "cb_assigned", [A0, A1]),  # rebalance timeout over: m1 expelled, a:0 handed on
        ev("m1", 5, "commit_err", [A1], error="CommitFailedError"),
        ev("m1", 5, "cb_revoked_done"),
        ev("m1", 5.01, "cb_lost", [A0]),
        # a later quick revocation by the same member is no zombie window
        ev("m2", 5.5, "cb_revoked", [A1]),
        ev("m1", 6, "cb_assigned", [A1]),
        ev("m3", 7, "cb_assigned", [A1]),
        ev("m1", 7.5, "cb_revoked", [A1]),
    ]
    result = _judged(events)
    assert zombie_windows(events, 1.5) == {"m1": [(2, 5.01)]}
    assert result.faults.slow_revocations == 1 and result.faults.slow_revokers_expelled == 1
    assert result.faults.slow_in_rebalance == 1
    assert math.isclose(result.faults.zombie_ps, 1.01)
    assert math.isclose(result.double_owned_ps, 0.5)  # m1 and m3 on a:1 over [7, 7.5): not excused
    # the revocation's failed commit names a:1, which m1 no longer owned: its duplicates are excused
    assert set(excused_partitions(events)) == {A0, A1}
    # a slow revocation while closing is no rebalance's
    closing = _judged(
        [
            *events,
            ev("m1", 8, "closing"),
            ev("m1", 8.1, "cb_revoked", [], slow_ms=3000),
            ev("m1", 11.1, "cb_revoked_done"),
        ]
    )
    assert (closing.faults.slow_revocations, closing.faults.slow_in_rebalance) == (2, 1)


def test_failovers_are_counted_with_the_group_state_at_the_kill():
    events = [
        ev("cluster", 1, "node_killed", node=2, group_state="PREPARING_REBALANCING"),
        ev("cluster", 5, "node_killed", node=1, group_state="STABLE"),
        ev("m1", 0.5, "cb_assigned", [A0, A1]),
    ]
    result = _judged(events)
    assert (result.faults.failovers, result.faults.failovers_mid_rebalance) == (2, 1)
    assert "2 failover(s) (1 mid-rebalance)" in result.summary()


def test_a_close_the_driver_had_to_kill_is_a_problem_a_crash_is_not():
    events = [
        ev("m1", 1, "closing"),
        ev("m1", 21, "exit", code=-9),
        ev("m2", 1, "closing"),
        ev("m2", 2, "closed"),
        ev("m2", 2.1, "exit", code=0),
        ev("m3", 3, "crash"),
        ev("m3", 3.01, "exit", code=-9),
        ev("m1", 0.5, "cb_assigned", [A0, A1]),
    ]
    assert hung_closes(events) == ["member m1 began closing at 1.000 and never finished: killed at 21.000"]
    assert hung_closes(events)[0] in churn_problems(_judged(events))


# -- on a replicated 3-broker cluster ------------------------------------------------------------


@pytest.mark.timeout(90)
def test_the_cluster_loses_its_coordinator_and_gets_it_back(replicated_cluster):
    cluster = replicated_cluster
    assert cluster.node_ids == (1, 2, 3)
    node = cluster.coordinator_node("g-failover-probe")
    cluster.kill_node(node)
    deadline = time.monotonic() + 30
    moved = cluster.coordinator_node("g-failover-probe")
    while moved == node and time.monotonic() < deadline:  # until the controller fences the dead node
        time.sleep(0.2)
        moved = cluster.coordinator_node("g-failover-probe")
    assert moved != node and moved in cluster.node_ids
    assert cluster.restart_node(node) < 60


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_fault_keeps_ownership_exclusive_and_loses_nothing(kind, replicated_cluster, tmp_path):
    pytest.importorskip("aiokafka")
    result = run_sequence(
        fault_sequence(kind), replicated_cluster.bootstrap, cluster=replicated_cluster, log_dir=tmp_path
    )
    assert churn_problems(result) == [], result.summary()
    assert result.records > 0, result.summary()
    faults = result.faults
    if kind == "failover":
        assert (faults.failovers, faults.failovers_mid_rebalance) == (1, 1), result.summary()
        assert [e.extra["node"] for e in result.events if e.ev == "node_restarted"], result.summary()
    elif kind == "zombie":
        assert (faults.zombies, faults.late_commits_rejected) == (1, 1), result.summary()
        frozen = next(e.t for e in result.events if e.ev == "freeze")
        # it rejoined: after its loss it owned partitions again
        assert any(e.id == "m1" and e.ev == "cb_assigned" and e.parts and e.t > frozen for e in result.events)
    else:
        # m1 owned everything when m3 joined: it had to give partitions up, slowly, and was expelled
        assert faults.slow_revocations >= 1 and faults.slow_revokers_expelled >= 1, result.summary()
