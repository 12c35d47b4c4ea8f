"""Random churn on a live consumer group (issue 9): a seeded generator of churn sequences and a runner
that plays one against a real broker under steady keyed load and checks the recorded timeline.

A sequence starts 2-8 members (kassign's aiokafka ``CooperativeConsumer``; optionally one librdkafka
and one Java member, all ``cooperative-sticky``) and then applies steps:

``join``          a new member starts;
``leave``         a member closes cleanly (LeaveGroup after committing);
``crash``         a member is SIGKILLed: no LeaveGroup, its session times out on the broker;
``restart_same``  a member is SIGKILLed and its replacement starts at once under the *same* member
                  name (client id): a process restart. The members are dynamic (no static
                  membership), so the broker sees a new member id joining while the dead one still
                  holds its partitions until its session expires; on the timeline both lives share
                  one name;
``restart_new``   the same, but the replacement takes a new name (a new pod / host);
``resubscribe``   a member changes its subscription (topic ``a`` only <-> topics ``a`` and ``b``). Our
                  member programs subscribe once, so the change is a clean close and an immediate
                  restart, same name, other subscription.

After each step the runner either waits for the group to settle (polling, with a deadline) or lets
a short seeded gap pass so the next step lands inside the running rebalance. After the last step it
waits for the settle, stops the load, waits until every acknowledged record was processed, closes
the group and checks the whole timeline (:func:`churn_problems`).

Replay one sequence: ``python -m benchmarks.churn_soak --seed N [--profile small]``.

A group that does not settle in time ends the run early as *stalled* (:attr:`ChurnResult.stalled`),
a failure.
"""

from __future__ import annotations

import logging
import math
import random
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from integration.driver import GroupDriver, GroupTiming, KeyedProducer
from integration.timeline_checks import (
    double_ownership,
    missing_records,
    owners_at,
    ownership_intervals,
    processed_offsets,
)
from integration.topics import create_topic
from kassign.timeline.events import Event, write_events
from kassign.model import TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "ACTIONS",
    "SUBSCRIPTIONS",
    "ChurnProfile",
    "PROFILES",
    "MemberSpec",
    "ChurnStep",
    "ChurnSequence",
    "generate_sequence",
    "ChurnResult",
    "ChurnFailure",
    "run_sequence",
    "analyse",
    "check",
    "churn_problems",
    "settle_problems",
    "excused_partitions",
    "unowned_partition_seconds",
]

ACTIONS = ("join", "leave", "crash", "restart_same", "restart_new", "resubscribe")

#: Subscription name -> topic roles. Every member reads ``a``; some also read ``b``.
SUBSCRIPTIONS: dict[str, tuple[str, ...]] = {"a": ("a",), "ab": ("a", "b")}

_STRATEGY_BY_KIND = {"confluent": "cooperative-sticky", "java": "cooperative-sticky"}


@dataclass(frozen=True)
class ChurnProfile:
    """The shape of the sequences a seed generates."""

    min_members: int = 2
    max_members: int = 8
    min_steps: int = 5
    max_steps: int = 10
    #: partitions of topic ``a`` (every member reads it) and ``b``; ``a`` has at least ``max_members``
    #: so a balanced assignment gives every member something and "settled" can require it
    partitions_a: int = 8
    partitions_b: int = 4
    #: probability that a sequence includes one librdkafka member, and one Java member
    confluent_probability: float = 0.3
    java_probability: float = 0.3
    #: probability that the runner waits for the settle after a step (else a gap of 0.2-1.5 s)
    settle_probability: float = 0.6
    #: records per second on topic ``a`` (``b`` gets half)
    rate: float = 100.0

    def __post_init__(self) -> None:
        if not 2 <= self.min_members <= self.max_members:
            raise ValueError(f"need 2 <= min_members <= max_members, got {self.min_members}, {self.max_members}")
        if not 1 <= self.min_steps <= self.max_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {self.min_steps}, {self.max_steps}")
        if self.partitions_a < self.max_members:
            raise ValueError(f"partitions_a ({self.partitions_a}) must be >= max_members ({self.max_members})")
        if self.partitions_b < 1:
            raise ValueError(f"partitions_b must be positive, got {self.partitions_b}")


