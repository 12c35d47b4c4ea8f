"""The runner that plays a churn sequence (:mod:`integration.churn.generator`) against a real broker
under steady keyed load and has its recorded timeline judged (:mod:`integration.churn.judge`).

After each step the runner either waits for the group to settle (polling, with a deadline) or lets
a short seeded gap pass so the next step lands inside the running rebalance. After the last step it
waits for the settle, stops the load, waits until every acknowledged record was processed, closes
the group and measures the whole timeline (:func:`~integration.churn.judge.analyse`).

Fault steps (``failover``, ``zombie``) and slow revokers are played by :mod:`integration.churn.faults`;
they need the handle of a replicated 3-broker cluster (``cluster``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from integration.churn import faults
from integration.churn.generator import FAULT_ACTIONS, SUBSCRIPTIONS, ChurnSequence, MemberSpec
from integration.churn.judge import ChurnFailure, ChurnResult, analyse, churn_problems, settle_problems
from integration.driver import GroupDriver, GroupTiming, KeyedProducer
from integration.timeline_checks import missing_records
from integration.topics import create_topic
from kassign.model import TopicPartition
from kassign.timeline.events import Event, write_events

if TYPE_CHECKING:
    from kassign.broker import BrokerInfo

log = logging.getLogger(__name__)

__all__ = ["run_sequence"]

_STRATEGY_BY_KIND = {"confluent": "cooperative-sticky", "java": "cooperative-sticky"}


class _GroupPool:
    """The group's members across several :class:`GroupDriver` instances on the same group id.

    A driver starts each member name once and gives all its members the driver's topics, so a
    restart under the same name, or a member with another subscription, uses another driver of the
    same group; the timeline is all drivers' events merged.
    """

    def __init__(self, bootstrap: str, group_id: str, topics: Mapping[str, str], timing: GroupTiming,
                 log_dir: Path, slow_revoke_ms: int = 0) -> None:
        self.bootstrap, self.group_id, self.topics, self.timing, self.log_dir = \
            bootstrap, group_id, topics, timing, log_dir
        self.slow_revoke_ms = slow_revoke_ms
        self._drivers: list[tuple[str, GroupDriver, set[str]]] = []
        self.current: dict[str, tuple[MemberSpec, GroupDriver]] = {}
        self._notes: list[Event] = []  # the runner's own events (faults on the cluster)

    def _new_driver(self, subscription: str) -> tuple[str, GroupDriver, set[str]]:
        topics = [self.topics[role] for role in SUBSCRIPTIONS[subscription]]
        driver = GroupDriver(self.bootstrap, self.group_id, topics, timing=self.timing,
                             log_dir=self.log_dir / f"driver{len(self._drivers)}")
        self._drivers.append((subscription, driver, set()))
        return self._drivers[-1]

    def _driver_for(self, spec: MemberSpec) -> GroupDriver:
        free = [d for d in self._drivers if d[0] == spec.subscription and spec.name not in d[2]]
        _, driver, names = free[0] if free else self._new_driver(spec.subscription)
        names.add(spec.name)
        return driver

    def start(self, spec: MemberSpec) -> None:
        driver = self._driver_for(spec)
        if spec.kind == "aiokafka":
            driver.start_member("aiokafka", "kassign.adapters.aiokafka:CooperativeStickyAssignor",
                                member_id=spec.name, consumer_factory="kassign.adapters.aiokafka:CooperativeConsumer",
                                slow_revoke_ms=self.slow_revoke_ms if spec.slow_revoke else 0)
        else:
            driver.start_member(spec.kind, _STRATEGY_BY_KIND[spec.kind], member_id=spec.name)
        self.current[spec.name] = (spec, driver)

    def stop(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.stop_member(name)

    def crash(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.crash_member(name)

    def request_leave(self, name: str) -> None:
        """Ask a member to close cleanly without waiting for it to exit."""
        _, driver = self.current.pop(name)
        driver.request_stop(name)

    def freeze(self, name: str) -> float:
        return self.current[name][1].freeze_member(name)

    def thaw(self, name: str) -> float:
        return self.current[name][1].thaw_member(name)

    def note(self, event: Event) -> None:
        """Add one of the runner's own events to the timeline."""
        self._notes.append(event)

    def start_producer(self, role: str, rate: float) -> KeyedProducer:
        _, driver, _ = self._drivers[0] if self._drivers else self._new_driver("ab")
        return driver.start_producer(rate, topic=self.topics[role])

    def live(self) -> dict[str, list[str]]:
        """Live member -> topics it reads."""
        running = {m for _, d, _ in self._drivers for m in d.live_members()}
        return {name: list(driver.topics) for name, (_, driver) in sorted(self.current.items()) if name in running}

    def failed(self) -> dict[str, str]:
        return {m: d.member_log(m, 10) for _, d, _ in self._drivers for m in d.failed_members()}

    def events(self) -> list[Event]:
        return sorted([*(e for _, d, _ in self._drivers for e in d.events()), *self._notes], key=lambda e: e.t)

    def wait_for(self, predicate: Callable[[list[Event]], list[str]], timeout: float, what: str) -> list[Event]:
        """Poll until ``predicate`` (returning problems) returns none; TimeoutError with the last problems."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            problems = predicate(events)
            if not problems:
                return events
            failed = self.failed()
            if failed:
                raise RuntimeError(f"{what}: member(s) exited on their own: {failed}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f}s: " + "; ".join(problems[:10]))
            time.sleep(0.1)

    def wait_settled(self, partitions: Mapping[str, Sequence[TopicPartition]], timeout: float,
                     stable_for: float = 0.5) -> float:
        """Wait until the group is settled continuously for ``stable_for`` seconds; returns when it settled."""
        since: list[float] = []

        def problems(events: list[Event]) -> list[str]:
            found = settle_problems(events, self.live(), partitions)
            if found:
                since.clear()
                return found
            if not since:
                since.append(time.time())
            return [] if time.time() - since[0] >= stable_for else ["not yet stable"]

        self.wait_for(problems, timeout, "group settled")
        return since[0]

    def kill_all(self) -> None:
        """SIGKILL every current member (a stalled group's members hang in JoinGroup and cannot leave)."""
        for name in sorted(self.current):
            _, driver = self.current.pop(name)
            if name in driver.live_members():
                driver.crash_member(name)

    def close(self) -> None:
        for _, driver, _ in self._drivers:
            driver.close()


def run_sequence(sequence: ChurnSequence, bootstrap: str, *, timing: GroupTiming | None = None,
                 settle_timeout: float = 30.0, log_dir: str | Path | None = None,
                 cluster: BrokerInfo | None = None) -> ChurnResult:
    """Play ``sequence`` on the broker at ``bootstrap`` and analyse its timeline (see :func:`churn_problems`).

    ``timing``: the members' timeouts (default: :class:`GroupTiming` with the profile's
    ``max_poll_ms``). ``cluster``: the handle of the replicated multi-broker cluster at
    ``bootstrap``, needed by fault sequences (its topics are then replicated across three nodes).
    Raises ChurnFailure (with the seed and the sequence) when a member dies on its own. A group that
    does not settle in time ends the sequence early with ``result.stalled`` set; invariant violations
    are left in the result for the caller to judge (:func:`check`, :func:`churn_problems`).
    """
    profile = sequence.profile
    timing = timing or GroupTiming(max_poll_ms=profile.max_poll_ms)
    kinds = sequence.fault_kinds()
    if kinds and (cluster is None or cluster.brokers < 3):
        raise ValueError(f"sequence {sequence.seed} injects {sorted(kinds)}: it needs a replicated cluster of "
                         f"3 brokers (cluster=...), got {cluster.describe() if cluster else 'none'}")
    replicas = 3 if kinds else 1
    tag = f"churn-{sequence.seed}-{uuid.uuid4().hex[:6]}"
    topics = {"a": create_topic(bootstrap, f"{tag}-a", profile.partitions_a, replication_factor=replicas),
              "b": create_topic(bootstrap, f"{tag}-b", profile.partitions_b, replication_factor=replicas)}
    # Without log_dir the logs go to a temporary directory: removed when the sequence passes or is
    # interrupted (Ctrl-C), kept (and named) when it fails.
    temporary = not log_dir
    log_root = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"kassign-{tag}-"))
    log_root.mkdir(parents=True, exist_ok=True)
    partitions = {topics["a"]: [TopicPartition(topics["a"], p) for p in range(profile.partitions_a)],
                  topics["b"]: [TopicPartition(topics["b"], p) for p in range(profile.partitions_b)]}
    pool = _GroupPool(bootstrap, tag, topics, timing, log_root, faults.slow_revoke_ms(sequence, timing))
    began, began_at = time.monotonic(), time.time()
    step_label = "start"
    producers: list[KeyedProducer] = []
    first_settle: float | None = None
    stalled: str | None = None
    produced: dict[TopicPartition, list[int]] = {}
    unread = 0
    try:
        producers = [pool.start_producer("a", profile.rate), pool.start_producer("b", profile.rate / 2)]
        for spec in sequence.initial:
            pool.start(spec)
        first_settle = pool.wait_settled(partitions, settle_timeout + 5 * len(sequence.initial))
        for number, step in enumerate(sequence.steps, 1):
            step_label = f"step {number} ({step})"
            log.info("seed %s %s", sequence.seed, step_label)
            if step.action == "failover":
                assert cluster is not None
                faults.run_failover(pool, step, cluster, partitions, settle_timeout)
            elif step.action == "zombie":
                faults.run_zombie(pool, step, timing, partitions, settle_timeout)
            elif step.action in ("leave", "resubscribe"):
                pool.stop(step.member)
            elif step.action in ("crash", "restart_same", "restart_new"):
                pool.crash(step.member)
            if step.start is not None and step.action not in FAULT_ACTIONS:
                pool.start(step.start)
            if step.settle:
                pool.wait_settled(partitions, settle_timeout)
            else:
                time.sleep(step.gap)  # the gap is part of the sequence: the next step hits the rebalance
        step_label = "final settle"
        final_settle = pool.wait_settled(partitions, settle_timeout)
        step_label = "draining"
        for producer in producers:
            producer.stop()
        # records of a topic nobody reads at the end wait for a future reader: not lost, not required
        read = {topic for topics in pool.live().values() for topic in topics}
        every = {tp: offs for p in producers for tp, offs in p.produced().items()}
        produced = {tp: offs for tp, offs in every.items() if tp.topic in read}
        unread = sum(len(offs) for tp, offs in every.items() if tp.topic not in read)
        pool.wait_for(lambda ev: [f"{sum(map(len, missing_records(ev, produced).values()))} records unprocessed"]
                      if missing_records(ev, produced) else [], settle_timeout, "all produced records processed")
    except TimeoutError as exc:
        # A stall: the group stopped converging. Its members cannot close cleanly (they wait in
        # JoinGroup), so they are killed; the timeline up to here is still checked for double
        # ownership and unexcused duplicates, but not for lost records (nobody could read them).
        stalled = f"{step_label}: {exc}"
        log.warning("seed %s stalled at %s", sequence.seed, stalled)
        for producer in producers:
            producer.stop()
        pool.kill_all()
        final_settle, produced = time.time(), {}
    except BaseException as exc:
        pool.kill_all()
        pool.close()
        path = log_root / "timeline.jsonl"
        write_events(path, pool.events())
        if isinstance(exc, RuntimeError):  # a member exited on its own
            raise ChurnFailure(f"{step_label}: {exc}\n{sequence.describe()}\ntimeline: {path}") from exc
        if temporary and isinstance(exc, KeyboardInterrupt):
            shutil.rmtree(log_root, ignore_errors=True)
        else:
            log.warning("seed %s: %s; timeline and member logs kept in %s", sequence.seed, type(exc).__name__, log_root)
        raise
    failed = pool.failed()
    pool.close()
    events = pool.events()
    path = log_root / "timeline.jsonl"
    write_events(path, events)
    result = ChurnResult(sequence, events, produced, [e for p in producers for e in p.errors], failed,
                         (first_settle if first_settle is not None else began_at, final_settle), path,
                         stalled=stalled, unread=unread, duration=time.monotonic() - began)
    analyse(result, partitions, grace=timing.session_ms / 1000)
    if temporary and not churn_problems(result):
        shutil.rmtree(log_root, ignore_errors=True)
        result.timeline_path = None
    return result
