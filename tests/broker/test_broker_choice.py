"""The session broker answers and creates topics; the selection order holds (environment, Apache
Kafka from jars, testcontainers, Tansu) and ``KASSIGN_BROKER`` forces one."""

from __future__ import annotations

import contextlib

import pytest

import kassign.broker.choose as choose
from kassign.broker import BrokerUnavailable, free_port, kafka_bootstrap, open_broker, planned_broker, wait_for_broker


def test_broker_answers_metadata(kafka_broker):
    assert kafka_broker.kind in ("kafka", "external", "testcontainers", "tansu")
    wait_for_broker(kafka_broker.bootstrap, timeout=5)


def test_topic_factory_creates_led_partitions(topic_factory, bootstrap_servers):
    from confluent_kafka.admin import AdminClient

    topic = topic_factory(5)
    meta = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(topic=topic, timeout=5)
    assert sorted(meta.topics[topic].partitions) == [0, 1, 2, 3, 4]


def test_kafka_bootstrap_env_wins(bootstrap_servers):
    with open_broker(env={"KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}) as info:
        assert info.kind == "external"
        assert info.bootstrap == bootstrap_servers
        assert info.is_real_kafka


@pytest.mark.asyncio
async def test_async_kafka_bootstrap_yields_a_ready_address(bootstrap_servers, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap_servers)

    async def use() -> str:
        async with kafka_bootstrap() as bootstrap:
            return bootstrap

    assert await use() == bootstrap_servers


def test_wait_for_broker_gives_up_on_a_closed_port():
    with pytest.raises(BrokerUnavailable, match="no broker answered"):
        wait_for_broker(f"127.0.0.1:{free_port()}", timeout=0.5)


def test_bad_bootstrap_is_named():
    with pytest.raises(ValueError, match="nohost"):
        wait_for_broker("nohost", timeout=0.1)


@pytest.mark.realkafka
def test_realkafka_marker_runs_only_on_kafka(kafka_broker):
    assert kafka_broker.is_real_kafka


def test_the_plan_prefers_apache_kafka_when_java_and_maven_are_there(monkeypatch):
    monkeypatch.setattr(choose, "_kafka_possible", lambda version: None)
    assert planned_broker({}).startswith("Apache Kafka")
    assert planned_broker({"KASSIGN_KAFKA_VERSION": "3.9.1"}).startswith("Apache Kafka 3.9.1")
    assert planned_broker({"KAFKA_BOOTSTRAP_SERVERS": "h:1"}).startswith("external")
    assert planned_broker({"KASSIGN_BROKER": "tansu"}).startswith("Tansu")


def test_without_java_the_plan_falls_back_to_tansu(monkeypatch):
    monkeypatch.setattr(choose, "_kafka_possible", lambda version: "no java")
    monkeypatch.setattr(choose, "docker_engine_answers", lambda timeout=3.0: False)
    assert planned_broker({}).startswith("Tansu")


def test_an_unknown_forced_broker_is_named():
    with pytest.raises(BrokerUnavailable, match="zookeeper"):
        planned_broker({"KASSIGN_BROKER": "zookeeper"})


def test_failed_kafka_and_container_fall_back_to_tansu(monkeypatch):
    @contextlib.contextmanager
    def fails(*args, **kwargs):
        raise BrokerUnavailable("boom")
        yield

    monkeypatch.setattr(choose, "_kafka_possible", lambda version: None)
    monkeypatch.setattr(choose, "start_kafka", fails)
    monkeypatch.setattr(choose, "docker_engine_answers", lambda timeout=3.0: True)
    monkeypatch.setattr(choose, "start_kafka_container", fails)
    with open_broker(env={}) as info:
        assert info.kind == "tansu"
        wait_for_broker(info.bootstrap, timeout=5)


def test_a_forced_kafka_that_fails_does_not_fall_back(monkeypatch):
    @contextlib.contextmanager
    def fails(*args, **kwargs):
        raise BrokerUnavailable("no jars")
        yield

    monkeypatch.setattr(choose, "start_kafka", fails)
    with pytest.raises(BrokerUnavailable, match="no jars"), open_broker(env={"KASSIGN_BROKER": "kafka"}):
        pass
