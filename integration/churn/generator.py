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

Fault profiles (issue 16; run on a 3-broker cluster, :mod:`integration.churn.faults`) add steps:
``failover``  a rebalance is started (``start`` joins, or ``member`` leaves) and, as soon as the
              broker reports the group rebalancing, the node coordinating it is SIGKILLed; it stays
              down until the group is stable on a new coordinator (plus ``fault_s``), then restarts;
``zombie``    ``member`` (a kassign aiokafka member) is frozen with SIGSTOP for the session timeout
              plus ``fault_s``, then resumed with SIGCONT: the broker has expired it meanwhile.
and may make one aiokafka member a *slow revoker* (``MemberSpec.slow_revoke``): its
``on_partitions_revoked`` takes longer than the group's rebalance timeout, so a rebalance in which
it gives partitions up goes on without it. :func:`fault_sequence` gives one short canonical
sequence per fault kind.

Replay one sequence: ``python -m benchmarks.churn_soak --seed N [--profile small]``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "ACTIONS",
    "FAULT_ACTIONS",
    "FAULT_KINDS",
    "SUBSCRIPTIONS",
    "ChurnProfile",
    "PROFILES",
    "MemberSpec",
    "ChurnStep",
    "ChurnSequence",
    "generate_sequence",
    "fault_sequence",
]

ACTIONS = ("join", "leave", "crash", "restart_same", "restart_new", "resubscribe")
#: Fault steps (fault profiles only).
FAULT_ACTIONS = ("failover", "zombie")
#: The fault kinds: the two fault steps and the slow revoker (a member property).
FAULT_KINDS = ("failover", "zombie", "slow_revoke")

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
    #: probability that a step is a fault step (``FAULT_ACTIONS``); fault profiles need a 3-broker cluster
    fault_probability: float = 0.0
    #: probability that a sequence makes one aiokafka member a slow revoker
    slow_revoker_probability: float = 0.0
    #: the members' max.poll.interval.ms, which is also the Java and librdkafka members' rebalance
    #: timeout: a fault profile lowers it so a slow revoker can outlast it in a mixed group too
    max_poll_ms: int = 30000

    @property
    def faulty(self) -> bool:
        """Whether sequences of this profile inject faults (and so need a replicated 3-broker cluster)."""
        return self.fault_probability > 0 or self.slow_revoker_probability > 0

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
    "small": ChurnProfile(
        min_members=2,
        max_members=3,
        min_steps=3,
        max_steps=5,
        partitions_a=4,
        partitions_b=2,
        confluent_probability=0.0,
        java_probability=0.0,
        settle_probability=0.7,
        rate=50.0,
    ),
    # the slow soak: groups of 2-8, sometimes with a librdkafka and a Java member
    "soak": ChurnProfile(),
    # the fault soak (issue 16): the soak's churn with coordinator failovers, zombies and slow revokers,
    # in groups of 2-6 (a 2-core machine also runs the three brokers)
    "faults": ChurnProfile(
        min_members=2,
        max_members=6,
        min_steps=4,
        max_steps=8,
        partitions_a=6,
        partitions_b=3,
        settle_probability=0.7,
        rate=60.0,
        fault_probability=0.35,
        slow_revoker_probability=1.0,
        max_poll_ms=6000,
    ),
}


@dataclass(frozen=True)
class MemberSpec:
    """One member process to start: its name (timeline id and client id), client kind and subscription."""

    name: str
    kind: str = "aiokafka"
    subscription: str = "a"
    #: its on_partitions_revoked outlasts the group's rebalance timeout (aiokafka members only)
    slow_revoke: bool = False

    def __post_init__(self) -> None:
        if self.slow_revoke and self.kind != "aiokafka":
            raise ValueError(f"{self.name}: only aiokafka members can be slow revokers, not {self.kind}")

    def __str__(self) -> str:
        slow = ",slow-revoke" if self.slow_revoke else ""
        return f"{self.name}({self.kind},{'+'.join(SUBSCRIPTIONS[self.subscription])}{slow})"


