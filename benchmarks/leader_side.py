"""The group leader's side of a cooperative-sticky rebalance at 6, 24, 96 (and 500) members (issue 28).

For each group size a fixed topic layout (:data:`SIZES`, :func:`topic_layout`: four topics of 1/2, 1/4,
1/6 and 1/12 of the partitions, every member subscribed to all four) and three rebalances:

* **fresh**: every member new (no owned partitions, generation -1);
* **scale-out**: the N members of the fresh group own kassign's fresh assignment (generation 3) and
  ceil(N/4) new members join with nothing owned;
* **one gone**: the member in the middle of the member list is gone, the N-1 others own their share.

Every member's JoinGroup metadata is what a kafka-clients 3.9.1 cooperative-sticky consumer sends: a
ConsumerProtocolSubscription v3 (Java 3.9's version; v1 added the owned partitions, v2 the generation,
v3 the rack, null here) whose user data is CooperativeStickyAssignor's 4-byte generation. The bytes are
written once by kassign's codecs (:mod:`kassign.protocol`), checked to be exactly what Java
re-serializes, and handed to both leaders. Measured, kassign against kafka-clients 3.9.1 on identical
input bytes:

* **decode**: parsing all members' metadata (``kassign.protocol.decode_subscription`` against
  ``ConsumerProtocol.deserializeSubscription``);
* **assign**: ``CooperativeStickyAssignor.assign`` on the decoded subscriptions (a fresh kassign
  assignor per call; one Java assignor, as a leader keeps it);
* **encode**: serializing every member's assignment for the SyncGroup (``encode_assignment`` against
  ``ConsumerProtocol.serializeAssignment``);
* the bytes: JoinGroup metadata per member, and the SyncGroup payload (the sum of the serialized
  assignments). Codec identity is asserted both ways: Java re-serializes kassign's serialized
  assignments to the same bytes, and kassign re-encodes Java's to Java's bytes. The two leaders'
  payloads are identical where their assignments are (the assignors are checked for validity and
  balance against Java's, not for the same answer, so a payload may differ by a topic header).

Issue 28 asks for the leaders "in the same group"; that needs a live mixed group on a broker. This
measures both leaders offline on the identical input bytes instead, which isolates the leader's own
work (no network, no broker, no other member). Java's times are from a JIT-warmed JVM
(``java/LeaderSideBench.java``: at least ``--warmup-seconds`` of warm-up per step, then ``--reps``
timed calls; its first, cold call is in the JSON); kassign's from :func:`benchmarks.impls.measure`
(one warm-up, then up to ``--reps`` timed calls, ``gc.collect()`` before each). Medians.

    python -m benchmarks.leader_side [--sizes 6,24,96,500] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kassign import Assignment, Subscription, TopicPartition
from kassign.assignors import CooperativeStickyAssignor
from kassign.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
)

__all__ = ["SIZES", "SCENARIOS", "topic_layout", "build_cases", "run_size", "markdown", "main"]

ROOT = Path(__file__).resolve().parent.parent
#: members -> partitions over all topics
SIZES: dict[int, int] = {6: 24, 24: 240, 96: 960, 500: 5000}
#: The topic layout: name and share of the partitions (a large topic, a mid-size one, two small ones).
TOPIC_SHARES: tuple[tuple[str, float], ...] = (
    ("orders", 1 / 2),
    ("payments", 1 / 4),
    ("clicks", 1 / 6),
    ("audit", 1 / 12),
)
SCENARIOS = ("fresh", "scale-out", "one gone")
#: The generation the owners were assigned in.
OWNERS_GENERATION = 3
SUBSCRIPTION_VERSION = 3  # what kafka-clients 3.9.1 sends
SEED = 28


def topic_layout(partitions: int) -> dict[str, int]:
    """Topic -> partitions: :data:`TOPIC_SHARES` of ``partitions``, rounded, the last topic taking the rest."""
    out: dict[str, int] = {}
    for name, share in TOPIC_SHARES[:-1]:
        out[name] = round(partitions * share)
    out[TOPIC_SHARES[-1][0]] = partitions - sum(out.values())
    return out


def member_ids(count: int, rng: random.Random, first: int = 1) -> list[str]:
    """Java-style member ids (``consumer-<group>-<n>-<uuid>``), from a seeded generator."""
    return [f"consumer-billing-{first + i}-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for i in range(count)]


@dataclass
class Case:
    """One rebalance as its leader sees it: every member's JoinGroup metadata, in the order received."""

    size: int
    scenario: str
    topics: dict[str, int]
    metadata: dict[str, bytes]
    kassign: dict[str, Any] = field(default_factory=dict)
    java: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.size}-{self.scenario.replace(' ', '-')}"


def _metadata(topics: Sequence[str], owned: list[TopicPartition] | None) -> bytes:
    generation = -1 if owned is None else OWNERS_GENERATION
    sub = Subscription(
        list(topics), encode_cooperative_user_data(generation), list(owned or []), None if owned is None else generation
    )
    return encode_subscription(sub, SUBSCRIPTION_VERSION)


