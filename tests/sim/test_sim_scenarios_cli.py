"""Scenario composition and validation, and the ``kassign simulate`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kassign.cli import main as kassign_main
from kassign.sim import SCENARIO_KINDS, Crash, ScaleIn, ScaleOut, Scenario, make_scenario, random_scenario
from kassign.sim.cli import main as simulate_main
from kassign.timeline.events import read_events

RECORDINGS = Path(__file__).resolve().parents[2] / "data" / "rebalance-timelines"


def test_scenarios_compose() -> None:
    base = Scenario(3, {"t": 6})
    composed = base.then(ScaleOut(2)).then(ScaleIn(1), Crash())
    assert [type(s) for s in composed.steps] == [ScaleOut, ScaleIn, Crash]
    assert base.steps == ()  # scenarios are values
    assert composed.to_dict()["steps"][0] == {
        "kind": "scale_out",
        "count": 2,
        "after_s": 10.0,
        "phase": None,
        "instance_ids": (),
    }


def test_random_scenarios_are_reproducible_and_varied() -> None:
    assert random_scenario(5) == random_scenario(5)
    assert len({random_scenario(s).steps for s in range(10)}) == 10


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(members=-1, topics={"t": 1}), "members must be >= 0"),
        (dict(members=1, topics={}), "at least one topic"),
        (dict(members=1, topics={"t": -2}), "negative partition count -2"),
        (dict(members=1, topics={"t": 1}, steps=(ScaleOut(after_s=-1),)), "after_s < 0"),
        (dict(members=1, topics={"t": 1}, steps=(ScaleOut(phase=1.5),)), "phase must be in"),
    ],
)
def test_bad_scenarios_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario(**kwargs)


def test_unknown_scenario_kind() -> None:
    with pytest.raises(ValueError, match="unknown scenario kind 'boom'"):
        make_scenario("boom", 3, 6)
    assert "scale_out" in SCENARIO_KINDS


def test_simulate_prints_a_table_and_writes_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "events.jsonl"
    assert (
        kassign_main(
            [
                "simulate",
                "--scenario",
                "scale_in",
                "--members",
                "4",
                "--partitions",
                "8",
                "--assignor",
                "sticky",
                "--events",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "1:scale_in" in text and "unowned_ps" in text and "settled=True" in text
    assert any(e.ev == "cb_revoked" for e in read_events(out))


def test_simulate_json_and_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        simulate_main(
            [
                "--scenario",
                "crash",
                "--broker",
                "tansu",
                "--session-timeout-ms",
                "2000",
                "--heartbeat-interval-ms",
                "300",
                "--set",
                "jitter_ms=2",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["settled"] is True and data["protocol"] == "cooperative"
    assert data["phases"]["1:crash"]["window_s"] >= 2.0  # Tansu evicts after the session timeout


def test_simulate_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate_main(["--set", "no_such_setting=1"]) == 2
    assert "no_such_setting" in capsys.readouterr().err
    assert simulate_main(["--set", "oops"]) == 2


def test_replay_sets_simulation_beside_recording(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate_main(["--replay", str(RECORDINGS / "kafka-java-coop-r1"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == {"out recorded", "out simulated", "in recorded", "in simulated"}
    assert rows["out simulated"]["rounds"] == rows["out recorded"]["rounds"] == 2


def test_simulate_the_consumer_group_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    """``--group-protocol consumer``: the broker assigns; a crash waits for the session timeout, a
    static group is refused (not modelled) with one line."""
    assert (
        simulate_main(
            [
                "--scenario",
                "crash",
                "--members",
                "4",
                "--group-protocol",
                "consumer",
                "--session-ms",
                "2000",
                "--heartbeat-ms",
                "250",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["settled"] is True
    crash = data["phases"]["1:crash"]
    assert crash["double_owned_ps"] == 0 and crash["window_s"] >= 2.0 - 0.25
    assert simulate_main(["--group-protocol", "consumer", "--static"]) == 2
    err = capsys.readouterr().err
    assert "KIP-848" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
