"""A recorded group of aiokafka and confluent-kafka members on a real broker: scale-out, scale-in, a crash.

Every member's own listener notes when each callback ran; from those notes alone the test computes
what Java's coordinator metrics should read, and compares them with the recorders' dicts, with the
recordings replayed from disk, and with a Prometheus endpoint scraped over HTTP. One member's sink
raises on every event: that member must keep consuming.

The recorders use a 10-minute sampling window so that avg/max cover the whole run; Java's window
rules themselves are checked against kafka-clients in test_stats_java.py.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kassign.telemetry import METRIC_NAMES, MetricConfig, RebalanceRecorder, metrics_from_events
from kassign.timeline.events import read_events

pytestmark = [pytest.mark.broker, pytest.mark.timeout(150)]

PARTITIONS = 6
SESSION_MS = 4000  # the crash is noticed after all of it
WINDOW = MetricConfig(time_window_ms=600_000)
# The wrapper reads the clock just outside the user's callback, so its duration contains the callback's own
# (up to the microsecond the duration is rounded to). How much longer it is depends on the scheduler: on a
# loaded 2-core machine a thread can lose the CPU between the two reads for several milliseconds (CI once
# saw 7.7 ms), so the upper side gets a scheduling allowance, not an exactness claim.
ROUNDING_MS = 1e-3
SCHEDULING_SLACK_MS = 250.0
CALLBACK_WORK_S = 0.02  # each user callback does measurable work, so a wrapper that timed nothing would fail


@dataclass
class Notes:
    """What one member's own callbacks saw: (kind, entry, exit, partitions)."""

    subscribed_at: float = 0.0
    stopping_at: float = math.inf
    calls: list[tuple[str, float, float, frozenset[int]]] = field(default_factory=list)
    owned: set[int] = field(default_factory=set)
    consumed: list[tuple[float, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, kind: str, entry: float, parts) -> None:
        ps = frozenset(p.partition for p in parts)
        time.sleep(CALLBACK_WORK_S)
        with self.lock:
            if kind == "assigned":
                self.owned |= ps
            else:
                self.owned -= ps
            self.calls.append((kind, entry, time.time(), ps))

    def expected_metrics(self, now: float, cooperative: bool = False) -> dict[str, float]:
        """Java's definitions applied to this member's callbacks. The subscribe starts the first
        rebalance. Eager: a revoke callback starts one, the assign callback ends each. Cooperative:
        the member's first callback after a SyncGroup ends it (the assign callback runs once per
        SyncGroup, a revoke just before it), and a member that revoked rejoins after that assign."""
        calls = [c for c in self.calls if c[1] < self.stopping_at]
        start: float | None = self.subscribed_at
        latencies, last_end, revoked_in_sync = [], None, None
        for kind, entry, exit_, _parts in calls:
            if cooperative and kind == "revoked":
                if revoked_in_sync is None:
                    revoked_in_sync = entry
                continue
            if kind == "assigned":
                end = revoked_in_sync if revoked_in_sync is not None else entry
                if start is not None:
                    latencies.append((end - start) * 1000)
                start, last_end = None, end
                if revoked_in_sync is not None:
                    start, revoked_in_sync = exit_, None
            elif start is None:
                start = entry if kind == "revoked" else exit_
        out = {
            "rebalance-total": float(sum(k == "assigned" for k, *_ in calls)),
            "rebalance-latency-total": sum(latencies),
            "rebalance-latency-avg": sum(latencies) / len(latencies) if latencies else math.nan,
            "rebalance-latency-max": max(latencies, default=math.nan),
            "failed-rebalance-total": 0.0,
            "last-rebalance-seconds-ago": -1.0 if last_end is None else float(math.trunc(now - last_end)),
        }
        for kind, name in (
            ("assigned", "partition-assigned"),
            ("revoked", "partition-revoked"),
            ("lost", "partition-lost"),
        ):
            durations = [(x - e) * 1000 for k, e, x, _ in calls if k == kind]
            out[f"{name}-latency-avg"] = sum(durations) / len(durations) if durations else math.nan
            out[f"{name}-latency-max"] = max(durations, default=math.nan)
        return out


def assert_callback_latency(value: float, want: float, who: str, name: str) -> None:
    """The recorded callback duration contains the callback's own and exceeds it by scheduling delay only."""
    if math.isnan(want):
        assert math.isnan(value), (who, name, value)
        return
    assert want - ROUNDING_MS <= value <= want + SCHEDULING_SLACK_MS, (who, name, value, want)


def assert_metrics_match(got: dict[str, float], expected: dict[str, float], n_samples: int, who: str) -> None:
    for name, want in expected.items():
        value = got[name]
        if name.startswith("partition-"):
            assert_callback_latency(value, want, who, name)
        elif math.isnan(want):
            assert math.isnan(value), (who, name, value)
        elif name in ("rebalance-total", "failed-rebalance-total"):
            assert value == want, (who, name, value, want)  # counts exactly
        elif name == "last-rebalance-seconds-ago":  # whole seconds: a microsecond can cross a boundary
            assert abs(value - want) <= 1, (who, name, value, want)
        else:  # rebalance boundaries: the recorder's and the callback's clock reads differ by scheduling delay
            assert value == pytest.approx(want, abs=SCHEDULING_SLACK_MS * max(1, n_samples)), (who, name, value, want)


class AioMember:
    """An aiokafka member on a shared event loop, recorded with ``recorder.attach``."""

    def __init__(
        self,
        loop,
        bootstrap: str,
        group: str,
        topic: str,
        recorder: RebalanceRecorder,
        cooperative: bool = False,
        protocol: str = "classic",
    ) -> None:
        self.loop, self.bootstrap, self.group, self.topic, self.recorder = loop, bootstrap, group, topic, recorder
        self.cooperative = cooperative or protocol == "consumer"  # kassign's consumer speaks the consumer protocol
        self.protocol = protocol
        self.notes = Notes()
        self.task = None

    def start(self) -> None:
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> None:
        from aiokafka import AIOKafkaConsumer

        notes = self.notes

        class Listener:  # the user's listener: plain, synchronous, unaware of telemetry
            def on_partitions_revoked(self, revoked):
                notes.note("revoked", time.time(), revoked)

            def on_partitions_assigned(self, assigned):
                notes.note("assigned", time.time(), assigned)

        if self.cooperative:
            from kassign.adapters.aiokafka import CooperativeConsumer as consumer_class
        else:
            consumer_class = AIOKafkaConsumer
        if self.protocol == "consumer":
            from integration.protocols import consumer_config

            timing = consumer_config(self.bootstrap, self.group, "consumer", session_ms=SESSION_MS, heartbeat_ms=500)
        else:
            timing = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 500}
        self.consumer = consumer_class(
            bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest", **timing
        )
        self.recorder.attach(self.consumer)  # the one line
        notes.subscribed_at = time.time()
        self.consumer.subscribe([self.topic], listener=Listener())
        await self.consumer.start()
        self.task = asyncio.ensure_future(self._consume())

    async def _consume(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=200)
            now = time.time()
            for records in batches.values():
                self.notes.consumed.extend((now, r.value) for r in records)

    def stop(self) -> None:
        async def _stop():
            self.notes.stopping_at = time.time()
            self.task.cancel()
            await self.consumer.stop()

        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(30)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()