def build_cases(size: int, seed: int = SEED) -> list[Case]:
    """The three rebalances of a group of ``size`` members (deterministic for a seed)."""
    rng = random.Random(seed * 1000 + size)
    topics = topic_layout(SIZES[size])
    names = sorted(topics)
    members = member_ids(size, rng)
    fresh = Case(size, "fresh", topics, {m: _metadata(names, None) for m in members})
    # The owners' state: kassign's fresh answer (an assignment the group would really hold).
    prior = CooperativeStickyAssignor().assign(topics, {m: decode_subscription(b) for m, b in fresh.metadata.items()})
    joiners = member_ids(math.ceil(size / 4), rng, first=size + 1)
    scale_out = Case(
        size,
        "scale-out",
        topics,
        {**{m: _metadata(names, prior[m]) for m in members}, **{m: _metadata(names, None) for m in joiners}},
    )
    gone = members[size // 2]
    one_gone = Case(size, "one gone", topics, {m: _metadata(names, prior[m]) for m in members if m != gone})
    return [fresh, scale_out, one_gone]


def _decode_all(metadata: dict[str, bytes]) -> dict[str, Subscription]:
    return {m: decode_subscription(b) for m, b in metadata.items()}


def _encode_all(assignment: dict[str, list[TopicPartition]]) -> dict[str, bytes]:
    return {m: encode_assignment(Assignment(tps)) for m, tps in assignment.items()}


def time_kassign(case: Case, reps: int, limit: float) -> None:
    """kassign's three steps on ``case`` (fills ``case.kassign``)."""
    from benchmarks.impls import measure

    decode, subs = measure(lambda: _decode_all(case.metadata), limit, reps)
    assign, result = measure(lambda: CooperativeStickyAssignor().assign(case.topics, subs), limit, reps)
    encode, encoded = measure(lambda: _encode_all(result), limit, reps)
    case.kassign = {
        "decodeMs": statistics.median(decode),
        "decodeSamplesMs": decode,
        "assignMs": statistics.median(assign),
        "assignSamplesMs": assign,
        "encodeMs": statistics.median(encode),
        "encodeSamplesMs": encode,
        "syncBytes": sum(map(len, encoded.values())),
        "assignments": {m: encoded[m].hex() for m in case.metadata},
        "withheld": sum(case.topics.values()) - sum(map(len, result.values())),
    }


def write_input(cases: Sequence[Case], path: Path) -> None:
    """The Java program's input (format in ``java/LeaderSideBench.java``)."""
    topics = cases[0].topics
    lines = [f"topics {len(topics)}", *(f"{t} {n}" for t, n in topics.items())]
    for case in cases:
        lines.append(f"case {case.name} {len(case.metadata)}")
        for m, b in case.metadata.items():
            lines.append(f"{m} {b.hex()} {case.kassign.get('assignments', {}).get(m, '-')}")
    path.write_text("\n".join(lines) + "\n")


def run_java(cases: Sequence[Case], work: Path, reps: int, warmup_seconds: float) -> None:
    """Java's three steps on the same bytes (fills each case's ``java``)."""
    from kassign._java import compile_java, java_command

    classes = compile_java(ROOT / "java" / "LeaderSideBench.java")
    path = work / f"leader-side-{cases[0].size}.txt"
    write_input(cases, path)
    cmd = java_command(
        classes, "LeaderSideBench", str(path), "--warmup-seconds", str(warmup_seconds), "--reps", str(reps)
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    rows = {r["case"]: r for r in (json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{"))}
    if proc.returncode != 0 or len(rows) != len(cases):
        raise RuntimeError(f"LeaderSideBench exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    for case in cases:
        case.java = rows[case.name]


def check_bytes(case: Case) -> dict[str, Any]:
    """Codec identity both ways, and whether the two leaders' SyncGroup payloads are the same bytes.

    Raises AssertionError when a codec is not Java-exact."""
    java = case.java
    assert java["subscriptionMismatches"] == 0, f"{case.name}: Java re-serializes kassign's metadata differently"
    assert not java["kassignAssignmentMismatches"], (
        f"{case.name}: Java re-serializes kassign's assignments differently: {java['kassignAssignmentMismatches'][:3]}"
    )
    for member, hexed in java["assignments"].items():
        raw = bytes.fromhex(hexed)
        assert encode_assignment(decode_assignment(raw)) == raw, f"{case.name}: kassign re-encodes {member} differently"
    ours = case.kassign["assignments"]
    same_payload = all(ours[m] == java["assignments"][m] for m in case.metadata)
    same_assignment = all(
        sorted(decode_assignment(bytes.fromhex(ours[m])).partitions)
        == sorted(decode_assignment(bytes.fromhex(java["assignments"][m])).partitions)
        for m in case.metadata
    )
    return {"codecsJavaExact": True, "samePayload": same_payload, "sameAssignment": same_assignment}


def run_size(size: int, work: Path, reps: int, warmup_seconds: float, limit: float) -> list[Case]:
    """Build, time (kassign, then Java) and check the three rebalances of one group size."""
    cases = build_cases(size)
    for case in cases:
        print(f"  {case.name}: kassign ...", file=sys.stderr, flush=True)
        time_kassign(case, reps, limit)
    print(f"  {size} members: Java ...", file=sys.stderr, flush=True)
    run_java(cases, work, reps, warmup_seconds)
    for case in cases:
        case.kassign["checks"] = check_bytes(case)
    return cases


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "–"


def markdown(cases: Sequence[Case]) -> str:
    """The two tables: leader time per step (ms, medians, kassign/Java), and the bytes."""
    out = [
        "Leader time, ms (median; kassign / Java ratio):",
        "",
        "| members | partitions | rebalance | in JoinGroup | decode kassign | decode Java | ratio "
        "| assign kassign | assign Java | ratio | encode kassign | encode Java | ratio "
        "| leader total kassign | Java | ratio |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        k, j = c.kassign, c.java
        tk = k["decodeMs"] + k["assignMs"] + k["encodeMs"]
        tj = j["decodeMs"] + j["assignMs"] + j["encodeMs"]
        out.append(
            f"| {c.size} | {sum(c.topics.values())} | {c.scenario} | {len(c.metadata)} "
            f"| {k['decodeMs']:.3f} | {j['decodeMs']:.3f} | {_ratio(k['decodeMs'], j['decodeMs'])} "
            f"| {k['assignMs']:.2f} | {j['assignMs']:.2f} | {_ratio(k['assignMs'], j['assignMs'])} "
            f"| {k['encodeMs']:.3f} | {j['encodeMs']:.3f} | {_ratio(k['encodeMs'], j['encodeMs'])} "
            f"| {tk:.2f} | {tj:.2f} | {_ratio(tk, tj)} |"
        )
    out += [
        "",
        "Bytes (JoinGroup metadata per member: median / max; SyncGroup payload: the sum of serialized assignments):",
        "",
        "| members | rebalance | JoinGroup metadata per member | all members' metadata "
        "| SyncGroup kassign | SyncGroup Java | codecs Java-exact | same payload | withheld (kassign) |",
        "|---:|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for c in cases:
        sizes = sorted(map(len, c.metadata.values()))
        checks = c.kassign["checks"]
        out.append(
            f"| {c.size} | {c.scenario} | {statistics.median(sizes):.0f} / {sizes[-1]} | {sum(sizes):,} "
            f"| {c.kassign['syncBytes']:,} | {c.java['syncBytes']:,} "
            f"| {'yes' if checks['codecsJavaExact'] else 'NO'} "
            f"| {'yes' if checks['samePayload'] else ('same partitions' if checks['sameAssignment'] else 'no')} "
            f"| {c.kassign['withheld']} |"
        )
    return "\n".join(out)


def _layouts(sizes: Sequence[int]) -> str:
    return "; ".join(f"{s} members: " + ", ".join(f"{t} {n}" for t, n in topic_layout(SIZES[s]).items()) for s in sizes)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; prints the markdown tables, optionally writes every number as JSON."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.leader_side", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="6,24,96", help=f"group sizes, from {sorted(SIZES)} (default 6,24,96)")
    ap.add_argument("--reps", type=int, default=9, help="timed calls per step (default 9)")
    ap.add_argument("--warmup-seconds", type=float, default=1.0, help="Java's warm-up per step (default 1)")
    ap.add_argument("--timebox", type=float, default=120.0, help="kassign's longest single call, s (default 120)")
    ap.add_argument("--json", type=Path, help="write every number (and both leaders' payloads) here")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes takes comma-separated integers, got {args.sizes!r}")
    unknown = sorted(set(sizes) - set(SIZES))
    if unknown or not sizes:
        ap.error(f"unknown size(s) {unknown}; known: {sorted(SIZES)}")
    started = time.perf_counter()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="leader-side-") as tmp:
        for size in sizes:
            print(f"{size} members over {SIZES[size]} partitions ...", file=sys.stderr, flush=True)
            cases += run_size(size, Path(tmp), args.reps, args.warmup_seconds, args.timebox)
    print(f"Topics (every member subscribed to all): {_layouts(sizes)}.\n")
    print(markdown(cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "command": "python -m benchmarks.leader_side " + " ".join(sys.argv[1:] if argv is None else argv),
                    "kafka_clients": "3.9.1",
                    "seconds": round(time.perf_counter() - started, 1),
                    "layouts": {str(s): topic_layout(SIZES[s]) for s in sizes},
                    "cases": [
                        {
                            "members": c.size,
                            "partitions": sum(c.topics.values()),
                            "rebalance": c.scenario,
                            "in_join_group": len(c.metadata),
                            "metadata_bytes": sorted(map(len, c.metadata.values())),
                            "kassign": c.kassign,
                            "java": c.java,
                        }
                        for c in cases
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
