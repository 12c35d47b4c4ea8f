"""Smoke test of the commits-under-churn benchmark (issue 27) on the broker: one short run of kassign's
classic ``CooperativeConsumer`` members that commit after every batch, through a join and a leave
(about 15 s). The full comparison is ``python -m benchmarks.commits_under_churn``."""

from __future__ import annotations

import pytest

pytest.importorskip("aiokafka")

from benchmarks.commits_under_churn import change_schedule, run_once  # noqa: E402
from integration.driver import GroupTiming  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(120)]


def test_a_short_run_reports_every_commit_and_loses_nothing(bootstrap_servers):
    schedule = change_schedule(3, 2, min_members=2, max_members=3)
    timing = GroupTiming(process_ms=(100, 300), seed=3, commit_every_batch=True)
    stats = run_once(bootstrap_servers, "kassign-classic", schedule, rep=1, partitions=6, rate=200.0, timing=timing)
    assert stats.commits >= 20 and stats.records > 0, stats.row()
    assert stats.latencies_ms and all(lat >= 0 for lat in stats.latencies_ms)
    assert (stats.failed, stats.kept_failures, stats.lost, stats.dup_unmoved) == (0, [], 0, 0), stats.row()
    assert stats.changes == 2 and stats.members == len(schedule.initial) + sum(
        c.action == "join" for c in schedule.changes
    )