class ConfluentMember:
    """A confluent-kafka member polled on its own thread, recorded through its subscribe callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, recorder: RebalanceRecorder) -> None:
        from confluent_kafka import Consumer

        self.recorder, self.topic = recorder, topic
        self.notes = Notes()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "roundrobin",
                "auto.offset.reset": "earliest",
                "log_level": 3,
            }
        )
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        notes = self.notes
        self.notes.subscribed_at = time.time()
        self.recorder.subscribe(  # the one line
            self.consumer,
            [self.topic],
            on_assign=lambda c, ps: notes.note("assigned", time.time(), ps),
            on_revoke=lambda c, ps: notes.note("revoked", time.time(), ps),
            on_lost=lambda c, ps: notes.note("lost", time.time(), ps),
        )
        self.thread.start()

    def _run(self) -> None:
        from kassign.telemetry.confluent_glue import close

        while not self._stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.notes.consumed.append((time.time(), msg.value()))
        close(self.recorder, self.consumer)

    def stop(self) -> None:
        self.notes.stopping_at = time.time()
        self._stop.set()
        self.thread.join(30)


class CrashMember:
    """A confluent-kafka member in a child process, killed with SIGKILL."""

    def __init__(self, bootstrap: str, group: str, topic: str, recording: Path) -> None:
        script = Path(__file__).with_name("crash_member.py")
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        self.proc = subprocess.Popen(
            [sys.executable, str(script), bootstrap, group, topic, str(recording)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.owned: set[int] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, parts = line.strip().partition(" ")
            ps = {int(p) for p in parts.split(",") if p}
            with self.lock:
                self.owned = self.owned | ps if kind == "assigned" else self.owned - ps

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def wait_settled(owners: list, timeout: float = 40.0, quiet: float = 1.0) -> None:
    """Until the live members own every partition exactly once and no callback ran for ``quiet`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [set(o.owned) for o in owners]
        union = set().union(*sets)
        last = max((c[2] for o in owners if isinstance(o, Notes) for c in o.calls), default=0.0)
        if union == set(range(PARTITIONS)) and sum(map(len, sets)) == PARTITIONS and time.time() - last > quiet:
            return
        time.sleep(0.1)
    raise AssertionError(f"group did not settle: {[sorted(o.owned) for o in owners]}")


class Producer:
    """Writes numbered records at a steady pace until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer as CkProducer

        self.producer = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        self.topic, self.sent = topic, 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(20):
                self.producer.produce(self.topic, value=str(self.sent).encode(), partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.1)
        self.producer.flush(10)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(20)


def test_recorded_group_through_scale_out_scale_in_and_crash(bootstrap_servers, group_id, topic_factory, tmp_path):
    pytest.importorskip("aiokafka")
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from kassign.telemetry.prometheus import prometheus_name, serve

    topic = topic_factory(PARTITIONS)
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()

    sink_calls = []

    def raising_sink(obj):
        sink_calls.append(time.time())
        raise RuntimeError("sink is down")

    def recorder(member: str, sink) -> RebalanceRecorder:
        return RebalanceRecorder(sink, member=member, group=group_id, metric_config=WINDOW)

    rec_a1 = recorder("a1", raising_sink)
    rec_a2 = recorder("a2", tmp_path / "a2.jsonl")
    rec_c1 = recorder("c1", tmp_path / "c1.jsonl")
    _collector, server = serve([rec_a1, rec_a2, rec_c1], port=0, addr="127.0.0.1")
    producer = Producer(bootstrap_servers, topic)
    a1 = AioMember(loop, bootstrap_servers, group_id, topic, rec_a1)
    a2 = AioMember(loop, bootstrap_servers, group_id, topic, rec_a2)
    c1 = ConfluentMember(bootstrap_servers, group_id, topic, rec_c1)
    crash = None
    live_totals: dict[str, int] = {}
    try:
        a1.start()
        c1.start()
        wait_settled([a1.notes, c1.notes])

        a2.start()  # scale-out: an aiokafka and a crash-prone confluent member join
        crash = CrashMember(bootstrap_servers, group_id, topic, tmp_path / "crash.jsonl")
        wait_settled([a1.notes, c1.notes, a2.notes, crash])

        a2.stop()  # scale-in: a clean leave
        wait_settled([a1.notes, c1.notes, crash])

        crash.kill()  # a crash: no LeaveGroup, the broker notices after the session timeout
        wait_settled([a1.notes, c1.notes])

        # The raising sink failed at each event; its member kept consuming ever since.
        consumed_before = len(a1.notes.consumed)
        deadline = time.monotonic() + 10
        while len(a1.notes.consumed) <= consumed_before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(a1.notes.consumed) > consumed_before and a1.running
        assert sink_calls and sink_calls[0] < a1.notes.consumed[-1][0]
        assert 0 < rec_a1.stats()["sink_errors"] <= len(sink_calls)  # called for each event, never detached
        assert "sink is down" in rec_a1.stats()["sink_error"]

        scrape = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).read().decode()
        now = time.time()
        scraped = {
            (s.name, s.labels["member"]): s.value for fam in text_string_to_metric_families(scrape) for s in fam.samples
        }
        for member, rec, notes in (("a1", rec_a1, a1.notes), ("c1", rec_c1, c1.notes), ("a2", rec_a2, a2.notes)):
            expected = notes.expected_metrics(now)
            n = int(expected["rebalance-total"])
            assert n >= (2 if member == "a2" else 4), (member, notes.calls)  # every phase moved partitions
            live_totals[member] = n
            assert_metrics_match(rec.metrics(now), expected, n, member)
            from_http = {name: scraped[(prometheus_name(name), member)] for name in METRIC_NAMES}
            expected.pop("last-rebalance-seconds-ago")  # scraped a moment earlier
            assert_metrics_match(from_http, expected, n, f"{member} over HTTP")
    finally:
        server.shutdown()
        if crash is not None and crash.proc.poll() is None:
            crash.kill()
        for member in (a1, a2):
            if member.running:
                member.stop()
        if c1.thread.is_alive():
            c1.stop()
        producer.stop()
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
        for rec in (rec_a1, rec_a2, rec_c1):
            rec.close()

    # The recordings on disk give the same metrics as the live recorders.
    for member, rec in (("a2", rec_a2), ("c1", rec_c1)):
        events = list(read_events(tmp_path / f"{member}.jsonl"))
        assert events[0].ev == "subscribed" and events[-1].ev == "closed"
        inferred_syncs = [e for e in events if e.ev == "sync" and e.extra.get("inferred")]
        assert len(inferred_syncs) == live_totals[member]
        replayed = metrics_from_events(events, now=now, config=WINDOW)[member]
        live = rec.metrics(now)
        for name in METRIC_NAMES:
            assert (math.isnan(live[name]) and math.isnan(replayed[name])) or replayed[name] == pytest.approx(
                live[name], abs=1e-2
            ), (member, name)
    crashed = list(read_events(tmp_path / "crash.jsonl"))
    assert any(e.ev == "cb_assigned" and e.parts for e in crashed)
    assert not any(e.ev in ("closing", "closed") for e in crashed)  # SIGKILL leaves no goodbye


class LastReadClock:
    """``time.time`` that remembers the value it last returned."""

    def __init__(self) -> None:
        self.last = math.nan

    def __call__(self) -> float:
        self.last = time.time()
        return self.last


def observe_hooks(recorder: RebalanceRecorder) -> list[tuple[str, float, bool]]:
    """Note every rebalance hook call the consumer makes on ``recorder`` (kind, time, ok) after passing it on,
    at the time the recorder read for it (its clock must be a :class:`LastReadClock`)."""
    seen: list[tuple[str, float, bool]] = []
    started, completed, clock = recorder.rebalance_started, recorder.rebalance_completed, recorder.clock

    def on_started(generation=None):
        started(generation)
        seen.append(("started", clock.last, True))

    def on_completed(ok=True, generation=None, error=None):
        completed(ok, generation, error)
        seen.append(("completed", clock.last, bool(ok)))

    recorder.rebalance_started, recorder.rebalance_completed = on_started, on_completed
    return seen


def hook_expectations(seen: list[tuple[str, float, bool]], latest_start: bool = False) -> tuple[int, int, list[float]]:
    """Java's definitions over the hook calls: a rebalance starts at the first JoinGroup after the last
    successful one and ends at the next successful SyncGroup; failed rounds count separately. On the
    consumer protocol (``latest_start``) a reconciliation that starts while one is open restarts the
    clock, as Java's ConsumerRebalanceMetricsManager overwrites the start."""
    ok = failed = 0
    latencies: list[float] = []
    start: float | None = None
    for kind, t, success in seen:
        if kind == "started":
            start = t if start is None or latest_start else start
        elif success:
            ok += 1
            if start is not None:
                latencies.append((t - start) * 1000)
            start = None
        else:
            failed += 1
    return ok, failed, latencies


def test_recorded_cooperative_group_scale_out(bootstrap_servers, group_id, topic_factory, group_protocol):
    """kassign's cooperative aiokafka consumer reports its rebalances through the recorder's hooks, on
    both group protocols (JoinGroup/SyncGroup rounds on classic, reconciliations on consumer): counts
    and latencies equal what the test saw of those hook calls; callbacks are still recorded."""
    pytest.importorskip("aiokafka")
    topic = topic_factory(PARTITIONS)
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    recorders = [
        RebalanceRecorder(None, member=f"d{i}", group=group_id, metric_config=WINDOW, clock=LastReadClock())
        for i in range(3)
    ]
    hooks = [observe_hooks(rec) for rec in recorders]
    members = [
        AioMember(loop, bootstrap_servers, group_id, topic, rec, cooperative=True, protocol=group_protocol)
        for rec in recorders
    ]
    try:
        members[0].start()
        members[1].start()
        wait_settled([m.notes for m in members[:2]])
        members[2].start()  # scale-out: partitions move (in two rebalances on classic)
        wait_settled([m.notes for m in members])
        now = time.time()
        for member, rec, seen in zip(members, recorders, hooks):
            assert rec.protocol == ("cooperative" if group_protocol == "classic" else "consumer")
            ok, failed, latencies = hook_expectations(list(seen), latest_start=group_protocol == "consumer")
            assert ok >= 1, f"{rec.member}: the consumer never reported a completed rebalance"
            got = rec.metrics(now)
            assert got["rebalance-total"] == ok, (rec.member, got["rebalance-total"], ok)
            assert got["failed-rebalance-total"] == failed, (rec.member, got["failed-rebalance-total"], failed)
            # the same clock reads on both sides: only float rounding separates them
            assert got["rebalance-latency-total"] == pytest.approx(sum(latencies), abs=ROUNDING_MS), rec.member
            assert got["rebalance-latency-max"] == pytest.approx(max(latencies), abs=ROUNDING_MS), rec.member
            # the callbacks' own latencies are still Java's partition-*-latency metrics
            expected = member.notes.expected_metrics(now, cooperative=True)
            for name in ("partition-assigned-latency-max", "partition-revoked-latency-max"):
                assert_callback_latency(got[name], expected[name], rec.member, name)
        revokers = [m for m in members[:2] if any(k == "revoked" for k, *_ in m.notes.calls)]
        assert revokers, "scale-out moved no partition"
    finally:
        for member in members:
            if member.running:
                member.stop()
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
