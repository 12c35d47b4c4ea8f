"""The benchmark's group shapes, and the case-file format every implementation reads.

A case file (the format the kafka4-uniform timing tool also reads, so Kafka 4's UniformAssignor, Java's
StickyAssignor and kassign run identical inputs), whitespace separated::

    topics T            then T lines  "name partitions"
    members M           then M lines  "memberId k topic_1 ... topic_k"
    leaver ID           removed in the leave step
    joiner ID           added in the join step, subscribing like the first member

Shapes (consumers x partitions; topics of 100 partitions, at most 500 topics): S1 10 x 1k, S2 100 x 10k,
S20K 1,000 x 20k, S3 1,000 x 100k, S4 2,000 x 1M (500 topics x 2,000); each also as ``<name>_last1`` with
the last consumer subscribed to ``topic-0`` only (Kafka's general, unequal-subscription path). NU2: 500
consumers, 100 topics x 100, each consumer on each topic with probability 1/4. The member ids and seeds
are the kafka4-uniform tool's (``gen_cases.py``), so S2, S3, S4 and NU2 files are byte-identical to its output.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Case", "STEPS", "CASE_NAMES", "QUICK_CASES", "build_case", "write_case", "read_case", "ensure_case_files"]

STEPS = ("fresh", "leave", "join")


@dataclass(frozen=True)
class Case:
    """One group shape: topic sizes, member subscriptions (file order), the leave step's leaver and the join
    step's joiner."""

    name: str
    topics: dict[str, int]
    members: dict[str, list[str]]
    leaver: str
    joiner: str

    @property
    def n_partitions(self) -> int:
        return sum(self.topics.values())

    @property
    def shape(self) -> str:
        """Human label, e.g. ``2,000 x 1,000,000 (last on 1 topic)``."""
        label = f"{len(self.members):,} x {self.n_partitions:,}"
        return label + " (last on 1 topic)" if self.name.endswith("_last1") else label

    def step_members(self, step: str) -> dict[str, list[str]]:
        """The group's subscriptions in ``step``: fresh as written, leave without the leaver, join plus the joiner."""
        if step == "fresh":
            return dict(self.members)
        if step == "leave":
            return {m: ts for m, ts in self.members.items() if m != self.leaver}
        if step == "join":
            return {**self.members, self.joiner: list(next(iter(self.members.values())))}
        raise ValueError(f"unknown step {step!r}; expected one of {STEPS}")


def _member_ids(n: int, rng: random.Random) -> list[str]:
    return [f"consumer-{i}-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for i in range(n)]


def _uniform(n_consumers: int, n_partitions: int) -> tuple[dict[str, int], dict[str, list[str]]]:
    rng = random.Random(1)
    n_topics = min(500, max(1, n_partitions // 100))
    topics = {f"topic-{i}": n_partitions // n_topics for i in range(n_topics)}
    return topics, {m: list(topics) for m in _member_ids(n_consumers, rng)}


def _random_quarter(n_consumers: int, n_topics: int, per_topic: int) -> tuple[dict[str, int], dict[str, list[str]]]:
    rng = random.Random(2)
    names = [f"topic-{i}" for i in range(n_topics)]
    subs = {m: [t for t in names if rng.random() < 0.25] or [rng.choice(names)] for m in _member_ids(n_consumers, rng)}
    covered, ids = {t for ts in subs.values() for t in ts}, list(subs)
    # Every topic gets a subscriber (same draws, in the same order, as the kafka4-uniform tool's generator).
    for t in names:
        if t not in covered:
            m = rng.choice(ids)
            subs[m] = sorted(subs[m] + [t], key=names.index)
    return {t: per_topic for t in names}, subs


_UNIFORM_SHAPES: dict[str, tuple[int, int]] = {
    "S1": (10, 1_000),
    "S2": (100, 10_000),
    "S20K": (1_000, 20_000),
    "S3": (1_000, 100_000),
    "S4": (2_000, 1_000_000),
}

CASE_NAMES: tuple[str, ...] = tuple(n for base in _UNIFORM_SHAPES for n in (base, base + "_last1")) + ("NU2",)
QUICK_CASES: tuple[str, ...] = ("S1", "S1_last1", "S2", "S2_last1")

_JOINER = f"consumer-new-{uuid.UUID(int=random.Random(7).getrandbits(128), version=4)}"


def build_case(name: str) -> Case:
    """The case called ``name`` (one of :data:`CASE_NAMES`)."""
    base, last1 = (name[: -len("_last1")], True) if name.endswith("_last1") else (name, False)
    shape: Callable[[], tuple[dict[str, int], dict[str, list[str]]]]
    if base in _UNIFORM_SHAPES:
        shape = lambda: _uniform(*_UNIFORM_SHAPES[base])  # noqa: E731
    elif name == "NU2":
        shape = lambda: _random_quarter(500, 100, 100)  # noqa: E731
    else:
        raise ValueError(f"unknown case {name!r}; known: {', '.join(CASE_NAMES)}")
    topics, members = shape()
    ids = list(members)
    if last1:
        members[ids[-1]] = [next(iter(topics))]
    return Case(name, topics, members, leaver=ids[len(ids) // 2], joiner=_JOINER)


def write_case(case: Case, path: str | Path) -> None:
    """Write ``case`` in the case-file format."""
    lines = [f"topics {len(case.topics)}"] + [f"{t} {n}" for t, n in case.topics.items()]
    lines += [f"members {len(case.members)}"] + [f"{m} {len(ts)} {' '.join(ts)}" for m, ts in case.members.items()]
    lines += [f"leaver {case.leaver}", f"joiner {case.joiner}"]
    Path(path).write_text("\n".join(lines) + "\n")


def read_case(path: str | Path) -> Case:
    """Read a case file; the case is named after the file's stem."""
    path = Path(path)
    lines = iter(path.read_text().split("\n"))

    def header(expected: str) -> int:
        word, count = next(lines).split()
        if word != expected:
            raise ValueError(f"{path}: expected a {expected!r} line, got {word!r}")
        return int(count)

    topics = {}
    for _ in range(header("topics")):
        t, n = next(lines).split()
        topics[t] = int(n)
    members = {}
    for _ in range(header("members")):
        fields = next(lines).split()
        members[fields[0]] = fields[2 : 2 + int(fields[1])]
    extra = dict(line.split() for line in lines if line.strip())
    missing = {"leaver", "joiner"} - extra.keys()
    if missing:
        raise ValueError(f"{path}: missing {sorted(missing)} line(s)")
    return Case(path.stem, topics, members, leaver=extra["leaver"], joiner=extra["joiner"])


def ensure_case_files(names: list[str], case_dir: str | Path) -> dict[str, Case]:
    """Write (if absent) and read back the named cases' files in ``case_dir``; returns name -> Case."""
    case_dir = Path(case_dir)
    case_dir.mkdir(parents=True, exist_ok=True)
    cases = {}
    for name in names:
        path = case_dir / f"{name}.txt"
        if not path.exists():
            write_case(build_case(name), path)
        cases[name] = read_case(path)
    return cases
