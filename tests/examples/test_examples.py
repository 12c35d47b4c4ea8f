"""Each example app runs against the test broker (run under ``flock /tmp/kassign-broker.lock``).

The examples are run as scripts, the way a user runs them, with short timeouts suited to the
embedded broker; each prints one JSON line as its last line of output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("aiokafka")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FAST = ["--session-ms", "1500", "--heartbeat-ms", "250"]

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


def _start(name: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(EXAMPLES.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _result(proc: subprocess.Popen, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{err[-3000:]}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"no JSON result line\nstdout: {out[-2000:]}\nstderr: {err[-3000:]}"
    return json.loads(lines[-1])


def test_at_least_once_processor(bootstrap_servers):
    topic, group = f"ex1-{uuid.uuid4().hex[:8]}", f"ex1-{uuid.uuid4().hex[:8]}"
    common = ["--bootstrap", bootstrap_servers, "--topic", topic, "--group", group, "--partitions", "6", *FAST]
    first = _start("at_least_once_processor.py", *common, "--name", "a", "--seconds", "16", "--produce", "100")
    import time

    time.sleep(5)  # the second copy joins a group whose partitions the first owns: a cooperative rebalance
    second = _start("at_least_once_processor.py", *common, "--name", "b", "--seconds", "6", "--produce", "0")
    b = _result(second, 40)
    a = _result(first, 40)
    assert b["processed"], f"the second copy got no records: {b}"
    assert set(a["processed"]) == {str(p) for p in range(6)}, a  # the first copy owned every partition at some point
    assert a["produced"] > 0
    processed = sum(a["processed"].values()) + sum(b["processed"].values())
    # at least once: everything produced up to the last second of the run was processed
    assert processed >= a["produced"] - 150, (processed, a["produced"])


def test_mixed_group(bootstrap_servers):
    pytest.importorskip("confluent_kafka")
    res = _result(_start("mixed_group.py", "--bootstrap", bootstrap_servers, "--seconds", "16", *FAST), 45)
    rd, aio = set(res["librdkafka"]["final"]), set(res["aiokafka"]["final"])
    assert rd and aio, res
    assert not rd & aio and rd | aio == set(range(6)), res


@pytest.mark.realkafka
def test_eager_to_cooperative_upgrade(bootstrap_servers):
    res = _result(
        _start("eager_to_cooperative_upgrade.py", "--bootstrap", bootstrap_servers, "--seconds", "150", *FAST), 170
    )
    final = res["stages"]["second bounce"]
    assert {m["protocol"] for m in final.values()} == {"COOPERATIVE"}, final
    assert {m["protocol"] for m in res["stages"]["first bounce"].values()} == {"EAGER"}
    assert sorted(p for m in final.values() for p in m["partitions"]) == list(range(6))
    assert res["records"]["lost"] == 0


def test_delayed_rolling_restart(bootstrap_servers):
    res = _result(
        _start(
            "delayed_rolling_restart.py",
            "--bootstrap",
            bootstrap_servers,
            "--seconds",
            "35",
            "--delay-ms",
            "8000",
            *FAST,
        ),
        50,
    )
    assert res["records"]["lost"] == 0, res["records"]
    assert len(res["bounces"]) == 3
    quiet = [b for b in res["bounces"] if not b["others_moved"]]
    # Only a departing leader's partitions are reassigned at once (it takes the record with it).
    assert len(quiet) >= 2, res["bounces"]
    for bounce in quiet:
        mine_before = {p for p, m in bounce["before"].items() if m == bounce["restarted"]}
        mine_after = {p for p, m in bounce["after"].items() if m == bounce["restarted"]}
        assert mine_before == mine_after, bounce
