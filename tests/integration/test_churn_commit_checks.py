"""The churn judge's commit rule (issue 27) on hand-made timelines, no broker: a kassign member's
failed commit of a partition it kept fails the run; refused commits of partitions given up or lost
meanwhile, a zombie's, a Java or librdkafka peer's and the failures of a coordinator failover do not."""

from __future__ import annotations

from integration.churn import ChurnResult, analyse, churn_problems, generate_sequence
from integration.churn.commit_checks import commit_reports, kept_commit_failures
from kassign.model import TopicPartition
from kassign.timeline.events import Event

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, parts, extra)


def failed(member, began, ended, parts, error="CommitFailedError", **extra):
    return ev(member, ended, "commit_err", parts, error=error, began=began, lat=(ended - began) * 1000, **extra)


BASE = [ev("m1", 1.0, "cb_assigned", [A0, A1]), ev("m2", 1.0, "cb_assigned", [])]


def test_a_failed_commit_of_a_kept_partition_is_reported_with_what_the_member_kept():
    events = BASE + [failed("m1", 2.0, 2.4, [A0, A1], whole=True, why="batch")]
    (problem,) = kept_commit_failures(events)
    assert problem.startswith(
        "m1's commit (batch, issued 2.000, failed 2.400 after 400 ms) failed with "
        "CommitFailedError for partitions it kept: a:0, a:1"
    )


def test_a_whole_assignment_commit_fails_the_rule_even_when_a_partition_was_revoked_meanwhile():
    # commit() leaves the revoked partition out: its failure is still a kept partition's
    events = BASE + [ev("m1", 2.2, "cb_revoked", [A1]), failed("m1", 2.0, 2.4, [A0, A1], whole=True)]
    (problem,) = kept_commit_failures(events)
    assert "it kept: a:0; not kept: a:1" in problem


def test_explicit_offsets_naming_a_partition_given_up_in_flight_may_be_refused():
    events = BASE + [ev("m1", 2.2, "cb_revoked", [A1]), failed("m1", 2.0, 2.4, [A0, A1])]
    assert kept_commit_failures(events) == []


def test_commits_of_partitions_not_kept_are_not_judged():
    events = BASE + [
        ev("m1", 2.0, "cb_revoked", [A1]),
        failed("m1", 2.0, 2.1, [A1], why="revoke"),  # a revocation's commit of what it gave up
        ev("m1", 3.0, "cb_lost", [A0]),
        failed("m1", 2.5, 2.9, [A0], whole=True),  # expelled: the member hears it lost a:0 afterwards
        ev("m1", 4.0, "commit_err", error="CommitFailedError"),  # no parts: nothing to judge
    ]
    assert kept_commit_failures(events) == []


def test_successful_commits_zombies_and_failovers_are_not_judged():
    events = BASE + [
        ev("m1", 2.0, "commit", [A0, A1], began=1.9, lat=100.0, why="batch"),
        ev("m1", 3.0, "freeze"),
        ev("m1", 5.0, "thaw"),
        failed("m1", 5.0, 5.1, [A0, A1], whole=True),
        ev("cluster", 6.0, "node_killed", node=1),
        ev("cluster", 9.0, "node_restarted", node=1),
        failed("m1", 7.0, 7.5, [A0, A1], error="KafkaTimeoutError", whole=True),
    ]
    assert kept_commit_failures(events, zombie={"m1": [(3.0, 5.2)]}) == []
    assert len(kept_commit_failures(events)) == 1  # without the zombie window, the thawed member's commit counts
    reports = commit_reports(events)
    assert [(r.ok, r.latency_ms) for r in reports][:1] == [(True, 100.0)]


def test_the_churn_judge_fails_a_run_on_a_kassign_members_kept_commit_failure_only():
    sequence = generate_sequence(5, "small")  # its members are kassign aiokafka members m1, m2, ...
    events = BASE + [
        ev("m1", 1.5, "processed", ranges={"a:0": [[0, 1]], "a:1": [[0, 0]]}),
        failed("m1", 2.0, 2.4, [A0, A1], error="RebalanceInProgressError", whole=True),
    ]
    result = ChurnResult(sequence, events, {A0: [0, 1], A1: [0]}, [], {}, (0.0, 3.0))
    analyse(result, {"a": [A0, A1]})
    problems = churn_problems(result)
    assert len(problems) == 1 and problems[0].startswith("commit of kept partitions failed: m1's commit")
    assert "RebalanceInProgressError" in problems[0]
    # a peer of another client (not a kassign member of the sequence) is not judged
    other = [Event("java1", e.t, e.ev, e.parts, e.extra) for e in events]
    peer = ChurnResult(sequence, other, {A0: [0, 1], A1: [0]}, [], {}, (0.0, 3.0))
    analyse(peer, {"a": [A0, A1]})
    assert churn_problems(peer) == []
