"""Smoke test of the assignment benchmark (``python -m benchmarks.assign --quick``) on its smallest cases."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cases import build_case, read_case, write_case
from benchmarks.impls import evaluate

ROOT = Path(__file__).resolve().parent.parent
#: sha256 of the case files of the kafka4-uniform tool's generator (which times Kafka 4's UniformAssignor on
#: the same cases); the file says how they were produced.
GENERATOR_DIGESTS = ROOT / "tests" / "data" / "kafka4_uniform_cases.sha256.json"


def _quick_run(tmp_path: Path, cases: str, impls: str) -> tuple[str, list[dict]]:
    out = tmp_path / f"bench-{cases}.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.assign",
            "--quick",
            "--cases",
            cases,
            "--impls",
            impls,
            "--timebox",
            "10",
            "--case-dir",
            str(tmp_path / "cases"),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())["results"]


def test_quick_run_prints_tables_and_valid_results(tmp_path: Path) -> None:
    # aiokafka's sticky assignor takes seconds on the unequal case: it runs on S1 only.
    stdout, rows = _quick_run(tmp_path, "S1", "floor,kassign-sticky,kassign-coop,aiokafka-sticky")
    stdout_last1, rows_last1 = _quick_run(tmp_path, "S1_last1", "floor,kassign-sticky,kassign-coop")
    for text in (stdout, stdout_last1):
        assert "Time per assign() call" in text and "xfloor" in text
        assert "Quality: balance" in text
        assert "Targets" in text
    rows += rows_last1
    timed = [r for r in rows if "medianMs" in r]
    assert {(r["impl"], r["case"]) for r in timed} >= {
        ("floor", "S1"),
        ("kassign-sticky", "S1"),
        ("kassign-coop", "S1"),
        ("aiokafka-sticky", "S1"),
        ("floor", "S1_last1"),
        ("kassign-sticky", "S1_last1"),
        ("kassign-coop", "S1_last1"),
    }
    for r in timed:
        assert r["medianMs"] > 0
        assert r["valid"] == "ok", r
    # Every sticky assignor keeps the group balanced on S1 (1,000 partitions over 10 members, then 9, then 11).
    for r in timed:
        if r["impl"] != "floor" and r["case"] == "S1":
            assert r["balance"] <= 1, r
            if r["step"] != "fresh":
                assert r["moved"] >= 90, r  # at least the leaver's 100 / the joiner's share change owner


@pytest.mark.java
def test_java_sticky_bench_reports_valid_rows(tmp_path: Path) -> None:
    from benchmarks.impls import run_java

    case = build_case("S1")
    write_case(case, tmp_path / "S1.txt")
    for impl in ("java-sticky", "java-coop"):
        rows = run_java(impl, tmp_path / "S1.txt", ("fresh", "leave", "join"), limit=30, warmup_seconds=0.1)
        assert [r["step"] for r in rows] == ["fresh", "leave", "join"]
        for r in rows:
            assert r["impl"] == impl and r["valid"] == "ok" and r["medianMs"] > 0, r
        assert rows[1]["moved"] >= 100  # the leaver's partitions all change owner


def test_evaluate_flags_double_and_missing_assignment() -> None:
    case = build_case("S1")
    members = case.step_members("fresh")
    ids = list(members)
    everything = [(t, p) for t, n in case.topics.items() for p in range(n)]
    split = {m: everything[i :: len(ids)] for i, m in enumerate(ids)}
    assert evaluate(case, members, split, None)["valid"] == "ok"
    doubled = {**split, ids[0]: split[ids[0]] + [split[ids[1]][0]]}
    assert "twice" in evaluate(case, members, doubled, None)["valid"]
    missing = {**split, ids[0]: split[ids[0]][1:]}
    assert "unassigned" in evaluate(case, members, missing, None)["valid"]
    assert evaluate(case, members, missing, None, complete=False)["valid"] == "ok"
    moved = evaluate(case, members, split, {everything[0]: ids[1]})
    assert moved["moved"] == 1 and moved["balance"] == 0


def test_case_files_round_trip(tmp_path: Path) -> None:
    case = build_case("S1_last1")
    write_case(case, tmp_path / "S1_last1.txt")
    again = read_case(tmp_path / "S1_last1.txt")
    assert again == case
    assert list(case.members.values())[-1] == ["topic-0"]
    assert case.leaver in case.members and case.joiner not in case.members
    assert len(case.step_members("leave")) == 9 and len(case.step_members("join")) == 11


@pytest.mark.parametrize("name", ["S2", "NU2", "S3"])
def test_case_files_match_the_kafka4_uniform_generator(tmp_path: Path, name: str) -> None:
    """Our benchmark cases are byte for byte the ones Kafka 4's assignor is timed on."""
    digests = json.loads(GENERATOR_DIGESTS.read_text())
    write_case(build_case(name), tmp_path / f"{name}.txt")
    assert hashlib.sha256((tmp_path / f"{name}.txt").read_bytes()).hexdigest() == digests[name]
