"""How each simulated client meets the group protocol, and the Kafka coordinator's barrier details
the Kafka 4.4 recordings showed: Java advances a rebalance one step per ``poll()``; librdkafka
sends at most one JoinGroup per second, leaves only after a round it joined and ignores news of
another rebalance while its callbacks wait for ``poll()``; the join barrier waits for members sent
MEMBER_ID_REQUIRED; an OffsetCommit keeps a classic member's session alive, as a heartbeat does
(``OffsetMetadataManager.commitOffset``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import pytest

from kassign.model import Assignment, Subscription
from kassign.sim import ScaleOut, Scenario, SimConfig, simulate
from kassign.sim.coordinator import JoinResponse, KafkaCoordinator, SyncResponse
from kassign.sim.engine import EventLoop
from kassign.sim.member import LIBRDKAFKA_JOIN_INTERVAL_S
from kassign.sim.simulator import Simulation

FAST = dict(assignor="cooperative-sticky", session_timeout_ms=1500.0, heartbeat_interval_ms=250.0)


def _m1_protocol_events(client: str, **settings: float) -> list[tuple[str, float]]:
    """m1's join/sync/callback events in a scale-out of 3 -> 4, relative to the trigger."""
    result = simulate(
        Scenario(3, {"topic": 12}).then(ScaleOut(1, after_s=5.0, phase=0.5)),
        SimConfig(client=client, **FAST, **settings),
    )
    start = result.phases["1:scale_out"][0]
    return [
        (e.ev, e.t - start)
        for e in result.events
        if e.t >= start and e.id == "m1" and e.ev in ("join", "sync", "cb_revoked", "cb_assigned")
    ]


def test_java_reads_each_answer_at_its_next_poll_while_it_processes_its_partitions() -> None:
    java = _m1_protocol_events("java", processing_ms=400.0)
    aiokafka = _m1_protocol_events("aiokafka", processing_ms=400.0)
    (join_t, sync_t) = (next(t for ev, t in java if ev == "join"), next(t for ev, t in java if ev == "sync"))
    # JoinGroup sent at a poll, its answer read (and the SyncGroup sent) at the next, the SyncGroup's
    # answer at the one after: two 400 ms batches.
    assert sync_t - join_t == pytest.approx(0.8, abs=0.02)
    # kassign's coordinator on aiokafka is a task of its own: the round takes milliseconds.
    assert next(t for ev, t in aiokafka if ev == "sync") - next(t for ev, t in aiokafka if ev == "join") < 0.05
    # Without processing Java is always at poll(), and as quick.
    instant = _m1_protocol_events("java")
    assert next(t for ev, t in instant if ev == "sync") - next(t for ev, t in instant if ev == "join") < 0.05
    # The cooperative follow-up JoinGroup goes out inside the same poll() as the revocation.
    revoked = next(t for ev, t in java if ev == "cb_revoked")
    second_join = [t for ev, t in java if ev == "join"][1]
    assert revoked <= second_join < revoked + 0.05


def test_librdkafka_waits_a_second_between_joingroups_unless_it_gave_partitions_up() -> None:
    # Two scale-outs 0.6 s apart: m1 learns of the second while its last JoinGroup is fresh.
    scenario = Scenario(3, {"topic": 12}).then(ScaleOut(1, after_s=5.0, phase=0.5), ScaleOut(1, after_s=0.6))
    joins, revoked = {}, {}
    for client in ("librdkafka", "aiokafka"):
        result = simulate(scenario, SimConfig(client=client, **FAST))
        start = result.phases["1:scale_out"][0]
        mine = [e for e in result.events if e.id == "m1" and e.t >= start]
        joins[client] = [e.t for e in mine if e.ev == "join"]
        revoked[client] = [e.t for e in mine if e.ev == "cb_revoked_done"]
    gaps = {client: [b - a for a, b in zip(ts, ts[1:])] for client, ts in joins.items()}
    # After revoking, librdkafka rejoins at once ("rejoining group to redistribute..."); a rejoin on a
    # heartbeat's news waits for the join interval.
    assert revoked["librdkafka"]
    follow_up = min(t for t in joins["librdkafka"] if t >= revoked["librdkafka"][0])
    assert follow_up - revoked["librdkafka"][0] < 0.01
    assert max(gaps["librdkafka"]) >= LIBRDKAFKA_JOIN_INTERVAL_S - 1e-9
    assert max(gaps["aiokafka"]) < LIBRDKAFKA_JOIN_INTERVAL_S


