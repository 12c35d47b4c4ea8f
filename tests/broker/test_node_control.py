"""Single nodes of a local cluster are killed and restarted through its supervisor (no broker here: the
"nodes" are sleeping Python processes; the live cluster is exercised by tests/integration/test_churn_faults.py),
and the planning of a cluster that survives a node's loss."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from kassign.broker import BrokerUnavailable, replicated_settings
from kassign.broker.kafka import _node_properties
from kassign.broker.launch import BrokerInfo
from kassign.broker.nodes import NodeControl
from kassign.broker.probe import _coordinator_answer, _find_coordinator_request
from kassign.broker.supervisor import DIED_FILE, Supervisor


@pytest.fixture
def supervisor(tmp_path):
    nodes = [
        {
            "node_id": n,
            "argv": [sys.executable, "-c", "import time; time.sleep(120)"],
            "log": str(tmp_path / f"node-{n}.log"),
        }
        for n in (1, 2, 3)
    ]
    sup = Supervisor({"workdir": str(tmp_path), "nodes": nodes, "stop_grace": 1.0, "keep_workdir": True})
    sup.procs = [sup._spawn(n["argv"], n["log"]) for n in nodes]
    yield sup
    sup.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_node_is_down_on_purpose_and_starts_again(supervisor):
    old_pid = supervisor.procs[1].pid
    answer = supervisor.command("kill 2")
    assert answer == {"ok": True, "node": 2, "pid": old_pid}
    assert supervisor.procs[1].returncode == -signal.SIGKILL and not _alive(old_pid)
    assert supervisor.down == {1}
    assert supervisor.command("kill 2") == {"ok": False, "error": "node 2 is already down"}
    started = supervisor.command("start 2")
    assert started["ok"] and started["pid"] != old_pid and _alive(started["pid"])
    assert supervisor.down == set() and supervisor.procs[1].poll() is None
    assert supervisor.command("start 2") == {"ok": False, "error": "node 2 is running"}
    # the other nodes were never touched
    assert all(p.poll() is None for p in supervisor.procs)


def test_unknown_commands_and_nodes_are_answered_not_fatal(supervisor):
    assert "unknown command" in supervisor.command("reboot 1")["error"]
    assert "unknown command" in supervisor.command("kill one")["error"]
    assert supervisor.command("kill 7") == {"ok": False, "error": "no node 7; nodes are [1, 2, 3]"}
    assert all(p.poll() is None for p in supervisor.procs)


def test_a_broker_this_process_does_not_own_cannot_lose_nodes():
    external = BrokerInfo("external", "127.0.0.1:9092")
    with pytest.raises(BrokerUnavailable, match="only a cluster started by start_kafka"):
        external.kill_node(1)
    with pytest.raises(BrokerUnavailable, match="cannot be killed or restarted"):
        external.restart_node(1)


def test_find_coordinator_speaks_version_1():
    request = _find_coordinator_request("billing", 11)
    size, api_key, version, correlation = struct.unpack(">ihhi", request[:12])
    assert (size, api_key, version, correlation) == (len(request) - 4, 10, 1, 11)
    assert request.endswith(struct.pack(">h", 7) + b"billing" + b"\x00")  # key, then key type 0 (group)
    # throttle, error 0, null error message, node 3, host, port
    body = struct.pack(">ihhih", 0, 0, -1, 3, 9) + b"127.0.0.1" + struct.pack(">i", 9092)
    assert _coordinator_answer(body) == (0, 3)
    message = b"not yet"
    body = struct.pack(">ihh", 0, 15, len(message)) + message + struct.pack(">ih", -1, 0) + struct.pack(">i", -1)
    assert _coordinator_answer(body) == (15, -1)


def test_replicated_settings_tolerate_one_node_down():
    three = replicated_settings(3)
    assert three["offsets.topic.replication.factor"] == "3" and three["min.insync.replicas"] == "2"
    assert three["default.replication.factor"] == "3"
    assert int(three["broker.session.timeout.ms"]) > int(three["broker.heartbeat.interval.ms"])
    one = replicated_settings(1)
    assert one["offsets.topic.replication.factor"] == "1" and one["min.insync.replicas"] == "1"


def test_every_controller_node_lists_all_voters_and_settings_override_the_test_defaults(tmp_path):
    voters = "1@127.0.0.1:1001,2@127.0.0.1:1002,3@127.0.0.1:1003"
    controller = _node_properties(
        2, 9002, voters, tmp_path, None, controller_port=1002, settings=replicated_settings(3)
    )
    assert controller["process.roles"] == "broker,controller"
    assert controller["listeners"] == "PLAINTEXT://127.0.0.1:9002,CONTROLLER://127.0.0.1:1002"
    assert controller["controller.quorum.voters"] == voters
    assert controller["offsets.topic.replication.factor"] == "3"  # TEST_SETTINGS says 1
    broker = _node_properties(4, 9004, voters, tmp_path, "r1", controller_port=None, settings={})
    assert broker["process.roles"] == "broker" and "CONTROLLER" not in broker["listeners"]
    assert broker["offsets.topic.replication.factor"] == "1"


class _FakeMetadata:
    """Answers every request on 127.0.0.1 like a Metadata response listing ``brokers`` brokers: enough
    for the supervisor's readiness probe and NodeControl's "is it back" probe."""

    def __init__(self, brokers: int) -> None:
        self.brokers = brokers
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
                    request = conn.recv(size, socket.MSG_WAITALL)
                    (correlation,) = struct.unpack(">i", request[4:8])
                    conn.sendall(struct.pack(">iiii", 12, correlation, 0, self.brokers))
                except (OSError, struct.error):
                    pass


def test_node_control_kills_and_restarts_through_a_running_supervisor(tmp_path):
    fake = _FakeMetadata(brokers=2)
    nodes = [
        {
            "node_id": n,
            "argv": [sys.executable, "-c", "import time; time.sleep(120)"],
            "log": str(tmp_path / f"node-{n}.log"),
        }
        for n in (1, 2)
    ]
    plan = {
        "workdir": str(tmp_path),
        "bootstrap": f"127.0.0.1:{fake.port}",
        "min_brokers": 2,
        "startup_timeout": 20,
        "stop_grace": 1.0,
        "nodes": nodes,
    }
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kassign.broker.supervisor", str(plan_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        report = json.loads(proc.stdout.readline())
        assert report["ready"], report
        first, second = report["pids"]
        control = NodeControl(proc, {1: fake.port, 2: fake.port})
        control.kill(2)
        assert not _alive(second) and _alive(first)
        time.sleep(1.5)  # a watch round or two: a node killed on purpose does not stop the cluster
        assert proc.poll() is None and _alive(first)
        assert control.restart(2, timeout=20) < 20
        with pytest.raises(BrokerUnavailable, match="no node 5"):
            control.kill(5)
        with pytest.raises(BrokerUnavailable, match="node 1 is running"):
            control.restart(1)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        fake.sock.close()
    assert not _alive(first)
    assert not tmp_path.exists()  # the supervisor removed its work directory


def test_a_node_that_dies_on_its_own_stops_the_cluster_and_keeps_its_logs(tmp_path):
    """A broker that exits unasked is a failure to explain: its work directory (logs) is kept, with why."""
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    nodes = [
        {"node_id": 1, "argv": [sys.executable, "-c", "import time; time.sleep(120)"], "log": str(workdir / "n1.log")},
        {
            "node_id": 2,
            "argv": [sys.executable, "-c", "print('out of heap'); raise SystemExit(3)"],
            "log": str(workdir / "n2.log"),
        },
    ]
    sup = Supervisor({"workdir": str(workdir), "nodes": nodes, "stop_grace": 1.0, "detached": True})
    sup.procs = [sup._spawn(n["argv"], n["log"]) for n in nodes]
    why = sup.watch()
    sup.stop()
    assert why == "node 2 exited with code 3"
    assert (workdir / DIED_FILE).read_text().strip() == why
    assert "out of heap" in (workdir / "n2.log.out").read_text()
    assert sup.procs[0].poll() is not None  # the others were stopped


def test_a_cluster_stopped_on_purpose_leaves_no_directory(tmp_path):
    workdir = tmp_path / "cluster"
    workdir.mkdir()
    nodes = [
        {"node_id": 1, "argv": [sys.executable, "-c", "import time; time.sleep(120)"], "log": str(workdir / "n1.log")}
    ]
    sup = Supervisor({"workdir": str(workdir), "nodes": nodes, "stop_grace": 1.0})
    sup.procs = [sup._spawn(n["argv"], n["log"]) for n in nodes]
    sup.stop()
    assert sup.died is None
    assert not workdir.exists()
