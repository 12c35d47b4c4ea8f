"""kassign's fast follow-up in the simulator: the leader marks assignments when its cooperative
assignor withholds partitions, kassign members rejoin without waiting for a heartbeat."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from kassign.protocol.follow_up_mark import mark_follow_up, read_follow_up
from kassign.sim import Crash, RollingRestart, ScaleIn, ScaleOut, Scenario, SimConfig, simulate

#: The recorded groups' Kafka settings (data/rebalance-timelines): session 10 s, heartbeat 1 s.
KAFKA = SimConfig(
    assignor="cooperative-sticky",
    broker="kafka",
    session_timeout_ms=10000.0,
    heartbeat_interval_ms=1000.0,
    rebalance_timeout_ms=30000.0,
)
TANSU = replace(KAFKA, broker="tansu", session_timeout_ms=1500.0, heartbeat_interval_ms=250.0)
#: Median unowned partition-seconds of the recorded cooperative-sticky scale-outs on Kafka (docs/simulator.md).
RECORDED_COOP_SCALE_OUT_PS = 12.1


def _scale_out(seed: int) -> Scenario:
    return Scenario(3, {"topic": 24}, seed=seed).then(ScaleOut(3, phase=random.Random(seed).random()))


def _follow_ups(result) -> list[tuple[str, int]]:  # noqa: ANN001
    return [(e.id, e.extra["gen"]) for e in result.events if e.ev == "sync" and e.extra.get("follow_up")]


def _timeline(result) -> list[tuple]:  # noqa: ANN001
    return [(e.id, round(e.t, 9), e.ev, tuple(e.parts or ()), tuple(sorted(e.extra.items()))) for e in result.events]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_follow_up_cuts_a_cooperative_scale_out_on_kafka(seed: int) -> None:
    plain = simulate(_scale_out(seed), KAFKA)
    fast = simulate(_scale_out(seed), replace(KAFKA, fast_follow_up=True))
    p, f = plain.metrics["1:scale_out"], fast.metrics["1:scale_out"]
    assert plain.settled and fast.settled
    # Without the mark the model still reproduces the recorded cost: one heartbeat for 12 partitions.
    assert p.unowned_ps == pytest.approx(RECORDED_COOP_SCALE_OUT_PS, rel=0.25)
    assert f.unowned_ps < 0.1 * p.unowned_ps
    assert f.double_owned_ps == p.double_owned_ps == 0
    assert f.rounds == p.rounds == 2
    assert f.moved == p.moved and f.final == p.final
    assert f.gap_kept_s == 0
    assert _follow_ups(fast) and not _follow_ups(plain)


@pytest.mark.parametrize("config", [KAFKA, TANSU], ids=["kafka", "tansu"])
def test_no_mark_and_no_extra_round_when_nothing_is_withheld(config: SimConfig) -> None:
    # Scale-in: the leavers revoked everything before leaving, so the leader withholds nothing.
    scenario = Scenario(6, {"topic": 24}, seed=3).then(ScaleIn(3, phase=0.4))
    plain = simulate(scenario, config)
    fast = simulate(scenario, replace(config, fast_follow_up=True))
    assert _follow_ups(fast) == []
    assert _timeline(fast) == _timeline(plain)
    assert fast.metrics["1:scale_in"].rounds == plain.metrics["1:scale_in"].rounds


def test_eager_groups_are_never_marked() -> None:
    scenario = _scale_out(4)
    plain = simulate(scenario, replace(KAFKA, assignor="sticky"))
    fast = simulate(scenario, replace(KAFKA, assignor="sticky", fast_follow_up=True))
    assert _follow_ups(fast) == []
    assert _timeline(fast) == _timeline(plain)


@pytest.mark.parametrize("config", [KAFKA, TANSU], ids=["kafka", "tansu"])
@pytest.mark.parametrize("seed", [1, 2, 7])
def test_a_group_that_keeps_changing_does_not_rejoin_storm(config: SimConfig, seed: int) -> None:
    # Changes land on rebalances still in flight; the seed moves the first one and the jitter.
    # (Seeds where the plain group settles: with 8 members, the Tansu model can keep re-forming.)
    scenario = Scenario(4, {"topic": 12}, seed=seed).then(
        ScaleOut(2, phase=random.Random(seed).random()),
        RollingRestart(down_s=0.3, interval_s=0.5, after_s=2.0),
        Crash(after_s=1.0),
        ScaleOut(2, after_s=0.5),
        ScaleIn(3, after_s=1.5),
    )
    config = replace(config, jitter_ms=2.0)
    plain = simulate(scenario, config)
    fast = simulate(scenario, replace(config, fast_follow_up=True))
    assert plain.settled and fast.settled
    rounds_plain = sum(m.rounds for m in plain.metrics.values())
    rounds_fast = sum(m.rounds for m in fast.metrics.values())
    assert rounds_fast <= 2 * rounds_plain
    assert all(m.double_owned_ps == 0 for m in fast.metrics.values())
    acted = _follow_ups(fast)
    assert len(acted) == len(set(acted)), "a member rejoined twice for one mark"
    # Never two fast follow-ups in a row: between two, the member synced a generation unmarked.
    for member in {m for m, _ in acted}:
        syncs = [bool(e.extra.get("follow_up")) for e in fast.events if e.ev == "sync" and e.id == member]
        assert not any(a and b for a, b in zip(syncs, syncs[1:])), member


def test_tansu_scale_out_stays_bounded() -> None:
    # Tansu answers each SyncGroup on its own 1-second re-evaluation, so the leader's is answered
    # before the others': rejoining at every mark would start generations nobody else can sync.
    plain = simulate(_scale_out(0), TANSU)
    fast = simulate(_scale_out(0), replace(TANSU, fast_follow_up=True))
    assert fast.settled
    assert fast.metrics["1:scale_out"].rounds <= 2 * plain.metrics["1:scale_out"].rounds
    assert fast.metrics["1:scale_out"].final == plain.metrics["1:scale_out"].final


def test_a_leader_that_is_not_kassign_marks_nothing() -> None:
    scenario = _scale_out(2)
    plain = simulate(scenario, KAFKA)
    mixed = simulate(scenario, replace(KAFKA, fast_follow_up=True, kassign_members=("m2", "m3", "m4", "m5", "m6")))
    assert _follow_ups(mixed) == []
    assert _timeline(mixed) == _timeline(plain)


def test_only_kassign_members_act_on_the_mark() -> None:
    mixed = simulate(_scale_out(2), replace(KAFKA, fast_follow_up=True, kassign_members=["m1", "m4"]))
    assert mixed.settled
    assert {m for m, _ in _follow_ups(mixed)} == {"m1", "m4"}
    assert mixed.metrics["1:scale_out"].double_owned_ps == 0


def test_mark_wraps_the_assignors_own_user_data() -> None:
    assert read_follow_up(mark_follow_up(7, b"delay-state")) == (7, b"delay-state")
    assert read_follow_up(mark_follow_up(0, None)) == (0, None)
    assert read_follow_up(b"delay-state") == (None, b"delay-state")
    assert read_follow_up(None) == (None, None)
    with pytest.raises(ValueError, match="-1"):
        mark_follow_up(-1, None)


def test_delayed_assignor_keeps_working_with_the_mark() -> None:
    config = replace(
        KAFKA,
        assignor="kassign-delayed-cooperative-sticky",
        fast_follow_up=True,
        scheduled_rebalance_max_delay_ms=2000.0,
    )
    scenario = Scenario(4, {"topic": 12}, seed=1).then(Crash(phase=0.3), ScaleOut(1, after_s=15.0))
    result = simulate(scenario, config)
    assert result.settled
    assert all(m.double_owned_ps == 0 for m in result.metrics.values())
    assert "m5" in list(result.metrics.values())[-1].final.values()


def test_kassign_members_setting_is_checked_and_round_trips() -> None:
    config = SimConfig.from_dict({"fast_follow_up": True, "kassign_members": ["m1", "m2"]})
    assert config.kassign_members == ("m1", "m2")
    assert config.follows_up_fast("m1") and not config.follows_up_fast("m3")
    assert SimConfig.from_dict(config.to_dict()) == config
    assert not SimConfig(kassign_members=("m1",)).follows_up_fast("m1")  # the flag is off
    with pytest.raises(TypeError, match="'m1'"):
        SimConfig(kassign_members="m1")  # type: ignore[arg-type]


def test_predicted_table_prints_every_cell(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.predicted_rebalance import SCENARIOS, STRATEGIES, main

    assert main(["--seeds", "1", "--broker", "kafka"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "strategy" not in line]
    assert len(rows) == len(SCENARIOS) * len(STRATEGIES)
    assert "fast follow-up / eager range" in out and "target on Kafka" in out
