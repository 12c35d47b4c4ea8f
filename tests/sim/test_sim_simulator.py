"""The simulator's behaviour: Kafka's join barrier and heartbeat-driven notification, eager vs
cooperative rounds, session timeouts, static membership, Tansu's held joins, scenario kinds,
and invariants over random scenarios. Every run calls kassign's real assignors."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace

import pytest

from kassign.model import RebalanceProtocol, TopicPartition
from kassign.sim import (
    SCENARIO_KINDS,
    Crash,
    PartitionIncrease,
    RollingRestart,
    ScaleIn,
    ScaleOut,
    Scenario,
    SimConfig,
    SimulationError,
    SubscriptionChange,
    make_scenario,
    random_scenario,
    simulate,
)
from kassign.timeline.events import read_events
from kassign.timeline.metrics import timeline_metrics

#: The recorded groups' Kafka settings: session 10 s, heartbeat 1 s.
KAFKA = dict(broker="kafka", session_timeout_ms=10000.0, heartbeat_interval_ms=1000.0)
TANSU = dict(broker="tansu", session_timeout_ms=2000.0, heartbeat_interval_ms=300.0)


def scale_out(phase: float = 0.5, *, partitions: int = 24) -> Scenario:
    return Scenario(3, {"topic": partitions}).then(ScaleOut(3, after_s=10.0, phase=phase))


def test_runs_are_deterministic() -> None:
    scenario = random_scenario(7, members=4, partitions=16)
    config = SimConfig(assignor="cooperative-sticky", jitter_ms=3.0, **KAFKA)
    first = [e.to_json() for e in simulate(scenario, config).events]
    second = [e.to_json() for e in simulate(scenario, config).events]
    assert first == second
    jittered = Scenario(3, {"topic": 12}, steps=(ScaleOut(2, after_s=5.0),), seed=1)
    runs = [[e.to_json() for e in simulate(replace(jittered, seed=s), config).events] for s in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]  # the seed drives the jitter


def test_eager_scale_out_is_one_round_that_revokes_everything() -> None:
    m = simulate(scale_out(), SimConfig(assignor="range", **KAFKA)).metrics["1:scale_out"]
    assert m.rounds == 1
    assert m.unowned_parts == 24  # eager: every partition is revoked, even those that stay
    assert m.revoke_callbacks == 3 and m.assign_callbacks == 6
    assert m.moved == 20  # range over 6 members keeps only the first member's first 4
    assert m.double_owned_ps == 0 and m.balance == 0


def test_cooperative_scale_out_waits_one_heartbeat_for_its_second_round() -> None:
    m = simulate(scale_out(), SimConfig(assignor="cooperative-sticky", **KAFKA)).metrics["1:scale_out"]
    assert m.rounds == 2
    assert m.moved == 12 and m.unowned_parts == 12
    assert m.gap_kept_s == 0  # kept partitions never pause under cooperative
    # The moving partitions are revoked at the first SyncGroup; the members that revoked nothing
    # notice the second rebalance only at their next heartbeat, one interval later.
    assert m.unowned_ps / m.moved == pytest.approx(1.0, rel=0.1)
    assert m.double_owned_ps == 0 and m.balance == 0


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_the_heartbeat_phase_decides_when_members_notice(assignor: str) -> None:
    config = SimConfig(assignor=assignor, **KAFKA)
    early = simulate(scale_out(0.2), config).metrics["1:scale_out"].settle_s
    late = simulate(scale_out(0.8), config).metrics["1:scale_out"].settle_s
    assert early - late == pytest.approx(0.6, abs=0.05)  # (0.8 - 0.2) of the 1 s heartbeat interval


def test_a_crash_costs_a_session_timeout() -> None:
    scenario = Scenario(3, {"topic": 12}).then(Crash(after_s=10.0, phase=0.5))
    result = simulate(scenario, SimConfig(assignor="cooperative-sticky", **KAFKA))
    m = result.metrics["1:crash"]
    assert 10.0 <= m.window_s <= 10.0 + 1.0 + 0.2  # session timeout, then the next heartbeat
    assert m.unowned_ps == pytest.approx(4 * m.window_s, rel=0.01)
    assert result.settled and len(m.final) == 12 and set(m.final.values()) == {"m1", "m2"}


def test_static_members_restart_within_the_session_timeout_without_a_rebalance() -> None:
    scenario = Scenario(3, {"topic": 12}).then(RollingRestart(down_s=2.0, interval_s=3.0, after_s=10.0))
    static_config = SimConfig(assignor="sticky", static_membership=True, **KAFKA)
    static = simulate(scenario, static_config).metrics["1:rolling_restart"]
    assert static.rounds == 0 and static.moved == 0
    dynamic = simulate(scenario, SimConfig(assignor="sticky", **KAFKA)).metrics["1:rolling_restart"]
    assert dynamic.rounds >= 6  # a leave and a join per member


def test_tansu_holds_every_join_for_half_the_session_timeout() -> None:
    scenario = Scenario(3, {"topic": 12})
    tansu = simulate(
        scenario, SimConfig(assignor="range", broker="tansu", session_timeout_ms=4000.0, heartbeat_interval_ms=300.0)
    ).metrics["initial"]
    kafka = simulate(scenario, SimConfig(assignor="range", **KAFKA)).metrics["initial"]
    assert tansu.settle_s >= 2.0
    assert kafka.settle_s < 0.5


def test_tansu_eager_scale_out_answers_old_members_before_newcomers() -> None:
    result = simulate(scale_out(), SimConfig(assignor="range", **TANSU))
    start, _ = result.phases["1:scale_out"]
    assigned = {e.id: e.t - start for e in result.events if e.ev == "cb_assigned" and e.t >= start}
    # Old members rejoin once (held 1 s); newcomers first get MEMBER_ID_REQUIRED, then are held too
    # and their SyncGroup waits for Tansu's next one-second poll.
    assert all(0.9 < assigned[m] < 1.5 for m in ("m1", "m2", "m3"))
    assert all(1.9 < assigned[m] < 2.5 for m in ("m4", "m5", "m6"))


def test_partition_increase_reaches_the_group_through_the_leader() -> None:
    scenario = Scenario(3, {"topic": 6}).then(PartitionIncrease("topic", 12, after_s=10.0))
    result = simulate(scenario, SimConfig(assignor="cooperative-sticky", metadata_max_age_ms=5000.0, **KAFKA))
    m = result.metrics["1:partition_increase"]
    assert sorted(m.final) == [TopicPartition("topic", p) for p in range(12)]
    assert m.balance == 0 and m.moved == 0


def test_subscription_change_assigns_the_new_topic() -> None:
    scenario = Scenario(2, {"a": 4}, extra_topics={"b": 4}).then(SubscriptionChange(("a", "b"), after_s=10.0))
    m = simulate(scenario, SimConfig(assignor="range", **KAFKA)).metrics["1:subscription_change"]
    assert {tp.topic for tp in m.final} == {"a", "b"} and len(m.final) == 8


def test_delayed_assignor_holds_a_departed_members_partitions() -> None:
    scenario = Scenario(3, {"topic": 12}).then(ScaleIn(1, after_s=10.0), ScaleOut(1, after_s=3.0))
    config = SimConfig(assignor="kassign-delayed-cooperative-sticky", scheduled_rebalance_max_delay_ms=20000, **KAFKA)
    result = simulate(scenario, config)
    assert len(result.metrics["1:scale_in"].final) == 8  # m3's 4 partitions are held back
    assert len(result.metrics["2:scale_out"].final) == 12
    assert result.end_s >= 10.0 + 20.0  # released to the newcomer only when the delay ran out
    eager_release = simulate(scenario, SimConfig(assignor="cooperative-sticky", **KAFKA))
    assert len(eager_release.metrics["1:scale_in"].final) == 12


@pytest.mark.parametrize("kind", SCENARIO_KINDS)
def test_every_scenario_kind_settles_with_every_partition_owned_once(kind: str) -> None:
    result = simulate(make_scenario(kind, 4, 16, seed=3), SimConfig(assignor="cooperative-sticky", **KAFKA))
    assert result.settled
    last = list(result.metrics.values())[-1]
    assert len(last.final) == sum(result.subscribed.values())
    if kind == "partition_increase":
        assert result.subscribed == {"topic": 32}
    if kind == "subscription_change":
        assert result.subscribed == {"topic": 16, "topic-b": 16}
    assert all(m.double_owned_ps == 0 for m in result.metrics.values())


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_random_scenarios_on_kafka_never_double_own_and_end_balanced(assignor: str) -> None:
    for seed in range(6):
        result = simulate(random_scenario(seed, members=3, partitions=12), SimConfig(assignor=assignor, **KAFKA))
        assert result.settled, seed
        for name, m in result.metrics.items():
            assert m.double_owned_ps == 0, (seed, name)
        last = list(result.metrics.values())[-1]
        assert last.balance <= 1, seed
        assert len(last.final) == sum(result.subscribed.values()), seed


def test_events_use_the_shared_timeline_schema(tmp_path) -> None:
    result = simulate(scale_out(), SimConfig(assignor="cooperative-sticky", **KAFKA))
    path = tmp_path / "sim.jsonl.gz"
    assert result.write_events(str(path)) == len(result.events)
    again = timeline_metrics(read_events(path), result.phases)
    assert again["1:scale_out"].unowned_ps == pytest.approx(result.metrics["1:scale_out"].unowned_ps, abs=1e-5)
    kinds = {e.ev for e in result.events}
    assert {"subscribed", "join", "sync", "cb_assigned", "cb_revoked", "cb_revoked_done"} <= kinds
    first = json.loads(gzip.decompress(path.read_bytes()).splitlines()[0])
    assert set(first) >= {"id", "t", "ev"}


class _MovesOwnedPartitions:
    """An assignor that ignores ownership: illegal under the cooperative protocol."""

    name = "bad"
    supported_protocols = (RebalanceProtocol.COOPERATIVE,)

    def subscription_user_data(self, topics):  # noqa: ANN001, ANN201
        return None

    def on_assignment(self, partitions, generation):  # noqa: ANN001, ANN201
        return None

    def assign(self, partitions_per_topic, subscriptions):  # noqa: ANN001, ANN201
        members = sorted(subscriptions)[::-1]
        parts = [TopicPartition(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t])]
        return {m: parts[i :: len(members)] for i, m in enumerate(members)}


def test_an_assignment_a_kafka_client_would_reject_raises() -> None:
    with pytest.raises(SimulationError, match="broke the cooperative rule"):
        simulate(scale_out(), SimConfig(**KAFKA), assignor_factory=lambda name: _MovesOwnedPartitions())


def test_bad_configuration_is_named() -> None:
    with pytest.raises(ValueError, match="does not support the COOPERATIVE"):
        simulate(scale_out(), SimConfig(assignor="range", protocol=RebalanceProtocol.COOPERATIVE))
    with pytest.raises(ValueError, match="unknown assignor 'nope'"):
        simulate(scale_out(), SimConfig(assignor="nope"))
    with pytest.raises(ValueError, match="unknown broker model 'zk'"):
        SimConfig(broker="zk")
    with pytest.raises(ValueError, match="session_timeout_ms must be a finite number of milliseconds from 0"):
        SimConfig(session_timeout_ms=-1)
    for bad in (float("nan"), float("inf"), 1e308):
        with pytest.raises(ValueError, match=re.escape(f"limit), got {bad!r}")):
            SimConfig(horizon_ms=bad)
    with pytest.raises(ValueError, match="must be >= 1"):
        SimConfig(heartbeat_interval_ms=1e-9)
    with pytest.raises(ValueError, match=r"unknown simulator setting\(s\) \['colour'\]"):
        SimConfig.from_dict({"colour": "red"})


def test_event_loop_refuses_times_it_could_never_leave() -> None:
    from kassign.sim.engine import EventLoop

    loop = EventLoop()
    for t in (float("nan"), float("inf"), 1e308):
        with pytest.raises(ValueError, match="cannot schedule at simulated time"):
            loop.at(t, print)
