"""When a simulated member's heartbeats go, and its periodic commits.

A member's heartbeats can run a little late each interval (``heartbeat_lag_s``), drawn from a
generator of its own so that its batch times do not change. (That a commit keeps a classic member's
session alive is tested with the coordinator's other rules, in ``test_sim_client_loops.py``.)
"""

from __future__ import annotations

from kassign.sim import SimConfig
from kassign.sim.processing import Processing
from kassign.sim.scenarios import Scenario
from kassign.sim.simulator import Simulation


def _group(processing: Processing) -> Simulation:
    return Simulation(
        Scenario(members=2, topics={"t": 4}, seed=3),
        SimConfig(
            client="aiokafka",
            session_timeout_ms=1500,
            heartbeat_interval_ms=250,
            processing_ms=processing.low_ms,
            processing_max_ms=processing.high_ms,
        ),
        None,
    )


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
