"""Scenarios: the membership and metadata changes a simulated group goes through.

A :class:`Scenario` is an initial group (members, topics) plus a sequence of steps; each step
fires ``after_s`` seconds after the previous one (the first after the group's start), optionally
aligned to a ``phase`` of the heartbeat interval (0..1), because when a trigger lands relative to
the members' heartbeats decides how fast they notice it. Scenarios compose with
:meth:`Scenario.then`; :func:`make_scenario` builds the named ones a sweep grid uses and
:func:`random_scenario` draws reproducible mixtures from a seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "ScaleOut",
    "ScaleIn",
    "RollingRestart",
    "Crash",
    "Flap",
    "SubscriptionChange",
    "PartitionIncrease",
    "Step",
    "Scenario",
    "SCENARIO_KINDS",
    "make_scenario",
    "random_scenario",
]


@dataclass(frozen=True)
class ScaleOut:
    """``count`` new members start; in a static group the first of them take ``instance_ids`` as their
    ``group.instance.id`` (replacements of closed static members), the others their own names."""

    count: int = 1
    after_s: float = 10.0
    phase: float | None = None
    instance_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScaleIn:
    """The ``count`` newest live members close (revoke, LeaveGroup; static members skip the leave)."""

    count: int = 1
    after_s: float = 10.0
    phase: float | None = None


@dataclass(frozen=True)
class RollingRestart:
    """Every live member in turn closes and starts again ``down_s`` later; the next member goes
    ``interval_s`` after the previous one is back. ``leader_last`` restarts the group leader last,
    as deploy tooling does for Connect-style delayed reassignment (a departing leader starts no delay).
    ``count`` restarts only the first ``count`` live members (a sample of a large group; None: all)."""

    down_s: float = 1.0
    interval_s: float = 5.0
    after_s: float = 10.0
    phase: float | None = None
    leader_last: bool = False
    count: int | None = None


@dataclass(frozen=True)
class Crash:
    """A member dies without a word (no callbacks, no LeaveGroup); ``member`` None: the newest."""

    member: str | None = None
    after_s: float = 10.0
    phase: float | None = None


@dataclass(frozen=True)
class Flap:
    """A member crashes and restarts ``times`` times, ``down_s`` down and ``up_s`` up each time."""

    member: str | None = None
    times: int = 3
    down_s: float = 2.0
    up_s: float = 5.0
    after_s: float = 10.0
    phase: float | None = None


@dataclass(frozen=True)
class SubscriptionChange:
    """Every live member switches to ``topics`` (new topics must be in the scenario's table)."""

    topics: tuple[str, ...] = ()
    after_s: float = 10.0
    phase: float | None = None


@dataclass(frozen=True)
class PartitionIncrease:
    """``topic`` grows to ``partitions``; the leader notices at its next metadata refresh."""

    topic: str = "topic"
    partitions: int = 1
    after_s: float = 10.0
    phase: float | None = None


Step = ScaleOut | ScaleIn | RollingRestart | Crash | Flap | SubscriptionChange | PartitionIncrease

STEP_KINDS: dict[str, type] = {
    "scale_out": ScaleOut,
    "scale_in": ScaleIn,
    "rolling_restart": RollingRestart,
    "crash": Crash,
    "flap": Flap,
    "subscription_change": SubscriptionChange,
    "partition_increase": PartitionIncrease,
}


def step_kind(step: Step) -> str:
    """The snake_case name of a step's kind (``scale_out``...)."""
    for name, cls in STEP_KINDS.items():
        if isinstance(step, cls):
            return name
    raise TypeError(f"not a scenario step: {step!r}")


@dataclass(frozen=True)
class Scenario:
    """An initial group and what happens to it.

    ``topics`` maps topic -> partition count at the start; ``subscribed`` lists the topics the
    members subscribe to (default: all of them). ``seed`` drives latency jitter.
    """

    members: int
    topics: Mapping[str, int]
    steps: tuple[Step, ...] = ()
    subscribed: tuple[str, ...] | None = None
    seed: int = 0
    name: str = ""
    extra_topics: Mapping[str, int] = field(default_factory=dict)  # created later / subscribed later

    def __post_init__(self) -> None:
        if self.members < 0:
            raise ValueError(f"members must be >= 0, got {self.members}")
        if not self.topics:
            raise ValueError("a scenario needs at least one topic")
        for topic, count in {**self.topics, **self.extra_topics}.items():
            if count < 0:
                raise ValueError(f"topic {topic!r} has a negative partition count {count}")
        for step in self.steps:
            step_kind(step)
            if step.after_s < 0:
                raise ValueError(f"step {step!r} fires before the previous one (after_s < 0)")
            if step.phase is not None and not 0.0 <= step.phase < 1.0:
                raise ValueError(f"step {step!r}: phase must be in [0, 1)")

    def then(self, *steps: Step) -> Scenario:
        """This scenario followed by ``steps``."""
        return replace(self, steps=self.steps + tuple(steps))

    def to_dict(self) -> dict[str, Any]:
        """A plain mapping (for Parquet rows and JSON)."""
        return {
            "members": self.members,
            "topics": dict(self.topics),
            "subscribed": None if self.subscribed is None else list(self.subscribed),
            "seed": self.seed,
            "name": self.name,
            "extra_topics": dict(self.extra_topics),
            "steps": [{"kind": step_kind(s), **{k: getattr(s, k) for k in s.__dataclass_fields__}} for s in self.steps],
        }


#: Scenario kinds a sweep grid can name.
SCENARIO_KINDS = (
    "scale_out",
    "scale_in",
    "scale_out_in",
    "rolling_restart",
    "crash",
    "flap",
    "subscription_change",
    "partition_increase",
    "random",
)


def make_scenario(
    kind: str,
    members: int,
    partitions: int,
    *,
    seed: int = 0,
    topic: str = "topic",
    change_fraction: float = 0.5,
    restart_count: int | None = None,
) -> Scenario:
    """A named scenario on a one-topic group of ``members`` members and ``partitions`` partitions.

    The trigger's heartbeat phase is drawn from ``seed`` so that repetitions sample it. A scale-out
    adds, a scale-in closes ``change_fraction`` of the members (rounded down, at least one); a rolling
    restart restarts the first ``restart_count`` members (None: all).
    """
    if not 0 < change_fraction <= 1:
        raise ValueError(f"change_fraction must be in (0, 1], got {change_fraction!r}")
    if restart_count is not None and restart_count < 1:
        raise ValueError(f"restart_count must be >= 1 or None, got {restart_count!r}")
    rng = random.Random(seed)
    phase = rng.random()
    grow = max(1, int(members * change_fraction))
    base = Scenario(members=members, topics={topic: partitions}, seed=seed, name=kind)
    if kind == "scale_out":
        return base.then(ScaleOut(grow, phase=phase))
    if kind == "scale_in":
        return base.then(ScaleIn(min(grow, max(members - 1, 0)), phase=phase))
    if kind == "scale_out_in":  # the recorded groups' shape: grow, settle, shrink back
        return base.then(ScaleOut(members, phase=phase), ScaleIn(members, after_s=12.0, phase=rng.random()))
    if kind == "rolling_restart":
        return base.then(RollingRestart(phase=phase, count=restart_count))
    if kind == "crash":
        return base.then(Crash(phase=phase))
    if kind == "flap":
        return base.then(Flap(phase=phase))
    if kind == "subscription_change":
        extra = f"{topic}-b"
        return replace(base, extra_topics={extra: partitions}).then(SubscriptionChange((topic, extra), phase=phase))
    if kind == "partition_increase":
        return base.then(PartitionIncrease(topic, partitions * 2, phase=phase))
    if kind == "random":
        return random_scenario(seed, members=members, partitions=partitions, topic=topic)
    raise ValueError(f"unknown scenario kind {kind!r}; expected one of {SCENARIO_KINDS}")


def random_scenario(
    seed: int, *, members: int = 3, partitions: int = 12, steps: int = 4, topic: str = "topic"
) -> Scenario:
    """A reproducible random sequence of scale-outs, scale-ins, crashes, restarts and growth."""
    rng = random.Random(seed)
    live = members
    chosen: list[Step] = []
    size = partitions
    for _ in range(steps):
        after, phase = rng.uniform(5.0, 60.0), rng.random()
        roll = rng.random()
        if live <= 1 or roll < 0.35:
            n = rng.randint(1, max(1, members))
            chosen.append(ScaleOut(n, after_s=after, phase=phase))
            live += n
        elif roll < 0.6:
            n = rng.randint(1, live - 1)
            chosen.append(ScaleIn(n, after_s=after, phase=phase))
            live -= n
        elif roll < 0.75:
            chosen.append(Crash(after_s=after, phase=phase))
            live -= 1
        elif roll < 0.9:
            chosen.append(
                RollingRestart(
                    down_s=rng.uniform(0.1, 3.0), interval_s=rng.uniform(1.0, 10.0), after_s=after, phase=phase
                )
            )
        else:
            size += rng.randint(1, partitions)
            chosen.append(PartitionIncrease(topic, size, after_s=after, phase=phase))
    return Scenario(members=members, topics={topic: partitions}, steps=tuple(chosen), seed=seed, name="random")
