"""``kassign demo --quick`` end to end: broker, each mode's run, summary, PNG and timelines.

With ``KAFKA_BOOTSTRAP_SERVERS`` unset the demo starts its own embedded broker, as on a fresh
machine. Run under ``flock /tmp/kassign-broker.lock``.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("matplotlib")

from integration.timeline_checks import assert_exclusive  # noqa: E402
from kassign.demo import main  # noqa: E402
from kassign.timeline.events import read_events  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def _revocations(events, start, end):
    """member -> partitions revoked in [start, end), and member -> partitions owned at start."""
    owned: dict[str, set] = {}
    revoked: dict[str, set] = {}
    owned_at_start: dict[str, set] = {}
    for e in events:
        if e.t >= start and not owned_at_start:
            owned_at_start = {m: set(p) for m, p in owned.items()}
        if e.ev == "cb_assigned":
            owned.setdefault(e.id, set()).update(e.parts or ())
        elif e.ev in ("cb_revoked", "cb_lost"):
            owned.setdefault(e.id, set()).difference_update(e.parts or ())
            if start <= e.t < end:
                revoked.setdefault(e.id, set()).update(e.parts or ())
        elif e.ev == "closed":
            owned.pop(e.id, None)
    return revoked, owned_at_start


def _run_demo(tmp_path, monkeypatch, label: str) -> tuple[dict, list]:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "demo-out"
    code = main(["--quick", "--only", label, "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {label}
    run = summary[label]
    assert run["unsettled"] == [], f"the {label} group did not settle after {run['unsettled']}"
    assert code == 0
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert run["records"]["produced"] > 0 and run["records"]["lost"] == 0, run["records"]
    events = list(read_events(out / f"{label}.jsonl", default_topic=run["topic"]))
    assert_exclusive(events)  # no partition ever had two owners
    phase = run["phases"]["scale out 2\u21924"]
    revoked, owned = _revocations(events, phase["start"], phase["end"])
    original = {m: parts for m, parts in owned.items() if parts}
    assert sorted(original) == ["m1", "m2"], owned
    return original, revoked


def test_quick_demo_eager(tmp_path, monkeypatch, capsys):
    original, revoked = _run_demo(tmp_path, monkeypatch, "eager")
    assert "partition-s unowned" in capsys.readouterr().out
    for member, parts in original.items():
        # eager: every member gives up everything it owns before rejoining
        assert parts <= revoked.get(member, set()), (member, parts, revoked)


@pytest.mark.parametrize("label", ["cooperative", "fast-follow-up"])
def test_quick_demo_cooperative(tmp_path, monkeypatch, label):
    original, revoked = _run_demo(tmp_path, monkeypatch, label)
    for member, parts in original.items():
        # cooperative-sticky: 6 partitions over 4 members, each original member keeps some
        assert parts - revoked.get(member, set()), (member, parts, revoked)
