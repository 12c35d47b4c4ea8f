"""Drive a live consumer group: start, stop and crash members of several kinds, produce keyed records
at a steady rate, and record one rebalance timeline from every member's own callbacks.

Every member is a subprocess (``integration/members/*`` or ``java/JavaMember.java``) printing
``kassign.timeline.events`` JSON lines on stdout, so the three kinds behave alike: closing a member's stdin
closes its consumer cleanly (LeaveGroup); :meth:`GroupDriver.crash_member` SIGKILLs it (no
LeaveGroup, the broker notices only when the session times out); :meth:`GroupDriver.freeze_member`
and :meth:`GroupDriver.thaw_member` stop and resume it (SIGSTOP/SIGCONT: a zombie).

Typical use::

    with GroupDriver(bootstrap, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_members(3, "aiokafka", "roundrobin")
        group.wait_settled()
        group.start_member("java", "roundrobin")
        group.wait_settled()
        producer.stop()
        group.wait_all_processed(producer)
        assert_exclusive(group.events())
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from integration.member_hosts import MemberHost
from integration.proc_usage import process_cpu_seconds, process_rss_bytes
from integration.timeline_checks import current_assignment, is_settled, missing_records
from kassign.model import TopicPartition
from kassign.timeline.events import Event, write_events

log = logging.getLogger(__name__)

__all__ = ["MEMBER_KINDS", "GroupTiming", "GroupDriver", "KeyedProducer", "strategy_argument"]

MEMBER_KINDS = ("aiokafka", "confluent", "java")

_ROOT = Path(__file__).resolve().parent.parent
_JAVA_SOURCE = _ROOT / "java" / "JavaMember.java"


@dataclass(frozen=True)
class GroupTiming:
    """Consumer timeouts every member of a group gets.

    All members share one short session timeout. Apache Kafka accepts it only with
    ``group.min.session.timeout.ms`` lowered, as the brokers kassign starts do (500 ms).
    """

    session_ms: int = 1500
    heartbeat_ms: int = 250
    max_poll_ms: int = 30000
    progress_ms: int = 1000
    #: Work per non-empty poll batch, uniform in [lo, hi] ms (seeded by ``seed`` and the member id).
    process_ms: tuple[int, int] = (0, 0)
    seed: int = 0
    #: aiokafka and Java members only: commit synchronously after every non-empty batch (after its
    #: ``process_ms``) instead of in the background every ``progress_ms``, and report every commit
    #: (``commit``/``commit_err`` with ``parts``, ``began``, ``lat``, ``why``).
    commit_every_batch: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_ms < self.session_ms:
            raise ValueError(f"need 0 < heartbeat_ms < session_ms, got {self.heartbeat_ms} and {self.session_ms}")
        lo, hi = self.process_ms
        if not 0 <= lo <= hi < self.max_poll_ms:
            raise ValueError(f"need 0 <= lo <= hi < max_poll_ms for process_ms, got {self.process_ms}")


def _import_path(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    # classes and factory functions go by their own name, assignor instances by their class
    target = obj if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__qualname__")) else type(obj)
    qualname = getattr(target, "__qualname__", "")
    if "<locals>" in qualname or not qualname:
        raise TypeError(f"{obj!r} is not importable by a member subprocess; pass a module-level class")
    return f"{target.__module__}:{qualname}"


def strategy_argument(strategy: str | type | object | Sequence[Any]) -> str:
    """The ``--strategy`` value for a member: a name (``"range"``), an assignor class (passed by
    ``module:Class`` import path; instances by their class), or a sequence of these, preferred first."""
    if isinstance(strategy, str):
        items: Sequence[Any] = [strategy]
    elif isinstance(strategy, Sequence):
        items = strategy
    else:
        items = [strategy]
    out = [_import_path(s) for s in items]
    if not out or any(not s or "," in s for s in out):
        raise ValueError(f"bad assignment strategy {strategy!r}")
    return ",".join(out)


@dataclass
class _Member:
    member_id: str
    kind: str
    strategy: str
    proc: subprocess.Popen
    stderr_path: Path
    reader: threading.Thread | None = None
    stopping: bool = False
    crashed: bool = False
    frozen: bool = False
    #: the process it shares with other aiokafka members, if it does (``proc`` is then the host's)
    host: MemberHost | None = None


#: What every member reports several times a second while it runs. A long run of a large group
#: gathers hundreds of thousands of these; the waits poll the rest.
STEADY_REPORTS = frozenset({"processed", "progress", "commit"})


@dataclass
class _Timeline:
    """Events from all members, appended by reader threads; the events that are not steady reports
    (:data:`STEADY_REPORTS`) are also kept apart, for the waits that poll them often."""

    events: list[Event] = field(default_factory=list)
    changes: list[Event] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)
            if event.ev not in STEADY_REPORTS:
                self.changes.append(event)

    def snapshot(self, *, changes_only: bool = False) -> list[Event]:
        with self.lock:
            out = list(self.changes if changes_only else self.events)
        out.sort(key=lambda e: e.t)
        return out


class KeyedProducer:
    """Produces keyed records to one topic at a steady rate from a background thread (confluent-kafka),
    remembering the partition and offset of every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float = 200.0, key_space: int = 1000) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self.bootstrap, self.topic, self.rate, self.key_space = bootstrap, topic, rate, key_space
        self._produced: dict[TopicPartition, list[int]] = collections.defaultdict(list)
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0

    def _delivered(self, err, msg) -> None:
        with self._lock:
            if err is not None:
                self._errors.append(str(err))
            else:
                self._produced[TopicPartition(msg.topic(), msg.partition())].append(msg.offset())

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 3})
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.sent < due:
                key = f"k{self.sent % self.key_space}"
                producer.produce(self.topic, key=key, value=str(self.sent), on_delivery=self._delivered)
                self.sent += 1
            producer.poll(0)
            time.sleep(0.01)
        remaining = producer.flush(15)
        if remaining:
            with self._lock:
                self._errors.append(f"{remaining} record(s) not acknowledged at stop")

    def start(self) -> KeyedProducer:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop producing and wait until every record is acknowledged (or failed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def produced(self) -> dict[TopicPartition, list[int]]:
        """Partition -> offsets of acknowledged records so far."""
        with self._lock:
            return {tp: list(offs) for tp, offs in sorted(self._produced.items())}

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)