PROFILES: dict[str, ChurnProfile] = {
    # the regular suite: short sequences over small groups, Python members only
    "small": ChurnProfile(min_members=2, max_members=3, min_steps=3, max_steps=5, partitions_a=4, partitions_b=2,
                          confluent_probability=0.0, java_probability=0.0, settle_probability=0.7, rate=50.0),
    # the slow soak: groups of 2-8, sometimes with a librdkafka and a Java member
    "soak": ChurnProfile(),
}


@dataclass(frozen=True)
class MemberSpec:
    """One member process to start: its name (timeline id and client id), client kind and subscription."""

    name: str
    kind: str = "aiokafka"
    subscription: str = "a"

    def __str__(self) -> str:
        return f"{self.name}({self.kind},{'+'.join(SUBSCRIPTIONS[self.subscription])})"


@dataclass(frozen=True)
class ChurnStep:
    """One churn step: ``action`` on ``member``; ``start`` is the process it starts (join, restarts,
    resubscribe); then wait for the settle (``settle``) or let ``gap`` seconds pass."""

    action: str
    member: str
    start: MemberSpec | None = None
    settle: bool = True
    gap: float = 0.0

    def __str__(self) -> str:
        what = {"join": f"join {self.start}", "leave": f"leave {self.member}", "crash": f"crash {self.member}",
                "restart_same": f"restart_same {self.member} -> {self.start}",
                "restart_new": f"restart_new {self.member} -> {self.start}",
                "resubscribe": f"resubscribe {self.member} -> {self.start}"}[self.action]
        return f"{what}; " + ("settle" if self.settle else f"gap {self.gap:.2f}s")


@dataclass(frozen=True)
class ChurnSequence:
    """A seeded churn sequence: the initial members and the steps, replayable from ``seed`` and ``profile``."""

    seed: int
    profile_name: str
    profile: ChurnProfile
    initial: tuple[MemberSpec, ...]
    steps: tuple[ChurnStep, ...]

    def describe(self) -> str:
        lines = [f"churn sequence seed={self.seed} profile={self.profile_name} "
                 f"(partitions a={self.profile.partitions_a} b={self.profile.partitions_b})",
                 "  start " + " ".join(map(str, self.initial))]
        lines += [f"  {i}. {step}" for i, step in enumerate(self.steps, 1)]
        lines.append(f"  replay: python -m benchmarks.churn_soak --seed {self.seed} --profile {self.profile_name}")
        return "\n".join(lines)


def generate_sequence(seed: int, profile: str | ChurnProfile = "soak") -> ChurnSequence:
    """The churn sequence of ``seed`` (deterministic: the same seed and profile give the same sequence).

    The group never shrinks below ``min_members`` nor grows beyond ``max_members`` live members; the
    librdkafka and Java members, when drawn, are part of the initial group and keep their kind
    across restarts; joins are kassign aiokafka members.
    """
    if isinstance(profile, str):
        try:
            profile_name, shape = profile, PROFILES[profile]
        except KeyError:
            raise ValueError(f"unknown churn profile {profile!r}; expected one of {sorted(PROFILES)}") from None
    else:
        profile_name, shape = "custom", profile
    rng = random.Random(seed)
    counter = 0

    def new_name() -> str:
        nonlocal counter
        counter += 1
        return f"m{counter}"

    def subscription() -> str:
        return rng.choice(sorted(SUBSCRIPTIONS))

    size = rng.randint(shape.min_members, shape.max_members)
    kinds = ["aiokafka"] * size
    # the first member stays kassign's, so every group has one; others may be swapped for other clients
    if size > 1 and rng.random() < shape.confluent_probability:
        kinds[1] = "confluent"
    if size > 2 and rng.random() < shape.java_probability:
        kinds[2] = "java"
    initial = tuple(MemberSpec(new_name(), kind, subscription()) for kind in kinds)
    live: dict[str, MemberSpec] = {m.name: m for m in initial}

    steps = []
    for _ in range(rng.randint(shape.min_steps, shape.max_steps)):
        allowed = [a for a in ACTIONS
                   if not (a == "join" and len(live) >= shape.max_members)
                   and not (a in ("leave", "crash") and len(live) <= shape.min_members)]
        action = rng.choice(allowed)
        settle = rng.random() < shape.settle_probability
        gap = 0.0 if settle else round(rng.uniform(0.2, 1.5), 2)
        if action == "join":
            spec = MemberSpec(new_name(), "aiokafka", subscription())
            live[spec.name] = spec
            steps.append(ChurnStep(action, spec.name, spec, settle, gap))
            continue
        target = live[rng.choice(sorted(live))]
        start: MemberSpec | None
        if action in ("leave", "crash"):
            start = None
            del live[target.name]
        elif action == "restart_same":
            start = target
        elif action == "restart_new":
            start = MemberSpec(new_name(), target.kind, target.subscription)
            del live[target.name]
            live[start.name] = start
        else:  # resubscribe
            start = MemberSpec(target.name, target.kind, "a" if target.subscription == "ab" else "ab")
            live[target.name] = start
        steps.append(ChurnStep(action, target.name, start, settle, gap))
    return ChurnSequence(seed, profile_name, shape, initial, tuple(steps))


