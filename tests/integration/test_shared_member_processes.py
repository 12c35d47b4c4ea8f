"""aiokafka members sharing processes (``GroupDriver(members_per_process=N)``,
``integration.members.aiokafka_host``): the driver treats each as a member of its own, and a large
benchmark group can run without an interpreter per member."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from integration.driver import GroupDriver
from integration.timeline_checks import assert_all_processed, assert_exclusive
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor

ROOT = Path(__file__).resolve().parents[2]
SETTLE_S = 60.0


def test_a_host_skips_bad_commands_and_exits_when_its_stdin_ends():
    host = subprocess.run(
        [sys.executable, "-m", "integration.members.aiokafka_host"],
        input=b"start --no-such-option\nfrobnicate now\ngo m9\n",
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    assert host.returncode == 0, host.stderr.decode()
    err = host.stderr.decode()
    assert "the following arguments are required: --bootstrap" in err
    assert "unknown command 'frobnicate now'" in err
    assert "unknown command 'go m9'" in err  # no such member: nothing to release
    assert host.stdout == b""


@pytest.mark.broker
def test_members_sharing_processes_join_hand_over_and_leave_one_by_one(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(12)
    kind = dict(consumer_factory=CooperativeConsumer)
    with GroupDriver(bootstrap_servers, group_id, topic, members_per_process=3) as group:
        producer = group.start_producer(rate=200)
        group.start_members(4, "aiokafka", CooperativeStickyAssignor, **kind)
        first = group.wait_settled(SETTLE_S, balanced=True)
        assert sorted(first) == ["m1", "m2", "m3", "m4"]
        logs = sorted(p.name for p in group.log_dir.glob("*.stderr"))
        assert logs == ["host1.stderr", "host2.stderr"], logs  # m1-m3 in one process, m4 in another

        # a rolling restart's step: the replacement waits in host2 while m2 closes in host1
        replacement = group.start_member("aiokafka", CooperativeStickyAssignor, hold=True, **kind)
        group.wait_ready(replacement, 60)
        group.hand_over("m2", replacement)
        after = group.wait_settled(SETTLE_S, balanced=True)
        assert sorted(after) == ["m1", "m3", "m4", "m5"]
        exits = [e for e in group.events() if e.ev == "exit"]
        assert [(e.id, e.extra["code"]) for e in exits] == [("m2", 0)]
        assert group.live_members() == ["m1", "m3", "m4", "m5"]

        with pytest.raises(ValueError, match="m1 shares host1"):
            group.crash_member("m1")

        assert group.stop_members(["m3"]) == {"m3": 0}
        last = group.wait_settled(SETTLE_S, balanced=True)
        assert sorted(last) == ["m1", "m4", "m5"]
        usage = group.member_usage()
        assert sorted(usage) == ["m1", "m4", "m5"]
        # m1 has host1 to itself now, m4 and m5 share host2: each is counted once in the sums
        assert usage["m4"] == usage["m5"]
        producer.stop()
        assert producer.errors == []
        events = group.wait_all_processed(producer, timeout=SETTLE_S)
        assert_exclusive(events)
        assert_all_processed(events, producer.produced(), default_topic=topic)