class GroupDriver:
    """One consumer group on one broker: its members, its producer and its timeline.

    Use as a context manager; leaving it stops every member (cleanly) and the producer.
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: str | Sequence[str],
        *,
        timing: GroupTiming = GroupTiming(),
        log_dir: str | os.PathLike[str] | None = None,
        java_heap: str = "256m",
        members_per_process: int = 1,
    ) -> None:
        """``members_per_process``: aiokafka members share processes, this many to a process (one event
        loop each; :mod:`integration.members.aiokafka_host`), as on a fleet's machines rather than an
        interpreter per member; Java and librdkafka members always run alone. A member sharing a process
        cannot be crashed or frozen alone."""
        from integration.topics import partition_count

        if members_per_process < 1:
            raise ValueError(f"members_per_process must be at least 1, got {members_per_process}")
        self.members_per_process = members_per_process

        self.bootstrap = bootstrap
        self.group_id = group_id
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("a group needs at least one topic")
        self.timing = timing
        self.java_heap = java_heap
        # Before the log directory exists: a missing topic raising here leaves no directory behind.
        self.partitions = sorted(
            TopicPartition(t, p) for t in self.topics for p in range(partition_count(bootstrap, t))
        )
        self._temporary_log_dir = not log_dir
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"kassign-{group_id}-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._members: dict[str, _Member] = {}
        self._hosts: list[MemberHost] = []
        self._timeline = _Timeline()
        self._producers: list[KeyedProducer] = []
        self._java_classes: dict[str, str] = {}  # kafka-clients version -> compiled JavaMember
        self._next_number = 1

    # -- members -------------------------------------------------------------------------------

    def _member_command(
        self,
        kind: str,
        member_id: str,
        strategy: str,
        consumer_factory: Any,
        rack: str | None,
        kafka_clients: str | None,
        instance_id: str | None = None,
        hold: bool = False,
        slow_revoke_ms: int = 0,
        group_protocol: str | None = None,
        remote_assignor: str | None = None,
    ) -> list[str]:
        t = self.timing
        common = [
            "--bootstrap",
            self.bootstrap,
            "--group",
            self.group_id,
            "--topics",
            ",".join(self.topics),
            "--id",
            member_id,
            "--strategy",
            strategy,
            "--session-ms",
            str(t.session_ms),
            "--heartbeat-ms",
            str(t.heartbeat_ms),
            "--max-poll-ms",
            str(t.max_poll_ms),
            "--progress-ms",
            str(t.progress_ms),
        ]
        if rack:
            common += ["--rack", rack]
        if t.process_ms[1] > 0:
            common += ["--process-ms", f"{t.process_ms[0]},{t.process_ms[1]}", "--seed", str(t.seed)]
        if instance_id:
            common += ["--instance-id", instance_id]
        if t.commit_every_batch:
            if kind not in ("aiokafka", "java"):
                raise ValueError(f"commit_every_batch applies to aiokafka and java members only, not {kind!r}")
            common.append("--commit-every-batch")
        if hold:
            common.append("--hold")
        if group_protocol is not None or remote_assignor is not None:
            common += ["--group-protocol", group_protocol or "classic"]
            if remote_assignor is not None:
                common += ["--remote-assignor", remote_assignor]
        if consumer_factory is not None and kind != "aiokafka":
            raise ValueError(f"consumer_factory applies to aiokafka members only, not {kind!r}")
        if kafka_clients is not None and kind != "java":
            raise ValueError(f"kafka_clients applies to Java members only, not {kind!r}")
        if slow_revoke_ms and kind != "aiokafka":
            raise ValueError(f"slow_revoke_ms applies to aiokafka members only, not {kind!r}")
        if kind == "aiokafka":
            extra = ["--consumer-factory", _import_path(consumer_factory)] if consumer_factory is not None else []
            if slow_revoke_ms:
                extra += ["--slow-revoke-ms", str(slow_revoke_ms)]
            return [sys.executable, "-m", "integration.members.aiokafka_member", *common, *extra]
        if kind == "confluent":
            return [sys.executable, "-m", "integration.members.confluent_member", *common]
        if kind == "java":
            from kassign._java import REFERENCE_KAFKA_CLIENTS, compile_java, java_command

            version = kafka_clients or REFERENCE_KAFKA_CLIENTS
            if version not in self._java_classes:
                self._java_classes[version] = compile_java(_JAVA_SOURCE, kafka_version=version)
            return java_command(
                self._java_classes[version], "JavaMember", *common, heap=self.java_heap, kafka_version=version
            )
        raise ValueError(f"unknown member kind {kind!r}; expected one of {MEMBER_KINDS}")

    def start_member(
        self,
        kind: str,
        strategy: str | type | Sequence[Any],
        *,
        member_id: str | None = None,
        consumer_factory: str | Callable[..., Any] | None = None,
        rack: str | None = None,
        kafka_clients: str | None = None,
        instance_id: str | None = None,
        hold: bool = False,
        slow_revoke_ms: int = 0,
        group_protocol: str | None = None,
        remote_assignor: str | None = None,
    ) -> str:
        """Start one member; returns its id (``m1``, ``m2``, ... unless given).

        ``strategy``: see :func:`strategy_argument`; Java takes range/roundrobin/sticky/
        cooperative-sticky, confluent range/roundrobin/cooperative-sticky, aiokafka its own names or
        assignor classes. ``consumer_factory`` (aiokafka only): a class or ``module:attr`` used in place
        of ``AIOKafkaConsumer``. ``kafka_clients`` (Java only): the kafka-clients version from Maven
        Central (default :data:`kassign._java.REFERENCE_KAFKA_CLIENTS`, 3.9.1; 4.x works too).
        ``instance_id``: ``group.instance.id`` (a static member). ``hold``: the member builds its consumer,
        reports ``ready`` and subscribes only on :meth:`release_member` (a replacement prepared in advance).
        ``slow_revoke_ms`` (aiokafka only): ``on_partitions_revoked`` takes that much longer (a slow application).
        ``group_protocol`` (every kind): ``"consumer"`` joins with KIP-848's protocol (Java needs
        ``kafka_clients`` 4.x; aiokafka members need ``CooperativeConsumer`` as ``consumer_factory``), the
        broker assigning with ``remote_assignor``; ``strategy`` and the timing's session timeout and
        heartbeat interval are then not used (the group's own settings are).
        """
        if member_id is None:
            member_id = f"m{self._next_number}"
            self._next_number += 1
        if member_id in self._members:
            raise ValueError(f"member id {member_id!r} already used in group {self.group_id}")
        strategy_arg = strategy_argument(strategy)
        cmd = self._member_command(
            kind,
            member_id,
            strategy_arg,
            consumer_factory,
            rack,
            kafka_clients,
            instance_id,
            hold,
            slow_revoke_ms,
            group_protocol,
            remote_assignor,
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        # A small client JVM starts faster and leaves CPU to the rest of the group on a small machine.
        env.setdefault("JAVA_TOOL_OPTIONS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        if kind == "aiokafka" and self.members_per_process > 1:
            host = self._host_with_room(env)
            host.start(member_id, cmd[3:])  # cmd: python -m integration.members.aiokafka_member ARGS
            self._members[member_id] = _Member(member_id, kind, strategy_arg, host.proc, host.stderr_path, host=host)
            log.info("started %s member %s (%s) in %s", kind, member_id, strategy_arg, host.name)
            return member_id
        stderr_path = self.log_dir / f"{member_id}.stderr"
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=_ROOT,
                env=env,
                start_new_session=True,
            )
        member = _Member(member_id, kind, strategy_arg, proc, stderr_path)
        member.reader = threading.Thread(target=self._read, args=(member,), name=f"reader-{member_id}", daemon=True)
        self._members[member_id] = member
        member.reader.start()
        log.info("started %s member %s (%s) in group %s", kind, member_id, strategy_arg, self.group_id)
        return member_id

    def _host_with_room(self, env: dict[str, str]) -> MemberHost:
        if self._hosts and self._hosts[-1].has_room():
            return self._hosts[-1]
        name = f"host{len(self._hosts) + 1}"
        host = MemberHost(
            name, self.members_per_process, cwd=_ROOT, env=env, stderr_path=self.log_dir / f"{name}.stderr"
        )
        self._hosts.append(host)
        threading.Thread(target=self._read_host, args=(host,), name=f"reader-{name}", daemon=True).start()
        return host

    def wait_ready(self, member_id: str, timeout: float = 60.0) -> None:
        """Wait until a member started with ``hold=True`` reports ``ready``."""
        self.wait_for(
            lambda events: any(e.id == member_id and e.ev == "ready" for e in events),
            timeout,
            f"member {member_id} ready",
            changes_only=True,
        )

    def release_member(self, member_id: str) -> float:
        """Let a held member subscribe; returns the time of the signal."""
        m = self._member(member_id)
        if m.host is not None:
            m.host.release(member_id)
            return time.time()
        assert m.proc.stdin is not None
        m.proc.stdin.write(b"go\n")
        m.proc.stdin.flush()
        return time.time()

    def start_members(self, n: int, kind: str, strategy: str | type | Sequence[Any], **kwargs: Any) -> list[str]:
        """Start ``n`` members alike (a scale-out); returns their ids."""
        return [self.start_member(kind, strategy, **kwargs) for _ in range(n)]

    scale_out = start_members

    def _read_events(self, proc: subprocess.Popen, name: str) -> Iterable[Event]:
        """Add every event ``proc`` prints to the timeline, and yield it."""
        stdout: IO[bytes] = proc.stdout  # type: ignore[assignment]
        for raw in stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("{"):
                if line:
                    log.debug("%s: %s", name, line)
                continue
            try:
                event = Event.from_json(json.loads(line), default_topic=self.topics[0])
            except ValueError as exc:
                log.warning("%s printed a bad event: %s", name, exc)
                continue
            self._timeline.add(event)
            yield event

    def _read_host(self, host: MemberHost) -> None:
        for event in self._read_events(host.proc, host.name):
            if event.ev == "exit":
                host.note_exit(event.id, int(event.extra.get("code", 1)))
        code = host.proc.wait()
        for member_id in host.members:
            if host.exit_code(member_id) is None:  # the host died under it
                self._timeline.add(Event(member_id, time.time(), "exit", extra={"code": code}))
                host.note_exit(member_id, code)
        if code != 0:
            log.warning("%s exited with code %s; stderr tail:\n%s", host.name, code, _tail(host.stderr_path, 40))

    def _read(self, member: _Member) -> None:
        for _ in self._read_events(member.proc, member.member_id):
            pass
        code = member.proc.wait()
        self._timeline.add(Event(member.member_id, time.time(), "exit", extra={"code": code}))
        if code != 0 and not member.crashed:
            log.warning(
                "member %s exited with code %s; stderr tail:\n%s",
                member.member_id,
                code,
                self.member_log(member.member_id),
            )

    def stop_members(self, member_ids: Iterable[str], timeout: float = 20.0) -> dict[str, int]:
        """Close the given members cleanly, all at once (a scale-in); returns their exit codes.

        A member that does not exit within ``timeout`` is killed and reported with code -9.
        """
        members = [self._member(m) for m in member_ids]
        for m in members:
            self.request_stop(m.member_id)
        deadline = time.monotonic() + timeout
        codes = {}
        for m in members:
            if m.host is not None:
                try:
                    codes[m.member_id] = m.host.wait_member(m.member_id, max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    # one member of a shared process cannot be killed alone; the host goes at close()
                    log.warning("member %s did not close within %.0fs", m.member_id, timeout)
                    codes[m.member_id] = -9
                continue
            try:
                codes[m.member_id] = m.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("member %s did not close within %.0fs; killing it", m.member_id, timeout)
                m.proc.kill()
                codes[m.member_id] = m.proc.wait()
            if m.reader is not None:
                m.reader.join(5)
        return codes

    def request_stop(self, member_id: str) -> None:
        """Ask a member to close cleanly (end of its stdin) without waiting for it."""
        m = self._member(member_id)
        if m.host is not None:
            m.stopping = True
            m.host.request_stop(member_id)
            return
        if m.frozen:
            self.thaw_member(member_id)  # a stopped process cannot read its stdin
        m.stopping = True
        if m.proc.stdin is not None and not m.proc.stdin.closed:
            m.proc.stdin.close()

    def stop_member(self, member_id: str, timeout: float = 20.0) -> int:
        """Close one member cleanly; returns its exit code."""
        return self.stop_members([member_id], timeout)[member_id]

    scale_in = stop_members

    def hand_over(self, member_id: str, replacement: str, timeout: float = 60.0) -> None:
        """Replace a member by one started with ``hold=True`` and ready: ask the member to close,
        release the replacement as soon as its consumer has closed (not when its interpreter or JVM
        has finished exiting, which is no part of a rebalance), then wait for the old process."""
        self.request_stop(member_id)
        self.wait_for(
            lambda events: any(e.id == member_id and e.ev in ("closed", "exit") for e in events),
            timeout,
            f"{member_id} closed",
            poll_s=0.005,
            changes_only=True,
        )
        self.release_member(replacement)
        self.stop_member(member_id)

    def crash_member(self, member_id: str) -> None:
        """Kill a member with SIGKILL: no LeaveGroup, no callbacks; records a ``crash`` event."""
        m = self._own_process(member_id, "crashed")
        m.crashed = True
        m.proc.kill()
        self._timeline.add(Event(member_id, time.time(), "crash"))
        m.proc.wait()
        if m.reader is not None:
            m.reader.join(5)
        log.info("crashed member %s", member_id)

    def freeze_member(self, member_id: str) -> float:
        """Stop a member with SIGSTOP (no heartbeats, no processing, no callbacks: a long GC pause or a
        suspended VM); records a ``freeze`` event and returns its time."""
        m = self._own_process(member_id, "frozen")
        m.proc.send_signal(signal.SIGSTOP)
        m.frozen = True
        at = time.time()
        self._timeline.add(Event(member_id, at, "freeze"))
        log.info("froze member %s", member_id)
        return at

    def thaw_member(self, member_id: str) -> float:
        """Resume a member frozen by :meth:`freeze_member` (SIGCONT); records a ``thaw`` event and returns its time."""
        m = self._own_process(member_id, "thawed")
        # Taken before the signal: a resumed member may act (and report it) before this line runs on.
        at = time.time()
        m.proc.send_signal(signal.SIGCONT)
        m.frozen = False
        self._timeline.add(Event(member_id, at, "thaw"))
        log.info("thawed member %s", member_id)
        return at

    def _member(self, member_id: str) -> _Member:
        try:
            return self._members[member_id]
        except KeyError:
            raise KeyError(
                f"no member {member_id!r} in group {self.group_id}; members: {sorted(self._members)}"
            ) from None

    def _own_process(self, member_id: str, what: str) -> _Member:
        m = self._member(member_id)
        if m.host is not None:
            raise ValueError(
                f"member {member_id} shares {m.host.name} with other members and cannot be {what} alone; "
                "use members_per_process=1"
            )
        return m

    @staticmethod
    def _running(m: _Member) -> bool:
        """Its consumer still runs (a member sharing a process may have closed while the process runs on)."""
        return m.proc.poll() is None and (m.host is None or m.host.exit_code(m.member_id) is None)

    def live_members(self) -> list[str]:
        """Members whose process runs and that were not asked to stop."""
        return sorted(
            m.member_id for m in self._members.values() if self._running(m) and not m.stopping and not m.crashed
        )

    def member_usage(self) -> dict[str, tuple[int, float]]:
        """Live member -> (resident memory in bytes, CPU seconds used so far) of its process, read from
        ``/proc`` (Linux; empty elsewhere). A member that exits meanwhile is left out. Members sharing a
        process have an equal share of it each, so the sums over members are the processes' own."""
        out: dict[str, tuple[int, float]] = {}
        by_pid: dict[int, list[str]] = collections.defaultdict(list)
        for member_id in self.live_members():
            by_pid[self._members[member_id].proc.pid].append(member_id)
        for pid, member_ids in by_pid.items():
            cpu_s, rss = process_cpu_seconds(pid), process_rss_bytes(pid)
            if cpu_s is None or rss is None:
                continue
            share = len(member_ids)
            for member_id in member_ids:
                out[member_id] = (rss // share, cpu_s / share)
        return out

    def failed_members(self) -> list[str]:
        """Members that exited on their own (not stopped, not crashed on purpose)."""
        return sorted(
            m.member_id for m in self._members.values() if not self._running(m) and not m.stopping and not m.crashed
        )

    def member_kind(self, member_id: str) -> str:
        return self._member(member_id).kind

    def member_log(self, member_id: str, tail: int = 40) -> str:
        """The last ``tail`` lines the member wrote on stderr."""
        return _tail(self._member(member_id).stderr_path, tail)

    # -- producing -----------------------------------------------------------------------------

    def start_producer(self, rate: float = 200.0, topic: str | None = None, key_space: int = 1000) -> KeyedProducer:
        """Produce keyed records to ``topic`` (the group's first) at ``rate`` per second until stopped."""
        producer = KeyedProducer(self.bootstrap, topic or self.topics[0], rate=rate, key_space=key_space).start()
        self._producers.append(producer)
        return producer

    # -- timeline ------------------------------------------------------------------------------

    def events(self) -> list[Event]:
        """Every event so far, in time order."""
        return self._timeline.snapshot()

    def change_events(self) -> list[Event]:
        """Every event so far but the steady reports (:data:`STEADY_REPORTS`), in time order: what
        ownership and the members' lives are judged on, cheap to take often however long the run."""
        return self._timeline.snapshot(changes_only=True)

    def assignment(self) -> dict[str, list[TopicPartition]]:
        """Member -> partitions it owns now, from the timeline."""
        return current_assignment(self.change_events())

    def describe(self) -> str:
        """Live members, current ownership and unexpected exits: for failure messages."""
        lines = [f"group {self.group_id}: live {self.live_members()}; logs and timeline in {self.log_dir}"]
        for member, parts in self.assignment().items():
            lines.append(f"  {member}: {[p.partition for p in parts] if len(self.topics) == 1 else parts}")
        for member_id in self.failed_members():
            m = self._members[member_id]
            code = m.proc.poll() if m.host is None else m.host.exit_code(member_id)
            lines.append(f"  {member_id} exited with {code}; stderr tail:\n{self.member_log(member_id, 15)}")
        return "\n".join(lines)

    def recent_events(self, count: int = 40) -> str:
        """The last ``count`` rebalance events (progress and processing left out), one per line, times
        relative to the first event: what a failure message needs when the logs stay on the CI machine."""
        events = self.events()
        if not events:
            return "  (no events)"
        t0 = events[0].t
        shown = [e for e in events if e.ev not in ("progress", "processed")][-count:]
        lines = []
        for e in shown:
            one_topic = len(self.topics) == 1
            detail = "" if e.parts is None else " " + str([p.partition if one_topic else p for p in e.parts])
            extra = {k: v for k, v in e.extra.items() if k in ("gen", "error", "protocol")}
            lines.append(f"  {e.t - t0:7.2f} {e.id} {e.ev}{detail}{' ' + str(extra) if extra else ''}")
        return "\n".join(lines)

    def wait_for(
        self,
        predicate: Callable[[list[Event]], bool],
        timeout: float,
        what: str,
        *,
        poll_s: float = 0.1,
        changes_only: bool = False,
    ) -> list[Event]:
        """Poll the timeline every ``poll_s`` seconds until ``predicate(events)`` holds; raises
        TimeoutError describing the group. ``changes_only``: the predicate needs no steady reports
        (see :meth:`change_events`)."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.change_events() if changes_only else self.events()
            if predicate(events):
                return events
            failed = self.failed_members()
            if failed:
                raise RuntimeError(f"{what}: member(s) {failed} exited unexpectedly\n{self.describe()}")
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{what}: not reached within {timeout:.0f}s\n{self.describe()}\n"
                    f"last events:\n{self.recent_events()}"
                )
            time.sleep(poll_s)

    def wait_settled(
        self,
        timeout: float = 15.0,
        *,
        stable_for: float = 0.5,
        require_every_member: bool = True,
        balanced: bool = False,
    ) -> dict[str, list[TopicPartition]]:
        """Wait until every partition has exactly one owner among the live members (and every live member
        owns something, by default), continuously for ``stable_for`` seconds; returns the assignment.

        ``balanced`` also waits for the live members' partition counts to be within one of each other:
        the end state of a cooperative group of equal subscriptions, which can pass through other fully
        owned states between its rounds (on Tansu a round can take a second or more).
        """
        since: list[float] = []

        def even(events: list[Event]) -> bool:
            owned = current_assignment(events)
            counts = [len(owned.get(m, ())) for m in self.live_members()]
            return not counts or max(counts) - min(counts) <= 1

        def settled(events: list[Event]) -> bool:
            if not is_settled(
                events, self.partitions, self.live_members(), require_every_member=require_every_member
            ) or (balanced and not even(events)):
                since.clear()
                return False
            if not since:
                since.append(time.monotonic())
            return time.monotonic() - since[0] >= stable_for

        self.wait_for(settled, timeout, "group settled", changes_only=True)
        return self.assignment()

    def wait_all_processed(self, producer: KeyedProducer, timeout: float = 15.0) -> list[Event]:
        """Wait until every record ``producer`` had acknowledged shows up in some member's ``processed``."""
        produced = producer.produced()
        return self.wait_for(
            lambda ev: not missing_records(ev, produced, self.topics[0]),
            timeout,
            f"all {sum(map(len, produced.values()))} produced records processed",
        )

    def write_timeline(self, path: str | os.PathLike[str]) -> int:
        """Write the timeline as JSON lines (bare partition numbers when the group reads one topic)."""
        single = self.topics[0] if len(self.topics) == 1 else None
        return write_events(path, self.events(), single_topic=single)

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the producers and every member still running (cleanly, then by force), and leave the
        timeline in ``log_dir/timeline.jsonl`` next to the members' stderr logs."""
        for producer in self._producers:
            producer.stop()
        running = [m.member_id for m in self._members.values() if self._running(m)]
        if running:
            self.stop_members(running)
        for host in self._hosts:
            host.close_stdin()
            try:
                host.proc.wait(20)
            except subprocess.TimeoutExpired:
                log.warning("%s did not exit within 20s; killing it", host.name)
                host.proc.kill()
                host.proc.wait()
        self.write_timeline(self.log_dir / "timeline.jsonl")

    def __enter__(self) -> GroupDriver:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self.close()
        if exc_type is None and self._temporary_log_dir:
            # A group that ended cleanly leaves nothing behind; a failed one keeps its logs for the report.
            shutil.rmtree(self.log_dir, ignore_errors=True)


def _tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log file ("" when it does not exist)."""
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    return "\n".join(text[-lines:])
