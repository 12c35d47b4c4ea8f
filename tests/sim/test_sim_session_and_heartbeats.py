"""What keeps a simulated member's session alive, and when its heartbeats go.

Kafka's classic coordinator counts an OffsetCommit as a sign of life (``OffsetMetadataManager.commitOffset``):
a crashed member's session ends a session timeout after its last heartbeat or commit. A member's
heartbeats can run a little late each interval (``heartbeat_lag_s``), drawn from a generator of its own
so that its batch times do not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kassign.model import Assignment, Subscription
from kassign.sim import SimConfig
from kassign.sim.coordinator import JoinResponse, KafkaCoordinator, SyncResponse
from kassign.sim.engine import EventLoop
from kassign.sim.processing import Processing
from kassign.sim.scenarios import Scenario
from kassign.sim.simulator import Simulation


@dataclass
class _Member:
    id: str
    instance_id: str | None = None
    joins: list[JoinResponse] = field(default_factory=list)

    def on_join_response(self, response: JoinResponse) -> None:
        self.joins.append(response)

    def on_sync_response(self, response: SyncResponse) -> None:
        pass

    def on_heartbeat_response(self, error: str | None) -> None:
        pass


def _stable_member(loop: EventLoop) -> tuple[KafkaCoordinator, _Member]:
    coordinator = KafkaCoordinator(loop, network_s=0.0, session_s=1.5, rebalance_s=30.0)
    member = _Member("m")
    coordinator.join(member, Subscription(["topic"]), True)
    loop.run(0.01, lambda: False)
    coordinator.sync(member, 1, {"m": Assignment([])})
    assert coordinator.state == "Stable"
    return coordinator, member


def test_an_offset_commit_keeps_a_silent_members_session_alive() -> None:
    loop = EventLoop()
    coordinator, member = _stable_member(loop)
    loop.run(1.0, lambda: False)
    coordinator.offset_commit(member, 1.0)  # then nothing: no heartbeat, no commit
    loop.run(2.4, lambda: False)
    assert "m" in coordinator.members  # 1.4 s after its commit
    loop.run(2.6, lambda: False)
    assert "m" not in coordinator.members  # a session timeout after its commit


def test_a_commit_that_arrived_before_the_last_heartbeat_changes_nothing() -> None:
    loop = EventLoop()
    coordinator, member = _stable_member(loop)
    loop.run(0.5, lambda: False)
    coordinator.heartbeat(member, 1)
    coordinator.offset_commit(member, 0.2)
    loop.run(1.99, lambda: False)
    assert "m" in coordinator.members
    loop.run(2.05, lambda: False)
    assert "m" not in coordinator.members  # 1.5 s after its heartbeat at 0.5


def _group(processing: Processing) -> Simulation:
    return Simulation(Scenario(members=2, topics={"t": 4}, seed=3), SimConfig(
        client="aiokafka", session_timeout_ms=1500, heartbeat_interval_ms=250,
        processing_ms=processing.low_ms, processing_max_ms=processing.high_ms), None)


def test_heartbeat_lateness_spreads_members_without_touching_their_batches() -> None:
    sim = _group(Processing(250.0, 750.0))
    one, two = sim.start_member(), sim.start_member()
    before = [m.poll.rng.getstate() for m in (one, two)]
    for member in (one, two):
        member.heartbeat_lag_s = 0.001
    periods = [one._heartbeat_period_s() - sim.heartbeat_s for _ in range(200)]
    assert all(0.0 <= p <= 0.002 for p in periods) and 0.0008 < sum(periods) / len(periods) < 0.0012
    assert [m.poll.rng.getstate() for m in (one, two)] == before  # batch draws untouched
    assert one._heartbeat_period_s() != two._heartbeat_period_s()  # each member its own lateness


def test_without_lateness_heartbeats_keep_the_interval() -> None:
    sim = _group(Processing())
    member = sim.start_member()
    assert member._heartbeat_period_s() == sim.heartbeat_s


def test_the_last_periodic_commit_of_an_instant_and_of_a_busy_member() -> None:
    instant = _group(Processing())
    member = instant.start_member()
    member.commit_interval_s = 0.2
    instant.loop.run(1.05, lambda: False)
    assert abs(member._last_commit_t() - 1.0) < 1e-9  # on the ticks from subscribing
    busy = _group(Processing(250.0, 750.0))
    member = busy.start_member()
    member.commit_interval_s = 0.2
    busy.loop.run(3.0, lambda: False)
    assert member.consuming
    last = member._last_commit_t()
    assert member.poll.batch_chained and last == member.poll.batch_start  # as its last batch ended
    assert 3.0 - 0.75 <= last <= 3.0
