"""The top-level docker-compose.yml runs the cluster ``kassign broker start --brokers 3 --racks r1,r2,r3``
runs, from Apache Kafka's official image, plus a SASL/SCRAM listener. This machine has no Docker engine,
so the file is checked, not run: it parses (PyYAML), and the settings the image turns its ``KAFKA_*``
variables into match what :mod:`kassign.broker.kafka` writes for the same cluster (process roles, node
ids, racks, the controller quorum, listeners and their protocols, replication factors and group
settings). No broker and no Java are needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from kassign.broker.choose import KAFKA_IMAGE  # noqa: E402
from kassign.broker.kafka import TEST_SETTINGS, _node_properties  # noqa: E402
from kassign.broker.security import SCRAM_MECHANISMS  # noqa: E402

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
RACKS = ("r1", "r2", "r3")


def _property(variable: str) -> str:
    """The image's rule: ``KAFKA_`` dropped, ``___`` is ``-``, ``__`` is ``_``, ``_`` is ``.``, lower case."""
    name = variable.removeprefix("KAFKA_").lower()
    return name.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


@pytest.fixture(scope="module")
def brokers() -> dict[int, dict[str, str]]:
    """Node id -> the server properties of each Kafka service."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    out = {}
    for name, service in services.items():
        if not name.startswith("kafka-"):
            continue
        props = {_property(k): str(v) for k, v in service["environment"].items() if k.startswith("KAFKA_")}
        out[int(props["node.id"])] = props
    return out


def _kassign_nodes() -> dict[int, dict[str, str]]:
    """What kassign writes for --brokers 3 --racks r1,r2,r3 (one controller), ports aside."""
    voters = "1@127.0.0.1:19093"
    return {
        n: _node_properties(
            n, 9090 + n, voters, Path("/data"), RACKS[n - 1], controller_port=19093 if n == 1 else None, settings={}
        )
        for n in (1, 2, 3)
    }


def _listeners(value: str) -> dict[str, str]:
    """``NAME://host:port,...`` as name -> port."""
    return {item.split("://")[0]: item.rsplit(":", 1)[1] for item in value.split(",")}


def test_it_parses_and_uses_the_image_testcontainers_uses():
    compose = yaml.safe_load(COMPOSE.read_text())
    kafka = {name: s for name, s in compose["services"].items() if name.startswith("kafka-")}
    assert sorted(kafka) == ["kafka-1", "kafka-2", "kafka-3"]
    assert {s["image"] for s in compose["services"].values()} == {KAFKA_IMAGE}


def test_roles_ids_racks_and_quorum_match_kassigns_cluster(brokers):
    ours = _kassign_nodes()
    assert sorted(brokers) == [1, 2, 3]
    for node_id, props in brokers.items():
        for key in ("process.roles", "node.id", "broker.rack", "controller.listener.names"):
            assert props[key] == ours[node_id][key], (node_id, key)
        voter = ours[node_id]["controller.quorum.voters"].split("@")[0]
        assert props["controller.quorum.voters"].split("@")[0] == voter
    assert [brokers[n]["broker.rack"] for n in (1, 2, 3)] == list(RACKS)


def test_replication_factors_and_group_settings_are_kassigns_test_settings(brokers):
    for node_id, props in brokers.items():
        for key, (value, _why) in TEST_SETTINGS.items():
            assert props.get(key) == value, (node_id, key, props.get(key), value)


def test_listeners_are_kassigns_plus_an_internal_and_a_sasl_one(brokers):
    ours = _kassign_nodes()
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for node_id, props in brokers.items():
        protocols = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
        kassign_protocols = dict(item.split(":") for item in ours[node_id]["listener.security.protocol.map"].split(","))
        assert kassign_protocols.items() <= protocols.items()
        assert protocols["SASL"] == "SASL_PLAINTEXT" and protocols["INTERNAL"] == "PLAINTEXT"
        listening, advertised = _listeners(props["listeners"]), _listeners(props["advertised.listeners"])
        assert set(_listeners(ours[node_id]["listeners"])) | {"INTERNAL", "SASL"} == set(listening)
        assert set(advertised) == {"INTERNAL", "PLAINTEXT", "SASL"}
        assert props["inter.broker.listener.name"] == "INTERNAL"
        published = {p.split(":")[1] for p in services[f"kafka-{node_id}"]["ports"]}
        assert published == {advertised["PLAINTEXT"], advertised["SASL"]}
        assert props["sasl.enabled.mechanisms"].split(",") == list(SCRAM_MECHANISMS)
        for mechanism in SCRAM_MECHANISMS:
            assert "ScramLoginModule" in props[f"listener.name.sasl.{mechanism.lower()}.sasl.jaas.config"]


def test_the_scram_users_are_made_once_every_broker_answers():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    users = services["scram-users"]
    assert users["depends_on"] == {f"kafka-{n}": {"condition": "service_healthy"} for n in (1, 2, 3)}
    assert all("healthcheck" in services[f"kafka-{n}"] for n in (1, 2, 3))
    script = " ".join(users["command"])
    assert all(m in script for m in SCRAM_MECHANISMS) and "admin" in script and "kafka-1:19092" in script