# -- timeline analysis --------------------------------------------------------------------------


def settle_problems(events: Sequence[Event], live: Mapping[str, Iterable[str]],
                    partitions: Mapping[str, Sequence[TopicPartition]]) -> list[str]:
    """Why the group is not settled at the end of ``events`` (empty when it is).

    ``live``: live member -> topics it subscribes to; ``partitions``: topic -> its partitions.
    Settled: each partition of a topic some live member reads is owned by exactly one live member
    that reads it, partitions of topics nobody reads are owned by nobody, and every live member owns
    something (the profiles give topic ``a`` enough partitions for that).
    """
    owners = owners_at(events)
    readers: dict[str, set[str]] = defaultdict(set)
    for member, topics in live.items():
        for topic in topics:
            readers[topic].add(member)
    problems = []
    for topic, tps in sorted(partitions.items()):
        for tp in tps:
            who = owners.get(tp, [])
            if not readers[topic]:
                if who:
                    problems.append(f"{tp.topic}:{tp.partition} owned by {who} though no live member reads it")
            elif len(who) != 1:
                problems.append(f"{tp.topic}:{tp.partition} owned by {who or 'nobody'}")
            elif who[0] not in readers[topic]:
                problems.append(f"{tp.topic}:{tp.partition} owned by {who[0]}, not a live member reading it")
    owning = {m for ms in owners.values() for m in ms}
    problems += [f"{m} owns nothing" for m in sorted(set(live) - owning)]
    return problems


def excused_partitions(events: Iterable[Event]) -> dict[TopicPartition, str]:
    """Partitions that may see duplicates, with the reason: their owner crashed, lost them (``cb_lost``),
    exited on its own, or failed a commit while owning them, so processed offsets may be uncommitted."""
    owned: dict[str, set[TopicPartition]] = defaultdict(set)
    closing: set[str] = set()
    out: dict[TopicPartition, str] = {}

    def excuse(parts: Iterable[TopicPartition], why: str) -> None:
        for tp in parts:
            out.setdefault(tp, why)

    for e in sorted(events, key=lambda e: e.t):
        mine = owned[e.id]
        if e.ev == "cb_assigned":
            mine.update(e.parts or ())
            closing.discard(e.id)
        elif e.ev == "cb_revoked":
            mine.difference_update(e.parts or ())
        elif e.ev == "cb_lost":
            excuse(e.parts or (), f"lost by {e.id} at {e.t:.3f}")
            mine.difference_update(e.parts or ())
        elif e.ev == "commit_err":
            excuse(mine, f"commit by {e.id} failed at {e.t:.3f} ({e.extra.get('error')})")
        elif e.ev == "crash":
            excuse(mine, f"owner {e.id} crashed at {e.t:.3f}")
            mine.clear()
        elif e.ev == "closing":
            closing.add(e.id)  # what it owned is committed on close; keep it to judge the exit code
        elif e.ev == "exit":
            if e.extra.get("code") not in (0, None) and e.id not in closing:
                excuse(mine, f"owner {e.id} exited with {e.extra.get('code')} at {e.t:.3f}")
            mine.clear()
            closing.discard(e.id)
    return dict(sorted(out.items()))


def _measure(segments: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(segments):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _reader_intervals(events: Sequence[Event], partitions: Mapping[str, Sequence[TopicPartition]]
                      ) -> dict[str, list[tuple[float, float]]]:
    """Topic -> intervals in which some member subscribed to it was alive (subscribed .. closing/exit/crash)."""
    since: dict[str, tuple[float, list[str]]] = {}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.t):
        if e.ev == "subscribed":
            since[e.id] = (e.t, list(e.extra.get("topics") or partitions))
        elif e.ev in ("closing", "exit", "crash") and e.id in since:
            start, topics = since.pop(e.id)
            for topic in topics:
                out[topic].append((start, e.t))
    for start, topics in since.values():
        for topic in topics:
            out[topic].append((start, math.inf))
    return out


