"""Metadata v12-13 (:mod:`kassign.protocol.metadata`), the request a KIP-848 member names topic ids
with: byte for byte against kafka-clients 4.4.0 (java/MessageOracle.java), both directions, plus
the id -> name view and what the codec refuses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from group_message_samples import java_class, to_java

from kassign.protocol import AiokafkaRequest, ProtocolError
from kassign.protocol.flexible_wire import ZERO_UUID
from kassign.protocol.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

T1 = uuid.UUID("11111111-2222-3333-4444-555555555555")
T2 = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")

RESPONSE = MetadataResponse(
    throttle_time_ms=5,
    brokers=[MetadataResponseBroker(1, "kafka-1", 9092, "r1"), MetadataResponseBroker(2, "kafka-2", 9093, None)],
    cluster_id="cluster-\u00e9",
    controller_id=1,
    topics=[
        MetadataResponseTopic(
            0,
            "orders",
            T1,
            False,
            [
                MetadataResponsePartition(0, 0, 1, 3, [1, 2], [1], [2]),
                MetadataResponsePartition(0, 1, 2, 0, [2, 1], [2, 1], []),
            ],
            -2147483648,
        ),
        MetadataResponseTopic(3, "gone", ZERO_UUID, False, [], -2147483648),
        MetadataResponseTopic(0, None, T2, True, [], 248),
    ],
)

CASES = [
    ("request-by-name", MetadataRequest.for_topics(["orders", "payments"]), 12),
    ("request-by-name-v13", MetadataRequest.for_topics(["orders"]), 13),
    ("request-all-topics", MetadataRequest.for_topics(None), 12),
    ("request-by-id", MetadataRequest([MetadataRequestTopic(T1, None)], True, True), 13),
    ("request-no-topics", MetadataRequest([]), 13),
    ("response", RESPONSE, 12),
    ("response-v13-error", MetadataResponse(0, [], None, -1, [], error_code=58), 13),
    ("response-v13", RESPONSE, 13),
]


@pytest.fixture(scope="module")
def oracle() -> Iterator[object]:
    import subprocess

    from test_group_messages_java import KAFKA_CLIENTS, ROOT, MessageOracle

    from kassign._java import JavaUnavailable, compile_java, java_command

    try:
        classes = compile_java(ROOT / "java" / "MessageOracle.java", kafka_version=KAFKA_CLIENTS)
        cmd = java_command(classes, "MessageOracle", heap="256m", kafka_version=KAFKA_CLIENTS)
    except JavaUnavailable as exc:
        pytest.fail(f"Java conformance tests need Java 17 and kafka-clients {KAFKA_CLIENTS}: {exc}")
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8"
    )
    try:
        yield MessageOracle(proc)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)


@pytest.mark.java
def test_metadata_messages_match_kafka_clients(oracle) -> None:
    answers = oracle.encode([(m, v) for _, m, v in CASES])
    for (name, message, version), (status, java_hex) in zip(CASES, answers):
        assert status == "OK", (name, java_hex)
        assert message.encode(version).hex() == java_hex, name
    # Java reads kassign's bytes back to the same values, and kassign reads Java's.
    from test_group_messages_java import _python_view

    views = oracle.decode([(type(m), m.encode(v), v) for _, m, v in CASES])
    for (name, message, version), (status, java_json), (_, java_hex) in zip(CASES, views, answers):
        assert status == "OK", (name, java_json)
        mine = to_java(message)
        assert _python_view(json.loads(java_json), mine) == mine, name
        assert type(message).decode(bytes.fromhex(java_hex), version) == message, name


def test_topic_names_keeps_named_topics_without_errors() -> None:
    assert RESPONSE.topic_names() == {T1: "orders"}


def test_response_round_trip_and_truncation() -> None:
    data = RESPONSE.encode(13)
    assert MetadataResponse.decode(data, 13) == RESPONSE
    for cut in (1, len(data) // 2, len(data) - 1):
        with pytest.raises(ProtocolError):
            MetadataResponse.decode(data[:cut], 13)


def test_versions_outside_12_13_are_refused() -> None:
    with pytest.raises(ValueError):
        MetadataRequest.for_topics(["a"]).encode(11)
    prepared = AiokafkaRequest(MetadataRequest.for_topics(["a"])).prepare({3: (0, 13)})
    assert prepared.API_VERSION == 13 and prepared.RESPONSE_TYPE.message is MetadataResponse
    assert java_class(MetadataRequest) == "MetadataRequestData"
