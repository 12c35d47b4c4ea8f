"""Malformed bytes raise ProtocolError naming field and offset; bad arguments raise TypeError/ValueError."""

from __future__ import annotations

import struct

import pytest

from kassign import Assignment, Subscription, TopicPartition
from kassign.protocol import (
    ProtocolError,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)

SUB = Subscription(
    ["orders", "payments"], b"ud", [TopicPartition("orders", 0), TopicPartition("payments", 3)], 4, "az1"
)
ASSIGNMENT = Assignment([TopicPartition("orders", 0), TopicPartition("orders", 1)], b"ud")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_of_a_subscription_fails(version: int) -> None:
    data = encode_subscription(SUB, version)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError) as info:
            decode_subscription(data[:cut])
        assert 0 <= info.value.offset <= cut
        assert f"offset {info.value.offset}" in str(info.value)


def test_every_truncation_of_an_assignment_fails() -> None:
    data = encode_assignment(ASSIGNMENT)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            decode_assignment(data[:cut])


def test_truncated_sticky_user_data_fails_except_where_v0_fits() -> None:
    data = encode_sticky_user_data([TopicPartition("t", 1), TopicPartition("u", 2)], 3)
    v0_end = len(data) - 4
    for cut in range(len(data)):
        if cut >= v0_end:  # the whole previous assignment is there: Java falls back to V0
            assert decode_sticky_user_data(data[:cut]).generation is None
        else:
            with pytest.raises(ProtocolError):
                decode_sticky_user_data(data[:cut])


@pytest.mark.parametrize("version", [-1, -2, -32768])
def test_negative_version_is_an_error(version: int) -> None:
    data = struct.pack(">h", version) + encode_subscription(SUB)[2:]
    with pytest.raises(ProtocolError, match="version"):
        decode_subscription(data)
    with pytest.raises(ProtocolError, match="version"):
        decode_assignment(struct.pack(">h", version) + encode_assignment(ASSIGNMENT)[2:])


def test_negative_topic_count_names_field_and_offset() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_subscription(b"\x00\x01\xff\xff\xff\xfe")
    assert info.value.field == "topics" and info.value.offset == 2
    assert "negative" in str(info.value)


def test_huge_array_count_is_rejected_before_allocating() -> None:
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_assignment(b"\x00\x03\x7f\xff\xff\xff")
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_sticky_user_data(b"\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff")


def test_null_topic_string_is_an_error() -> None:
    with pytest.raises(ProtocolError) as info:
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff")
    assert info.value.field == "topics[]" and info.value.offset == 6


def test_invalid_utf8_topic_is_an_error() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        decode_subscription(b"\x00\x00\x00\x00\x00\x01\x00\x02\xc3\x28\xff\xff\xff\xff")


def test_short_cooperative_user_data_is_an_error() -> None:
    with pytest.raises(ProtocolError, match="generation"):
        decode_cooperative_user_data(b"\x00\x00\x01")


def test_protocol_error_is_a_value_error() -> None:
    assert issubclass(ProtocolError, ValueError)


@pytest.mark.parametrize("bad", ["text", 5, None, [1, 2]])
def test_non_bytes_input_is_a_type_error(bad: object) -> None:
    for decode in (decode_subscription, decode_assignment, decode_sticky_user_data, decode_cooperative_user_data):
        with pytest.raises(TypeError):
            decode(bad)  # type: ignore[arg-type]


def test_bad_arguments_to_encoders_name_the_value() -> None:
    with pytest.raises(ValueError, match="-1"):
        encode_subscription(SUB, -1)
    with pytest.raises(TypeError, match="Subscription"):
        encode_subscription({"topics": ["t"]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="4294967296"):
        encode_assignment(Assignment([TopicPartition("t", 2**32)]))
    with pytest.raises(ValueError, match="int32"):
        encode_cooperative_user_data(2**31)
    with pytest.raises(TypeError, match="'x'"):
        encode_sticky_user_data([TopicPartition("t", "x")], 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_subscription(Subscription("orders"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="more than Kafka's 32767"):
        encode_subscription(Subscription(["t" * 40000]))
    with pytest.raises(TypeError, match="5"):
        encode_sticky_user_data([5], 1)  # type: ignore[list-item]
