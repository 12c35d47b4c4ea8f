"""Apache Kafka from Maven Central's jars as a local KRaft cluster: what to resolve and how to run it.

This module only plans: it resolves the jars, writes each node's ``server.properties`` and logging
config into a work directory and returns the commands (format the storage, start the node). Running
and stopping them is :mod:`kassign.broker.supervisor`'s job.

One node is a combined broker + controller. ``N`` nodes are nodes 1..C as broker + controller (the
voters; ``controllers``, 1 by default) and the rest as brokers; each node gets ``broker.rack`` from
``racks`` (cycled) when given. A cluster meant to survive the loss of a node (the churn soak's
coordinator failover) takes three voters and :func:`replicated_settings`: with a single voter, losing
node 1 would stop every leader election, the coordinator's included.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.jvm import find_java
from kassign.broker.maven import cached_jars, resolve_jars
from kassign.broker.probe import free_port, port_in_use
from kassign.broker.security import SecurityPlan, plan_security
from kassign.broker.versions import kafka_version

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "TEST_SETTINGS",
    "KafkaPlan",
    "NodePlan",
    "kafka_jars",
    "kafka_jars_cached",
    "plan_kafka_cluster",
    "replicated_settings",
    "settings_help",
]

#: The newest Kafka that aiokafka 0.14, librdkafka 2.x and kafka-clients 3.9/4.x all talk to (checked by the suite).
DEFAULT_KAFKA_VERSION = "4.4.0"

#: Broker settings for fast, faithful tests: each changes a bound or a wait, none the group coordinator's logic.
TEST_SETTINGS: dict[str, tuple[str, str]] = {
    "group.initial.rebalance.delay.ms": ("0", "no 3 s wait for more members before a new group's first rebalance"),
    "group.min.session.timeout.ms": ("500", "allow the tests' short consumer session timeouts (default min 6 s)"),
    "group.consumer.min.session.timeout.ms": ("1000", "the same bound for KIP-848 groups (default 45 s)"),
    "group.consumer.min.heartbeat.interval.ms": ("100", "allow short KIP-848 heartbeat intervals (default 5 s)"),
    "offsets.topic.replication.factor": ("1", "internal topics fit any cluster size"),
    "offsets.topic.num.partitions": ("1", "one coordinator partition: a faster first commit (default 50)"),
    "transaction.state.log.replication.factor": ("1", "as above"),
    "transaction.state.log.min.isr": ("1", "as above"),
    "transaction.state.log.num.partitions": ("1", "as above"),
    "share.coordinator.state.topic.replication.factor": ("1", "as above"),
    "share.coordinator.state.topic.min.isr": ("1", "as above"),
}


def replicated_settings(brokers: int) -> dict[str, str]:
    """Settings for a cluster that keeps working, and keeps every acknowledged write, when one of its
    ``brokers`` nodes dies: internal and new topics replicated up to 3 times, with one replica fewer
    required in sync (so a node down still takes writes and a committed offset survives its leader's
    loss); a dead node fenced 2 s after its last heartbeat (default 9 s), which is when its partitions,
    the group coordinator's among them, get new leaders; and no automatic preferred-leader elections,
    so the coordinator moves only when a test moves it."""
    if brokers < 1:
        raise BrokerUnavailable(f"a cluster has at least one broker, got {brokers}")
    replicas = min(3, brokers)
    in_sync = str(max(1, replicas - 1))
    return {
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": in_sync,
        "default.replication.factor": str(replicas),
        "min.insync.replicas": in_sync,
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
        "auto.leader.rebalance.enable": "false",
    }


_JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

_LOG4J2 = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""

_LOG4J1 = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients=WARN
"""


def settings_help() -> str:
    """The test settings as ``--help`` lines."""
    return "\n".join(f"  {key}={value}: {why}" for key, (value, why) in TEST_SETTINGS.items())


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise BrokerUnavailable(f"Kafka version {version!r} is not of the form MAJOR.MINOR.PATCH (e.g. 4.4.0)")
    return int(head)


