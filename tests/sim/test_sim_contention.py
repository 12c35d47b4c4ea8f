"""CPU contention in the simulator (:mod:`kassign.sim.contention`, issue 28): member processes sharing
a machine's cores make heartbeats drift apart and rounds take longer, more so the larger the group;
off (``cpu_cores`` None, the default) the simulator behaves exactly as before it existed.

Broker-free: simulated groups only, and the group-size recordings' measurement on synthetic runs.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from kassign.sim.calibration.benchmark import BenchRun
from kassign.sim.calibration.group_size import (
    MEASURED_AT_MEMBERS,
    measured_contention,
    measured_member_cpu_ms,
    revocation_spread_ms,
)
from kassign.sim.config import SimConfig
from kassign.sim.contention import BROKER_PROCESSES, CpuContention
from kassign.sim.scenarios import Crash, ScaleIn, ScaleOut, Scenario
from kassign.sim.simulator import SimResult, simulate
from kassign.timeline.events import Event
from tests.sim.recorded_runs import scale_in_meta

# -- the model on its own ------------------------------------------------------------------------


def test_members_answered_together_are_served_cores_apart() -> None:
    cpu = CpuContention(cores=2, wait_s=0.0, work_s=0.004, processes=lambda: 10)
    done = [cpu.reaction_s(1.0, random.Random(0)) for _ in range(6)]
    # two cores: two at a time, each 4 ms of core time
    assert done == pytest.approx([0.004, 0.004, 0.008, 0.008, 0.012, 0.012])
    # a core freed long ago serves a later answer at once
    assert cpu.reaction_s(5.0, random.Random(0)) == pytest.approx(0.004)


def test_the_wake_up_wait_grows_with_the_processes_beyond_the_cores() -> None:
    count = [2]
    cpu = CpuContention(cores=2, wait_s=0.001, work_s=0.0, processes=lambda: count[0])
    assert cpu.mean_wait_s() == 0.0 and cpu.lateness_s(random.Random(1)) == 0.0  # a core each: no wait
    assert cpu.mean_wait_s(7) == pytest.approx(0.0025)
    assert cpu.mean_wait_s(97) == pytest.approx(0.0475)
    count[0] = 97
    draws = [cpu.lateness_s(random.Random(seed)) for seed in range(2000)]
    assert min(draws) >= 0 and sum(draws) / len(draws) == pytest.approx(0.0475, rel=0.1)


@pytest.mark.parametrize("cores", [0, True, 1.5])
def test_cpu_cores_must_be_a_whole_number_of_cores(cores: object) -> None:
    with pytest.raises(ValueError, match="cpu_cores"):
        SimConfig(cpu_cores=cores)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SimConfig(cpu_cores=2, cpu_wait_ms=-1.0)


# -- off: as before ------------------------------------------------------------------------------


def _digest(result: SimResult) -> str:
    h = hashlib.sha256()
    for e in result.events:
        h.update(f"{e.id}|{e.t:.9f}|{e.ev}|{sorted(map(str, e.parts or []))}|{sorted(e.extra.items())}\n".encode())
    return h.hexdigest()[:16]


#: The timelines of these groups before contention existed (kassign at 7077f62, the commit before it):
#: with ``cpu_cores`` None they must come out the same, event for event.
BEFORE_CONTENTION = {
    "aiokafka-eager-lag": "9c5084ad8d16fb58",
    "aiokafka-fast": "4122d5239bc8f777",
    "java-coop-jitter": "819106b8af6c726a",
    "librdkafka-coop": "91276280499bda8e",
    "kip848-aiokafka": "0fbfc1bd17a92dce",
}
CONFIGS = {
    "aiokafka-eager-lag": dict(
        client="aiokafka", assignor="roundrobin", heartbeat_lag_ms=2.0, commit_interval_ms=200.0
    ),
    "aiokafka-fast": dict(client="aiokafka", fast_follow_up=True),
    "java-coop-jitter": dict(client="java", jitter_ms=3.0, processing_ms=5.0, processing_max_ms=40.0),
    "librdkafka-coop": dict(client="librdkafka", commit_interval_ms=1000.0),
    "kip848-aiokafka": dict(client="aiokafka", group_protocol="consumer"),
}
SCENARIO = Scenario(
    members=6,
    topics={"t": 48},
    steps=(ScaleOut(3, after_s=3.0, phase=0.3), ScaleIn(4, after_s=3.0, phase=0.7), Crash(after_s=3.0)),
    seed=7,
)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_without_cores_the_timeline_is_the_one_from_before_contention(name: str) -> None:
    settings = dict(session_timeout_ms=3000, heartbeat_interval_ms=500, **CONFIGS[name])
    assert _digest(simulate(SCENARIO, SimConfig(**settings))) == BEFORE_CONTENTION[name]
    # the two costs alone do nothing without cores to share
    idle = SimConfig(**settings, cpu_wait_ms=5.0, member_cpu_ms=5.0)
    assert _digest(simulate(SCENARIO, idle)) == BEFORE_CONTENTION[name]


# -- on: what grows with the group ---------------------------------------------------------------


def _scale_in(members: int, *, cores: int | None, seed: int = 3, **extra: object) -> SimResult:
    """An eager group of ``members`` aiokafka consumers (10 partitions each, session 10 s, heartbeat
    1 s, the group-size benchmark's) loses a quarter of them 4.5 s after forming."""
    scenario = Scenario(
        members=members,
        topics={"t": 10 * members},
        steps=(ScaleIn(members // 4, after_s=4.5, phase=0.5),),
        seed=seed,
    )
    settings: dict[str, object] = {
        "client": "aiokafka",
        "assignor": "roundrobin",
        "session_timeout_ms": 10000,
        "heartbeat_interval_ms": 1000,
        "cpu_cores": cores,
        "cpu_wait_ms": 0.4,
        "member_cpu_ms": 3.3,
        **extra,
    }
    return simulate(scenario, SimConfig.from_dict(settings))


def _spread(result: SimResult) -> float:
    trigger = result.phases["1:scale_in"][0]
    spread = revocation_spread_ms(result.events, trigger)
    assert spread is not None
    return spread


def test_without_contention_survivors_hear_of_a_scale_in_in_lockstep() -> None:
    assert _spread(_scale_in(24, cores=None)) == 0.0


def test_with_contention_survivors_hear_apart_and_further_apart_in_larger_groups() -> None:
    small = [_spread(_scale_in(6, cores=2, seed=s)) for s in range(3)]
    mid = [_spread(_scale_in(24, cores=2, seed=s)) for s in range(3)]
    large = [_spread(_scale_in(96, cores=2, seed=s)) for s in range(3)]
    assert min(mid) > 0
    assert sorted(small)[1] < sorted(mid)[1] < sorted(large)[1]
    assert sorted(large)[1] > 100  # hundreds of ms at 96 members on 2 cores


def test_with_contention_a_larger_group_settles_later_and_leaves_more_unowned() -> None:
    def settle(result: SimResult) -> float:
        return result.metrics["1:scale_in"].settle_s

    for members in (24, 96):
        off, on = _scale_in(members, cores=None), _scale_in(members, cores=2)
        assert settle(on) > settle(off)
    assert settle(_scale_in(96, cores=2)) - settle(_scale_in(96, cores=None)) > settle(_scale_in(24, cores=2)) - settle(
        _scale_in(24, cores=None)
    )


def test_contention_is_deterministic_for_a_seed() -> None:
    assert _digest(_scale_in(24, cores=2)) == _digest(_scale_in(24, cores=2))
    assert _digest(_scale_in(24, cores=2, seed=3)) != _digest(_scale_in(24, cores=2, seed=4))
    kip848 = dict(group_protocol="consumer", assignor="cooperative-sticky")
    assert _digest(_scale_in(24, cores=2, **kip848)) == _digest(_scale_in(24, cores=2, **kip848))


def test_more_cores_mean_less_drift() -> None:
    assert _spread(_scale_in(96, cores=8)) < _spread(_scale_in(96, cores=2))


# -- measured at 6 members only ------------------------------------------------------------------


def _fake_run(tmp_path: Path, name: str, meta: dict[str, object], events: list[Event]) -> BenchRun:
    import gzip

    d = tmp_path / name
    d.mkdir()
    (d / "meta.json").write_text(json.dumps(meta))
    with gzip.open(d / "events.jsonl.gz", "wt") as f:
        for e in events:
            row: dict[str, object] = {"id": e.id, "t": e.t, "ev": e.ev, **e.extra}
            if e.parts is not None:
                row["parts"] = [tp.partition for tp in e.parts]
            f.write(json.dumps(row) + "\n")
    return BenchRun(d, meta)


def _scale_in_run(tmp_path: Path, members: int, spacing_s: float) -> BenchRun:
    """A recorded eager scale-in of ``members`` (one leaving) whose survivors' assign callbacks in the
    round after the trigger come ``spacing_s`` apart."""
    meta = scale_in_meta(members)
    events = [Event(f"m{i}", 90.0, "subscribed", None, {}) for i in range(1, members + 1)]
    events += [Event(f"m{members}", 100.01, "closing", None, {})]
    events += [Event(f"m{i}", 100.6 + (i - 1) * spacing_s, "cb_assigned", [], {"gen": 5}) for i in range(1, members)]
    return _fake_run(tmp_path, f"n{members}-instant-scale-in-eager-r1", meta, events)


def test_a_members_core_time_is_the_spacing_of_the_assign_callbacks_times_the_cores(tmp_path: Path) -> None:
    run = _scale_in_run(tmp_path, MEASURED_AT_MEMBERS, 0.002)
    assert measured_member_cpu_ms([run], cores=2) == pytest.approx(4.0)


def test_contention_is_measured_on_groups_of_6_only(tmp_path: Path) -> None:
    large = _scale_in_run(tmp_path, 24, 0.01)
    with pytest.raises(ValueError, match="no groups of 6"):
        measured_contention([large])


def test_the_processes_are_the_members_and_the_broker() -> None:
    assert BROKER_PROCESSES == 1
    result = _scale_in(6, cores=2)
    assert result.settled
