"""The KIP-848 message codecs without Java: hand-derived byte layouts, round trips, malformed input,
refused values, request/response frames, and sending through aiokafka's real connection code."""

from __future__ import annotations

import asyncio
import io
import struct
import uuid

import pytest
from group_message_samples import CASES, REFUSED, T1, T2, random_cases

from kassign.protocol import (
    AiokafkaRequest,
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    ProtocolError,
    RequestHeader,
    ResponseHeader,
    TopicIdPartitions,
    UnsupportedApiVersion,
    decode_request_frame,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
)
from kassign.protocol.flexible_wire import FlexReader, FlexWriter

STEADY = ConsumerGroupHeartbeatRequest("g", "m", 5)


# ---- layouts derived by hand from the schemas ----


def test_steady_heartbeat_v0_layout() -> None:
    expected = bytes.fromhex(
        "0267"  # group_id "g": compact length 1 + 1
        "026d"  # member_id "m"
        "00000005"  # member_epoch
        "00"
        "00"  # instance_id, rack_id: null
        "ffffffff"  # rebalance_timeout_ms -1: unchanged
        "00"
        "00"
        "00"  # subscribed_topic_names, server_assignor, topic_partitions: null
        "00"
    )  # no tagged fields
    assert STEADY.encode(0) == expected
    # v1 inserts the null subscribed_topic_regex after the topic names.
    assert STEADY.encode(1) == expected[:-3] + b"\x00" + expected[-3:]


def test_heartbeat_response_assignment_layout() -> None:
    response = ConsumerGroupHeartbeatResponse(
        0, 0, None, None, 3, 5000, ConsumerGroupHeartbeatAssignment([TopicIdPartitions(T2, [7])])
    )
    assert (
        response.encode(1)
        == bytes.fromhex(
            "00000000"
            "0000"
            "00"
            "00"
            "00000003"
            "00001388"
            "01"  # assignment present (nullable struct marker)
            "02" + "00" * 15 + "01" + "02"
            "00000007"
            "00"  # one topic: id, [7], no tags
            "00"  # assignment's tags
            "00"
        )
    )  # response's tags


def test_offset_commit_v10_writes_the_topic_id_not_the_name() -> None:
    request = OffsetCommitRequest(
        "g", 4, "m", None, [OffsetCommitRequestTopic("orders", T2, [OffsetCommitRequestPartition(1, 42, -1, None)])]
    )
    assert request.encode(10) == bytes.fromhex(
        "026700000004026d0002" + "00" * 15 + "010200000001000000000000002affffffff00000000"
    )
    assert request.encode(9) == bytes.fromhex(
        "026700000004026d0002076f72646572730200000001000000000000002affffffff00000000"
    )


def test_varints_and_tags_use_more_than_one_byte_when_needed() -> None:
    w = FlexWriter()
    w.tagged_fields([(300, b"a" * 200)], "tags")
    raw = w.getvalue()
    assert raw[:5] == bytes([1, 0xAC, 0x02, 0xC8, 0x01])  # count 1, tag 300, size 200
    assert FlexReader(raw, "t").tagged_fields("tags") == ((300, b"a" * 200),)


# ---- round trips ----


@pytest.mark.parametrize("name,message,version", CASES, ids=[c[0] for c in CASES])
def test_table_round_trips(name: str, message, version: int) -> None:
    data = message.encode(version)
    assert type(message).decode(data, version).encode(version) == data
    assert type(message).decode(memoryview(bytearray(data)), version).encode(version) == data


def test_random_messages_round_trip_exactly() -> None:
    for name, message, version in random_cases(seed=7, per_version=25):
        assert type(message).decode(message.encode(version), version) == message, name


def test_null_and_empty_differ() -> None:
    null = ConsumerGroupHeartbeatRequest("g", subscribed_topic_names=None, topic_partitions=None)
    empty = ConsumerGroupHeartbeatRequest("g", subscribed_topic_names=[], topic_partitions=[])
    assert null.encode(1) != empty.encode(1)
    assert ConsumerGroupHeartbeatRequest.decode(empty.encode(1), 1).subscribed_topic_names == []
    assert ConsumerGroupHeartbeatRequest.decode(null.encode(1), 1).subscribed_topic_names is None


def test_fields_outside_the_version_decode_as_defaults() -> None:
    request = ConsumerGroupHeartbeatRequest.decode(STEADY.encode(0), 0)
    assert request.subscribed_topic_regex is None
    topic = OffsetCommitRequest.decode(
        OffsetCommitRequest("g", topics=[OffsetCommitRequestTopic("t", T1)]).encode(10), 10
    ).topics[0]
    assert (topic.name, topic.topic_id) == ("", T1)


# ---- malformed bytes: one-line ProtocolError naming message, field and offset ----


