"""Run a :class:`~kassign.sim.scenarios.Scenario` against a broker model and collect the timeline.

:func:`simulate` is the entry point: it builds the members (each with its own instance of one of
kassign's real assignors), the coordinator, plays the scenario's steps, stops once the group is
quiet again, and returns the events (the :mod:`kassign.timeline.events` schema) with the metrics of every
phase (:mod:`kassign.timeline.metrics`). Runs are deterministic: the scenario's seed drives all jitter.
"""

from __future__ import annotations

import importlib
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kassign.model import RebalanceProtocol, TopicPartition
from kassign.sim.config import SimConfig
from kassign.sim.consumer_group_coordinator import ConsumerGroupCoordinator
from kassign.sim.consumer_group_member import ConsumerGroupSimMember
from kassign.sim.contention import BROKER_PROCESSES, CpuContention
from kassign.sim.coordinator import KafkaCoordinator, TansuCoordinator
from kassign.sim.engine import EventLoop
from kassign.sim.member import SimMember
from kassign.sim.scenarios import (
    Crash,
    Flap,
    PartitionIncrease,
    RollingRestart,
    ScaleIn,
    ScaleOut,
    Scenario,
    Step,
    SubscriptionChange,
    step_kind,
)
from kassign.timeline.events import Event, write_events
from kassign.timeline.metrics import PhaseMetrics, timeline_metrics

__all__ = ["ASSIGNOR_CLASSES", "SimResult", "Simulation", "simulate", "make_assignor_factory"]

log = logging.getLogger(__name__)

#: Assignor name (the protocol name members advertise) -> (module, class) of kassign's assignor.
ASSIGNOR_CLASSES = {
    "range": ("kassign.assignors", "RangeAssignor"),
    "roundrobin": ("kassign.assignors", "RoundRobinAssignor"),
    "sticky": ("kassign.assignors", "StickyAssignor"),
    "cooperative-sticky": ("kassign.assignors", "CooperativeStickyAssignor"),
    "kassign-delayed-cooperative-sticky": ("kassign.assignors.delayed", "DelayedCooperativeStickyAssignor"),
}
DELAYED_ASSIGNOR = "kassign-delayed-cooperative-sticky"


def make_assignor_factory(config: SimConfig, clock: Callable[[], float]) -> Callable[[str], Any]:
    """A factory ``member name -> fresh instance`` of the kassign assignor named by ``config.assignor``.

    The delayed (Connect-style) assignor gets the simulated ``clock``, the member name as its
    stable worker id and ``config.scheduled_rebalance_max_delay_ms`` when set.
    """
    if config.assignor not in ASSIGNOR_CLASSES:
        raise ValueError(f"unknown assignor {config.assignor!r}; expected one of {sorted(ASSIGNOR_CLASSES)}")
    module_name, class_name = ASSIGNOR_CLASSES[config.assignor]
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if cls is None:
        raise ValueError(f"assignor {config.assignor!r}: {module_name}.{class_name} is not available")
    if config.assignor != DELAYED_ASSIGNOR:
        return lambda name: cls()
    options: dict[str, Any] = {}
    if config.scheduled_rebalance_max_delay_ms is not None:
        options["scheduled_rebalance_max_delay_ms"] = int(config.scheduled_rebalance_max_delay_ms)
    return lambda name: cls(worker_id=name, clock=clock, **options)


@dataclass
class SimResult:
    """A simulated timeline and its metrics per phase (``initial``, then ``1:scale_out``...)."""

    scenario: Scenario
    config: SimConfig
    events: list[Event]
    phases: dict[str, tuple[float, float]]
    metrics: dict[str, PhaseMetrics]
    end_s: float
    settled: bool
    assign_calls: int
    protocol: RebalanceProtocol
    subscribed: dict[str, int]  # at the end: the subscribed topics and their partition counts

    def write_events(self, path: str) -> int:
        """Write the timeline as JSON lines (gzip for ``.gz``), partitions of a one-topic group as ints."""
        topics = list(self.scenario.topics) + list(self.scenario.extra_topics)
        return write_events(path, self.events, single_topic=topics[0] if len(topics) == 1 else None)

    def summary(self) -> dict[str, Any]:
        """Metrics per phase as plain dicts (without the final owner maps)."""
        out: dict[str, Any] = {}
        for name, m in self.metrics.items():
            d = m.as_dict()
            d.pop("final")
            out[name] = d
        return out


