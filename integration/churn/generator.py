"""The seeded generator of churn sequences (issue 9): a seed and a profile give the members a
sequence starts and the steps it applies, always the same for the same seed.

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

After each step the runner (:mod:`integration.churn.runner`) either waits for the group to settle or
lets the step's short seeded ``gap`` pass so the next step lands inside the running rebalance.

Replay one sequence: ``python -m benchmarks.churn_soak --seed N [--profile small]``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["ACTIONS", "SUBSCRIPTIONS", "ChurnProfile", "PROFILES", "MemberSpec", "ChurnStep", "ChurnSequence",
           "generate_sequence"]

ACTIONS = ("join", "leave", "crash", "restart_same", "restart_new", "resubscribe")

#: Subscription name -> topic roles. Every member reads ``a``; some also read ``b``.
SUBSCRIPTIONS: dict[str, tuple[str, ...]] = {"a": ("a",), "ab": ("a", "b")}


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