def _coordinates(version: str) -> list[str]:
    coords = [f"org.apache.kafka:kafka_2.13:{version}"]
    # The broker's POM leaves the logging back end to the distribution; add the one it ships with.
    if _major(version) >= 4:
        coords.append("org.apache.logging.log4j:log4j-slf4j-impl:2.24.3")
    else:
        coords.append("org.slf4j:slf4j-reload4j:1.7.36")
    return coords


def _jar_set(version: str) -> str:
    return f"kafka-{version}"


def kafka_jars_cached(version: str = DEFAULT_KAFKA_VERSION) -> bool:
    """True when the jars of Kafka ``version`` are in the cache (no Maven or network needed)."""
    return bool(os.environ.get("KASSIGN_KAFKA_LIBS")) or cached_jars(_jar_set(version)) is not None


def kafka_jars(version: str = DEFAULT_KAFKA_VERSION) -> list[Path]:
    """Kafka ``version``'s broker jars: ``$KASSIGN_KAFKA_LIBS`` (a distribution's ``libs/``), else the cache/Maven."""
    libs = os.environ.get("KASSIGN_KAFKA_LIBS")
    if libs:
        jars = sorted(Path(libs).glob("*.jar"))
        if not jars:
            raise BrokerUnavailable(f"KASSIGN_KAFKA_LIBS={libs} holds no .jar files")
        return jars
    return resolve_jars(_jar_set(version), _coordinates(version), label=f"Apache Kafka {version}")


@dataclass(frozen=True)
class NodePlan:
    """One Kafka process: its id, rack, client address, log file and the two commands it needs."""

    node_id: int
    rack: str | None
    port: int
    log: str
    format_argv: list[str]
    argv: list[str]
    #: the mutual-TLS listener between brokers of a secured cluster (None: plaintext, one listener)
    internal_port: int | None = None


@dataclass(frozen=True)
class KafkaPlan:
    """A whole local cluster, ready for :mod:`kassign.broker.supervisor`."""

    version: str
    workdir: str
    nodes: list[NodePlan] = field(default_factory=list)
    security: SecurityPlan | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def probe_bootstrap(self) -> str:
        """Where a plaintext (or, secured, mutual-TLS) Metadata probe reaches the cluster."""
        return ",".join(f"127.0.0.1:{n.internal_port or n.port}" for n in self.nodes)


def _cluster_id() -> str:
    while True:  # Kafka's own ids never start with "-", which a command line would read as a flag
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _check_racks(brokers: int, racks: tuple[str, ...], controllers: int = 1) -> None:
    if brokers < 1 or brokers > 9:
        raise BrokerUnavailable(f"--brokers {brokers}: a local cluster has 1 to 9 brokers")
    if not 1 <= controllers <= brokers:
        raise BrokerUnavailable(f"{controllers} controllers: need 1 to {brokers} (the nodes that are also controllers)")
    for rack in racks:
        if not rack or any(c.isspace() or c == "," for c in rack):
            raise BrokerUnavailable(f"rack name {rack!r} must be non-empty with no spaces or commas")