def unowned_partition_seconds(events: Sequence[Event], partitions: Mapping[str, Sequence[TopicPartition]],
                              start: float, end: float) -> float:
    """Partition-seconds within [start, end] in which a partition had no owner although a live member
    read its topic: what churn costs in availability."""
    readers = _reader_intervals(events, partitions)
    owned: dict[TopicPartition, list[tuple[float, float]]] = defaultdict(list)
    for i in ownership_intervals(events):
        owned[i.partition].append((max(i.start, start), min(i.end, end)))
    total = 0.0
    for topic, tps in partitions.items():
        needed = [(max(s, start), min(e, end)) for s, e in readers.get(topic, []) if min(e, end) > max(s, start)]
        need = _measure(needed)
        for tp in tps:
            # owned time only counts where it is also needed (owners are readers, so intersect by clipping)
            covered = [(max(a, s), min(b, e)) for a, b in owned[tp] for s, e in needed if min(b, e) > max(a, s)]
            total += need - _measure(covered)
    return total


# -- running ------------------------------------------------------------------------------------


@dataclass
class ChurnResult:
    """What one sequence did and what its timeline shows."""

    sequence: ChurnSequence
    events: list[Event]
    produced: dict[TopicPartition, list[int]]  # acknowledged offsets, on topics read at the end
    producer_errors: list[str]
    failed_members: dict[str, str]
    settled_at: tuple[float, float]  # first settle of the initial group, final settle
    timeline_path: Path | None = None
    generations: int = 0
    double_owned_ps: float = 0.0
    overlaps: list[str] = field(default_factory=list)
    unowned_ps: float = 0.0
    duplicates: int = 0
    unexcused_duplicates: dict[TopicPartition, int] = field(default_factory=dict)
    lost: dict[TopicPartition, list[int]] = field(default_factory=dict)
    excused: dict[TopicPartition, str] = field(default_factory=dict)
    #: where and why the group stopped converging (it then ended early, its members killed)
    stalled: str | None = None
    #: records of topics no member read when the sequence ended (left out of ``produced``)
    unread: int = 0
    duration: float = 0.0

    @property
    def records(self) -> int:
        return sum(len(v) for v in self.produced.values())

    def summary(self) -> str:
        stalled = "STALLED, " if self.stalled else ""
        return (f"seed {self.sequence.seed}: {stalled}{len(self.sequence.steps)} steps, "
                f"{self.generations} generations, {self.records} records ({self.unread} unread), "
                f"double-owned {self.double_owned_ps:.3f} ps, unowned {self.unowned_ps:.1f} ps, "
                f"duplicates {self.duplicates} (unexcused "
                f"{sum(self.unexcused_duplicates.values())}), lost {sum(len(v) for v in self.lost.values())}, "
                f"{self.duration:.1f}s")


class ChurnFailure(AssertionError):
    """A churn sequence broke an invariant; the message has the seed, the sequence and the replay command."""


def churn_problems(result: ChurnResult) -> list[str]:
    """The invariants of issue 9 that ``result`` breaks (empty when it passes)."""
    problems = []
    if result.stalled:
        problems.append(f"group did not settle (lost records not checked): {result.stalled}")
    if result.double_owned_ps > 0:
        problems.append(f"{result.double_owned_ps:.3f} double-owned partition-seconds: "
                        + "; ".join(result.overlaps[:5]))
    if result.lost:
        shown = ", ".join(f"{tp.topic}:{tp.partition} {offs[:5]}" for tp, offs in list(result.lost.items())[:5])
        problems.append(f"{sum(len(v) for v in result.lost.values())} record(s) never processed: {shown}")
    if result.unexcused_duplicates:
        shown = ", ".join(f"{tp.topic}:{tp.partition} x{n}" for tp, n in result.unexcused_duplicates.items())
        problems.append(f"duplicates on partitions whose owners neither crashed nor failed to commit: {shown}")
    if result.producer_errors:
        problems.append(f"producer errors: {result.producer_errors[:3]}")
    problems += [f"member {m} exited on its own: {tail}" for m, tail in result.failed_members.items()]
    return problems