def test_librdkafka_rejoins_with_its_member_id_after_id_rejoin_ms() -> None:
    def first_joins(delay_ms: float) -> list[float]:
        result = simulate(Scenario(1, {"topic": 4}), SimConfig(client="librdkafka", id_rejoin_ms=delay_ms, **FAST))
        return [e.t for e in result.events if e.id == "m1" and e.ev == "join"][:2]

    quick, held = first_joins(0.0), first_joins(200.0)
    assert held[1] - held[0] == pytest.approx(quick[1] - quick[0] + 0.2, abs=1e-6)


@dataclass
class _Member:
    """A member as the coordinator sees it, recording what it is answered."""

    id: str
    instance_id: str | None = None
    joins: list[JoinResponse] = field(default_factory=list)

    def on_join_response(self, response: JoinResponse) -> None:
        self.joins.append(response)

    def on_sync_response(self, response: SyncResponse) -> None:
        pass

    def on_heartbeat_response(self, error: str | None) -> None:
        pass


def _stable_group_of_one(loop: EventLoop) -> tuple[KafkaCoordinator, _Member]:
    coordinator = KafkaCoordinator(loop, network_s=0.0, session_s=1.5, rebalance_s=30.0)
    old = _Member("old")
    coordinator.join(old, Subscription(["topic"]), True)
    loop.run(0.05, lambda: False)
    assert [r.generation for r in old.joins] == [1]  # alone: the first round completes at once
    coordinator.sync(old, 1, {"old": Assignment([])})
    assert coordinator.state == "Stable"
    return coordinator, old


def test_join_barrier_waits_for_a_member_sent_member_id_required() -> None:
    loop = EventLoop()
    coordinator, old = _stable_group_of_one(loop)
    new = _Member("new")
    sub = Subscription(["topic"])
    coordinator.join(new, sub, False)  # a new member's first JoinGroup: MEMBER_ID_REQUIRED, now pending
    coordinator.join(old, sub, True)  # the leader rejoins: the barrier has everyone known...
    loop.run(1.1, lambda: False)
    assert [r.error for r in new.joins] == ["MEMBER_ID_REQUIRED"] and len(old.joins) == 1  # ...but waits
    coordinator.join(new, sub, True)  # back with its id
    loop.run(1.2, lambda: False)
    assert old.joins[-1].generation == new.joins[-1].generation == 2
    assert set(old.joins[-1].members or {}) == {"old", "new"}


def test_a_pending_member_that_never_returns_stops_holding_the_barrier_after_its_session() -> None:
    loop = EventLoop()
    coordinator, old = _stable_group_of_one(loop)
    ghost = _Member("ghost")
    sub = Subscription(["topic"])
    coordinator.join(ghost, sub, False)
    coordinator.join(old, sub, True)
    loop.run(1.5, lambda: False)
    assert len(old.joins) == 1
    loop.run(1.7, lambda: False)
    assert len(old.joins) == 2 and set(old.joins[-1].members or {}) == {"old"}


def test_an_offset_commit_keeps_a_silent_members_session_alive() -> None:
    loop = EventLoop()
    coordinator, old = _stable_group_of_one(loop)
    loop.run(1.0, lambda: False)
    coordinator.offset_commit(old, 1.0)  # then nothing: no heartbeat, no commit
    loop.run(2.4, lambda: False)
    assert "old" in coordinator.members  # 1.4 s after its commit
    loop.run(2.6, lambda: False)
    assert "old" not in coordinator.members  # a session timeout after its commit


def test_a_commit_that_arrived_before_the_last_heartbeat_changes_nothing() -> None:
    loop = EventLoop()
    coordinator, old = _stable_group_of_one(loop)
    loop.run(0.5, lambda: False)
    coordinator.heartbeat(old, 1)
    coordinator.offset_commit(old, 0.2)
    loop.run(1.99, lambda: False)
    assert "old" in coordinator.members
    loop.run(2.05, lambda: False)
    assert "old" not in coordinator.members  # 1.5 s after its heartbeat at 0.5


