"""Anything a user can cause is one line on stderr, ``kassign <command>: <what> (<what to do>)``,
with exit code 2 for bad input, 1 for a failure at run time, 130 for Ctrl-C; never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scenarios" / "join.json"


def scenario(tmp_path: Path, text: str | dict, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    return path


def one_line(run, code: int) -> str:
    assert run.code == code, run.err
    assert len(run.err_lines) == 1 and "Traceback" not in run.err, run.err
    return run.err_lines[0]


# -- kassign assign --------------------------------------------------------------------------


def test_missing_file(kassign, tmp_path):
    missing = tmp_path / "nope.json"
    assert (
        one_line(kassign("assign", str(missing)), 2)
        == f"kassign assign: {missing}: No such file or directory (check the path)"
    )


def test_directory_instead_of_file(kassign, tmp_path):
    assert (
        one_line(kassign("assign", str(tmp_path)), 2)
        == f"kassign assign: {tmp_path}: Is a directory (give a file, not a directory)"
    )


def test_malformed_json(kassign, tmp_path):
    p = scenario(tmp_path, "{oops")
    assert one_line(kassign("assign", str(p)), 2) == (
        f"kassign assign: {p}: malformed JSON at line 1 column 2: Expecting property name enclosed in double "
        "quotes (see kassign assign --help)"
    )


def test_subscriptions_of_wrong_type(kassign, tmp_path):
    p = scenario(tmp_path, {"partitions_per_topic": {"t": 3}, "subscriptions": [1]})
    assert one_line(kassign("assign", str(p)), 2) == (
        f"kassign assign: {p}: 'subscriptions' must be an object of member id -> subscription, got list "
        "(see kassign assign --help)"
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"topics": [1]}, "subscription of 'm': topics must be strings, got [1]"),
        ({"topics": ["t"], "owned_partitions": 5}, "subscription of 'm': 'owned_partitions' must be a list, got 5"),
        (
            {"topics": ["t"], "owned_partitions": [["t", 1.5]]},
            "subscription of 'm': owned_partitions: partition number must be an integer, got 1.5",
        ),
        (
            {"topics": ["t"], "generation_id": "x"},
            "subscription of 'm': 'generation_id' must be an int32 or null, got 'x'",
        ),
        ({"topics": ["t"], "rack_id": 3}, "subscription of 'm': 'rack_id' must be a string or null, got 3"),
    ],
)
def test_subscription_fields_of_wrong_type(kassign, tmp_path, spec, message):
    p = scenario(tmp_path, {"partitions_per_topic": {"t": 3}, "subscriptions": {"m": spec}})
    assert one_line(kassign("assign", str(p)), 2) == f"kassign assign: {p}: {message} (see kassign assign --help)"


def test_deeply_nested_json(kassign, tmp_path):
    p = scenario(tmp_path, "[" * 100_000 + "]" * 100_000)
    assert (
        one_line(kassign("assign", str(p)), 2)
        == f"kassign assign: {p}: JSON nested too deeply (see kassign assign --help)"
    )


@pytest.mark.parametrize("count", [10**30, 10**8])
def test_partition_count_beyond_the_bound(kassign, tmp_path, count):
    p = scenario(tmp_path, {"partitions_per_topic": {"t": count}, "subscriptions": {"m": {"topics": ["t"]}}})
    assert one_line(kassign("assign", str(p)), 2) == (
        f"kassign assign: {p}: topic 't' has {count:,} partitions; at most 1,000,000 per topic are supported "
        "(see kassign assign --help)"
    )


def test_total_partitions_beyond_the_bound(kassign, tmp_path):
    p = scenario(tmp_path, {"partitions_per_topic": {f"t{i}": 1_000_000 for i in range(11)}, "subscriptions": {}})
    assert one_line(kassign("assign", str(p)), 2) == (
        f"kassign assign: {p}: 11,000,000 partitions in all; at most 10,000,000 are supported "
        "(see kassign assign --help)"
    )


def test_verbose_shows_the_traceback_then_the_line(kassign, tmp_path):
    missing = tmp_path / "nope.json"
    run = kassign("assign", str(missing), "--verbose")
    assert run.code == 2 and run.err.startswith("Traceback")
    assert run.err_lines[-1] == f"kassign assign: {missing}: No such file or directory (check the path)"


def test_ctrl_c_is_one_line_and_130(kassign, monkeypatch):
    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr("kassign.assign_cli.run_scenario", interrupted)
    assert one_line(kassign("assign", str(EXAMPLE)), 130) == "kassign assign: interrupted (run it again to start over)"


def test_unexpected_error_is_one_line_and_1(kassign, monkeypatch):
    def bug(path):
        raise KeyError("boom")

    monkeypatch.setattr("kassign.assign_cli.run_scenario", bug)
    assert one_line(kassign("assign", str(EXAMPLE)), 1) == (
        "kassign assign: unexpected KeyError: 'boom' (kassign --verbose assign ... shows the traceback; "
        "please report it)"
    )


def test_broken_pipe_exits_quietly(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kassign.cli", "assign", str(EXAMPLE), str(EXAMPLE)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # as `| head -0`: the reader is gone before kassign writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


def test_usage_error_is_one_line(kassign):
    assert (
        one_line(kassign("assign"), 2)
        == "kassign assign: the following arguments are required: SCENARIO (see kassign assign --help)"
    )


def test_unknown_command(kassign):
    assert (
        one_line(kassign("frobnicate"), 2) == "kassign: unknown command 'frobnicate' (one of assign, broker, "
        "demo, simulate, sweep, analyze, replicas, telemetry; see kassign --help)"
    )


# -- kassign simulate ------------------------------------------------------------------------


def test_simulate_rejects_zero_members(kassign):
    assert one_line(kassign("simulate", "--members", "0"), 2) == (
        "kassign simulate: argument --members: the member count must be between 1 and 10,000, got 0 "
        "(see kassign simulate --help)"
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-5"])
def test_simulate_rejects_bad_timeouts(kassign, value):
    line = one_line(kassign("simulate", "--session-timeout-ms", value), 2)
    assert line.startswith("kassign simulate: argument --session-timeout-ms/--session-ms: the session timeout (ms) ")
    assert line.endswith(f"got {value if value == '-5' else repr(value)} (see kassign simulate --help)")


def test_simulate_rejects_nan_through_set(kassign):
    assert one_line(kassign("simulate", "--set", "session_timeout_ms=NaN"), 2) == (
        "kassign simulate: session_timeout_ms must be a finite number of milliseconds from 0 to 2,147,483,647 "
        "(Kafka's int32 limit), got nan (see kassign simulate --help)"
    )


def test_simulate_rejects_huge_partition_counts(kassign):
    assert one_line(kassign("simulate", "--partitions", str(10**30)), 2) == (
        "kassign simulate: argument --partitions: the partition count must be between 1 and 1,000,000, got "
        f"{10**30:,} (see kassign simulate --help)"
    )


def _timeline(tmp_path: Path, last_t: str, name: str = "m.jsonl") -> Path:
    lines = [
        '{"id": "m1", "t": 100.0, "ev": "subscribed", "topics": ["t"]}',
        '{"id": "m1", "t": 100.5, "ev": "cb_assigned", "parts": [0, 1]}',
        f'{{"id": "m2", "t": {last_t}, "ev": "subscribed", "topics": ["t"]}}',
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replay_truncated_gzip(kassign, tmp_path):
    data = gzip.compress(_timeline(tmp_path, "101.0").read_bytes())
    path = tmp_path / "events.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    assert one_line(kassign("simulate", "--replay", str(path)), 2) == (
        f"kassign simulate: {path}: truncated or corrupted gzip file after line 0 (Compressed file ended before "
        "the end-of-stream marker was reached) (see kassign simulate --help)"
    )


def test_replay_corrupted_gzip(kassign, tmp_path):
    path = tmp_path / "events.jsonl.gz"
    path.write_bytes(b"this is not gzip at all")
    assert one_line(kassign("simulate", "--replay", str(path)), 2) == (
        f"kassign simulate: {path}: truncated or corrupted gzip file after line 0 (Not a gzipped file (b'th')) "
        "(see kassign simulate --help)"
    )


def test_replay_corrupted_deflate_data(kassign, tmp_path):
    data = bytearray(gzip.compress(_timeline(tmp_path, "101.0").read_bytes()))
    data[12:20] = b"\xff" * 8
    path = tmp_path / "events.jsonl.gz"
    path.write_bytes(bytes(data))
    line = one_line(kassign("simulate", "--replay", str(path)), 2)
    assert line.startswith(f"kassign simulate: {path}: truncated or corrupted gzip file after line 0 (")
    assert line.endswith(") (see kassign simulate --help)")


@pytest.mark.parametrize("t", ["1e308", "Infinity", "NaN"])
def test_replay_rejects_non_finite_and_absurd_times(kassign, tmp_path, t):
    path = _timeline(tmp_path, t)
    shown = {"1e308": "1e+308", "Infinity": "inf", "NaN": "nan"}[t]
    assert one_line(kassign("simulate", "--replay", str(path)), 2) == (
        f"kassign simulate: {path}:3: bad timeline event: event time {shown} is not a finite time within "
        "+-1e+10 s (see kassign simulate --help)"
    )


def test_replay_rejects_a_recording_spanning_years(kassign, tmp_path):
    path = _timeline(tmp_path, "9000000000")
    assert one_line(kassign("simulate", "--replay", str(path)), 2) == (
        f"kassign simulate: recording {path} spans 8,999,999,900 s from its first to its last event; a replay "
        "simulates at most 604,800 s (7 days): cut it to the part to replay (see kassign simulate --help)"
    )


# -- kassign telemetry, replicas -------------------------------------------------------------


def test_telemetry_missing_file(kassign):
    assert (
        one_line(kassign("telemetry", "/nope.jsonl"), 2)
        == "kassign telemetry: /nope.jsonl: no timeline file or directory here (check the path)"
    )


def test_telemetry_malformed_line(kassign, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "m1", "t": 1.0, "ev": "join"}\n{broken\n')
    assert one_line(kassign("telemetry", str(path)), 2) == (
        f"kassign telemetry: {path}:2: bad timeline event: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1) (see kassign telemetry --help)"
    )


def test_telemetry_takes_run_directories(kassign, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _timeline(run_dir, "101.0", "a.jsonl")
    (run_dir / "README.md").write_text("not a timeline")
    run = kassign("telemetry", str(run_dir))
    assert run.code == 0, run.err
    assert set(json.loads(run.out)) == {"m1", "m2"}


def test_replicas_out_into_a_missing_directory_prints_no_plan(kassign, tmp_path):
    out = tmp_path / "missing" / "plan.json"
    run = kassign(
        "replicas", "plan", "--brokers", "0,1,2", "--partitions", "3", "--replication-factor", "2", "--out", str(out)
    )
    assert one_line(run, 2) == (
        f"kassign replicas: --out {out}: directory {out.parent} does not exist (create it first or pick another path)"
    )
    assert run.out == ""


def test_replicas_partition_bound(kassign):
    assert one_line(
        kassign("replicas", "plan", "--brokers", "0", "--partitions", str(10**8), "--replication-factor", "1"), 2
    ) == (
        "kassign replicas plan: argument --partitions: the partition count must be between 1 and 1,000,000, got "
        "100,000,000 (see kassign replicas plan --help)"
    )


def test_demo_with_an_unreachable_cluster_is_one_line(kassign, tmp_path):
    pytest.importorskip("aiokafka")
    run = kassign("demo", "--bootstrap", "127.0.0.1:1", "--quick", "--no-plot", "--out", str(tmp_path / "out"))
    assert one_line(run, 1) == (
        "kassign demo: cannot reach the Kafka cluster at 127.0.0.1:1: KafkaConnectionError: Unable to bootstrap "
        "from [('127.0.0.1', 1, <AddressFamily.AF_INET: 2>)] (check --bootstrap and that the cluster is up, or "
        "leave --bootstrap out to start a local broker)"
    )