class _GroupPool:
    """The group's members across several :class:`GroupDriver` instances on the same group id.

    A driver starts each member name once and gives all its members the driver's topics, so a
    restart under the same name, or a member with another subscription, uses another driver of the
    same group; the timeline is all drivers' events merged.
    """

    def __init__(self, bootstrap: str, group_id: str, topics: Mapping[str, str], timing: GroupTiming,
                 log_dir: Path) -> None:
        self.bootstrap, self.group_id, self.topics, self.timing, self.log_dir = \
            bootstrap, group_id, topics, timing, log_dir
        self._drivers: list[tuple[str, GroupDriver, set[str]]] = []
        self.current: dict[str, tuple[MemberSpec, GroupDriver]] = {}

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
                                member_id=spec.name, consumer_factory="kassign.adapters.aiokafka:CooperativeConsumer")
        else:
            driver.start_member(spec.kind, _STRATEGY_BY_KIND[spec.kind], member_id=spec.name)
        self.current[spec.name] = (spec, driver)

    def stop(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.stop_member(name)

    def crash(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.crash_member(name)

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
        return sorted((e for _, d, _ in self._drivers for e in d.events()), key=lambda e: e.t)

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


def run_sequence(sequence: ChurnSequence, bootstrap: str, *, timing: GroupTiming = GroupTiming(),
                 settle_timeout: float = 30.0, log_dir: str | Path | None = None) -> ChurnResult:
    """Play ``sequence`` on the broker at ``bootstrap`` and analyse its timeline (see :func:`churn_problems`).

    Raises ChurnFailure (with the seed and the sequence) when a member dies on its own. A group that
    does not settle in time ends the sequence early with ``result.stalled`` set; invariant violations
    are left in the result for the caller to judge (:func:`check`, :func:`churn_problems`).
    """
    profile = sequence.profile
    tag = f"churn-{sequence.seed}-{uuid.uuid4().hex[:6]}"
    log_root = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"kassign-{tag}-"))
    log_root.mkdir(parents=True, exist_ok=True)
    topics = {"a": create_topic(bootstrap, f"{tag}-a", profile.partitions_a),
              "b": create_topic(bootstrap, f"{tag}-b", profile.partitions_b)}
    partitions = {topics["a"]: [TopicPartition(topics["a"], p) for p in range(profile.partitions_a)],
                  topics["b"]: [TopicPartition(topics["b"], p) for p in range(profile.partitions_b)]}
    pool = _GroupPool(bootstrap, tag, topics, timing, log_root)
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
            if step.action in ("leave", "resubscribe"):
                pool.stop(step.member)
            elif step.action in ("crash", "restart_same", "restart_new"):
                pool.crash(step.member)
            if step.start is not None:
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
        raise
    failed = pool.failed()
    pool.close()
    events = pool.events()
    path = log_root / "timeline.jsonl"
    write_events(path, events)
    result = ChurnResult(sequence, events, produced, [e for p in producers for e in p.errors], failed,
                         (first_settle if first_settle is not None else began_at, final_settle), path,
                         stalled=stalled, unread=unread, duration=time.monotonic() - began)
    analyse(result, partitions)
    return result


def analyse(result: ChurnResult, partitions: Mapping[str, Sequence[TopicPartition]]) -> None:
    """Fill ``result``'s measurements from its timeline (``partitions``: topic -> its partitions)."""
    events = result.events
    result.generations = len({e.extra["gen"] for e in events if isinstance(e.extra.get("gen"), int)
                              and e.extra["gen"] >= 0 and e.ev in ("cb_assigned", "cb_revoked", "sync")})
    overlaps = double_ownership(events)
    result.double_owned_ps = sum(o.end - o.start for o in overlaps)
    result.overlaps = [str(o) for o in overlaps]
    result.unowned_ps = unowned_partition_seconds(events, partitions, *result.settled_at)
    result.lost = missing_records(events, result.produced)
    result.excused = excused_partitions(events)
    unexcused: Counter[TopicPartition] = Counter()
    for tp, counts in processed_offsets(events).items():
        extra = sum(n - 1 for n in counts.values() if n > 1)
        result.duplicates += extra
        if extra and tp not in result.excused:
            unexcused[tp] = extra
    result.unexcused_duplicates = dict(sorted(unexcused.items()))


def check(result: ChurnResult) -> None:
    """Raise ChurnFailure (seed, sequence, problems, timeline path) when ``result`` breaks an invariant."""
    problems = churn_problems(result)
    if problems:
        raise ChurnFailure("\n".join(["churn invariants broken:", *(f"  - {p}" for p in problems),
                                      result.sequence.describe(), f"timeline: {result.timeline_path}"]))
