"""A revocation callback's OffsetCommit as a round trip under CPU contention (issue 28,
``SimConfig.revocation_commit_ms``): off by default; on, a revocation waits for its commit's answer
(and first for the member's periodic commit in flight), so revocations take longer the larger the
group and the commits of survivors revoking together queue on the cores.

Broker-free: simulated groups only, and the measurement on synthetic 6-member runs.
"""

from __future__ import annotations

import gzip
import json
import random
import statistics
from pathlib import Path

import pytest

from kassign.sim.calibration.benchmark import BenchRun
from kassign.sim.calibration.group_size import (
    measured_contention,
    measured_revocation_commit_ms,
    selected_runs,
)
from kassign.sim.config import SimConfig
from kassign.sim.contention import CpuContention
from kassign.sim.scenarios import ScaleIn, ScaleOut, Scenario
from kassign.sim.simulator import SimResult, simulate
from kassign.timeline.events import Event
from tests.sim.recorded_runs import scale_in_meta


def _group(members: int, step: object, *, seed: int = 3, **extra: object) -> SimResult:
    """``members`` aiokafka consumers (10 partitions each, session 10 s, heartbeat 1 s, periodic commits
    every 200 ms: the group-size benchmark's) on 2 cores, ``step`` 4.5 s after forming."""
    scenario = Scenario(members=members, topics={"t": 10 * members}, steps=(step,), seed=seed)  # type: ignore[arg-type]
    settings: dict[str, object] = {
        "client": "aiokafka",
        "assignor": "roundrobin",
        "session_timeout_ms": 10000,
        "heartbeat_interval_ms": 1000,
        "commit_interval_ms": 200.0,
        "cpu_cores": 2,
        "cpu_wait_ms": 0.4,
        "member_cpu_ms": 3.3,
        **extra,
    }
    return simulate(scenario, SimConfig.from_dict(settings))


def _revocations_ms(result: SimResult, after: float) -> list[float]:
    """Each revocation callback's duration (``cb_revoked`` to ``cb_revoked_done``) from ``after`` on, ms."""
    began: dict[str, float] = {}
    out: list[float] = []
    for e in sorted(result.events, key=lambda e: e.t):
        if e.t < after:
            continue
        if e.ev == "cb_revoked":
            began[e.id] = e.t
        elif e.ev == "cb_revoked_done" and e.id in began:
            out.append((e.t - began.pop(e.id)) * 1000)
    return out