@pytest.mark.parametrize("name,message,version", CASES[::4], ids=[c[0] for c in CASES[::4]])
def test_every_truncation_raises_protocol_error(name: str, message, version: int) -> None:
    data = message.encode(version)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            type(message).decode(data[:cut], version)
        text = str(info.value)
        assert "\n" not in text and f"{type(message).__name__} v{version}" in text
        assert 0 <= info.value.offset <= cut


@pytest.mark.parametrize(
    "data,field,reason",
    [
        (bytes.fromhex("00"), "group_id", "non-nullable string is null"),
        (bytes.fromhex("02670380ff"), "member_id", "not valid UTF-8"),
        (bytes.fromhex("8080808080"), "group_id", "longer than 5 bytes"),
        (bytes.fromhex("818002") + b"g" * 0x8000, "group_id", "above Kafka's 32767"),  # length 32768
        (bytes.fromhex("0267026d000000050000ffffffffff7f"), "subscribed_topic_names", "cannot fit"),
        (bytes.fromhex("0267026d000000050000ffffffff00000200"), "topic_partitions[].topic_id", "needs 16 bytes"),
    ],
)
def test_malformed_heartbeat_names_the_field(data: bytes, field: str, reason: str) -> None:
    with pytest.raises(ProtocolError) as info:
        ConsumerGroupHeartbeatRequest.decode(data, 0)
    assert (info.value.field, info.value.structure) == (field, "ConsumerGroupHeartbeatRequest v0")
    assert reason in info.value.reason


def test_non_nullable_array_null_is_malformed() -> None:
    # OffsetCommitResponse.topics is not nullable: compact count 0 means null.
    with pytest.raises(ProtocolError, match="'topics'.*non-nullable array is null"):
        OffsetCommitResponse.decode(bytes.fromhex("000000000000"), 9)


def test_truncated_tagged_field_is_malformed() -> None:
    with pytest.raises(ProtocolError, match="tag 3"):
        ResponseHeader.decode(bytes.fromhex("00000001010305aabb"), 1)


# ---- values kassign refuses to write ----


@pytest.mark.parametrize("name,message,version", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_values(name: str, message, version: int) -> None:
    with pytest.raises((TypeError, ValueError)):
        message.encode(version)


@pytest.mark.parametrize(
    "message,error",
    [
        (ConsumerGroupHeartbeatRequest("g", "m", 2**31), ValueError),
        (ConsumerGroupHeartbeatRequest("g", "m", True), TypeError),  # type: ignore[arg-type]
        (ConsumerGroupHeartbeatRequest("g", subscribed_topic_names="orders"), TypeError),  # type: ignore[arg-type]
        (ConsumerGroupHeartbeatRequest("g", topic_partitions=[TopicIdPartitions("not-a-uuid")]), TypeError),  # type: ignore[arg-type]
        (ConsumerGroupHeartbeatRequest("g", topic_partitions=[TopicIdPartitions(T1, [2**31])]), ValueError),
        (ConsumerGroupHeartbeatRequest("g", topic_partitions=[(T1, [0])]), TypeError),  # type: ignore[list-item]
        (ConsumerGroupHeartbeatResponse(error_code=2**15), ValueError),
        (
            OffsetCommitRequest(
                "g", topics=[OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 2**63)])]
            ),
            ValueError,
        ),
        (OffsetFetchRequest([OffsetFetchRequestGroup("g")], require_stable=1), TypeError),  # type: ignore[arg-type]
    ],
)
def test_bad_values_raise_type_or_value_error(message, error: type[Exception]) -> None:
    version = type(message).HIGHEST_VERSION
    with pytest.raises(error):
        message.encode(version)


@pytest.mark.parametrize(
    "cls,version",
    [
        (ConsumerGroupHeartbeatRequest, 2),
        (OffsetCommitRequest, 8),
        (OffsetFetchRequest, 11),
        (RequestHeader, 0),
        (ResponseHeader, 2),
    ],
)
def test_unsupported_versions_are_refused_both_ways(cls, version: int) -> None:
    with pytest.raises(ValueError, match="supports versions"):
        cls.decode(b"\x00" * 64, version)


def test_request_messages_know_their_response() -> None:
    assert ConsumerGroupHeartbeatRequest.RESPONSE is ConsumerGroupHeartbeatResponse
    assert OffsetCommitRequest.RESPONSE is OffsetCommitResponse
    assert ConsumerGroupHeartbeatResponse.RESPONSE is None
    api_keys = (ConsumerGroupHeartbeatRequest.API_KEY, OffsetCommitRequest.API_KEY, OffsetFetchRequest.API_KEY)
    assert api_keys == (68, 8, 9)


# ---- frames ----


def test_request_frame_is_size_header_v2_body() -> None:
    frame = encode_request_frame(STEADY, 1, correlation_id=7, client_id="kassign")
    header = bytes.fromhex("00440001000000070007") + b"kassign" + b"\x00"
    assert frame == struct.pack(">i", len(header) + len(STEADY.encode(1))) + header + STEADY.encode(1)
    parsed_header, parsed = decode_request_frame(frame[4:], ConsumerGroupHeartbeatRequest)
    assert parsed_header == RequestHeader(68, 1, 7, "kassign") and parsed == STEADY


