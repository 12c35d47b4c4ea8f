"""The recorder's plumbing without a broker: file rotation, callable and failing sinks, the bounded queue,
and the confluent-kafka / aiokafka callback wrappers."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from kassign.model import TopicPartition
from kassign.telemetry import RebalanceRecorder, RotatingFileSink, metrics_from_events
from kassign.timeline.events import read_events

# Both clients' partition objects expose .topic and .partition; a namedtuple stands in for them.
TP = namedtuple("TP", "topic partition")


def test_file_sink_rotates_by_size_and_keeps_backup_count(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    sink = RotatingFileSink(path, max_bytes=200, backup_count=2)
    lines = [{"id": "m", "t": float(i), "ev": "progress", "n": i} for i in range(40)]
    for obj in lines:
        sink(obj)
    sink.close()
    assert sink.backups() == [path.with_name("rec.jsonl.1"), path.with_name("rec.jsonl.2")]
    assert not path.with_name("rec.jsonl.3").exists()
    files = [path.with_name("rec.jsonl.2"), path.with_name("rec.jsonl.1"), path]
    for f in files:
        assert 0 < f.stat().st_size <= 200
    kept = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert kept == lines[-len(kept) :]  # the newest events, in order, none torn


def test_recording_round_trips_through_the_events_schema(tmp_path: Path) -> None:
    path = tmp_path / "m1.jsonl"
    with RebalanceRecorder(path, member="m1", group="g") as rec:
        rec.subscribed(["orders", "payments"])
        cb = rec.confluent_callbacks()
        cb["on_assign"](None, [TP("payments", 1), TP("orders", 3)])
        cb["on_revoke"](None, [TP("orders", 3)])
        live = rec.metrics(now=1e10)
    events = list(read_events(path))
    assert [e.ev for e in events] == [
        "subscribed",
        "join",
        "cb_assigned",
        "sync",
        "cb_revoked",
        "join",
        "cb_revoked_done",
    ]
    assert [e.extra.get("inferred") for e in events if e.ev in ("join", "sync")] == [True] * 3
    assert events[1].t == events[0].t and events[3].t == events[2].t  # eager: subscribe/revoke start, assign ends
    assert events[2].parts == [TopicPartition("orders", 3), TopicPartition("payments", 1)]
    raw = path.read_text().splitlines()
    assert '"parts":["orders:3","payments:1"]' in raw[2]  # multi-topic groups name the topic
    assert metrics_from_events(events, now=1e10)["m1"]["rebalance-total"] == live["rebalance-total"] == 1


def test_an_inferred_boundary_is_written_at_its_events_exact_time(tmp_path: Path) -> None:
    # t * 1000 / 1000 differs from this t in the last bit and rounds to another microsecond.
    t = 1795774011.5959625
    assert round(t * 1000.0 / 1000.0, 6) != round(t, 6)
    path = tmp_path / "m1.jsonl"
    with RebalanceRecorder(path, member="m1", group="g", clock=lambda: t) as rec:
        rec.subscribed(["orders"])
        rec.confluent_callbacks()["on_assign"](None, [TP("orders", 0)])
    events = list(read_events(path))
    assert [e.ev for e in events] == ["subscribed", "join", "cb_assigned", "sync"]
    assert {e.t for e in events} == {round(t, 6)}


def test_single_topic_partitions_are_bare_ints(tmp_path: Path) -> None:
    out: list[dict] = []
    rec = RebalanceRecorder(out.append, member="m1")
    rec.subscribed(["orders"])
    rec.confluent_callbacks()["on_assign"](None, [TP("orders", 2), TP("orders", 0)])
    rec.close()
    assert out[2]["parts"] == [0, 2] and out[0]["topics"] == ["orders"]


def test_raising_sink_stays_attached_and_never_reaches_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def sink(obj: dict) -> None:
        calls.append(obj)
        raise RuntimeError("sink bug")

    rec = RebalanceRecorder(sink, member="m1")
    cb = rec.confluent_callbacks()
    for i in range(5):
        cb["on_assign"](None, [TP("t", i)])  # must not raise
    assert rec.close()
    assert len(calls) == 10  # every event reached the sink: one failure does not detach it
    stats = rec.stats()
    assert stats["events"] == 5 and stats["written"] == 0 and stats["dropped"] == 5 + 5  # with inferred syncs
    assert stats["sink_errors"] == 10 and stats["sink_failing"]
    assert "sink bug" in stats["sink_error"]
    assert rec.metrics()["rebalance-total"] == 5  # metrics do not depend on the sink
    assert caplog.text.count("stays attached") == 1  # reported once, not per event


def test_full_queue_drops_and_counts_without_blocking() -> None:
    release = threading.Event()
    rec = RebalanceRecorder(lambda obj: release.wait(10), member="m1", queue_size=4)
    t0 = time.perf_counter()
    for _ in range(1000):
        rec.record("progress")
    elapsed = time.perf_counter() - t0
    release.set()
    rec.close()
    stats = rec.stats()
    assert elapsed < 1.0
    assert stats["dropped"] >= 1000 - 5 and stats["written"] + stats["dropped"] == 1000


def test_confluent_callbacks_keep_user_behaviour() -> None:
    seen: list[tuple[str, list]] = []
    rec = RebalanceRecorder(None, member="m1")

    def on_revoke(consumer, parts):
        seen.append(("revoke", parts))
        raise RuntimeError("user bug")

    cb = rec.confluent_callbacks(on_assign=lambda c, p: seen.append(("assign", p)), on_revoke=on_revoke)
    cb["on_assign"]("consumer", [TP("t", 0)])
    with pytest.raises(RuntimeError, match="user bug"):
        cb["on_revoke"]("consumer", [TP("t", 0)])
    with pytest.raises(RuntimeError, match="user bug"):
        cb["on_lost"]("consumer", [TP("t", 1)])  # without on_lost, on_revoke gets lost partitions
    assert [kind for kind, _ in seen] == ["assign", "revoke", "revoke"]
    assert seen[2][1] == [TP("t", 1)]
    with pytest.raises(TypeError, match="on_lost"):
        rec.confluent_callbacks(on_lost="nope")


@pytest.mark.asyncio
async def test_aiokafka_listener_wrapper_sync_async_lost_and_hooks() -> None:
    pytest.importorskip("aiokafka")
    out: list[dict] = []
    rec = RebalanceRecorder(out.append, member="m1", protocol="cooperative")
    calls: list[str] = []

    class Listener:
        def on_partitions_revoked(self, revoked):
            calls.append(f"revoked {sorted(revoked)}")

        async def on_partitions_assigned(self, assigned):
            await asyncio.sleep(0.02)
            calls.append(f"assigned {sorted(assigned)}")

    wrapped = rec.wrap_listener(Listener())

    async def drive() -> None:
        wrapped.rebalance_started(generation=None)
        wrapped.rebalance_completed(True, generation=1)
        await wrapped.on_partitions_assigned({TP("t", 1), TP("t", 0)})
        await wrapped.on_partitions_lost({TP("t", 1)})  # no on_partitions_lost: revoked, as in Java
        wrapped.rebalance_completed(False, error="ILLEGAL_GENERATION")

    await drive()
    rec.close()
    assert calls == [
        "assigned [TP(topic='t', partition=0), TP(topic='t', partition=1)]",
        "revoked [TP(topic='t', partition=1)]",
    ]
    assert [o["ev"] for o in out] == ["join", "sync", "cb_assigned", "cb_lost", "rebalance_failed"]  # none inferred
    assert out[2]["dur"] >= 0.02
    m = rec.metrics()
    assert m["rebalance-total"] == 1 and m["failed-rebalance-total"] == 1
    assert m["partition-assigned-latency-max"] >= 20.0


@pytest.mark.asyncio
async def test_aiokafka_attach_records_subscribe_and_stop() -> None:
    aiokafka = pytest.importorskip("aiokafka")
    out: list[dict] = []

    async def drive() -> list[str]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", group_id="g1")
        rec = RebalanceRecorder(out.append, member="m1")
        assert rec.attach(consumer) is consumer
        consumer.subscribe(["orders"])
        listener = consumer._subscription.listener
        await listener.on_partitions_assigned({aiokafka.TopicPartition("orders", 0)})
        await consumer.stop()
        rec.close()
        return [o["ev"] for o in out]

    kinds = await drive()
    assert kinds == ["subscribed", "join", "cb_assigned", "sync", "closing", "closed"]
    assert out[0]["group"] == "g1" and out[0]["protocol"] == "eager" and out[2]["parts"] == [0]


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'sticky'"):
        RebalanceRecorder(None, protocol="sticky")
    with pytest.raises(TypeError, match="42"):
        RebalanceRecorder(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bytes"):
        RotatingFileSink(tmp_path / "x", max_bytes=-1)
    rec = RebalanceRecorder(None)
    with pytest.raises(ValueError, match="cb_moved"):
        rec.record_callback("cb_moved", [], 0.0, 1.0)
