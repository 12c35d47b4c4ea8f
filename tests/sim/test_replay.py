"""``kassign simulate --replay``: recorded groups replayed through the simulator under another
assignor or protocol, on the recordings in data/rebalance-timelines and on a small hand-written multi-file recording."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kassign.model import TopicPartition
from kassign.sim import Crash, ScaleIn, ScaleOut
from kassign.sim.cli import main as simulate_main
from kassign.sim.replay import load_recording, membership_changes, plan_replay, replay, replay_config
from kassign.timeline.events import Event, write_events

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"
RANGE_RUN = RECORDINGS / "kafka-java-range-r1"


def test_eager_recording_replayed_as_cooperative_moves_no_more_and_names_the_difference() -> None:
    report = replay(load_recording(RANGE_RUN), assignor="cooperative-sticky")
    recorder = json.loads((RANGE_RUN / "metrics.json").read_text())
    assert [p.name for p in report.phases] == ["out", "in"]
    for phase in report.phases:
        # The recorded side is the recorder's own measurement of the run.
        assert phase.recorded.moved == recorder[phase.name]["moved"]
        assert phase.recorded.unowned_ps == pytest.approx(recorder[phase.name]["unowned_ps"], abs=0.01)
        assert phase.simulated.moved <= phase.recorded.moved
        assert phase.simulated.double_owned_ps == 0
    assert [p.members for p in report.phases] == [(3, 6), (6, 3)]
    assert report.config.session_timeout_ms == 10000 and report.config.heartbeat_interval_ms == 1000
    rec_moved, sim_moved = report.totals()["moved"]
    assert sim_moved <= rec_moved
    line = report.difference()
    assert "cooperative-sticky (cooperative)" in line and "range (eager)" in line
    assert f"moves {int(rec_moved - sim_moved)} fewer partitions" in line
    assert "unowned partition-seconds" in line and "rounds" in line and "settle time" in line


def test_cli_prints_side_by_side_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate_main(["--replay", str(RANGE_RUN), "--assignor", "cooperative-sticky"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("phase"))
    for metric in ("unowned_ps", "moved", "rounds", "settle_s"):
        assert metric in header
    assert "recorded  simulated" in out
    assert any(line.startswith("out ") for line in out.splitlines())
    assert "difference: cooperative-sticky (cooperative) moves" in out
    assert "shutdown" in out  # the survivors' final close is named, not replayed


def test_recording_without_meta_takes_settings_from_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(RANGE_RUN / "events.jsonl.gz", tmp_path / "events.jsonl.gz")
    assert (
        simulate_main(
            [
                "--replay",
                str(tmp_path),
                "--broker",
                "kafka",
                "--session-ms",
                "10000",
                "--heartbeat-ms",
                "1000",
                "--protocol",
                "eager",
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == {"1:scale_out recorded", "1:scale_out simulated", "2:scale_in recorded", "2:scale_in simulated"}
    recorder = json.loads((RANGE_RUN / "metrics.json").read_text())
    assert rows["1:scale_out recorded"]["moved"] == recorder["out"]["moved"]
    assert rows["2:scale_in recorded"]["moved"] == recorder["in"]["moved"]
    # Eager cooperative-sticky still rebalances stickily: it moves no more than eager range did.
    assert rows["1:scale_out simulated"]["moved"] <= rows["1:scale_out recorded"]["moved"]


def test_every_shared_recording_replays_as_cooperative_sticky() -> None:
    runs = sorted(d for d in RECORDINGS.iterdir() if (d / "metrics.json").is_file())
    assert len(runs) >= 30
    for run in runs:
        report = replay(load_recording(run), assignor="cooperative-sticky")
        recorder = json.loads((run / "metrics.json").read_text())
        assert [p.name for p in report.phases] == ["out", "in"], run.name
        assert report.result.settled, run.name
        for phase in report.phases:
            assert phase.recorded.moved == recorder[phase.name]["moved"], (run.name, phase.name)
            assert phase.recorded.unowned_ps == pytest.approx(recorder[phase.name]["unowned_ps"], abs=0.01), run.name
        rec_moved, sim_moved = report.totals()["moved"]
        assert sim_moved <= rec_moved, run.name


def test_members_files_are_merged_by_time(tmp_path: Path) -> None:
    """The run's timeline split into one file per writer (as telemetry leaves it) reads back as the run."""
    events = load_recording(RANGE_RUN / "events.jsonl.gz").events
    for writer in sorted({e.id for e in events}):
        write_events(tmp_path / f"{writer}.jsonl", [e for e in events if e.id == writer], single_topic="topic")
    report = replay(load_recording(tmp_path), session_timeout_ms=10000, heartbeat_interval_ms=1000)
    recorder = json.loads((RANGE_RUN / "metrics.json").read_text())
    assert [(p.name, p.members) for p in report.phases] == [("1:scale_out", (3, 6)), ("2:scale_in", (6, 3))]
    assert [p.recorded.moved for p in report.phases] == [recorder["out"]["moved"], recorder["in"]["moved"]]
    assert [p.recorded.unowned_ps for p in report.phases] == pytest.approx(
        [recorder["out"]["unowned_ps"], recorder["in"]["unowned_ps"]], abs=0.01
    )
    assumed = next(n for n in report.plan.notes if n.startswith("no meta.json"))
    assert "broker kafka" in assumed and "session " not in assumed and "heartbeat " not in assumed
    assert any("partition counts" in n for n in report.plan.notes)


