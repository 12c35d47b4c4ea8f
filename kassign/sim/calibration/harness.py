"""``benchmarks/rebalance.py``'s harness in the simulator: a group driven the way the benchmark drove
the real ones recorded in ``data/rebalance-bench-kafka44``.

The harness settles a group, waits, and fires each trigger a set *phase* of a heartbeat interval
after the group's last assign callback (the members' heartbeat timers restart with their SyncGroup,
so this is when the trigger lands relative to their heartbeats). Then: a scale-out starts new member
processes; a scale-in tells the newest members to stop (each closes once its batch in hand is done);
a crash kills the newest member; a rolling restart stops each member in turn, releases its
replacement (already started and ready) once the old consumer has closed, waits for the group to
settle and fires the next restart. :class:`HarnessInputs` holds what of this depends on the
machine the recording ran on (how long new processes took to subscribe, how long the harness took
to release a replacement and to move on after a settle); :func:`harness_inputs` reads it from a
recording, and :class:`BenchSimulation` replays it.

``benchmarks/group_size.py``'s recordings say more in their meta.json: the group's full size
(``members``), how many members a scale-out adds or a scale-in removes (``change``), the partition
counts of its several topics (``topics``) and how many members a rolling restart restarts
(``restart_sample``); their newcomers were started beforehand and subscribe at the trigger. Without
those keys a recording is the original benchmark's: 3 -> 6 and 6 -> 3 members on one topic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kassign.model import TopicPartition
from kassign.sim.config import SimConfig
from kassign.sim.member import SimMember
from kassign.sim.scenarios import Scenario
from kassign.sim.simulator import Simulation
from kassign.timeline.events import OWNERSHIP_EVENTS, Event

__all__ = [
    "SCENARIOS",
    "TOPIC",
    "HarnessInputs",
    "harness_inputs",
    "bench_topics",
    "BenchSimulation",
    "BenchRunResult",
]

SCENARIOS = ("scale-out", "scale-in", "crash", "rolling-restart")
TOPIC = "topic"
#: The harness: ``wait_settled`` wants the group settled this long, the run then sleeps ``STEADY_S``
#: before its first trigger, and it polls the members' timeline every ``POLL_S``.
STABLE_S = 0.5
STEADY_S = 3.0
POLL_S = 0.1
#: The harness gives up on a group that has not settled this long after a trigger (``wait_settled(120)``).
SETTLE_TIMEOUT_S = 120.0
#: How often the simulated harness looks at the group (seconds of simulated time).
CHECK_S = 0.002


@dataclass(frozen=True)
class HarnessInputs:
    """What the harness did in one run, relative to each trigger.

    ``start_s``: the first members' ``subscribed``, slot by slot (``m1``, ``m2``...), after the first
    of them (the harness starts their processes one after another, and how the group forms decides
    who owns which partitions when the change comes); ``launch_s``: a scale-out's new members'
    ``subscribed`` after the trigger (their processes start at it, or, started and held ready
    beforehand, are released at it); ``release_s``: per restart, the
    replacement's ``subscribed`` after its predecessor's ``closed``; ``gap_s``: per restart after
    the first, from the previous restart's settle to the harness's phase wait (its ``wait_settled``,
    the next replacement's start-up until ``ready``, and its polling).

    ``members`` are those the group starts with (a scale-out's before its newcomers); ``change`` the
    members a scale-in stops (0: half of them, the original benchmark's); ``topics`` the partition
    counts of the group's topics (empty: one topic of ``partitions``); ``restart_sample`` how many
    members a rolling restart restarts (0: all).
    """

    scenario: str
    members: int
    partitions: int
    phase: float
    start_s: tuple[float, ...] = ()
    launch_s: tuple[float, ...] = ()
    release_s: tuple[float, ...] = ()
    gap_s: tuple[float, ...] = ()
    change: int = 0
    topics: tuple[int, ...] = ()
    restart_sample: int = 0

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"unknown benchmark scenario {self.scenario!r}; expected one of {SCENARIOS}")
        if not 0.0 <= self.phase < 1.0:
            raise ValueError(f"phase must be in [0, 1), got {self.phase!r}")
        if self.start_s and (len(self.start_s) != self.members or min(self.start_s) < 0):
            raise ValueError(f"start_s needs {self.members} offsets of at least 0, got {self.start_s!r}")
        if self.topics and sum(self.topics) != self.partitions:
            raise ValueError(f"topics {self.topics!r} do not add up to {self.partitions} partitions")
        if not 0 <= self.change < max(self.members, 1) or not 0 <= self.restart_sample <= self.members:
            raise ValueError(
                f"need 0 <= change < members and 0 <= restart_sample <= members, got change {self.change}, "
                f"restart_sample {self.restart_sample} of {self.members} members"
            )

    @property
    def layout(self) -> dict[str, int]:
        """The group's topics, simulator name -> partition count (:func:`bench_topics`)."""
        return topic_layout(self.topics or (self.partitions,))

    @property
    def leaving(self) -> int:
        """Members a scale-in stops."""
        return self.change or self.members // 2

    @property
    def restarts(self) -> int:
        """Members a rolling restart restarts, one after the other."""
        return self.restart_sample or self.members


def topic_layout(counts: Sequence[int]) -> dict[str, int]:
    """Simulator topic names for these partition counts: one topic is ``TOPIC`` (the original
    benchmark's); several are ``TOPIC-t0``, ``TOPIC-t1``..., named like the recorded ``<tag>-t<i>`` so that
    they sort the same way (the assignors order partitions by topic name)."""
    if len(counts) == 1:
        return {TOPIC: int(counts[0])}
    return {f"{TOPIC}-t{i}": int(count) for i, count in enumerate(counts)}


def bench_topics(meta: Mapping[str, Any]) -> dict[str, int]:
    """A recording's topics in the simulator, name -> partition count: meta.json's ``topics`` when it
    has them, else one topic of ``partitions`` (24 by default)."""
    counts = meta.get("topics") or [meta.get("partitions", 24)]
    return topic_layout([int(c) for c in counts])


def harness_inputs(meta: Mapping[str, Any], events: Sequence[Event]) -> HarnessInputs:
    """What the harness did in a recorded run (its meta.json and its events, in time order)."""
    scenario = str(meta["scenario"])
    triggers = [float(t) for t in meta["triggers"]]
    # The original benchmark's runs say none of this: 3 -> 6 and 6 -> 3 on one topic, every member restarted.
    size = int(meta.get("members", 6))
    change = int(meta.get("change", size // 2))
    members = size - change if scenario == "scale-out" else size
    topics = bench_topics(meta)
    first = {e.id: e.t for e in reversed(events) if e.ev == "subscribed" and e.t < triggers[0]}
    slots = [first.get(f"m{slot + 1}") for slot in range(members)]
    known = [t for t in slots if t is not None]
    start_s = () if len(known) < len(slots) else tuple(round(t - min(known), 6) for t in known)
    common: dict[str, Any] = {
        "scenario": scenario,
        "members": members,
        "start_s": start_s,
        "partitions": sum(topics.values()),
        "phase": float(meta["phase"]),
        "change": change if "change" in meta else 0,
        "topics": tuple(topics.values()) if "topics" in meta else (),
    }
    if scenario == "scale-out":
        subscribed = sorted(e.t - triggers[0] for e in events if e.ev == "subscribed" and e.t >= triggers[0])
        return HarnessInputs(**common, launch_s=tuple(round(s, 6) for s in subscribed))
    if scenario != "rolling-restart":
        return HarnessInputs(**common)
    common["restart_sample"] = int(meta.get("restart_sample", 0))
    bounds = [*triggers, float(meta["end"])]
    release: list[float] = []
    gaps: list[float] = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        inside = [e for e in events if lo <= e.t < hi]
        closed = next(e.t for e in inside if e.ev in ("closed", "exit"))
        rejoined = next(e.t for e in inside if e.ev == "subscribed")
        release.append(round(max(0.0, rejoined - closed), 6))
        if i + 1 < len(triggers):
            settle = max(e.t for e in inside if e.parts and e.ev in OWNERSHIP_EVENTS)
            ready = next(e.t for e in inside if e.ev == "ready")
            gaps.append(round(ready + POLL_S / 2 - settle, 6))  # it notices ``ready`` at its next poll
    return HarnessInputs(**common, release_s=tuple(release), gap_s=tuple(gaps))


@dataclass(frozen=True)
class BenchRunResult:
    """A simulated run: its timeline, when each trigger fired, and the end of the measured stretch."""

    events: list[Event]
    triggers: list[float]
    end: float


class BenchSimulation(Simulation):
    """A simulated group driven by the benchmark's harness (see the module docstring)."""

    def __init__(self, inputs: HarnessInputs, config: SimConfig, *, seed: int = 0, name: str = "") -> None:
        super().__init__(Scenario(members=inputs.members, topics=inputs.layout, seed=seed, name=name), config, None)
        self.inputs = inputs
        self.triggers: list[float] = []
        self.finished_at: float | None = None
        self.failure: str | None = None
        self._watchers: list[tuple[str, str, Callable[[], None]]] = []
        self._last_assign = 0.0  # the harness's phase reference
        self._last_change = 0.0  # the last change its settle check sees

    def emit(self, member: str, ev: str, parts: Iterable[TopicPartition] | None = None, **extra: Any) -> None:
        super().emit(member, ev, parts, **extra)
        if ev == "cb_assigned":
            self._last_assign = self.loop.now
        if (parts and ev in OWNERSHIP_EVENTS) or ev in ("closing", "crash"):
            self._last_change = self.loop.now
        for watch in [w for w in self._watchers if w[:2] == (member, ev)]:
            self._watchers.remove(watch)
            watch[2]()

    def _on(self, member: str, ev: str, then: Callable[[], None]) -> None:
        """Call ``then()`` when ``member`` emits ``ev``."""
        self._watchers.append((member, ev, then))

    # -- what the harness watches ----------------------------------------------------------------
    def settled_now(self) -> bool:
        """``wait_settled(balanced=True)``: every partition has exactly one owner among the members
        running and not told to stop, each of which owns something, and their counts within one."""
        live = [m for m in self.live() if not m._closing]
        owners: dict[TopicPartition, int] = defaultdict(int)
        for member in live:
            for tp in member.consuming:
                owners[tp] += 1
        sizes = [len(m.consuming) for m in live]
        return (
            bool(live)
            and len(owners) == self.inputs.partitions
            and set(owners.values()) == {1}
            and min(sizes) > 0
            and max(sizes) - min(sizes) <= 1
        )

    def _when_settled(self, then: Callable[[float], None]) -> None:
        """``then(settle time)`` once the group is settled (the harness's timeout: a failure)."""
        deadline = self.loop.now + SETTLE_TIMEOUT_S

        def check() -> None:
            if self.settled_now():
                then(max(self._last_change, self.triggers[-1] if self.triggers else 0.0))
            elif self.loop.now > deadline:
                self.failure = f"the group did not settle within {SETTLE_TIMEOUT_S:g} s"
                self.finished_at = self.loop.now
            else:
                self.loop.after(CHECK_S, check)

        check()

    def _after_settle(self, settle: float, wait_s: float, then: Callable[[], None]) -> None:
        """``then()`` ``wait_s`` after ``settle`` if the group stayed settled, else after the next settle."""

        def check() -> None:
            if self._last_change > settle or not self.settled_now():
                self._when_settled(lambda t: self._after_settle(t, wait_s, then))
            else:
                then()

        self.loop.at(settle + wait_s, check)

    def _phase_wait(self, then: Callable[[], None]) -> None:
        """``_wait_for_phase``: the next moment ``phase`` of a heartbeat interval after the last
        assign callback, at least one interval on from it; records the trigger and calls ``then()``."""
        hb, last, now = self.heartbeat_s, self._last_assign, self.loop.now
        periods = max(0, int((now - last) / hb) + 1)

        def fire() -> None:
            self.triggers.append(self.loop.now)
            then()

        self.loop.at(max(now, last + (periods + self.inputs.phase) * hb), fire)

    # -- the scenarios ---------------------------------------------------------------------------
    def _start(self) -> None:
        offsets = self.inputs.start_s or (0.0,) * self.inputs.members
        for slot, offset in sorted(enumerate(offsets), key=lambda so: (so[1], so[0])):
            self.loop.at(offset, self.start_member, self._slot(slot))
        action = {
            "scale-out": self._scale_out,
            "scale-in": self._scale_in,
            "crash": self._crash,
            "rolling-restart": lambda: self._restart(0),
        }[self.inputs.scenario]
        # Only the phase after the last assignment matters for the first trigger, not how long the
        # harness waited before it. It waits for all of its members, not just those in so far.
        self.loop.at(
            max(offsets) + 1e-9,
            self._when_settled,
            lambda t: self._after_settle(t, STABLE_S + STEADY_S, lambda: self._phase_wait(action)),
        )

    def _finish_when_settled(self) -> None:
        self._when_settled(self._finish)

    def _finish(self, settle: float) -> None:
        self.finished_at = settle

    @staticmethod
    def _slot(index: int) -> str:
        """The harness's name for the member started in slot ``index`` (``m1``...)."""
        return f"m{index + 1}"

    def _slots(self, indexes: range) -> list[SimMember]:
        return [self.members[self._slot(i)] for i in indexes]

    def _scale_out(self) -> None:
        for offset in self.inputs.launch_s:
            self.loop.after(offset, self.start_member)
        self.loop.after(max(self.inputs.launch_s, default=0.0), self._finish_when_settled)

    def _scale_in(self) -> None:
        self.loop.after(
            self.latency("spawn_ms"),
            self._stop,
            self._slots(range(self.inputs.members - self.inputs.leaving, self.inputs.members)),
        )

    def _stop(self, members: Sequence[SimMember]) -> None:
        for member in members:
            member.close()
        self._finish_when_settled()

    def _crash(self) -> None:
        (victim,) = self._slots(range(self.inputs.members - 1, self.inputs.members))
        victim.crash()
        self._finish_when_settled()

    def _restart(self, index: int) -> None:
        """Restart slot ``index``: stop its member; the replacement (the next ``m<n>``) subscribes
        ``release_s`` after it has closed."""
        (old,) = self._slots(range(index, index + 1))
        release = self.inputs.release_s[index] if index < len(self.inputs.release_s) else 0.0

        def replace() -> None:
            self.loop.after(release, lambda: self.start_member(instance_id=old.instance_id))
            # The replacement counts as a live member for the settle check once it is in.
            self.loop.after(release + 1e-9, self._when_settled, settled)

        def settled(t: float) -> None:
            if index + 1 >= self.inputs.restarts:
                self._finish(t)
            else:
                gap = self.inputs.gap_s[index] if index < len(self.inputs.gap_s) else STABLE_S
                self._after_settle(t, gap, lambda: self._phase_wait(lambda: self._restart(index + 1)))

        self._on(old.name, "closed", replace)
        self.loop.after(self.latency("spawn_ms"), old.close)

    def run_bench(self, horizon_s: float = 3600.0) -> BenchRunResult:
        """Run to the end of the measured stretch (the last settle plus the harness's steady wait)."""
        self._start()
        self.loop.run(horizon_s, lambda: self.finished_at is not None)
        if self.finished_at is None or self.failure is not None or not self.triggers:
            raise RuntimeError(
                f"benchmark run {self.scenario.name!r} failed in the simulator: "
                f"{self.failure or 'it never settled'} (triggers at {self.triggers})"
            )
        return BenchRunResult(self.events, self.triggers, self.finished_at + STEADY_S)
