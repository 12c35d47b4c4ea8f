"""Settings of a simulated consumer group: client configuration, broker model and latencies.

Times are milliseconds in the names Kafka's configs use (``session.timeout.ms`` ->
``session_timeout_ms``) so that a Kafka operator can read a configuration at a glance.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kassign.model import RebalanceProtocol
from kassign.sim.processing import Processing

__all__ = [
    "SimConfig",
    "BROKER_MODELS",
    "GROUP_PROTOCOLS",
    "CLIENT_PRESETS",
    "KAFKA44_PRESETS",
    "KAFKA44_CONSUMER_PRESETS",
    "kafka44_presets",
    "MAX_MS",
]

#: The longest time setting accepted: Kafka's millisecond configs are int32.
MAX_MS = 2**31 - 1

#: ``kafka``: Apache Kafka's classic group coordinator. ``tansu``: Tansu 0.6, which holds every
#: JoinGroup for half the session timeout and answers with whoever has joined.
BROKER_MODELS = ("kafka", "tansu")

#: ``classic``: JoinGroup/SyncGroup, a member leads the assignment. ``consumer``: KIP-848's
#: ConsumerGroupHeartbeat, the broker assigns and reconciles each member on its own.
GROUP_PROTOCOLS = ("classic", "consumer")
#: Client latencies, in milliseconds: ``spawn_ms`` from a trigger to the consumer acting on it
#: (subscribing or closing), ``startup_ms`` from subscribing to the first JoinGroup, ``poll_ms`` for
#: the poll loop to act on a rebalance the heartbeat thread learnt of, ``revocation_ms`` for the
#: revoke callback (a synchronous commit), ``assign_ms`` for the leader to compute and send the
#: assignment (so its SyncGroup arrives after the others'), ``network_ms`` each way between member
#: and coordinator, ``id_rejoin_ms`` from a MEMBER_ID_REQUIRED answer to the JoinGroup with the id,
#: ``heartbeat_lag_ms`` the mean lateness of each heartbeat (its timer wakes late, so members that
#: synced together drift apart; 0: exactly on the interval, in lockstep).
#:
#: ``java`` and ``librdkafka`` are fitted to the Kafka 3.7 recordings in data/rebalance-timelines
#: (session 10 s, heartbeat 1 s); ``aiokafka`` (kassign's coordinator on aiokafka 0.14) to the Kafka
#: 4.4 benchmark recordings (:data:`KAFKA44_PRESETS`), the only ones of it there are, its ``startup_ms``
#: measured on a live broker as there.
CLIENT_PRESETS: dict[str, dict[str, float]] = {
    "aiokafka": {
        "spawn_ms": 7.2,
        "startup_ms": 10.9,
        "poll_ms": 1.2,
        "revocation_ms": 0.36,
        "assign_ms": 2.5,
        "network_ms": 1.2,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "java": {
        "spawn_ms": 28.0,
        "startup_ms": 30.0,
        "poll_ms": 8.0,
        "revocation_ms": 5.0,
        "assign_ms": 5.0,
        "network_ms": 3.5,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "librdkafka": {
        "spawn_ms": 3.0,
        "startup_ms": 10.0,
        "poll_ms": 3.0,
        "revocation_ms": 1.0,
        "assign_ms": 1.0,
        "network_ms": 2.0,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
}

#: The same latencies for the Kafka 4.4.0 benchmark recordings in data/rebalance-bench-kafka44
#: (session 1.5 s, heartbeat 250 ms, every member its own process on one machine): ``spawn_ms``
#: measured there, the others fitted (``python -m kassign.sim.calibration --reps 1,2,3,4,5 --fit``)
#: to repetitions r1-r5, the later ones held out (:data:`kassign.sim.calibration.benchmark.HELD_OUT_BY_CLIENT`).
#: A Java consumer's first JoinGroup comes 0.36 s after ``subscribe()`` (a fresh JVM finds its
#: coordinator), and librdkafka's JoinGroup with its member id 0.24 s after the MEMBER_ID_REQUIRED
#: answer (what the recordings show; the cause inside librdkafka is not pinned down). aiokafka's
#: ``startup_ms`` is measured, not fitted (``benchmarks/aiokafka_startup.py``, results in
#: ``benchmarks/results/aiokafka-startup-*``): a consumer built beforehand takes a median 10.9 ms from
#: ``subscribe()`` to its first JoinGroup (bootstrap, metadata, FindCoordinator), 10.7 ms for
#: kassign's and 11.4 ms for plain aiokafka's over 60 replacements each; the r1-r5 fit could not see
#: it and had set 0. ``heartbeat_lag_ms`` stays 0 (heartbeats in lockstep): the recordings show
#: aiokafka's running 0.86 ms late per interval
#: (:func:`kassign.sim.calibration.fit.measured_heartbeat_lag_ms`), but with that drift and a refit
#: r1-r5 fit no better (loss 5.10 against 5.05).
KAFKA44_PRESETS: dict[str, dict[str, float]] = {
    "aiokafka": {
        "spawn_ms": 6.8,
        "startup_ms": 10.9,
        "poll_ms": 1.22,
        "revocation_ms": 0.43,
        "assign_ms": 2.5,
        "network_ms": 1.2,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "java": {
        "spawn_ms": 0.2,
        "startup_ms": 360.0,
        "poll_ms": 0.0,
        "revocation_ms": 15.12,
        "assign_ms": 4.25,
        "network_ms": 3.5,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "librdkafka": {
        "spawn_ms": 34.9,
        "startup_ms": 20.0,
        "poll_ms": 20.0,
        "revocation_ms": 7.21,
        "assign_ms": 4.25,
        "network_ms": 1.0,
        "id_rejoin_ms": 240.0,
        "heartbeat_lag_ms": 0.0,
    },
}
#: The same for members on KIP-848's consumer protocol (kassign's ``group_protocol="consumer"``,
#: kafka-clients 4.4.0's consumer and librdkafka with ``group.protocol=consumer``), fitted to
#: repetitions r1-r3 of data/rebalance-bench-kafka44-kip848 (r4-r5 held out; ``python -m
#: kassign.sim.calibration --protocol consumer --reps 1,2,3 --fit``). ``assign_ms`` and ``id_rejoin_ms``
#: play no part there (no leader, no MEMBER_ID_REQUIRED). ``poll_ms`` here is the client's delay from a
#: heartbeat's new assignment to starting its reconciliation.
KAFKA44_CONSUMER_PRESETS: dict[str, dict[str, float]] = {
    "aiokafka": {
        "spawn_ms": 5.9,
        "startup_ms": 5.0,
        "poll_ms": 35.0,
        "revocation_ms": 0.0,
        "assign_ms": 2.5,
        "network_ms": 0.04,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "java": {
        "spawn_ms": 1.5,
        "startup_ms": 63.75,
        "poll_ms": 1.0,
        "revocation_ms": 24.3,
        "assign_ms": 4.3,
        "network_ms": 7.0,
        "id_rejoin_ms": 0.0,
        "heartbeat_lag_ms": 0.0,
    },
    "librdkafka": {
        "spawn_ms": 35.9,
        "startup_ms": 12.75,
        "poll_ms": 1.0,
        "revocation_ms": 10.81,
        "assign_ms": 1.0,
        "network_ms": 0.17,
        "id_rejoin_ms": 240.0,
        "heartbeat_lag_ms": 0.0,
    },
}


def kafka44_presets(client: str, group_protocol: str = "classic") -> dict[str, float]:
    """The Kafka 4.4 latencies of ``client`` on ``group_protocol`` (a copy)."""
    table = KAFKA44_CONSUMER_PRESETS if group_protocol == "consumer" else KAFKA44_PRESETS
    if client not in table:
        raise ValueError(f"unknown client {client!r}; expected one of {tuple(table)}")
    return dict(table[client])


@dataclass(frozen=True)
class SimConfig:
    """Everything that shapes a simulated group, apart from the scenario itself.

    ``protocol`` None picks the most capable protocol the assignor supports (as Java does);
    ``static_membership`` gives every member a ``group.instance.id`` (KIP-345), so a restart
    within the session timeout costs no rebalance. ``jitter_ms`` spreads each latency uniformly
    by up to that much, drawn from the scenario's seeded random generator.

    ``fast_follow_up`` makes members kassign consumers with the fast follow-up
    (:mod:`kassign.protocol.follow_up_mark`): a kassign leader whose cooperative assignor withholds
    partitions marks every assignment, and a kassign member that receives the mark rejoins as
    soon as its revocations are done. ``kassign_members`` names the members (``m1``...) that run
    kassign in a mixed group (None: all of them); the others behave as ``client`` says.

    ``cpu_cores`` models the members' processes and the broker sharing that many cores
    (:mod:`kassign.sim.contention`): each wake-up (a heartbeat timer, a broker's answer) waits for a
    core, ``cpu_wait_ms`` on average per process beyond the cores, and each reaction to a broker's
    answer takes ``member_cpu_ms`` of a core, first come first served; so heartbeats drift apart and
    rounds take longer the larger the group. None (the default): no contention, the client latencies
    alone.

    ``revocation_commit_ms`` (with ``cpu_cores``; kassign's aiokafka members only) makes a revocation
    callback's OffsetCommit a round trip under contention instead of the constant ``revocation_ms``:
    the member waits for the answer like any other (a wake-up wait, then this much core time, first
    come first served), and first for the answer of its periodic commit in flight, as the benchmark's
    member does (:mod:`kassign.sim.member`). None (the default): ``revocation_ms`` alone.
    """

    assignor: str = "cooperative-sticky"
    protocol: RebalanceProtocol | None = None
    broker: str = "kafka"
    client: str = "java"
    session_timeout_ms: float = 45000.0
    heartbeat_interval_ms: float = 3000.0
    rebalance_timeout_ms: float = 300000.0  # max.poll.interval.ms
    initial_rebalance_delay_ms: float = 0.0  # group.initial.rebalance.delay.ms (Kafka's default is 3000)
    metadata_max_age_ms: float = 300000.0
    static_membership: bool = False
    scheduled_rebalance_max_delay_ms: float | None = None  # Connect-style delayed reassignment
    network_ms: float | None = None  # None: the client preset's
    spawn_ms: float | None = None
    startup_ms: float | None = None
    poll_ms: float | None = None
    revocation_ms: float | None = None
    assign_ms: float | None = None
    id_rejoin_ms: float | None = None
    heartbeat_lag_ms: float | None = None
    commit_interval_ms: float | None = None  # the application's periodic commits (None: none)
    processing_ms: float = 0.0  # work per poll batch: fixed, or the low end of a uniform range
    processing_max_ms: float | None = None  # the high end of that range (None: fixed)
    jitter_ms: float = 0.0
    horizon_ms: float = 600000.0  # give up on settling this long after the last step
    fast_follow_up: bool = False
    kassign_members: tuple[str, ...] | None = None
    group_protocol: str = "classic"  # "consumer": KIP-848, the broker assigns (see GROUP_PROTOCOLS)
    assignment_interval_ms: float = 1000.0  # consumer.assignment.interval.ms (KIP-1263; Kafka 4.4's default)
    cpu_cores: int | None = None  # cores the members' processes and the broker share (None: no contention)
    cpu_wait_ms: float = 0.0  # mean wake-up wait per process beyond the cores (kassign.sim.contention)
    member_cpu_ms: float = 0.0  # core time of a member's reaction to a broker's answer (kassign.sim.contention)
    revocation_commit_ms: float | None = None  # core time of a revocation's commit round trip (None: revocation_ms)

    def __post_init__(self) -> None:
        if self.broker not in BROKER_MODELS:
            raise ValueError(f"unknown broker model {self.broker!r}; expected one of {BROKER_MODELS}")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"unknown group protocol {self.group_protocol!r}; expected one of {GROUP_PROTOCOLS}")
        if self.group_protocol == "consumer" and (self.broker != "kafka" or self.static_membership):
            raise ValueError(
                "the consumer group protocol (KIP-848) is modelled on the kafka broker model, without static membership"
            )
        if self.client not in CLIENT_PRESETS:
            raise ValueError(f"unknown client {self.client!r}; expected one of {tuple(CLIENT_PRESETS)}")
        if self.kassign_members is not None:
            if isinstance(self.kassign_members, str) or not all(isinstance(m, str) for m in self.kassign_members):
                raise TypeError(f"kassign_members must be a sequence of member names, got {self.kassign_members!r}")
            object.__setattr__(self, "kassign_members", tuple(self.kassign_members))  # lists from YAML/JSON
        if self.protocol is not None and not isinstance(self.protocol, RebalanceProtocol):
            raise TypeError(f"protocol must be a RebalanceProtocol or None, got {self.protocol!r}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not f.name.endswith("_ms") or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{f.name} must be a number of milliseconds, got {value!r}")
            if not math.isfinite(value) or not 0 <= value <= MAX_MS:
                raise ValueError(
                    f"{f.name} must be a finite number of milliseconds from 0 to {MAX_MS:,} "
                    f"(Kafka's int32 limit), got {value!r}"
                )
        if self.cpu_cores is not None and (
            isinstance(self.cpu_cores, bool) or not isinstance(self.cpu_cores, int) or self.cpu_cores < 1
        ):
            raise ValueError(f"cpu_cores must be a whole number of cores from 1, or None, got {self.cpu_cores!r}")
        if self.processing_max_ms is not None and self.processing_max_ms < self.processing_ms:
            raise ValueError(
                f"processing_max_ms ({self.processing_max_ms!r}) must not be below processing_ms "
                f"({self.processing_ms!r})"
            )
        if self.heartbeat_interval_ms < 1 or self.session_timeout_ms < 1:
            raise ValueError(
                f"heartbeat_interval_ms and session_timeout_ms must be >= 1, got "
                f"{self.heartbeat_interval_ms!r} and {self.session_timeout_ms!r}"
            )

    def processing(self) -> Processing:
        """Each member's work per poll batch (the same distribution for every member)."""
        return Processing(self.processing_ms, self.processing_max_ms)

    def latency_ms(self, name: str) -> float:
        """A client latency (``network_ms``, ``poll_ms``...): the explicit setting or the preset's."""
        value = getattr(self, name)
        return CLIENT_PRESETS[self.client][name] if value is None else float(value)

    def follows_up_fast(self, member: str) -> bool:
        """Whether ``member`` (``m1``...) runs kassign with the fast follow-up."""
        return self.fast_follow_up and (self.kassign_members is None or member in self.kassign_members)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimConfig:
        """Build from a plain mapping (YAML, JSON, CLI); ``protocol`` may be a name ("eager")."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown simulator setting(s) {unknown}; known: {sorted(known)}")
        values = dict(data)
        proto = values.get("protocol")
        if isinstance(proto, str):
            try:
                values["protocol"] = RebalanceProtocol[proto.upper()]
            except KeyError:
                raise ValueError(f"unknown protocol {proto!r}; expected eager or cooperative") from None
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """A plain mapping that :meth:`from_dict` reads back."""
        out = dataclasses.asdict(self)
        out["protocol"] = None if self.protocol is None else self.protocol.name.lower()
        return out
