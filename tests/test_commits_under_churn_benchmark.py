"""The commits-under-churn benchmark (benchmarks/commits_under_churn.py, issue 27) without a broker: its
figures for a hand-made timeline, its seeded schedules, its table and targets, its command line."""

from __future__ import annotations

import pytest

from benchmarks.commit_stats import classify_duplicates, percentile, pooled, run_stats
from benchmarks.commits_under_churn import change_schedule, format_table, parse_args, target_problems
from kassign.model import TopicPartition
from kassign.timeline.events import Event

T = "t"
P0, P1, P2 = TopicPartition(T, 0), TopicPartition(T, 1), TopicPartition(T, 2)


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, None if parts is None else [TopicPartition(T, p) for p in parts], extra)


def processed(member, t, **ranges):
    return Event(member, t, "processed", None, {"ranges": {f"{T}:{p[1:]}": spans for p, spans in ranges.items()}})


def commit(member, t, parts, lat_ms, error=None, why="batch", whole=True):
    extra = {"began": t - lat_ms / 1000, "lat": lat_ms, "why": why, "whole": whole}
    if error:
        extra["error"] = error
    return ev(member, t, "commit_err" if error else "commit", parts, **extra)


# m1 owns 0 and 1, m2 owns 2. m1 commits twice (10 and 30 ms); m2's batch commit fails on its kept
# partition 2 (a kept-partition failure) and it later reprocesses offset 1 of partition 2 itself
# (unmoved: nobody else owned it). Partition 1 moves to m2 at 5, which reprocesses m1's offset 1
# (moved). m1 is revoked partition 0 at 6 and given it back at 7: it re-reads offset 1 (re-read by
# the same member, on a partition nobody else owned: unmoved). Offset 3 of partition 0 is lost.
TIMELINE = [
    ev("m1", 1.0, "cb_assigned", [0, 1]),
    ev("m2", 1.0, "cb_assigned", [2]),
    processed("m1", 2.0, p0=[[0, 1]], p1=[[0, 1]]),
    commit("m1", 2.01, [0, 1], 10.0),
    processed("m2", 2.0, p2=[[0, 1]]),
    commit("m2", 2.5, [2], 400.0, error="CommitFailedError"),
    ev("m1", 4.0, "cb_revoked", [1]),
    commit("m1", 4.03, [1], 30.0, error="RebalanceInProgressError", why="revoke", whole=False),
    ev("m2", 5.0, "cb_assigned", [1]),
    processed("m2", 5.5, p1=[[1, 2]], p2=[[1, 2]]),
    ev("m1", 6.0, "cb_revoked", [0]),
    ev("m1", 7.0, "cb_assigned", [0]),
    processed("m1", 7.5, p0=[[1, 2]]),
]
PRODUCED = {P0: [0, 1, 2, 3], P1: [0, 1, 2], P2: [0, 1, 2]}


def test_run_stats_count_commits_errors_latency_duplicates_and_lost():
    stats = run_stats("kassign-classic", 1, 7, TIMELINE, PRODUCED, T)
    assert (stats.commits, stats.failed) == (3, 2)
    assert stats.errors == {"CommitFailedError": 1, "RebalanceInProgressError": 1}
    assert stats.errors_where == {"CommitFailedError@batch": 1, "RebalanceInProgressError@revoke": 1}
    (kept,) = stats.kept_failures  # the revocation's commit was of a partition given up: not judged
    assert kept.startswith("m2's commit (batch") and "it kept: t:2" in kept
    assert stats.latencies_ms == [10.0, 400.0, 30.0]
    assert (stats.latency(50), stats.latency(99), max(stats.latencies_ms)) == (30.0, 400.0, 400.0)
    assert (stats.reread_same, stats.dup_moved, stats.dup_unmoved) == (2, 1, 2)
    assert (stats.records, stats.lost) == (10, 1)
    row = stats.row()
    assert row["lat_p99_ms"] == 400.0 and "latencies_ms" not in row


