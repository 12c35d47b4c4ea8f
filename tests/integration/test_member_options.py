"""The group driver's member options that need no broker: seeded per-batch processing times and a
member held before subscribing (it reports ``ready``, and closing its stdin ends it cleanly)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integration.driver import GroupTiming
from integration.members.reporting import BatchProcessing, parse_process_ms

ROOT = Path(__file__).resolve().parents[2]


def test_processing_times_are_seeded_per_member_and_within_bounds():
    a = [BatchProcessing("250,750", 7, "m1").next_delay() for _ in range(1)]
    first = BatchProcessing("250,750", 7, "m1")
    again = BatchProcessing("250,750", 7, "m1")
    other = BatchProcessing("250,750", 7, "m2")
    xs = [first.next_delay() for _ in range(200)]
    assert xs == [again.next_delay() for _ in range(200)]
    assert xs != [other.next_delay() for _ in range(200)]
    assert all(0.25 <= x <= 0.75 for x in xs) and max(xs) - min(xs) > 0.4 and a[0] == xs[0]
    assert BatchProcessing("0", 7, "m1").next_delay() == 0.0
    assert BatchProcessing("300", 7, "m1").next_delay() == pytest.approx(0.3)


@pytest.mark.parametrize("bad", ["x", "5,1", "-1", "1,2,3", "700000"])
def test_bad_processing_specs_are_named(bad):
    with pytest.raises(ValueError, match="--process-ms"):
        parse_process_ms(bad)


def test_timing_rejects_processing_longer_than_the_poll_interval():
    with pytest.raises(ValueError, match="process_ms"):
        GroupTiming(max_poll_ms=1000, process_ms=(500, 1500))


@pytest.mark.parametrize("module", ["integration.members.aiokafka_member", "integration.members.confluent_member"])
def test_a_held_member_reports_ready_and_closes_on_end_of_input(module):
    cmd = [
        sys.executable,
        "-m",
        module,
        "--bootstrap",
        "127.0.0.1:1",
        "--group",
        "g",
        "--topics",
        "t",
        "--id",
        "m9",
        "--strategy",
        "roundrobin",
        "--hold",
        "--process-ms",
        "250,750",
        "--seed",
        "3",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
    )
    first = json.loads(proc.stdout.readline())
    assert (first["id"], first["ev"]) == ("m9", "ready")
    out, err = proc.communicate(b"", timeout=30)
    assert proc.returncode == 0, err.decode()
    assert b"subscribed" not in out  # never released: it never joined
