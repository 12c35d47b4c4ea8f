"""Telling a broker without the consumer group protocol (KIP-848) apart, with no broker: the
ApiVersions probe the suite's skip relies on, against a fake broker on a local socket, and
``set_consumer_group_timing``'s answer to a broker that has no group configs (Kafka 3.x)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kassign.broker import BrokerUnavailable, group_config
from kassign.broker.probe import api_versions, consumer_group_protocol_missing
from tests.refusing_admin import refusing_admin


def _api_versions_answer(correlation_id: int, apis: dict[int, tuple[int, int]], error: int = 0) -> bytes:
    """An ApiVersions v0 response: correlation id, error code, [api key, min, max]."""
    body = struct.pack(">ihi", correlation_id, error, len(apis))
    body += b"".join(struct.pack(">hhh", key, low, high) for key, (low, high) in apis.items())
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def fake_broker() -> Iterator[tuple[str, list[bytes], dict]]:
    """``(bootstrap, requests, answer)``: a listener that answers each connection's one request with
    ``answer["apis"]`` (and ``answer["error"]``), recording the requests it got."""
    requests: list[bytes] = []
    answer: dict = {"apis": {}, "error": 0}
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)  # closing does not wake a blocked accept(): look at `done` this often
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:  # a timeout: look at `done` again
                continue
            with conn:
                (size,) = struct.unpack(">i", conn.recv(4))
                request = conn.recv(size)
                requests.append(request)
                (correlation_id,) = struct.unpack(">i", request[4:8])
                conn.sendall(_api_versions_answer(correlation_id, answer["apis"], answer["error"]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}", requests, answer
    finally:
        done.set()
        thread.join(5)
        server.close()


def test_api_versions_sends_version_0_and_reads_every_api(fake_broker):
    bootstrap, requests, answer = fake_broker
    answer["apis"] = {0: (0, 11), 18: (0, 4), 68: (0, 1)}
    assert api_versions(bootstrap) == {0: (0, 11), 18: (0, 4), 68: (0, 1)}
    api_key, version = struct.unpack(">hh", requests[0][:4])
    assert (api_key, version) == (18, 0)


def test_an_error_answer_or_no_answer_is_broker_unavailable(fake_broker):
    bootstrap, _, answer = fake_broker
    answer["error"] = 35
    with pytest.raises(BrokerUnavailable, match="error code 35"):
        api_versions(bootstrap)
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(BrokerUnavailable, match="no ApiVersions answer"):
        api_versions(f"127.0.0.1:{port}", timeout=1.0)


@pytest.mark.parametrize(
    ("heartbeat", "words"),
    [
        (None, "lists none of ConsumerGroupHeartbeat (API key 68)"),
        ((0, 0), "lists only version 0 (the pre-4.0 preview) of ConsumerGroupHeartbeat"),
    ],
    ids=["kafka-3.6", "kafka-3.9"],
)
def test_a_broker_without_consumer_group_heartbeat_v1_has_no_consumer_protocol(fake_broker, heartbeat, words):
    bootstrap, _, answer = fake_broker
    answer["apis"] = {18: (0, 4)} | ({68: heartbeat} if heartbeat else {})
    missing = consumer_group_protocol_missing(bootstrap)
    assert missing is not None and words in missing and "Apache Kafka 4.0+" in missing


def test_a_kafka_4_broker_has_the_consumer_protocol(fake_broker):
    bootstrap, _, answer = fake_broker
    answer["apis"] = {18: (0, 4), 68: (0, 1)}
    assert consumer_group_protocol_missing(bootstrap) is None


def test_group_timing_on_a_3x_broker_says_it_has_no_consumer_group_protocol(monkeypatch):
    """Kafka 3.9.1's own answer to a GROUP config resource, as set_consumer_group_timing got it before."""
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaError

    monkeypatch.setattr(
        group_config, "_admin", lambda bootstrap: refusing_admin(KafkaError.INVALID_REQUEST, "Unknown resource type 32")
    )
    with pytest.raises(group_config.NoConsumerGroupProtocol) as caught:
        group_config.set_consumer_group_timing("127.0.0.1:9092", "g", session_ms=3000, heartbeat_ms=300)
    message = str(caught.value)
    assert message.startswith("the broker at 127.0.0.1:9092 does not support the consumer group protocol (KIP-848)")
    assert "Apache Kafka 4.0 or newer" in message and "group_protocol='classic'" in message
    assert "Unknown resource type 32" in message and "consumer.session.timeout.ms=3000" in message
    # Still a refusal, not one of the values: callers catching GroupTimingRefused keep working.
    assert isinstance(caught.value, group_config.GroupTimingRefused) and not caught.value.out_of_bounds


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("INVALID_REQUEST", "Unknown type"),
        ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed."),
        ("INVALID_CONFIG", "consumer.session.timeout.ms must be greater than or equal to ..."),
    ],
)
def test_other_refusals_are_not_taken_for_a_missing_protocol(monkeypatch, code, reason):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import KafkaError

    monkeypatch.setattr(group_config, "_admin", lambda bootstrap: refusing_admin(getattr(KafkaError, code), reason))
    with pytest.raises(group_config.GroupTimingRefused) as caught:
        group_config.set_consumer_group_timing("127.0.0.1:9092", "g", session_ms=3000, heartbeat_ms=300)
    assert not isinstance(caught.value, group_config.NoConsumerGroupProtocol)
    assert caught.value.reason == reason and caught.value.out_of_bounds == (code == "INVALID_CONFIG")