def test_a_duplicate_counts_as_moved_when_another_member_owned_the_partition_in_between():
    events = [
        ev("m1", 1.0, "cb_assigned", [0]),
        processed("m1", 2.0, p0=[[0, 0]]),
        ev("m1", 3.0, "cb_revoked", [0]),
        ev("m2", 3.5, "cb_assigned", [0]),
        ev("m2", 4.0, "cb_revoked", [0]),  # m2 held it without processing anything
        ev("m1", 4.5, "cb_assigned", [0]),
        processed("m1", 5.0, p0=[[0, 0]]),
    ]
    dup = classify_duplicates(events, T)
    assert (dup.reread_same, dup.dup_moved, dup.dup_unmoved) == (1, 1, 0)


def test_percentiles_are_nearest_rank():
    assert percentile([], 50) == 0.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile(list(range(1, 101)), 99) == 99 and percentile(list(range(1, 101)), 100) == 100


def test_pooled_figures_and_table_and_targets():
    a = run_stats("kassign-classic", 1, 7, TIMELINE, PRODUCED, T)
    b = run_stats("kassign-classic", 2, 8, TIMELINE[:4], {P0: [0, 1], P1: [0, 1]}, T)
    p = pooled([a, b])
    assert (p["runs"], p["commits"], p["failed"], p["failed_per_run"]) == (2, 4, 2, [2, 0])
    assert p["lat_max_ms"] == 400.0 and p["lost"] == 1
    table = format_table({"kassign-classic": [a, b]}, {"java-cooperative": 1}, ["kassign-classic", "java-cooperative"])
    assert (
        "| kassign classic | 2 | 4 | 2 (CommitFailedError 1, RebalanceInProgressError 1) | 1 | 10.0 / 400.0 / 400 "
        "| 2 | 1 | 2 | 1 / 14 |"
    ) in table  # b had one commit (10 ms), no duplicate
    assert "| Java 3.9 cooperative-sticky | 0 (+1 failed) |" in table
    problems = target_problems({"kassign-classic": [a, b], "aiokafka-eager": [a]}, {"java-cooperative": 1})
    assert problems[0] == "java-cooperative: 1 run(s) failed"
    assert any(p.startswith("kassign-classic: 2 commit error(s)") for p in problems)
    assert "kassign-classic: 1 record(s) lost" in problems
    assert not any(p.startswith("aiokafka-eager") for p in problems)  # eager's figures are shown, not judged


def test_schedules_are_seeded_and_keep_the_group_within_its_bounds():
    assert change_schedule(5, 20) == change_schedule(5, 20)
    assert change_schedule(5, 20) != change_schedule(6, 20)
    for seed in range(50):
        s = change_schedule(seed, 20)
        live = set(s.initial)
        assert 3 <= len(live) <= 4 and len(s.changes) == 20
        gaps = [b.at_s - a.at_s for a, b in zip((type(s.changes[0])(0.0, "", ""), *s.changes), s.changes)]
        assert all(0.74 <= g <= 2.26 for g in gaps), gaps
        for c in s.changes:
            if c.action == "join":
                assert c.member not in live
                live.add(c.member)
            else:
                live.remove(c.member)
            assert 3 <= len(live) <= 4
    with pytest.raises(ValueError, match="min_members"):
        change_schedule(1, 5, min_members=4, max_members=3)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reps", "0"], "--reps must be at least 1, got 0"),
        (["--changes", "0"], "--changes must be at least 1, got 0"),
        (["--modes", "kassign-classic,nope"], "unknown mode(s) nope; choose from kassign-classic"),
        (["--process-ms", "300,100"], "--process-ms takes MS or LO,HI"),
        (["--min-members", "5"], "need 1 <= --min-members <= --max-members, got 5 and 4"),
        (["--out", "/nonexistent-dir/x"], "--out: directory /nonexistent-dir does not exist"),
    ],
)
def test_bad_command_lines_are_refused_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    args = parse_args(["--modes", "java-cooperative,kassign-consumer"])
    assert (args.reps, args.changes, args.modes, args.process_ms) == (
        5,
        20,
        ["java-cooperative", "kassign-consumer"],
        (100, 300),
    )
