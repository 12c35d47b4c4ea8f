"""``kassign assign SCENARIO.json`` on the example scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kassign.assign_cli import main, run_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "examples" / "scenarios").glob("*.json"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_examples_assign_every_partition_once(path, capsys):
    assert main([str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    spec = json.loads(path.read_text())
    assigned = [tp for parts in report["assignment"].values() for tp in parts]
    held = list(report["changing_owner"]) if report["held_back"] else []
    expected = {
        f"{t}:{p}"
        for t, n in spec["partitions_per_topic"].items()
        for p in range(n)
        if any(t in s["topics"] for s in spec["subscriptions"].values())
    }
    assert len(assigned) == len(set(assigned)) and set(assigned) | set(held) == expected
    assert not set(assigned) & set(held)


def test_join_example_holds_back_what_changes_owner():
    report = run_scenario(SCENARIOS[[p.stem for p in SCENARIOS].index("join")])
    assert report["assignor"] == "cooperative-sticky"
    assert report["assignment"]["consumer-c"] == []  # gets its share once the others have revoked it
    assert report["held_back"] and set(report["changing_owner"].values()) == {"consumer-c"}


def test_bad_scenario_is_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"assignor": "nope", "partitions_per_topic": {}, "subscriptions": {}}))
    assert main([str(bad)]) == 2
    assert "unknown assignor 'nope'" in capsys.readouterr().err