# -- a hand-written recording: four members' telemetry files --------------------------------

A, B, C, D = "consumer-1-a1f0", "consumer-1-b2e1", "consumer-1-c3d2", "consumer-1-d4c3"


def _tps(*parts: int) -> list[TopicPartition]:
    return [TopicPartition("orders", p) for p in parts]


def _member_events() -> dict[str, list[Event]]:
    """An eager group on "orders" (12 partitions): a, b, c start; d joins at 20 s; b closes at 40 s
    (not the newest member); c goes silent at 60 s and its partitions go to a and d at 70.5 s."""

    def ev(member: str, t: float, kind: str, parts: list[TopicPartition] | None = None, **extra: Any) -> Event:
        return Event(member, t, kind, parts, extra)

    sub = {"topics": ["orders"], "protocol": "eager"}
    return {
        A: [
            ev(A, 0.00, "subscribed", **sub),
            ev(A, 1.0, "cb_assigned", _tps(0, 1, 2, 3)),
            ev(A, 21.0, "cb_revoked", _tps(0, 1, 2, 3)),
            ev(A, 21.05, "cb_assigned", _tps(0, 1, 2)),
            ev(A, 41.0, "cb_revoked", _tps(0, 1, 2)),
            ev(A, 41.05, "cb_assigned", _tps(0, 1, 2, 3)),
            ev(A, 70.5, "cb_revoked", _tps(0, 1, 2, 3)),
            ev(A, 70.55, "cb_assigned", _tps(0, 1, 2, 3, 4, 5)),
            ev(A, 80.0, "progress", pos={"0": 10}),
        ],
        B: [
            ev(B, 0.01, "subscribed", **sub),
            ev(B, 1.0, "cb_assigned", _tps(4, 5, 6, 7)),
            ev(B, 21.0, "cb_revoked", _tps(4, 5, 6, 7)),
            ev(B, 21.05, "cb_assigned", _tps(3, 4, 5)),
            ev(B, 40.0, "closing"),
            ev(B, 40.001, "cb_revoked", _tps(3, 4, 5)),
            ev(B, 40.01, "cb_revoked_done"),
            ev(B, 40.02, "closed"),
        ],
        C: [
            ev(C, 0.02, "subscribed", **sub),
            ev(C, 1.0, "cb_assigned", _tps(8, 9, 10, 11)),
            ev(C, 21.0, "cb_revoked", _tps(8, 9, 10, 11)),
            ev(C, 21.05, "cb_assigned", _tps(6, 7, 8)),
            ev(C, 41.0, "cb_revoked", _tps(6, 7, 8)),
            ev(C, 41.05, "cb_assigned", _tps(4, 5, 6, 7)),
            ev(C, 60.0, "progress", pos={"4": 10}),
        ],
        D: [
            ev(D, 20.0, "subscribed", **sub),
            ev(D, 21.05, "cb_assigned", _tps(9, 10, 11)),
            ev(D, 41.0, "cb_revoked", _tps(9, 10, 11)),
            ev(D, 41.05, "cb_assigned", _tps(8, 9, 10, 11)),
            ev(D, 70.5, "cb_revoked", _tps(8, 9, 10, 11)),
            ev(D, 70.55, "cb_assigned", _tps(6, 7, 8, 9, 10, 11)),
        ],
    }


