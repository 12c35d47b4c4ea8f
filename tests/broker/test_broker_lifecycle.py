"""A broker started by kassign never outlives its owner, and every bad state is one line, not a traceback.

The owners here are separate Python processes (a test cannot SIGKILL itself): each starts a broker,
prints where it is, and is then killed or signalled; the broker's port must stop answering and its
work directory must disappear.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kassign.broker.probe import free_port, probe_metadata

OWNER = textwrap.dedent("""
    import json, signal, sys, time
    from kassign.broker import start_kafka, start_tansu
    from kassign.broker.launch import BrokerInfo
    # A shell without job control starts background commands with SIGINT ignored, and children
    # inherit that: the owner stands for an interactive program, which gets KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    broker = start_tansu() if sys.argv[1] == "tansu" else start_kafka()
    with broker as info:
        import glob, os
        print(json.dumps({"bootstrap": info.bootstrap, "detail": info.detail}), flush=True)
        time.sleep(600)
""")


def _answers(bootstrap: str) -> bool:
    host, _, port = bootstrap.partition(",")[0].rpartition(":")
    try:
        return probe_metadata(host, int(port), timeout=1.0) > 0
    except (OSError, ConnectionError):
        return False


def _workdirs() -> set[str]:
    import tempfile

    return {str(p) for p in Path(tempfile.gettempdir()).glob("kassign-broker-*")}


def _wait_gone(bootstrap: str, supervisor_pid: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(supervisor_pid, 0)
        except ProcessLookupError:
            if not _answers(bootstrap):
                return
        time.sleep(0.2)
    raise AssertionError(f"the broker at {bootstrap} outlived its owner")


@pytest.mark.parametrize(
    ("kind", "how"),
    [("tansu", signal.SIGKILL), ("tansu", signal.SIGTERM), ("tansu", signal.SIGINT), ("kafka", signal.SIGKILL)],
    ids=["tansu-sigkill", "tansu-sigterm", "tansu-sigint", "kafka-sigkill"],
)
def test_the_broker_stops_when_its_owner_dies(kind, how):
    before = _workdirs()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, kind], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline()
        started = json.loads(line)
        assert _answers(started["bootstrap"])
        supervisor_pid = int(started["detail"].split()[-1])
        new_dirs = _workdirs() - before
        assert new_dirs, "the broker's work directory should exist while it runs"
        owner.send_signal(how)
        try:
            # the owner waits up to 30 s for its supervisor, which gives the broker 5 s + 10 s to stop
            owner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            logs = {
                str(p): p.read_text(errors="replace")[-2000:] for d in new_dirs for p in Path(d).glob("supervisor.log")
            }
            raise AssertionError(f"the owner did not exit within 60 s of {how.name}; supervisor log: {logs}") from None
        _wait_gone(started["bootstrap"], supervisor_pid)
        assert not (new_dirs & _workdirs()), "the broker's work directory outlived it"
    finally:
        if owner.poll() is None:
            owner.kill()


@pytest.fixture
def no_leftover_workdirs():
    """Whatever the test starts or fails to start leaves no work directory behind."""
    before = _workdirs()
    yield
    deadline = time.monotonic() + 10
    while _workdirs() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _workdirs() - before, f"left behind: {_workdirs() - before}"


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kassign.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _one_line_error(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode != 0, res.stdout
    assert "Traceback" not in res.stderr, res.stderr
    # progress lines ("kassign: resolving ...") may come first; the error itself is one "kassign broker:" line
    errors = [line for line in res.stderr.strip().splitlines() if line.startswith("kassign broker:")]
    assert len(errors) == 1, res.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_cli_start_status_stop_of_a_detached_broker(tmp_path, no_leftover_workdirs):
    env = {"KASSIGN_RUN_DIR": str(tmp_path)}
    port = free_port()
    started = _cli("broker", "start", "--port", str(port), env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert f"127.0.0.1:{port}" in started.stdout and "kassign broker stop" in started.stdout
        assert "Apache Kafka" in started.stdout
        assert _answers(f"127.0.0.1:{port}")
        status = _cli("broker", "status", env=env)
        assert status.returncode == 0 and f"127.0.0.1:{port}: answering" in status.stdout, status.stdout
        again = _cli("broker", "start", "--port", str(port), env=env)
        _one_line_error(again, f"port {port} is in use")
    finally:
        stopped = _cli("broker", "stop", env=env)
    assert stopped.returncode == 0 and f"127.0.0.1:{port}" in stopped.stdout
    assert not _answers(f"127.0.0.1:{port}")
    assert _cli("broker", "status", env=env).returncode == 1
    assert not list(tmp_path.glob("broker-*.json"))


def test_too_old_a_java_is_one_line(tmp_path, no_leftover_workdirs):
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.21\" 2023-10-17' >&2\n")
    (fake / "java").chmod(0o755)
    res = _cli("broker", "start", env={"JAVA_HOME": str(tmp_path / "jdk"), "KASSIGN_RUN_DIR": str(tmp_path)})
    _one_line_error(res, "Java 17", "Java 11")


def test_no_java_at_all_is_one_line(tmp_path, no_leftover_workdirs):
    res = _cli("broker", "start", env={"JAVA_HOME": "", "PATH": str(tmp_path), "KASSIGN_RUN_DIR": str(tmp_path)})
    _one_line_error(res, "no `java` was found")


def test_no_maven_and_no_cached_jars_is_one_line(tmp_path, no_leftover_workdirs):
    java_dir = Path(subprocess.run(["sh", "-c", "command -v java"], capture_output=True, text=True).stdout.strip())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(java_dir.resolve())
    res = _cli(
        "broker",
        "start",
        "--version",
        "4.0.0",
        env={"PATH": str(bin_dir), "JAVA_HOME": "", "KASSIGN_CACHE_DIR": str(tmp_path / "cache")},
    )
    _one_line_error(res, "no cached jars for Apache Kafka 4.0.0", "mvn")


def test_a_broker_that_does_not_come_up_in_time_shows_its_log(tmp_path, no_leftover_workdirs):
    res = _cli("broker", "start", "--timeout", "0.2", env={"KASSIGN_RUN_DIR": str(tmp_path)})
    _one_line_error(res, "did not answer within")
    assert "its log" in res.stderr
    assert not list(tmp_path.glob("broker-*.json"))


def test_bad_cli_values_are_one_line(tmp_path, no_leftover_workdirs):
    for args, needle in (
        (("--brokers", "0"), "1 to 9"),
        (("--port", "70000"), "70000"),
        (("--racks", "a,,b"), "a,,b"),
        (("--tansu", "--brokers", "3"), "--tansu"),
    ):
        res = _cli("broker", "start", *args, env={"KASSIGN_RUN_DIR": str(tmp_path)})
        assert res.returncode == 2, (args, res.stderr)
        assert "Traceback" not in res.stderr and needle in res.stderr, (args, res.stderr)


def test_maven_without_a_route_to_central_is_one_line(tmp_path):
    """A Maven that cannot reach Maven Central (here a stand-in printing what mvn prints offline)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = Path(subprocess.run(["sh", "-c", "command -v java"], capture_output=True, text=True).stdout.strip())
    (bin_dir / "java").symlink_to(java.resolve())
    (bin_dir / "mvn").write_text(
        "#!/bin/sh\necho '[ERROR] Failed to execute goal on project jars: Could not transfer "
        "artifact org.apache.kafka:kafka_2.13:pom:4.0.0 from/to central: Unknown host "
        "repo.maven.apache.org'\nexit 1\n"
    )
    (bin_dir / "mvn").chmod(0o755)
    res = _cli(
        "broker",
        "start",
        "--version",
        "4.0.0",
        env={"PATH": str(bin_dir), "JAVA_HOME": "", "KASSIGN_CACHE_DIR": str(tmp_path / "cache")},
    )
    _one_line_error(res, "could not fetch Apache Kafka 4.0.0 from Maven Central", str(tmp_path / "cache"))


def test_sigterm_to_the_demo_stops_its_broker(tmp_path):
    """`kassign demo` owns the broker it starts: SIGTERM to the demo leaves no broker behind."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"} | {"PYTHONUNBUFFERED": "1"}
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kassign.cli",
            "demo",
            "--quick",
            "--tansu",
            "--no-plot",
            "--out",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = demo.stdout.readline()
        assert "kassign demo: broker Tansu" in line, line
        bootstrap = line.split(" at ")[1].split()[0]
        assert _answers(bootstrap)
        demo.send_signal(signal.SIGTERM)
        demo.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _answers(bootstrap) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _answers(bootstrap), "the demo's broker outlived it"
    finally:
        if demo.poll() is None:
            demo.kill()