def plan_kafka_cluster(
    workdir: Path,
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    brokers: int = 1,
    racks: tuple[str, ...] = (),
    port: int | None = None,
    controllers: int = 1,
    settings: Mapping[str, str] | None = None,
    security: str = "plaintext",
    users: Mapping[str, str | None] | None = None,
) -> KafkaPlan:
    """Resolve the jars, check Java and the ports, and write every node's configuration into ``workdir``.

    ``controllers``: how many nodes (the first ones) are also KRaft controllers; ``settings``: broker
    settings added to (or replacing) :data:`TEST_SETTINGS`, e.g. :func:`replicated_settings`;
    ``security``: a mode of :mod:`kassign.broker.security` (``users``: its users besides ``admin``).
    """
    version = kafka_version(version)
    _check_racks(brokers, racks, controllers)
    secured = plan_security(security, version, workdir / "tls", users)
    java = find_java(17 if _major(version) >= 4 else 11, purpose=f"Apache Kafka {version}")
    classpath = os.pathsep.join(str(j) for j in kafka_jars(version))
    if port is not None and port_in_use(port):
        raise BrokerUnavailable(f"port {port} is in use: pick another with --port, or stop what listens there")
    client_ports = [port or free_port()]
    while len(client_ports) < brokers:
        candidate = free_port()
        if candidate not in client_ports:
            client_ports.append(candidate)
    taken = set(client_ports)

    def more_ports(count: int) -> list[int]:
        ports: list[int] = []
        while len(ports) < count:
            candidate = free_port()
            if candidate not in taken:
                taken.add(candidate)
                ports.append(candidate)
        return ports

    controller_ports = more_ports(controllers)
    internal_ports: list[int | None] = list(more_ports(brokers)) if secured else [None] * brokers
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(controller_ports))
    cluster_id = _cluster_id()
    nodes = []
    for index, client_port in enumerate(client_ports):
        node_id = index + 1
        node_dir = workdir / f"node-{node_id}"
        (node_dir / "data").mkdir(parents=True, exist_ok=True)
        rack = racks[index % len(racks)] if racks else None
        props = _node_properties(
            node_id,
            client_port,
            voters,
            node_dir / "data",
            rack,
            controller_port=controller_ports[index] if index < controllers else None,
            settings=settings or {},
            internal_port=internal_ports[index],
            security=secured,
        )
        props_path = node_dir / "server.properties"
        props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log_path = node_dir / "server.log"
        (node_dir / "log4j2.properties").write_text(_LOG4J2.format(log=log_path))
        (node_dir / "log4j.properties").write_text(_LOG4J1.format(log=log_path))
        jvm = [
            java.executable,
            *_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{node_dir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={node_dir}",
            "-cp",
            classpath,
        ]
        nodes.append(
            NodePlan(
                node_id=node_id,
                rack=rack,
                port=client_port,
                log=str(log_path),
                format_argv=[
                    *jvm,
                    "kafka.tools.StorageTool",
                    "format",
                    "--ignore-formatted",
                    "-t",
                    cluster_id,
                    "-c",
                    str(props_path),
                    *(secured.format_args if secured else []),
                ],
                argv=[*jvm, "kafka.Kafka", str(props_path)],
                internal_port=internal_ports[index],
            )
        )
    return KafkaPlan(version=version, workdir=str(workdir), nodes=nodes, security=secured)


def _listener_properties(
    client_port: int, controller_port: int | None, internal_port: int | None, security: SecurityPlan | None
) -> dict[str, str]:
    """Plaintext: one PLAINTEXT listener (and CONTROLLER). Secured: CLIENT in the mode's protocol,
    INTERNAL and CONTROLLER in mutual TLS (see :mod:`kassign.broker.security`)."""
    controller = f",CONTROLLER://127.0.0.1:{controller_port}" if controller_port is not None else ""
    if security is None:
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{client_port}{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
        }
    own = f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}"
    return {
        "listeners": own + controller,
        "advertised.listeners": own,
        "listener.security.protocol.map": f"CONTROLLER:SSL,INTERNAL:SSL,CLIENT:{security.client.security_protocol}",
        "inter.broker.listener.name": "INTERNAL",
        **security.properties,
    }


def _node_properties(
    node_id: int,
    client_port: int,
    voters: str,
    data: Path,
    rack: str | None,
    *,
    controller_port: int | None,
    settings: Mapping[str, str],
    internal_port: int | None = None,
    security: SecurityPlan | None = None,
) -> dict[str, str]:
    props = {
        "process.roles": "broker,controller" if controller_port is not None else "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        **_listener_properties(client_port, controller_port, internal_port, security),
        "log.dirs": str(data),
    }
    if rack:
        props["broker.rack"] = rack
    props.update({key: value for key, (value, _) in TEST_SETTINGS.items()})
    props.update(settings)
    return props