@dataclass(frozen=True)
class ChurnStep:
    """One churn step: ``action`` on ``member``; ``start`` is the process it starts (join, restarts,
    resubscribe, a failover's joining trigger); then wait for the settle (``settle``) or let ``gap``
    seconds pass. Fault steps: ``fault_s`` is the extra seconds the node stays down (``failover``) or
    the member stays frozen beyond its session timeout (``zombie``)."""

    action: str
    member: str
    start: MemberSpec | None = None
    settle: bool = True
    gap: float = 0.0
    fault_s: float = 0.0

    def __str__(self) -> str:
        if self.action == "failover":
            trigger = f"join {self.start}" if self.start is not None else f"leave {self.member}"
            what = (
                f"failover: {trigger}, kill the coordinator during that rebalance, "
                f"restart it {self.fault_s:.1f}s after the group is stable again"
            )
        elif self.action == "zombie":
            what = f"zombie {self.member}: SIGSTOP for the session timeout + {self.fault_s:.1f}s, SIGCONT"
        else:
            what = {
                "join": f"join {self.start}",
                "leave": f"leave {self.member}",
                "crash": f"crash {self.member}",
                "restart_same": f"restart_same {self.member} -> {self.start}",
                "restart_new": f"restart_new {self.member} -> {self.start}",
                "resubscribe": f"resubscribe {self.member} -> {self.start}",
            }[self.action]
        return f"{what}; " + ("settle" if self.settle else f"gap {self.gap:.2f}s")


@dataclass(frozen=True)
class ChurnSequence:
    """A seeded churn sequence: the initial members and the steps, replayable from ``seed`` and ``profile``."""

    seed: int
    profile_name: str
    profile: ChurnProfile
    initial: tuple[MemberSpec, ...]
    steps: tuple[ChurnStep, ...]

    def fault_kinds(self) -> set[str]:
        """The fault kinds (``FAULT_KINDS``) this sequence injects."""
        kinds = {step.action for step in self.steps if step.action in FAULT_ACTIONS}
        members = [*self.initial, *(step.start for step in self.steps if step.start is not None)]
        if any(m.slow_revoke for m in members):
            kinds.add("slow_revoke")
        return kinds

    def describe(self) -> str:
        lines = [
            f"churn sequence seed={self.seed} profile={self.profile_name} "
            f"(partitions a={self.profile.partitions_a} b={self.profile.partitions_b})",
            "  start " + " ".join(map(str, self.initial)),
        ]
        lines += [f"  {i}. {step}" for i, step in enumerate(self.steps, 1)]
        if self.profile_name.startswith("fault:"):
            replay = f"fault_sequence({self.profile_name[6:]!r}, {self.seed}) in integration.churn.generator"
        else:
            replay = f"python -m benchmarks.churn_soak --seed {self.seed} --profile {self.profile_name}"
        lines.append(f"  replay: {replay}")
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
    # a slow revoker, when drawn, is the first aiokafka member after the first (which stays plain)
    slow_at = next((i for i, kind in enumerate(kinds) if i > 0 and kind == "aiokafka"), None)
    slow = slow_at if shape.slow_revoker_probability > 0 and rng.random() < shape.slow_revoker_probability else None
    initial = tuple(MemberSpec(new_name(), kind, subscription(), slow_revoke=i == slow) for i, kind in enumerate(kinds))
    live: dict[str, MemberSpec] = {m.name: m for m in initial}

    steps = []
    for _ in range(rng.randint(shape.min_steps, shape.max_steps)):
        if shape.fault_probability > 0 and rng.random() < shape.fault_probability:
            steps.append(_fault_step(rng, live, shape, new_name, subscription))
            continue
        allowed = [
            a
            for a in ACTIONS
            if not (a == "join" and len(live) >= shape.max_members)
            and not (a in ("leave", "crash") and len(live) <= shape.min_members)
        ]
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
            # a new pod of the same application: a slow revoker stays one
            start = MemberSpec(new_name(), target.kind, target.subscription, target.slow_revoke)
            del live[target.name]
            live[start.name] = start
        else:  # resubscribe
            start = MemberSpec(
                target.name, target.kind, "a" if target.subscription == "ab" else "ab", target.slow_revoke
            )
            live[target.name] = start
        steps.append(ChurnStep(action, target.name, start, settle, gap))
    return ChurnSequence(seed, profile_name, shape, initial, tuple(steps))