def test_request_frame_for_another_api_is_refused() -> None:
    frame = encode_request_frame(OffsetCommitRequest("g"), 9, 1, None)
    with pytest.raises(ValueError, match="API key 8"):
        decode_request_frame(frame[4:], ConsumerGroupHeartbeatRequest)


def test_response_frame_round_trip_and_truncation() -> None:
    response = ConsumerGroupHeartbeatResponse(member_id="m", member_epoch=1, heartbeat_interval_ms=5000)
    frame = encode_response_frame(response, 0, correlation_id=41)
    assert frame[4:8] == struct.pack(">i", 41) and frame[8] == 0  # header v1: correlation id, no tags
    assert decode_response_frame(frame[4:], ConsumerGroupHeartbeatResponse, 0) == (ResponseHeader(41), response)
    with pytest.raises(ProtocolError, match="ConsumerGroupHeartbeatResponse v0"):
        decode_response_frame(frame[4:-1], ConsumerGroupHeartbeatResponse, 0)


# ---- aiokafka ----


def test_prepare_picks_the_highest_common_version() -> None:
    request = AiokafkaRequest(STEADY)
    assert request.API_KEY == 68
    assert request.prepare({68: (0, 1)}).API_VERSION == 1
    assert request.prepare({68: (0, 0)}).API_VERSION == 0
    assert request.prepare({68: (0, 5)}).API_VERSION == 1
    assert AiokafkaRequest(STEADY, max_version=0).prepare({68: (0, 1)}).API_VERSION == 0
    assert AiokafkaRequest(OffsetCommitRequest("g")).prepare({8: (2, 9)}).API_VERSION == 9
    with pytest.raises(UnsupportedApiVersion, match="does not support"):
        request.prepare({8: (0, 9)})
    with pytest.raises(UnsupportedApiVersion, match="2-3"):
        request.prepare({68: (2, 3)})
    with pytest.raises(UnsupportedApiVersion):
        AiokafkaRequest(OffsetCommitRequest("g")).prepare({8: (0, 8)})
    with pytest.raises(TypeError):
        AiokafkaRequest(ConsumerGroupHeartbeatResponse())  # type: ignore[arg-type]


def test_prepared_request_parses_a_response_stream_like_aiokafka() -> None:
    prepared = AiokafkaRequest(STEADY).prepare({68: (0, 1)})
    response = ConsumerGroupHeartbeatResponse(member_epoch=6, heartbeat_interval_ms=5000)
    tags = ((1, b"\x09"),)
    frame = ResponseHeader(99, unknown_tagged_fields=tags).encode(1) + response.encode(1)
    buffer = io.BytesIO(frame)
    header = prepared.parse_response_header(buffer)
    assert header.correlation_id == 99 and header.unknown_tagged_fields == tags
    assert prepared.RESPONSE_TYPE.decode(buffer) == response


class _Writer:
    """Stands in for the socket's StreamWriter: collects what aiokafka writes."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data


@pytest.mark.asyncio
async def test_aiokafka_connection_sends_and_answers_a_heartbeat() -> None:
    from aiokafka.conn import AIOKafkaConnection

    async def exchange() -> tuple[bytes, object]:
        conn = AIOKafkaConnection("127.0.0.1", 9092, client_id="kassign-test")
        writer = _Writer()
        conn._writer = writer  # no socket: aiokafka's own send() and frame handling, in process
        conn._versions = {68: (0, 1)}
        pending = asyncio.ensure_future(conn.send(AiokafkaRequest(STEADY)))
        await asyncio.sleep(0)
        header, sent = decode_request_frame(bytes(writer.sent[4:]), ConsumerGroupHeartbeatRequest)
        assert struct.unpack(">i", writer.sent[:4])[0] == len(writer.sent) - 4
        assert (header.request_api_version, header.client_id, sent) == (1, "kassign-test", STEADY)
        answer = ConsumerGroupHeartbeatResponse(
            member_epoch=6,
            heartbeat_interval_ms=5000,
            assignment=ConsumerGroupHeartbeatAssignment([TopicIdPartitions(T1, [0])]),
        )
        conn._handle_frame(encode_response_frame(answer, 1, header.correlation_id)[4:])
        return answer, await pending

    answer, received = await exchange()
    assert received == answer


def test_uuid_and_bool_wire_forms() -> None:
    w = FlexWriter()
    w.uuid(uuid.UUID(int=1), "id")
    w.boolean(True, "b")
    r = FlexReader(w.getvalue() + b"\x02", "t")
    assert (r.uuid("id"), r.boolean("b"), r.boolean("b")) == (uuid.UUID(int=1), True, True)  # any non-zero is true
