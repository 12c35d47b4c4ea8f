"""Issue 6's simulator comparison: a rolling restart of 6 members (leader last) under plain
cooperative-sticky, static membership and Connect-style delayed reassignment."""

from __future__ import annotations

from kassign.sim import Scenario, SimConfig, simulate
from kassign.sim.scenarios import RollingRestart

KAFKA = dict(broker="kafka", session_timeout_ms=10000, heartbeat_interval_ms=1000)


def _restart(config: SimConfig):
    scenario = Scenario(6, {"topic": 24}).then(RollingRestart(down_s=2.0, interval_s=5.0, leader_last=True))
    result = simulate(scenario, config)
    assert result.settled
    assert all(m.double_owned_ps == 0 for m in result.metrics.values())
    return result.metrics["1:rolling_restart"]


def test_static_membership_and_delayed_reassignment_move_less_than_cooperative() -> None:
    cooperative = _restart(SimConfig(assignor="cooperative-sticky", **KAFKA))
    static = _restart(SimConfig(assignor="cooperative-sticky", static_membership=True, **KAFKA))
    delayed = _restart(
        SimConfig(assignor="kassign-delayed-cooperative-sticky", scheduled_rebalance_max_delay_ms=30000, **KAFKA)
    )
    # every member restarts once: plain cooperative reshuffles the restarted members' partitions
    assert cooperative.moved > 0
    # static members come back within the session timeout: no rebalance, nothing moves
    assert static.moved == 0 and static.rounds == 0
    # delayed reassignment gives returning followers their partitions back; only the leader's move
    assert 0 < delayed.moved < cooperative.moved
    assert delayed.moved <= 24 // 6 * 2
    for m in (cooperative, static, delayed):
        assert len(m.final) == 24