@pytest.fixture
def telemetry_files(tmp_path: Path) -> list[Path]:
    """One file per member as the telemetry recorder writes them (bare ints for the one topic);
    b's in a subdirectory of its own, gzip-compressed."""
    paths = []
    for i, (member, events) in enumerate(_member_events().items()):
        folder = tmp_path / ("other" if member == B else "telemetry")
        folder.mkdir(exist_ok=True)
        path = folder / f"member{i}.jsonl{'.gz' if member == B else ''}"
        write_events(path, events, single_topic="orders")
        paths.append(path)
    return paths


def test_membership_timeline_is_inferred(telemetry_files: list[Path]) -> None:
    recording = load_recording(telemetry_files[0].parent, telemetry_files[1])
    changes, crashes = membership_changes(recording.events)
    assert [(c.kind, c.member, c.t) for c in changes] == [
        ("join", A, 0.0),
        ("join", B, 0.01),
        ("join", C, 0.02),
        ("join", D, 20.0),
        ("leave", B, 40.0),
        ("crash", C, 60.0),
    ]
    assert [(e.id, e.t, e.ev) for e in crashes] == [(C, 60.0, "crash")]
    # Bare-int partitions belong to the one topic the members subscribed to.
    assert {tp.topic for e in recording.events for tp in e.parts or ()} == {"orders"}


