"""Random group scenarios for the range/roundrobin conformance tests, and the batch runner for
java/EagerAssignorOracle.java (kafka-clients' own RangeAssignor and RoundRobinAssignor)."""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kassign import Subscription, TopicPartition

ROOT = Path(__file__).resolve().parents[2]
RACKS = ["r0", "r1", "r2", "r3"]


@dataclass
class Scenario:
    partitions_per_topic: dict[str, int]
    subscriptions: dict[str, Subscription]
    partition_racks: dict[TopicPartition, frozenset[str]] | None


def random_scenario(rng: random.Random) -> Scenario:
    """A group of 1-8 members over 1-5 topics: static and dynamic members, uneven subscriptions,
    topics without partitions or metadata, and (in most scenarios) member and replica racks."""
    topics = [f"t{i}" for i in range(rng.randint(1, 5))]
    co_partitioned = rng.random() < 0.3  # equal counts and equal subscriptions: Range's co-partitioning
    shared_count = rng.randint(1, 12)
    counts = {t: shared_count if co_partitioned else rng.choice([0, 1, 2, 3, 5, 7, 8, 12]) for t in topics}
    if not co_partitioned and rng.random() < 0.3:
        del counts[rng.choice(topics)]  # subscribed but absent from the metadata
    rack_mode = rng.choice(["none", "members", "members", "members", "some-members"])
    subscriptions = {}
    for _ in range(rng.randint(1, 8)):
        member = f"m-{rng.randrange(16**4):04x}"
        subscribed = topics if co_partitioned else [t for t in topics if rng.random() < 0.7]
        rack = None
        if rack_mode == "members" or (rack_mode == "some-members" and rng.random() < 0.5):
            rack = rng.choice(RACKS[:3])
        instance = f"i-{rng.randrange(100):02d}" if rng.random() < 0.25 else None
        subscriptions[member] = Subscription(list(subscribed), rack_id=rack, group_instance_id=instance)
    # Static members need distinct instance ids (the coordinator guarantees it).
    seen: set[str] = set()
    for member, sub in list(subscriptions.items()):
        if sub.group_instance_id in seen:
            subscriptions[member] = Subscription(sub.topics, rack_id=sub.rack_id)
        elif sub.group_instance_id is not None:
            seen.add(sub.group_instance_id)
    partition_racks = None
    if rng.random() < 0.8:
        everywhere = rng.random() < 0.2  # every partition on every rack: Java skips rack matching
        partition_racks = {}
        for topic, count in counts.items():
            for p in range(count):
                racks = RACKS[:3] if everywhere else rng.sample(RACKS, rng.randint(0, 2))
                partition_racks[TopicPartition(topic, p)] = frozenset(racks)
    return Scenario(counts, subscriptions, partition_racks)


def to_request(assignor: str, s: Scenario) -> str:
    topics = ",".join(f"{t}:{n}" for t, n in s.partitions_per_topic.items())
    members = ";".join(
        f"{m}/{sub.group_instance_id or '-'}/{sub.rack_id or '-'}/{'+'.join(sub.topics)}"
        for m, sub in s.subscriptions.items()
    )
    racks = ";".join(f"{tp.topic}:{tp.partition}={'+'.join(sorted(r))}" for tp, r in (s.partition_racks or {}).items())
    return "\t".join([assignor, topics, members, racks])


def parse_answer(answer: str) -> dict[str, list[TopicPartition]]:
    status, _, body = answer.partition("\t")
    assert status == "OK", answer
    result = {}
    for entry in body.split(";"):
        member, _, tps = entry.partition("=")
        result[member] = [TopicPartition(t, int(p)) for t, _, p in (x.rpartition(":") for x in tps.split(",") if x)]
    return result


def run_java_batch(requests: list[str]) -> list[str]:
    """Answers from one JVM run of EagerAssignorOracle over all ``requests``."""
    from kassign._java import JavaUnavailable, compile_java, java_command

    try:
        classes = compile_java(ROOT / "java" / "EagerAssignorOracle.java")
        cmd = java_command(classes, "EagerAssignorOracle", heap="256m")
    except JavaUnavailable as exc:
        pytest.fail(f"Java conformance tests need Java 17 and kafka-clients: {exc}")
    res = subprocess.run(
        cmd,
        input="".join(r + "\n" for r in requests),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=240,
        check=True,
    )
    answers = res.stdout.splitlines()
    assert len(answers) == len(requests), res.stderr[-2000:]
    return answers
