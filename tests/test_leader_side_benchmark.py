"""Smoke test of the leader-side benchmark (``python -m benchmarks.leader_side``) on its smallest size:
no broker, one short JVM run; kassign's and Java's codecs must agree byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.leader_side import SCENARIOS, build_cases, main, topic_layout

pytestmark = pytest.mark.java


def test_layout_and_cases_are_fixed() -> None:
    assert topic_layout(240) == {"orders": 120, "payments": 60, "clicks": 40, "audit": 20}
    assert sum(topic_layout(5000).values()) == 5000
    fresh, scale_out, one_gone = build_cases(24)
    assert (len(fresh.metadata), len(scale_out.metadata), len(one_gone.metadata)) == (24, 30, 23)
    assert build_cases(24)[1].metadata == scale_out.metadata  # seeded: the same bytes every run


def test_smallest_size_runs_with_java_exact_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "leader.json"
    assert main(["--sizes", "6", "--reps", "3", "--warmup-seconds", "0.1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Leader time, ms" in text and "SyncGroup kassign" in text
    for scenario in SCENARIOS:
        assert f"| 6 | 24 | {scenario} |" in text
        assert f"| 6 | {scenario} |" in text
    cases = json.loads(out.read_text())["cases"]
    assert [c["rebalance"] for c in cases] == list(SCENARIOS)
    for c in cases:
        assert c["kassign"]["checks"]["codecsJavaExact"]
        assert c["java"]["subscriptionMismatches"] == 0 and c["java"]["kassignAssignmentMismatches"] == []
        for side in ("kassign", "java"):
            assert c[side]["assignMs"] > 0 and c[side]["decodeMs"] > 0 and c[side]["syncBytes"] > 0
        if c["kassign"]["checks"]["samePayload"]:
            assert c["kassign"]["syncBytes"] == c["java"]["syncBytes"]