def test_scenario_fires_the_recorded_steps(telemetry_files: list[Path]) -> None:
    recording = load_recording(*telemetry_files)
    config = replay_config(recording, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    plan = plan_replay(recording, config)
    scenario = plan.scenario
    assert scenario.members == 3 and dict(scenario.topics) == {"orders": 12}
    assert scenario.subscribed == ("orders",)
    out, scale_in, crash = scenario.steps
    assert isinstance(out, ScaleOut) and out.count == 1
    assert isinstance(scale_in, ScaleIn) and scale_in.count == 1
    # b (m2) closed, but a scale-in closes the newest (m4, d): d goes on as m2, and c stays m3.
    assert crash == Crash(member="m3", after_s=crash.after_s)
    spawn_s = config.latency_ms("spawn_ms") / 1000
    assert out.after_s == pytest.approx(20.0 - spawn_s)
    assert out.after_s + scale_in.after_s == pytest.approx(40.0 - spawn_s)
    assert out.after_s + scale_in.after_s + crash.after_s == pytest.approx(60.0 - spawn_s)
    assert list(plan.phases) == ["1:scale_out", "2:scale_in", "3:crash"]
    assert plan.phases["3:crash"] == (60.0, pytest.approx(80.0, abs=1e-3))
    assert any("not the newest" in n for n in plan.notes) and any("inferred crash" in n for n in plan.notes)


def test_synthetic_recording_replayed_as_cooperative(telemetry_files: list[Path]) -> None:
    report = replay(
        load_recording(*telemetry_files),
        assignor="cooperative-sticky",
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    phases = {p.name: p for p in report.phases}
    # Hand-counted from the recording: the join moved 3, 6, 7, 9, 10, 11; the crash moved c's 4.
    assert phases["1:scale_out"].recorded.moved == 6
    assert phases["3:crash"].recorded.moved == 4
    assert phases["3:crash"].recorded.double_owned_ps == 0  # the inferred crash ends c's ownership
    assert [p.members for p in report.phases] == [(3, 4), (4, 3), (3, 2)]
    assert report.result.settled
    for phase in report.phases:
        assert phase.simulated.moved <= phase.recorded.moved
        assert phase.simulated.balance <= 1
    # The crash is noticed a session timeout after c's last heartbeat (at most one interval earlier).
    assert phases["3:crash"].simulated.settle_s >= 10.0 - 1.0
    assert report.recorded_as == "eager"
    assert "cooperative-sticky (cooperative) moves" in report.difference()


def test_bad_recordings_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="holds no timeline files"):
        load_recording(tmp_path)
    assert simulate_main(["--replay", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    only_orchestrator = tmp_path / "fleet.jsonl"
    write_events(only_orchestrator, [Event("fleet", 1.0, "exit")])
    with pytest.raises(ValueError, match="no group member events"):
        replay(load_recording(only_orchestrator))


BENCH = Path(__file__).resolve().parents[2] / "data" / "rebalance-bench-kafka44"


@pytest.mark.parametrize(
    ("run", "client", "processing", "static", "fast"),
    [
        ("process-rolling-restart-java-r1", "java", (250.0, 750.0), False, False),
        ("instant-scale-in-rdkafka-r2", "librdkafka", (0.0, None), False, False),
        ("process-rolling-restart-static-r3", "aiokafka", (250.0, 750.0), True, True),
        ("process-crash-coop-r4", "aiokafka", (250.0, 750.0), False, False),
    ],
)
def test_a_benchmark_recording_replays_with_its_client_and_processing(
    run: str, client: str, processing: tuple[float, float | None], static: bool, fast: bool
) -> None:
    from kassign.sim.config import KAFKA44_PRESETS

    recording = load_recording(BENCH / run)
    config = replay_config(recording)
    assert config.client == client and (config.processing_ms, config.processing_max_ms) == processing
    assert (config.static_membership, config.fast_follow_up) == (static, fast)
    assert config.broker == "kafka"  # from "Apache Kafka 4.4.0 at ..."
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.rebalance_timeout_ms) == (1500, 250, 30000)
    assert all(config.latency_ms(name) == value for name, value in KAFKA44_PRESETS[client].items())
    assert config.assignor == "cooperative-sticky"  # what a replay simulates unless told otherwise
    # Given settings win over the recording's.
    given = replay_config(recording, client="java", processing_ms=100.0, processing_max_ms=200.0)
    assert (given.client, given.processing_ms, given.processing_max_ms) == ("java", 100.0, 200.0)


def test_a_held_replacement_joins_when_it_subscribes_not_when_it_is_ready() -> None:
    recording = load_recording(BENCH / "instant-rolling-restart-fast-r1")
    changes, _ = membership_changes(recording.events)
    ready = {e.id: e.t for e in recording.events if e.ev == "ready"}
    subscribed = {e.id: e.t for e in recording.events if e.ev == "subscribed"}
    joins = {c.member: c.t for c in changes if c.kind == "join"}
    assert set(ready) == {f"m{i}" for i in range(7, 13)}
    assert all(joins[m] == subscribed[m] > ready[m] for m in ready)


def test_cli_replays_a_benchmark_run_under_its_own_client(capsys: pytest.CaptureFixture[str]) -> None:
    run = BENCH / "process-scale-in-java-r1"
    assert simulate_main(["--replay", str(run)]) == 0
    out = capsys.readouterr().out
    assert "on kafka (java), session 1500 ms, heartbeat 250 ms" in out
    assert "recorded java-cooperative (java)" in out
    assert simulate_main(["--replay", str(run), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == {"1:scale_in recorded", "1:scale_in simulated"}
    assert rows["1:scale_in recorded"]["moved"] == rows["1:scale_in simulated"]["moved"] == 12
    # Java survivors rejoin only after their 250-750 ms batches: far more than an instant group's ~2.
    assert rows["1:scale_in simulated"]["unowned_ps"] > 6.0


def test_a_static_restarts_replacement_takes_over_its_predecessors_instance_id() -> None:
    # The replay closes its newest member for each recorded close; in a static group the replacement
    # joins with that member's group.instance.id, so the broker hands it the partitions at once.
    recording = load_recording(BENCH / "instant-rolling-restart-static-r21")
    config = replay_config(recording)
    plan = plan_replay(recording, config)
    outs = [step for step in plan.scenario.steps if isinstance(step, ScaleOut)]
    assert [step.instance_ids for step in outs] == [("m6",)] * 6
    report = replay(recording, config)
    recorded = sum(p.recorded.unowned_ps for p in report.phases)
    simulated = sum(p.simulated.unowned_ps for p in report.phases)
    assert simulated < 2 * recorded < 1.5  # a full rejoin would cost ~4 partition-s per restart
    assert all(p.simulated.rounds == p.recorded.rounds for p in report.phases)
    assert "simulated cooperative-sticky (cooperative, static, fast follow-up)" in report.format()
    # Without static membership nobody takes an id over.
    dynamic = plan_replay(recording, replay_config(recording, static_membership=False))
    assert all(step.instance_ids == () for step in dynamic.scenario.steps if isinstance(step, ScaleOut))
