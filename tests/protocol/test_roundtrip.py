"""Round trips through kassign.protocol for every version, and the version/field rules of the schema."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_strategies import INT32, assignments, java_order, names, partitions, subscriptions

from kassign import Assignment, Subscription, TopicPartition
from kassign.protocol import (
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)

# Per-test settings (not a global profile): other modules keep their own.
EXAMPLES = settings(max_examples=150, deadline=None)


@EXAMPLES
@given(subscriptions, st.integers(0, 3))
def test_subscription_round_trip_keeps_what_the_version_carries(sub: Subscription, version: int) -> None:
    data = encode_subscription(sub, version)
    assert struct.unpack_from(">h", data)[0] == version
    got = decode_subscription(data)
    assert got.topics == sorted(sub.topics, key=lambda t: t.encode("utf-16-be"))
    assert got.user_data == sub.user_data
    assert got.owned_partitions == (sorted(sub.owned_partitions, key=java_order) if version >= 1 else [])
    assert got.generation_id == (sub.generation_id if version >= 2 else None)
    assert got.rack_id == ((sub.rack_id or None) if version >= 3 else None)
    assert got.group_instance_id is None


@EXAMPLES
@given(subscriptions)
def test_default_version_is_3(sub: Subscription) -> None:
    assert encode_subscription(sub) == encode_subscription(sub, 3)


@EXAMPLES
@given(subscriptions, st.integers(4, 2**15 - 1), st.binary(max_size=16))
def test_newer_subscription_version_reads_v3_fields_and_ignores_the_rest(
    sub: Subscription, version: int, extra: bytes
) -> None:
    v3 = encode_subscription(sub, 3)
    newer = struct.pack(">h", version) + v3[2:] + extra
    assert decode_subscription(newer) == decode_subscription(v3)


@EXAMPLES
@given(subscriptions, st.integers(4, 1000))
def test_encoding_a_newer_version_writes_v3_like_java(sub: Subscription, version: int) -> None:
    assert encode_subscription(sub, version) == encode_subscription(sub, 3)


@EXAMPLES
@given(assignments, st.integers(0, 3))
def test_assignment_round_trip_groups_by_topic_in_given_order(assignment: Assignment, version: int) -> None:
    data = encode_assignment(assignment, version)
    assert struct.unpack_from(">h", data)[0] == version
    got = decode_assignment(data)
    first_seen = list(dict.fromkeys(tp.topic for tp in assignment.partitions))
    expected = [tp for topic in first_seen for tp in assignment.partitions if tp.topic == topic]
    assert got.partitions == expected
    assert got.user_data == assignment.user_data


@EXAMPLES
@given(assignments, st.integers(4, 2**15 - 1), st.binary(max_size=16))
def test_newer_assignment_version_decodes(assignment: Assignment, version: int, extra: bytes) -> None:
    v3 = encode_assignment(assignment)
    assert decode_assignment(struct.pack(">h", version) + v3[2:] + extra) == decode_assignment(v3)


@EXAMPLES
@given(partitions, INT32)
def test_sticky_user_data_round_trip_keeps_order_within_topic(tps: list[TopicPartition], generation: int) -> None:
    got_partitions, got_generation = decode_sticky_user_data(encode_sticky_user_data(tps, generation))
    assert got_generation == generation
    assert sorted(got_partitions) == sorted(tps)
    for topic in {t for t, _ in tps}:
        assert [p for t, p in got_partitions if t == topic] == [p for t, p in tps if t == topic]


@EXAMPLES
@given(partitions)
def test_sticky_user_data_v0_has_no_generation(tps: list[TopicPartition]) -> None:
    v1 = encode_sticky_user_data(tps, 7)
    v0 = v1[:-4]  # V1 is V0 followed by the int32 generation
    assert decode_sticky_user_data(v0) == (decode_sticky_user_data(v1).partitions, None)


def test_sticky_user_data_none_generation_is_minus_one() -> None:
    assert decode_sticky_user_data(encode_sticky_user_data([], None)) == ([], -1)


def test_sticky_user_data_accepts_memoryview_and_bytearray() -> None:
    data = encode_sticky_user_data([TopicPartition("t", 1)], 3)
    assert decode_sticky_user_data(memoryview(data)) == decode_sticky_user_data(bytearray(data)) == ([("t", 1)], 3)


@EXAMPLES
@given(INT32, st.binary(max_size=8))
def test_cooperative_user_data_is_one_int32(generation: int, trailing: bytes) -> None:
    data = encode_cooperative_user_data(generation)
    assert data == struct.pack(">i", generation)
    assert decode_cooperative_user_data(data + trailing) == generation


def test_subscription_layout_by_hand() -> None:
    """The v3 bytes written field by field from ConsumerProtocolSubscription.json."""
    sub = Subscription(["b", "a"], b"\x01", [TopicPartition("a", 2), TopicPartition("a", 1)], 9, "r1")
    expected = (
        b"\x00\x03"  # version
        b"\x00\x00\x00\x02"
        b"\x00\x01a"
        b"\x00\x01b"  # topics, sorted
        b"\x00\x00\x00\x01\x01"  # user data
        b"\x00\x00\x00\x01"
        b"\x00\x01a"
        b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x01\x00\x00\x00\x02"  # owned
        b"\x00\x00\x00\x09"  # generation
        b"\x00\x02r1"  # rack
    )
    assert encode_subscription(sub) == expected
    assert encode_subscription(Subscription([]), 3) == (
        b"\x00\x03\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff"
    )


@EXAMPLES
@given(names)
def test_empty_rack_decodes_as_none(rack: str) -> None:
    got = decode_subscription(encode_subscription(Subscription(["t"], rack_id=rack)))
    assert got.rack_id == (rack or None)


def test_negative_generation_is_written_as_minus_one_like_java() -> None:
    assert encode_subscription(Subscription(["t"], generation_id=-5)) == encode_subscription(Subscription(["t"]))


def test_a_strided_memoryview_decodes_like_its_bytes() -> None:
    data = encode_assignment(Assignment([TopicPartition("t", 1), TopicPartition("u", 0)], b"ud"))
    strided = memoryview(bytes(b for pair in zip(data, data) for b in pair))[::2]
    assert not strided.c_contiguous
    assert decode_assignment(strided) == decode_assignment(data)
