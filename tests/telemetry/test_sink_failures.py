"""One sink error must not cost the rest of the timeline: retries, serialisation, counts, bad times."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from kassign.telemetry import RebalanceRecorder, RotatingFileSink
from kassign.telemetry.jsonsafe import dumps_line
from kassign.telemetry.writer import BackgroundWriter


class FlakySink:
    """Raises OSError for the first ``failures`` calls, then keeps what it gets."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.got: list[dict] = []

    def __call__(self, obj: dict) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        self.got.append(obj)


def test_os_error_is_retried_with_backoff_and_nothing_is_lost() -> None:
    sink = FlakySink(failures=2)
    writer = BackgroundWriter(sink, backoff_s=0.001, max_backoff_s=0.002)
    for i in range(3):
        writer.submit({"i": i})
    assert writer.close()
    assert [o["i"] for o in sink.got] == [0, 1, 2]
    assert writer.written == 3 and writer.dropped == 0 and writer.sink_errors == 2 and not writer.failing


def test_persistent_os_error_drops_and_counts_then_recovers() -> None:
    sink = FlakySink(failures=2 * 3)  # two events' worth of attempts (1 + 2 retries each)
    writer = BackgroundWriter(sink, retries=2, backoff_s=0.001, max_backoff_s=0.002)
    for i in range(4):
        writer.submit({"i": i})
    assert writer.close()
    assert [o["i"] for o in sink.got] == [2, 3]  # the sink was not detached
    assert writer.dropped == 2 and writer.written == 2 and writer.sink_errors == 6


def test_compiled_pattern_and_other_objects_are_serialised(tmp_path: Path) -> None:
    path = tmp_path / "m1.jsonl"
    rec = RebalanceRecorder(path, member="m1")
    rec.subscribed(pattern=re.compile(r"orders-.*"))
    rec.record("progress", odd={1, 2}, raw=b"\x00ab", obj=object())
    assert rec.close()
    lines = {obj["ev"]: obj for obj in map(json.loads, path.read_text().splitlines())}
    assert lines["subscribed"]["pattern"] == "orders-.*"
    progress = lines["progress"]
    assert progress["odd"] == [1, 2] and progress["raw"] == "\x00ab" and progress["obj"].startswith("<object")
    assert rec.stats()["dropped"] == 0 and rec.stats()["sink_errors"] == 0


def test_unserialisable_event_in_a_file_sink_is_written_not_fatal(tmp_path: Path) -> None:
    sink = RotatingFileSink(tmp_path / "x.jsonl")
    sink({"id": "m", "t": 1.0, "ev": "x", "p": re.compile("a+"), "k": {("t", 1): 2}})
    sink.close()
    assert json.loads((tmp_path / "x.jsonl").read_text()) == {
        "id": "m",
        "t": 1.0,
        "ev": "x",
        "p": "a+",
        "k": {"('t', 1)": 2},
    }
    cyclic: list = []
    cyclic.append(cyclic)
    assert json.loads(dumps_line({"c": cyclic}))["c"][0][0]  # cut at a depth, as repr


def test_failed_rotation_keeps_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.jsonl"
    sink = RotatingFileSink(path, max_bytes=100, backup_count=50)
    real_replace = Path.replace

    def failing_replace(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "replace", failing_replace)
    for i in range(10):
        sink({"i": i, "pad": "x" * 30})
    assert sink.rotation_failures >= 1
    monkeypatch.setattr(Path, "replace", real_replace)
    for i in range(10, 20):
        sink({"i": i, "pad": "x" * 30})
    sink.close()
    kept = [json.loads(line)["i"] for p in [*reversed(sink.backups()), path] for line in p.read_text().splitlines()]
    assert kept == list(range(20 - len(kept), 20)) and 10 in kept and len(kept) >= 11  # nothing lost in between
    assert sink.backups()


def test_file_that_went_away_is_reopened(tmp_path: Path) -> None:
    path = tmp_path / "d" / "m.jsonl"
    sink = RotatingFileSink(path)
    sink({"i": 0})
    sink._fh.close()  # as after a failed write
    sink({"i": 1})
    sink.close()
    assert [json.loads(line)["i"] for line in path.read_text().splitlines()] == [0, 1]


def test_nan_and_infinite_times_are_rejected_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    out: list[dict] = []
    rec = RebalanceRecorder(out.append, member="m1")
    rec.record("join", t=100.0)
    rec.record("sync", t=math.nan, gen=1)
    rec.record("sync", t=math.inf, gen=1)
    rec.record("sync", t=1e308, gen=1)
    rec.record("sync", t=100.5, gen=1)
    metrics = rec.metrics(now=101.0)
    assert rec.close()
    assert metrics["rebalance-total"] == 1 and not math.isnan(metrics["rebalance-latency-total"])
    assert rec.stats()["rejected"] == 3 and [o["ev"] for o in out] == ["join", "sync"]
    assert caplog.text.count("rejected (not a finite") == 1


def test_clock_returning_nan_does_not_break_metrics() -> None:
    rec = RebalanceRecorder(None, member="m1", clock=lambda: math.nan)
    rec.record("join")
    assert rec.metrics(now=10.0)["rebalance-total"] == 0
    assert rec.stats()["rejected"] == 1