def _closing_while_parked_at_the_barrier(client: str) -> dict[str, float]:
    """Just after m2's heartbeat, m1 rejoins, and 50 ms later it is told to close while its JoinGroup
    waits for m2 (which learns of the rebalance only at its next heartbeat): when m1 starts closing
    and is closed, and when m2 joins."""
    sim = Simulation(Scenario(2, {"topic": 4}), SimConfig(client=client, **FAST), None)
    for _ in range(2):
        sim.start_member()
    sim.loop.run(5.0, lambda: False)
    start = sim.members["m2"].next_heartbeat_t + 0.01
    sim.loop.run(start, lambda: False)
    sim.members["m1"].request_rejoin()
    sim.loop.run(start + 0.05, lambda: False)
    sim.members["m1"].close()
    sim.loop.run(start + 3.0, lambda: False)
    after = [e for e in sim.events if e.t >= start]
    return {
        "start": start,
        "closing": next(e.t for e in after if e.id == "m1" and e.ev == "closing"),
        "closed": next(e.t for e in after if e.id == "m1" and e.ev == "closed"),
        "m2 joins": next(e.t for e in after if e.id == "m2" and e.ev == "join"),
    }


def test_librdkafka_closes_only_once_the_round_it_joined_is_over() -> None:
    rdkafka = _closing_while_parked_at_the_barrier("librdkafka")
    assert rdkafka["closing"] == pytest.approx(rdkafka["start"] + 0.05)  # the application stops at once...
    assert rdkafka["m2 joins"] > rdkafka["start"] + 0.2  # (m2 heard of the rebalance a heartbeat later)
    assert rdkafka["closed"] > rdkafka["m2 joins"]  # ...but its consumer leaves after the round
    aiokafka = _closing_while_parked_at_the_barrier("aiokafka")
    assert aiokafka["closed"] < min(aiokafka["m2 joins"], aiokafka["start"] + 0.1)


def test_librdkafka_does_not_rejoin_while_its_callbacks_wait_for_poll() -> None:
    result = simulate(
        Scenario(3, {"topic": 12}).then(ScaleOut(3, after_s=5.0, phase=0.5)),
        SimConfig(client="librdkafka", processing_ms=400.0, **FAST),
    )
    start = result.phases["1:scale_out"][0]
    for member in ("m1", "m2", "m3"):
        mine = [e for e in result.events if e.id == member and e.t >= start]
        first_sync = next(e.t for e in mine if e.ev == "sync")
        revoked = next(e.t for e in mine if e.ev == "cb_revoked")
        assert revoked - first_sync > 0.05  # the callbacks waited for the batch in hand
        assert not [e for e in mine if e.ev == "join" and first_sync < e.t < revoked], member


#: Gaps between a librdkafka member's heartbeats, measured on Kafka 4.4.0 with the benchmark's
#: settings (heartbeat.interval.ms 250): ``benchmarks/librdkafka_heartbeats.py``, medians over its runs in
#: ``benchmarks/results/librdkafka-heartbeats-2026-11-25-kafka44.txt``.
MEASURED_LIBRDKAFKA_GAP_MS = {"instant": 332.0, "process": 422.0}


@pytest.mark.parametrize("profile", ["instant", "process"])
def test_librdkafka_heartbeats_go_when_its_main_thread_wakes(profile: str) -> None:
    # No heartbeat timer on the classic protocol: a due heartbeat waits for a commit or a 500 ms / 1 s
    # timer, so the gaps are well over the 250 ms interval, as measured.
    from kassign.sim.bench_meta import bench_config
    from kassign.sim.calibration.benchmark import load_bench_runs
    from kassign.sim.calibration.harness import BenchSimulation, harness_inputs

    (run,) = [r for r in load_bench_runs(reps=[1]) if r.name == f"{profile}-crash-rdkafka-r1"]
    sim = BenchSimulation(harness_inputs(run.meta, run.events()), bench_config(run.meta), seed=1)
    sent: dict[str, list[float]] = {}
    heartbeat = sim.coordinator.heartbeat

    def record(member, generation):  # noqa: ANN001, ANN202
        sent.setdefault(member.name, []).append(sim.loop.now)
        return heartbeat(member, generation)

    sim.coordinator.heartbeat = record
    result = sim.run_bench()
    gaps = [(b - a) * 1000 for times in sent.values() for a, b in zip(times, times[1:]) if b < result.triggers[0]]
    assert len(gaps) > 30 and min(gaps) >= 250 - 1e-6
    assert statistics.median(gaps) == pytest.approx(MEASURED_LIBRDKAFKA_GAP_MS[profile], rel=0.2)