def _eager_scale_in(members: int, **extra: object) -> tuple[SimResult, float]:
    result = _group(members, ScaleIn(members // 4, after_s=4.5, phase=0.5), **extra)
    return result, result.phases["1:scale_in"][0]


# -- the model on its own ------------------------------------------------------------------------


def test_a_reaction_can_take_its_own_core_time() -> None:
    cpu = CpuContention(cores=1, wait_s=0.0, work_s=0.004, processes=lambda: 10)
    assert cpu.reaction_s(1.0, random.Random(0), 0.010) == pytest.approx(0.010)
    assert cpu.reaction_s(1.0, random.Random(0)) == pytest.approx(0.014)  # queued behind it, its own 4 ms


def test_off_by_default_a_revocation_takes_the_presets_revocation_ms() -> None:
    assert SimConfig().revocation_commit_ms is None
    result, trigger = _eager_scale_in(24, revocation_ms=0.5)
    assert _revocations_ms(result, trigger) and all(d == pytest.approx(0.5) for d in _revocations_ms(result, trigger))
    # without contention the setting does nothing either
    plain, _ = _eager_scale_in(24, revocation_ms=0.5, cpu_cores=None, revocation_commit_ms=5.0)
    assert all(d == pytest.approx(0.5) for d in _revocations_ms(plain, trigger))


# -- on: the commit's round trip -----------------------------------------------------------------


def test_a_revocation_waits_for_its_commits_answer_longer_in_a_larger_group() -> None:
    medians = []
    for members in (6, 24, 96):
        result, trigger = _eager_scale_in(members, revocation_commit_ms=1.8)
        durations = _revocations_ms(result, trigger)
        assert min(durations) >= 1.8 - 1e-9  # at least the commit's core time
        medians.append(statistics.median(durations))
    assert medians[0] < medians[1] < medians[2]
    assert medians[2] > 20  # the wake-up wait of 97 processes on 2 cores


def _wave(result: SimResult, after: float) -> tuple[int, float]:
    """The first wave of revocations after ``after`` (those begun within 50 ms of the first): how many,
    and from the first begun to the last done (ms)."""
    began = sorted((e.t, e.id) for e in result.events if e.ev == "cb_revoked" and e.t >= after)
    wave = {m for t, m in began if t <= began[0][0] + 0.05}
    done = max(e.t for e in result.events if e.ev == "cb_revoked_done" and e.t >= after and e.id in wave)
    return len(wave), (done - began[0][0]) * 1000


def test_survivors_revoking_together_queue_their_commits_and_wait_for_one_sent_behind_the_syncgroup() -> None:
    # A cooperative scale-out (kassign's fast follow-up): the survivors revoke right after round 1's
    # SyncGroup, together; their commits (10 ms of a core each, no wait) go through 2 cores in turn.
    step = ScaleOut(8, after_s=4.5, phase=0.5)
    extra = {"assignor": "cooperative-sticky", "fast_follow_up": True, "member_cpu_ms": 0.0}
    lone = _group(24, step, revocation_commit_ms=10.0, commit_interval_ms=None, cpu_wait_ms=0.0, **extra)
    trigger = lone.phases["1:scale_out"][0]
    alone = _revocations_ms(lone, trigger)
    assert min(alone) == pytest.approx(10.0)  # no periodic commits: one round trip each
    count, span = _wave(lone, trigger)
    assert count >= 12 and span >= count * 10.0 / 2 - 1e-6  # served two at a time
    # Periodic commits sent while the JoinGroups wait go beside them and are answered at once: the
    # wave costs about one commit per survivor.
    beside = _group(24, step, revocation_commit_ms=10.0, **extra)
    count_beside, span_beside = _wave(beside, beside.phases["1:scale_out"][0])
    assert min(_revocations_ms(beside, trigger)) >= 10.0 - 1e-6
    # A leader slow to assign (600 ms, three commit ticks) keeps every survivor's SyncGroup out: its
    # periodic commit waits behind it and is answered after the round, a second commit before its own.
    refused = _group(24, step, revocation_commit_ms=10.0, assign_ms=600.0, **extra)
    trigger_refused = refused.phases["1:scale_out"][0]
    assert any(d >= 20.0 - 1e-6 for d in _revocations_ms(refused, trigger_refused))
    count_refused, span_refused = _wave(refused, trigger_refused)
    assert span_refused > count_refused * 10.0 / 2 * 1.5  # more commits than revoking survivors
    assert span_refused / count_refused > 1.5 * span_beside / count_beside


def test_a_leaver_leaves_after_its_revocations_commit() -> None:
    def closed_after_closing(result: SimResult) -> float:
        times = {(e.id, e.ev): e.t for e in result.events}
        leavers = {e.id for e in result.events if e.ev == "closing"}
        return max(times[(m, "closed")] - times[(m, "closing")] for m in leavers)

    off, _ = _eager_scale_in(24)
    on, _ = _eager_scale_in(24, revocation_commit_ms=20.0)
    assert closed_after_closing(on) >= closed_after_closing(off) + 0.020 - 1e-9


def test_the_commit_is_deterministic_for_a_seed() -> None:
    a, t = _eager_scale_in(24, revocation_commit_ms=1.8)
    b, _ = _eager_scale_in(24, revocation_commit_ms=1.8)
    assert _revocations_ms(a, t) == _revocations_ms(b, t)


# -- measured at 6 members only ------------------------------------------------------------------


def _run(tmp_path: Path, members: int, durations_ms: list[float], mode: str = "eager") -> BenchRun:
    """A recorded scale-in of ``members`` whose survivors' revocations after the trigger took ``durations_ms``."""
    name = f"n{members}-instant-scale-in-{mode}-r1"
    meta = scale_in_meta(members, mode)
    rows: list[dict[str, object]] = [{"id": f"m{i}", "t": 90.0, "ev": "subscribed"} for i in range(1, members + 1)]
    rows += [{"id": f"m{i}", "t": 99.45, "ev": "cb_assigned", "parts": [i], "gen": 4} for i in range(1, members + 1)]
    rows.append({"id": f"m{members}", "t": 100.01, "ev": "closing"})
    for i, d in enumerate(durations_ms, start=1):
        rows.append({"id": f"m{i}", "t": 100.5, "ev": "cb_revoked", "parts": [i]})
        rows.append({"id": f"m{i}", "t": 100.5 + d / 1000, "ev": "cb_revoked_done"})
        rows.append({"id": f"m{i}", "t": 100.7, "ev": "cb_assigned", "parts": [i], "gen": 5})
    d = tmp_path / name
    d.mkdir()
    (d / "meta.json").write_text(json.dumps(meta))
    with gzip.open(d / "events.jsonl.gz", "wt") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return BenchRun(d, meta)


def test_the_commits_core_time_is_the_median_revocation_less_the_mean_wait(tmp_path: Path) -> None:
    run = _run(tmp_path, 6, [2.0, 3.0, 3.0, 9.0, 4.0])
    assert measured_revocation_commit_ms([run], wait_ms=1.0) == pytest.approx(2.0)
    assert measured_revocation_commit_ms([run], wait_ms=5.0) == 0.0  # never below nothing
    with pytest.raises(ValueError, match="no eager"):
        (tmp_path / "f").mkdir()
        measured_revocation_commit_ms([_run(tmp_path / "f", 6, [3.0], mode="cooperative")], wait_ms=1.0)


def test_measured_contention_includes_the_commit_unless_asked_not_to(tmp_path: Path) -> None:
    small = _run(tmp_path, 6, [3.0] * 5)
    large = _run(tmp_path, 24, [300.0] * 23)  # never looked at
    on = measured_contention([small, large])
    assert on.revocation_commit_ms is not None and on.revocation_commit_ms < 3.0
    assert on.settings()["revocation_commit_ms"] == on.revocation_commit_ms
    off = measured_contention([small, large], revocation_commit=False)
    assert off.revocation_commit_ms is None and "revocation_commit_ms" not in off.settings()


def test_runs_are_selected_by_size_and_name(tmp_path: Path) -> None:
    runs = [_run(tmp_path, 6, [3.0]), _run(tmp_path, 24, [3.0])]
    assert [r.name for r in selected_runs(runs, names=["n24-instant"])] == ["n24-instant-scale-in-eager-r1"]
    assert [r.name for r in selected_runs(runs, members=[6])] == ["n6-instant-scale-in-eager-r1"]
    assert selected_runs(runs) == runs


def test_events_are_read_back(tmp_path: Path) -> None:
    events: list[Event] = _run(tmp_path, 6, [3.0]).events()
    assert any(e.ev == "cb_revoked_done" for e in events)