class _Simulation:
    """One run: the context every member and the coordinator share."""

    def __init__(self, scenario: Scenario, config: SimConfig, assignor_factory: Callable[[str], Any] | None) -> None:
        self.scenario = scenario
        self.config = config
        self.loop = EventLoop()
        self.assignor_factory = assignor_factory or make_assignor_factory(config, lambda: self.loop.now)
        self.rng = random.Random(scenario.seed)
        self.events: list[Event] = []
        self.partitions_per_topic = {**scenario.topics, **scenario.extra_topics}
        self.topics = list(scenario.subscribed or scenario.topics)
        self.heartbeat_s = config.heartbeat_interval_ms / 1000
        self.members: dict[str, SimMember] = {}  # name -> current incarnation
        self._incarnations: dict[str, int] = {}
        self.assign_calls = 0
        probe = self.assignor_factory("probe")
        supported = list(probe.supported_protocols)
        self.protocol = config.protocol or max(supported, key=lambda p: p.value)
        if self.protocol not in supported:
            raise ValueError(f"assignor {probe.name!r} does not support the {self.protocol.name} protocol")
        self.protocol_name = probe.name
        network_s = config.latency_ms("network_ms") / 1000
        common = dict(
            network_s=network_s,
            session_s=config.session_timeout_ms / 1000,
            rebalance_s=config.rebalance_timeout_ms / 1000,
        )
        if config.group_protocol == "consumer":
            self.coordinator: Any = ConsumerGroupCoordinator(
                self.loop,
                network_s=network_s,
                session_s=config.session_timeout_ms / 1000,
                heartbeat_s=self.heartbeat_s,
                partitions_per_topic=self.partitions_per_topic,
                assignment_interval_s=config.assignment_interval_ms / 1000,
            )
        elif config.broker == "kafka":
            self.coordinator = KafkaCoordinator(
                self.loop, initial_delay_s=config.initial_rebalance_delay_ms / 1000, **common
            )
        else:
            self.coordinator = TansuCoordinator(self.loop, **common)
        self.phase_starts: list[tuple[str, float]] = [("initial", 0.0)]
        self.processing = config.processing()
        #: The members' processes and the broker sharing ``config.cpu_cores`` (None: no contention).
        self.contention: CpuContention | None = None
        if config.cpu_cores is not None:
            self.contention = CpuContention(
                config.cpu_cores,
                config.cpu_wait_ms / 1000,
                config.member_cpu_ms / 1000,
                lambda: len(self.live()) + BROKER_PROCESSES,
            )

    # -- GroupContext --------------------------------------------------------------------------
    def latency(self, name: str) -> float:
        jitter = self.config.jitter_ms
        extra = self.rng.uniform(0.0, jitter) if jitter else 0.0
        return (self.config.latency_ms(name) + extra) / 1000

    def emit(self, member: str, ev: str, parts: Iterable[TopicPartition] | None = None, **extra: Any) -> None:
        self.events.append(Event(member, self.loop.now, ev, None if parts is None else sorted(parts), extra))

    def leader_assigned(self, member: SimMember) -> None:
        self.assign_calls += 1

    # -- membership ----------------------------------------------------------------------------
    def start_member(self, name: str | None = None, *, instance_id: str | None = None) -> SimMember:
        """Start a consumer named ``name`` (default the next ``m<n>``); a static group gives it
        ``instance_id`` as its ``group.instance.id`` (default its name: a restart under the same name)."""
        if name is None:
            name = f"m{len(self._incarnations) + 1}"
        incarnation = self._incarnations.get(name, 0) + 1
        self._incarnations[name] = incarnation
        member_id = f"{name}-{incarnation}"
        # Each incarnation's batches from its own generator: one member's never shift another's.
        rng = random.Random(f"{self.scenario.seed}/{member_id}")
        if self.config.group_protocol == "consumer":
            member: Any = ConsumerGroupSimMember(
                name,
                incarnation,
                self,
                self.topics,
                client=self.config.client,
                processing=self.processing,
                rng=rng,
                rebalance_timeout_ms=int(self.config.rebalance_timeout_ms),
                contention=self.contention,
            )
        else:
            interval = self.config.commit_interval_ms
            member = SimMember(
                name,
                incarnation,
                self,
                self.assignor_factory(name),
                self.topics,
                instance_id=(instance_id or name) if self.config.static_membership else None,
                fast_follow_up=self.config.follows_up_fast(name),
                client=self.config.client,
                processing=self.processing,
                rng=rng,
                heartbeat_lag_s=self.config.latency_ms("heartbeat_lag_ms") / 1000,
                commit_interval_s=None if interval is None else interval / 1000,
                contention=self.contention,
                revocation_commit_s=None
                if self.config.revocation_commit_ms is None
                else self.config.revocation_commit_ms / 1000,
            )
        self.members[name] = member
        member.start()
        return member

    def live(self) -> list[SimMember]:
        """Live members, oldest first."""
        return [m for m in self.members.values() if m.state != "down"]

    def _pick(self, name: str | None) -> SimMember | None:
        if name is not None:
            member = self.members.get(name)
            if member is None:
                raise ValueError(f"scenario names member {name!r}, which never started")
            return member
        live = self.live()
        return live[-1] if live else None

    # -- steps ---------------------------------------------------------------------------------
    def schedule_step(self, index: int, at: float) -> None:
        self.loop.at(at, self._fire_step, index, False)

    def _fire_step(self, index: int, aligned: bool) -> None:
        step = self.scenario.steps[index]
        if step.phase is not None and not aligned:
            target = self._aligned_time(step.phase)
            if target > self.loop.now + 1e-12:
                self.loop.at(target, self._fire_step, index, True)
                return
        self.phase_starts.append((f"{index + 1}:{step_kind(step)}", self.loop.now))
        # Members act a process-reaction time after the trigger, as the recorded consumers did
        # (the recorder's settle_s counts from the first member event, not from the trigger).
        self.loop.after(self.latency("spawn_ms"), self._apply, step)
        if index + 1 < len(self.scenario.steps):
            self.schedule_step(index + 1, self.loop.now + self.scenario.steps[index + 1].after_s)

    def _aligned_time(self, phase: float) -> float:
        """The first time from now at which the oldest stable member is ``phase`` through its
        heartbeat interval."""
        beats = [m.next_heartbeat_t for m in self.live() if m.next_heartbeat_t is not None]
        if not beats:
            return self.loop.now
        target = beats[0] - (1.0 - phase) * self.heartbeat_s
        while target < self.loop.now - 1e-12:
            target += self.heartbeat_s
        return target

    def _apply(self, step: Step) -> None:
        loop = self.loop
        if isinstance(step, ScaleOut):
            for k in range(step.count):
                self.start_member(instance_id=step.instance_ids[k] if k < len(step.instance_ids) else None)
        elif isinstance(step, ScaleIn):
            for member in self.live()[::-1][: step.count]:
                member.close()
        elif isinstance(step, Crash):
            picked = self._pick(step.member)
            if picked is not None:
                picked.crash()
        elif isinstance(step, RollingRestart):
            live = self.live()
            if step.leader_last:
                live = sorted(live, key=lambda m: m.id == self.coordinator.leader)  # stable: others keep their order
            if step.count is not None:
                live = live[: step.count]
            self._restart_next([m.name for m in live], step)
        elif isinstance(step, Flap):
            picked = self._pick(step.member)
            if picked is not None:
                self._flap(picked.name, step.times, step)
        elif isinstance(step, SubscriptionChange):
            unknown = sorted(set(step.topics) - set(self.partitions_per_topic))
            if unknown:
                raise ValueError(f"subscription change names unknown topic(s) {unknown}")
            self.topics = list(step.topics)
            for member in self.live():
                member.change_subscription(step.topics)
        elif isinstance(step, PartitionIncrease):
            current = self.partitions_per_topic.get(step.topic, 0)
            if step.partitions < current:
                raise ValueError(f"topic {step.topic!r} cannot shrink from {current} to {step.partitions} partitions")
            self.partitions_per_topic[step.topic] = step.partitions
            if self.config.group_protocol == "consumer":
                self.coordinator.metadata_changed()  # the broker assigns: it sees the new partitions itself
                return
            # The leader sees the new partitions at its next metadata refresh and rejoins.
            loop.after(self.rng.uniform(0.0, self.config.metadata_max_age_ms / 1000), self._leader_rejoin)

    def _leader_rejoin(self) -> None:
        for member in self.live():
            if member.id == self.coordinator.leader:
                member.request_rejoin()
                return

    def _restart_next(self, names: list[str], step: RollingRestart) -> None:
        if not names:
            return
        name, rest = names[0], names[1:]
        self.members[name].close()
        self.loop.after(step.down_s, self.start_member, name)
        self.loop.after(step.down_s + step.interval_s, self._restart_next, rest, step)

    def _flap(self, name: str, times: int, step: Flap) -> None:
        if times <= 0:
            return
        self.members[name].crash()
        self.loop.after(step.down_s, self.start_member, name)
        self.loop.after(step.down_s + step.up_s, self._flap, name, times - 1, step)

    # -- running -------------------------------------------------------------------------------
    def quiet(self) -> bool:
        coordinator = self.coordinator
        if not coordinator.settled():
            return False
        live = self.live()
        if set(coordinator.members) != {m.id for m in live}:
            return False
        return all(m.state == "stable" and m.generation == coordinator.generation for m in live)

    def horizon(self) -> float:
        """A generous bound on the scenario's length, then ``horizon_ms`` to settle."""
        total, size = 0.0, self.scenario.members
        for step in self.scenario.steps:
            metadata_wait = self.config.metadata_max_age_ms / 1000 if isinstance(step, PartitionIncrease) else 0
            total += step.after_s + metadata_wait
            if isinstance(step, ScaleOut):
                size += step.count
            elif isinstance(step, RollingRestart):
                restarted = size if step.count is None else min(size, step.count)
                total += restarted * (step.down_s + step.interval_s)
            elif isinstance(step, Flap):
                total += step.times * (step.down_s + step.up_s)
            total += self.heartbeat_s  # phase alignment
        return total + self.config.horizon_ms / 1000

    def run(self) -> SimResult:
        for _ in range(self.scenario.members):
            self.start_member()
        if self.scenario.steps:
            self.schedule_step(0, self.scenario.steps[0].after_s)
        end = self.loop.run(self.horizon(), self.quiet)
        settled = self.loop.active == 0 and self.quiet()
        if not settled:
            log.warning("scenario %r did not settle within %.1f s", self.scenario.name, end)
        starts = self.phase_starts
        stop = end + 1e-6
        phases = {name: (t, starts[i + 1][1] if i + 1 < len(starts) else stop) for i, (name, t) in enumerate(starts)}
        return SimResult(
            scenario=self.scenario,
            config=self.config,
            events=self.events,
            phases=phases,
            metrics=timeline_metrics(self.events, phases),
            end_s=end,
            settled=settled,
            assign_calls=self.assign_calls,
            protocol=self.protocol,
            subscribed={t: self.partitions_per_topic[t] for t in self.topics},
        )


#: One run's state (clock, members, coordinator, events), for drivers that script membership changes
#: themselves instead of through a scenario's steps (:mod:`kassign.sim.calibration.harness`).
Simulation = _Simulation


def simulate(
    scenario: Scenario, config: SimConfig | None = None, *, assignor_factory: Callable[[str], Any] | None = None
) -> SimResult:
    """Simulate ``scenario`` under ``config`` (default :class:`SimConfig`).

    ``assignor_factory`` builds one assignor per consumer incarnation from the member's name; the
    default builds kassign's assignor named by ``config.assignor``. Raises
    :class:`~kassign.sim.member.SimulationError` if the assignor produces an assignment a Kafka
    client would reject.
    """
    return _Simulation(scenario, config or SimConfig(), assignor_factory).run()