def _fault_step(
    rng: random.Random, live: dict[str, MemberSpec], shape: ChurnProfile, new_name, subscription
) -> ChurnStep:
    """A fault step on the group ``live`` (updated in place when the failover's trigger changes it)."""
    settle = rng.random() < shape.settle_probability
    gap = 0.0 if settle else round(rng.uniform(0.2, 1.5), 2)
    # zombies are plain kassign members: the member harness reports their late commit
    frozen = sorted(name for name, m in live.items() if m.kind == "aiokafka" and not m.slow_revoke)
    if frozen and rng.random() < 0.5:
        return ChurnStep("zombie", rng.choice(frozen), settle=settle, gap=gap, fault_s=round(rng.uniform(1.0, 3.0), 2))
    down = round(rng.uniform(0.5, 3.0), 2)
    if len(live) < shape.max_members and (len(live) <= shape.min_members or rng.random() < 0.5):
        spec = MemberSpec(new_name(), "aiokafka", subscription())
        live[spec.name] = spec
        return ChurnStep("failover", spec.name, spec, settle, gap, fault_s=down)
    leaving = rng.choice(sorted(live))
    del live[leaving]
    return ChurnStep("failover", leaving, None, settle, gap, fault_s=down)


#: The regular suite's fault sequences: small groups, one fault kind each.
_FAULT_SHAPE = ChurnProfile(
    min_members=2,
    max_members=3,
    min_steps=1,
    max_steps=2,
    partitions_a=4,
    partitions_b=2,
    confluent_probability=0.0,
    java_probability=0.0,
    settle_probability=1.0,
    rate=50.0,
    fault_probability=1.0,
    slow_revoker_probability=1.0,
    max_poll_ms=6000,
)


def fault_sequence(kind: str, seed: int = 0) -> ChurnSequence:
    """A short sequence that always exercises fault ``kind`` (one of ``FAULT_KINDS``), its timings
    drawn from ``seed``:

    ``failover``     m1, m2; m3 joins and the coordinator is killed during that rebalance;
    ``zombie``       m1, m2; m1 is frozen past its session timeout, then resumed;
    ``slow_revoke``  m1 (slow revoker), m2; m2 leaves, so m1 owns everything, then m3 joins and m1
                     must give partitions up: its revocation outlasts the rebalance timeout.
    """
    rng = random.Random(f"{kind}:{seed}")
    if kind == "failover":
        initial = (MemberSpec("m1"), MemberSpec("m2", subscription="ab"))
        steps = (ChurnStep("failover", "m3", MemberSpec("m3"), fault_s=round(rng.uniform(0.5, 2.0), 2)),)
    elif kind == "zombie":
        initial = (MemberSpec("m1"), MemberSpec("m2", subscription="ab"))
        steps = (ChurnStep("zombie", "m1", fault_s=round(rng.uniform(1.0, 2.5), 2)),)
    elif kind == "slow_revoke":
        initial = (MemberSpec("m1", slow_revoke=True), MemberSpec("m2"))
        steps = (ChurnStep("leave", "m2"), ChurnStep("join", "m3", MemberSpec("m3", subscription="ab")))
    else:
        raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")
    return ChurnSequence(seed, f"fault:{kind}", _FAULT_SHAPE, initial, steps)
