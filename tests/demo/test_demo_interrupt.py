"""Ctrl-C during ``kassign demo --quick``: a clean stop, not a traceback.

The demo runs in its own process (and process group, as a terminal's foreground job is); once its
first run is scaling out it gets SIGINT, as Ctrl-C sends. It must close its members, stop the
broker it started, write what ran so far, say so in one line and exit with 130. Run under
``flock /tmp/kassign-broker.lock``.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("matplotlib")

from kassign.broker.probe import probe_metadata  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

# A process started with SIGINT ignored (a background job of a non-interactive shell, as CI may
# run pytest) passes that on: the demo stands for an interactive program, so it restores Python's
# handler first.
DEMO = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from kassign.cli import main; sys.exit(main())"
)
MARKER = "scale out"  # a progress line of the first run's first rebalance step


def _broker_workdirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("kassign-broker-*"))


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        return probe_metadata(host, int(port), timeout=1.0) > 0
    except (OSError, ConnectionError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_stops_cleanly_and_keeps_the_partial_results(tmp_path):
    out = tmp_path / "demo-out"
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}  # the demo starts its broker
    before = _broker_workdirs()
    demo = subprocess.Popen(
        [sys.executable, "-c", DEMO, "demo", "--quick", "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(demo.stdout, lines), daemon=True).start()
    stdout: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any(MARKER in line for line in stdout):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"the demo ended before {MARKER!r}: {''.join(stdout)}{demo.stderr.read()}"
            stdout.append(line)
        os.killpg(demo.pid, signal.SIGINT)
        code = demo.wait(timeout=120)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    stderr = demo.stderr.read()

    assert code == 130, stderr
    assert "Traceback" not in stderr, stderr
    ours = [line for line in stderr.splitlines() if line.startswith("kassign demo:")]
    assert ours == [
        f"kassign demo: interrupted during the eager run's step 'scale out 2\u21924'; partial results "
        f"of what ran so far in {out} (summary.json, *.jsonl, timeline.png)"
    ], stderr

    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["eager"]
    eager = summary["eager"]
    assert eager["interrupted"] is True and eager["interrupted_during"] == "scale out 2\u21924"
    assert eager["records"]["produced"] > 0 and eager["records"]["lost"] is None
    assert "scale out 2\u21924" in eager["phases"]
    timeline = (out / "eager.jsonl").read_text().splitlines()
    events = {json.loads(line)["ev"] for line in timeline}
    assert {"subscribed", "cb_assigned", "closed"} <= events  # the members were closed, not abandoned
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"

    # The broker the demo started is gone: its supervisor, its port and its work directory.
    started = re.search(r"at (\S+:\d+) .*supervisor pid (\d+)", "".join(stdout))
    assert started, stdout[:3]
    address, supervisor = started.group(1), int(started.group(2))
    assert not _alive(supervisor), f"the broker's supervisor (pid {supervisor}) outlived the demo"
    assert not _answers(address), f"a broker still answers at {address}"
    assert _broker_workdirs() - before == set()
