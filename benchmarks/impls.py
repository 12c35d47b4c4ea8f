"""The implementations the assignment benchmark times, each measured the way a group leader runs it.

In-process (Python): the CPython floor, kassign's StickyAssignor and CooperativeStickyAssignor, aiokafka's
StickyPartitionAssignor. Out of process (Java): kafka-clients 3.9.1's StickyAssignor and
CooperativeStickyAssignor (``java/StickyBench.java``) and Kafka 4's broker-side UniformAssignor (the separate
``kafka4-uniform`` tool, given by ``$KAFKA4_UNIFORM_TOOL``). Every implementation's leave/join step starts from
its own fresh result.

A result row is a plain dict (the JSON the Java tools print): ``impl, case, step, members`` and either
``skipped`` (why) or ``medianMs, samplesMs, balance, moved, valid`` (and, for kassign, ``peakBytes`` and
``resultBytes``).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.cases import Case

__all__ = [
    "ALL_IMPLS",
    "PYTHON_IMPLS",
    "JAVA_IMPLS",
    "K4_IMPL",
    "Row",
    "python_impl",
    "run_python",
    "run_java",
    "run_k4",
    "k4_built",
    "evaluate",
    "result_bytes",
    "measure",
    "Timeboxed",
]

log = logging.getLogger(__name__)

Row = dict[str, Any]
Partition = tuple[str, int]
AssignmentMap = dict[str, list[Partition]]

PYTHON_IMPLS = ("floor", "kassign-sticky", "kassign-coop", "aiokafka-sticky")
JAVA_IMPLS = ("java-sticky", "java-coop")
K4_IMPL = "k4-uniform"
ALL_IMPLS = PYTHON_IMPLS + JAVA_IMPLS + (K4_IMPL,)

# The generation the previous (fresh) assignment was made in; the cooperative second round runs in the next.
PREVIOUS_GENERATION = 1


class Timeboxed(Exception):
    """A single call ran past the time box."""


@contextmanager
def timebox(seconds: float) -> Iterator[None]:
    """Raise :class:`Timeboxed` in the main thread if the block runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise Timeboxed(f"> {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def measure(call: Callable[[], Any], limit: float, max_reps: int = 9) -> tuple[list[float], Any]:
    """Median-ready samples (ms) of ``call()`` and its last result.

    One time-boxed probe sizes the run: probe < 0.5 s: 1 warm-up and 9 timed calls; < 2 s: 5 timed;
    < 30 s: 3 timed; else the probe is the only sample; never more than ``max_reps`` timed calls.
    ``gc.collect()`` before every timed call; the collector stays enabled inside it, as in a real leader.
    """
    gc.collect()
    start = time.perf_counter()
    with timebox(limit):
        result = call()
    probe = time.perf_counter() - start
    if probe >= 30:
        return [probe * 1e3], result
    reps = min(max_reps, 9 if probe < 0.5 else 5 if probe < 2 else 3)
    if probe < 0.5:
        call()
    samples = []
    for _ in range(reps):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples, result


def evaluate(
    case: Case,
    members: Mapping[str, list[str]],
    assignment: Mapping[str, list[Partition]],
    previous_owner: Mapping[Partition, str] | None,
    complete: bool = True,
) -> dict[str, Any]:
    """Validity, balance (max - min per member) and moved (previously owned partitions now elsewhere).

    Valid: every partition of a subscribed topic at most once (with ``complete``, exactly once), only
    to a member subscribing to its topic, only existing partitions. ``unassigned`` counts the rest.
    """
    owner: dict[Partition, str] = {}
    out: dict[str, Any] = {"valid": "ok", "balance": None, "moved": None, "unassigned": 0}
    unknown = set(assignment) - set(members)
    if unknown:
        out["valid"] = f"INVALID: assignment for unknown member {sorted(unknown)[0]}"
        return out
    counts = []
    for member, topics in members.items():
        got = assignment.get(member, [])
        subscribed = set(topics)
        for tp in got:
            topic, partition = tp
            if topic not in subscribed or not 0 <= partition < case.topics.get(topic, 0):
                out["valid"] = f"INVALID: {member} got {topic}-{partition}"
                return out
            if owner.setdefault((topic, partition), member) != member:
                out["valid"] = f"INVALID: {topic}-{partition} assigned twice"
                return out
        counts.append(len(got))
    assigned = sum(counts)
    if assigned != len(owner):
        out["valid"] = f"INVALID: {assigned - len(owner)} partitions assigned twice within a member"
        return out
    subscribed_topics = {t for ts in members.values() for t in ts}
    out["unassigned"] = sum(case.topics[t] for t in subscribed_topics) - len(owner)
    if complete and out["unassigned"]:
        out["valid"] = f"INVALID: {out['unassigned']} partitions unassigned"
        return out
    out["balance"] = max(counts) - min(counts) if counts else 0
    if previous_owner is not None:
        out["moved"] = sum(1 for tp, m in previous_owner.items() if owner.get(tp) != m)
    return out


def owners(assignment: Mapping[str, list[Partition]]) -> dict[Partition, str]:
    return {(tp[0], tp[1]): member for member, tps in assignment.items() for tp in tps}


def result_bytes(assignment: Mapping[str, list[Any]]) -> int:
    """The returned assignment's size: ``sys.getsizeof`` over its lists and their tuples."""
    return sum(sys.getsizeof(tps) + sum(sys.getsizeof(tp) for tp in tps) for tps in assignment.values())


# ---------------------------------------------------------------------------------------------------
# In-process implementations: prepare(case, members, previous, generation) builds the leader's input
# (untimed); run(prepared) is the timed call and returns member -> partitions.


class Floor:
    """CPython's floor: merely building the case's ``kassign.TopicPartition`` objects, gc disabled."""

    name = "floor"

    def __init__(self) -> None:
        from kassign import TopicPartition

        self._tp = TopicPartition

    def prepare(
        self, case: Case, members: Mapping[str, list[str]], previous: AssignmentMap | None, generation: int
    ) -> dict[str, int]:
        return case.topics

    def run(self, topics: dict[str, int]) -> list[Any]:
        tp = self._tp
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return [tp(t, p) for t, n in topics.items() for p in range(n)]
        finally:
            if was_enabled:
                gc.enable()


class KassignSticky:
    """kassign's StickyAssignor; previous assignments arrive as V1 user data bytes, decoded inside assign()."""

    name = "kassign-sticky"
    cooperative = False

    def __init__(self) -> None:
        from kassign import Subscription
        from kassign.assignors import StickyAssignor
        from kassign.protocol import encode_sticky_user_data

        self._subscription, self._assignor, self._encode = Subscription, StickyAssignor, encode_sticky_user_data

    def prepare(
        self, case: Case, members: Mapping[str, list[str]], previous: AssignmentMap | None, generation: int
    ) -> tuple[dict[str, int], dict[str, Any]]:
        from kassign import TopicPartition

        subs = {}
        for member, topics in members.items():
            prev = None if previous is None else previous.get(member)
            user_data = None if prev is None else self._encode([TopicPartition(*tp) for tp in prev], generation)
            subs[member] = self._subscription(list(topics), user_data)
        return dict(case.topics), subs

    def run(self, prepared: tuple[dict[str, int], dict[str, Any]]) -> dict[str, list[Any]]:
        return self._assignor().assign(*prepared)


class KassignCooperative(KassignSticky):
    """kassign's CooperativeStickyAssignor; previous assignments arrive as owned_partitions + generation_id."""

    name = "kassign-coop"
    cooperative = True

    def __init__(self) -> None:
        from kassign import Subscription
        from kassign.assignors import CooperativeStickyAssignor
        from kassign.protocol import encode_cooperative_user_data

        self._subscription, self._assignor = Subscription, CooperativeStickyAssignor
        self._encode = encode_cooperative_user_data

    def prepare(
        self, case: Case, members: Mapping[str, list[str]], previous: AssignmentMap | None, generation: int
    ) -> tuple[dict[str, int], dict[str, Any]]:
        from kassign import TopicPartition

        subs = {}
        for member, topics in members.items():
            prev = None if previous is None else previous.get(member)
            if prev is None:
                subs[member] = self._subscription(list(topics), self._encode(-1))
            else:
                subs[member] = self._subscription(
                    list(topics), self._encode(generation), [TopicPartition(*tp) for tp in prev], generation
                )
        return dict(case.topics), subs


class _Cluster:
    """The two ClusterMetadata methods aiokafka's sticky assignor calls."""

    def __init__(self, topics: Mapping[str, int]) -> None:
        self._parts = {t: set(range(n)) for t, n in topics.items()}

    def topics(self) -> set[str]:
        return set(self._parts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._parts.get(topic)


class AiokafkaSticky:
    """aiokafka's StickyPartitionAssignor (a port of Java's pre-2.x sticky assignor)."""

    name = "aiokafka-sticky"
    cooperative = False

    def __init__(self) -> None:
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from aiokafka.structs import TopicPartition

        self._assignor, self._tp = StickyPartitionAssignor, TopicPartition

    def prepare(
        self, case: Case, members: Mapping[str, list[str]], previous: AssignmentMap | None, generation: int
    ) -> tuple[_Cluster, dict[str, Any]]:
        metadata = {}
        for member, topics in members.items():
            prev = None if previous is None else previous.get(member)
            owned = None if prev is None else [self._tp(t, p) for t, p in prev]
            metadata[member] = self._assignor._metadata(topics, owned, generation)
        return _Cluster(case.topics), metadata

    def run(self, prepared: tuple[_Cluster, dict[str, Any]]) -> AssignmentMap:
        cluster, metadata = prepared
        result = self._assignor.assign(cluster, metadata)
        return {m: [(t, p) for t, ps in a.assignment for p in ps] for m, a in result.items()}


def python_impl(name: str) -> Floor | KassignSticky | AiokafkaSticky:
    """The in-process implementation called ``name``; ImportError if its library is missing."""
    factories: dict[str, Callable[[], Any]] = {
        "floor": Floor,
        "kassign-sticky": KassignSticky,
        "kassign-coop": KassignCooperative,
        "aiokafka-sticky": AiokafkaSticky,
    }
    return factories[name]()


def run_python(
    impl: Any, case: Case, steps: tuple[str, ...], limit: float, measure_memory: bool, max_reps: int = 9
) -> list[Row]:
    """Time ``impl`` on each step of ``case``; leave/join start from its own fresh result."""
    rows: list[Row] = []
    fresh: AssignmentMap | None = None
    for step in steps:
        members = case.step_members(step)
        row: Row = {"impl": impl.name, "case": case.name, "step": step, "members": len(members)}
        rows.append(row)
        if impl.name == "floor" and step != "fresh":
            row["skipped"] = "same as fresh"
            continue
        if step != "fresh" and fresh is None:
            fresh_row = rows[0] if rows and rows[0]["step"] == "fresh" else {}
            row["skipped"] = "no fresh result" if "skipped" not in fresh_row else "fresh " + fresh_row["skipped"]
            continue
        previous = None
        if step != "fresh":
            # leave: the leaver's partitions are unowned; join: everyone owns its fresh result,
            # as in the kafka4-uniform tool's join step.
            previous = {m: tps for m, tps in fresh.items() if step != "leave" or m != case.leaver}
        prepared = impl.prepare(case, members, previous, PREVIOUS_GENERATION)
        try:
            samples, result = measure(lambda: impl.run(prepared), limit, max_reps)  # noqa: B023 - run before the next
        except Timeboxed:
            row["skipped"] = f"skipped (>{limit:.0f}s)"
            log.info("%s %s %s: skipped (>%.0fs)", case.name, step, impl.name, limit)
            continue
        except Exception as exc:  # a broken implementation is a result to report, not a crash of the run
            log.exception("%s %s %s failed", case.name, step, impl.name)
            row["error"] = f"{type(exc).__name__}: {exc}"
            continue
        row.update(medianMs=statistics.median(samples), samplesMs=[round(s, 4) for s in samples])
        if impl.name == "floor":
            row.update(valid="ok" if len(result) == case.n_partitions else "INVALID: wrong count")
            log.info("%s floor: %.1f ms", case.name, row["medianMs"])
            continue
        if measure_memory:
            row.update(_memory(impl, prepared))
        previous_owner = None if previous is None else owners(fresh)
        if impl.cooperative and step != "fresh":
            # KIP-429: partitions changing owner are only revoked in this round; a second round
            # (everyone owning this round's result) hands them to their new owner.
            first = evaluate(case, members, result, None, complete=False)
            final = impl.run(impl.prepare(case, members, result, PREVIOUS_GENERATION + 1))
            quality = evaluate(case, members, final, previous_owner)
            quality["revoked"] = first["unassigned"]
            if first["valid"] != "ok":
                quality["valid"] = "round 1 " + first["valid"]
        else:
            quality = evaluate(case, members, result, previous_owner)
            quality["revoked"] = 0
        del quality["unassigned"]
        row.update(quality)
        if step == "fresh":
            fresh = {m: [(tp[0], tp[1]) for tp in tps] for m, tps in result.items()}
        log.info(
            "%s %s %s: %.1f ms, balance %s, moved %s, %s",
            case.name,
            step,
            impl.name,
            row["medianMs"],
            row["balance"],
            row["moved"],
            row["valid"],
        )
    return rows


def _memory(impl: Any, prepared: Any) -> dict[str, int]:
    """Peak traced allocation of one assign() call, beside the size of what it returns."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = impl.run(prepared)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return {"peakBytes": peak, "resultBytes": result_bytes(result)}


# ---------------------------------------------------------------------------------------------------
# Java implementations


def run_java(impl: str, case_file: Path, steps: tuple[str, ...], limit: float, warmup_seconds: float) -> list[Row]:
    """Run StickyBench for one case and assignor; rows as it prints them (time-boxed per call)."""
    from kassign._java import compile_java, java_command

    source = Path(__file__).resolve().parent.parent / "java" / "StickyBench.java"
    classes = compile_java(source)
    assignor = {"java-sticky": "sticky", "java-coop": "cooperative-sticky"}[impl]
    cmd = java_command(
        classes,
        "StickyBench",
        str(case_file),
        "--assignor",
        assignor,
        "--steps",
        ",".join(steps),
        "--warmup-seconds",
        str(warmup_seconds),
        "--timebox",
        str(limit),
        heap="8g",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode not in (0, 3) or not rows:
        raise RuntimeError(f"StickyBench exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    for r in rows:
        log.info(
            "%s %s %s: %s",
            r["case"],
            r["step"],
            impl,
            r.get("skipped") or f"{r['medianMs']:.1f} ms, balance {r['balance']}, moved {r['moved']}, {r['valid']}",
        )
    return rows


# ---------------------------------------------------------------------------------------------------
# Kafka 4's UniformAssignor (the separate kafka4-uniform tool, $KAFKA4_UNIFORM_TOOL)

# Quoted in the tool's README (ms per assign(), median; the project's machine), shown when it is not built.
K4_README_MS: dict[str, dict[str, float]] = {
    "S2": {"fresh": 0.66, "leave": 0.72, "join": 0.86},
    "S3": {"fresh": 7.1, "leave": 3.9, "join": 4.4},
    "S4": {"fresh": 56.0, "leave": 37.0, "join": 37.0},
    "NU2": {"fresh": 7.5, "leave": 4.2, "join": 5.0},
}


def k4_tool_dir() -> Path | None:
    """The kafka4-uniform tool's directory, from ``$KAFKA4_UNIFORM_TOOL`` (it is not part of the
    repository, and no default path outside it is assumed); without it the benchmark prints the
    quoted figures instead."""
    path = os.environ.get("KAFKA4_UNIFORM_TOOL")
    return Path(path) if path else None


def k4_built() -> bool:
    tool = k4_tool_dir()
    cache = Path(os.environ.get("KAFKA4_CACHE", Path.home() / ".cache" / "kafka4-uniform"))
    return tool is not None and (tool / "run.sh").exists() and (cache / "classes" / "UniformAnchor.class").exists()


def run_k4(case_dir: Path, names: list[str], steps: tuple[str, ...], out_json: Path) -> list[Row]:
    """Time Kafka 4's UniformAssignor on the cases (one JVM); rows in this harness's shape."""
    if not k4_built():
        return [
            {
                "impl": K4_IMPL,
                "case": n,
                "step": s,
                "medianMs": ms,
                "quoted": True,
                "valid": "ok",
                "balance": None,
                "moved": None,
            }
            for n in names
            if n in K4_README_MS
            for s, ms in K4_README_MS[n].items()
            if s in steps
        ]
    tool = k4_tool_dir()
    assert tool is not None  # k4_built() checked it
    cmd = [
        str(tool / "run.sh"),
        str(case_dir),
        "--cases",
        ",".join(names),
        "--assignors",
        "uniform",
        "--steps",
        ",".join(steps),
        "--json",
        str(out_json),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not out_json.exists():
        raise RuntimeError(f"kafka4-uniform exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    rows = []
    for r in json.loads(out_json.read_text()):
        row: Row = {"impl": K4_IMPL, "case": r["case"], "step": r["step"], "members": r.get("members")}
        if "error" in r:
            row["error"] = r["error"]
        else:
            row.update(
                medianMs=r["medianMs"],
                samplesMs=r["samplesMs"],
                balance=r["balance"],
                moved=r["moved"],
                valid=r["valid"],
            )
        rows.append(row)
    return rows
