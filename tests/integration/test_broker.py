"""The broker fixture: it answers, topics come out with the asked partition count, the selection order holds."""

from __future__ import annotations

import asyncio

import pytest

from integration.broker import BrokerUnavailable, free_port, kafka_bootstrap, open_broker, wait_for_broker


def test_broker_answers_metadata(kafka_broker):
    assert kafka_broker.kind in ("external", "testcontainers", "tansu")
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


def test_async_kafka_bootstrap_yields_a_ready_address(bootstrap_servers, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap_servers)

    async def use() -> str:
        async with kafka_bootstrap() as bootstrap:
            return bootstrap

    assert asyncio.run(use()) == bootstrap_servers


def test_wait_for_broker_gives_up_on_a_closed_port():
    with pytest.raises(BrokerUnavailable, match="no broker answered"):
        wait_for_broker(f"127.0.0.1:{free_port()}", timeout=0.5)


def test_bad_bootstrap_is_named():
    with pytest.raises(ValueError, match="nohost"):
        wait_for_broker("nohost", timeout=0.1)


@pytest.mark.realkafka
def test_realkafka_marker_runs_only_on_kafka(kafka_broker):
    assert kafka_broker.is_real_kafka


def test_failed_container_falls_back_to_the_embedded_broker(monkeypatch):
    import contextlib

    import integration.broker as broker

    @contextlib.contextmanager
    def container_that_fails(*args, **kwargs):
        raise RuntimeError("image not found")
        yield

    monkeypatch.setattr(broker, "docker_engine_answers", lambda timeout=3.0: True)
    monkeypatch.setattr(broker, "start_kafka_container", container_that_fails)
    with broker.open_broker(env={}) as info:
        assert info.kind == "tansu"
        wait_for_broker(info.bootstrap, timeout=5)
