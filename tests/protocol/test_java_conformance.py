"""Byte-for-byte conformance with Java's kafka-clients (ConsumerProtocol, StickyAssignor,
CooperativeStickyAssignor), through one JVM per module (java/ProtocolOracle.java)."""

from __future__ import annotations

import random
import struct

import pytest
from protocol_strategies import dec_str, dec_tps, enc_bytes, enc_str, enc_tps, java_order

from kassign import Assignment, Subscription, TopicPartition
from kassign.protocol import (
    ProtocolError,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)

pytestmark = pytest.mark.java

CASES = 300
# Topic characters include non-ASCII and a character outside the BMP, where Java's UTF-16 order
# differs from code-point order ("\U0001F600" sorts before "\uFF21" in Java).
ALPHABET = ["a", "b", "c", "-", ".", "_", "é", "\uff21", "\U0001f600"]


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4)))


def _partitions(rng: random.Random, topics: list[str]) -> list[TopicPartition]:
    if not topics:
        return []
    tps = {
        TopicPartition(rng.choice(topics), rng.choice([rng.randint(0, 50), rng.randint(-(2**31), 2**31 - 1)]))
        for _ in range(rng.randint(0, 12))
    }
    out = list(tps)
    rng.shuffle(out)
    return out


def _user_data(rng: random.Random) -> bytes | None:
    return None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 12))


def _subscription(rng: random.Random) -> Subscription:
    topics = list({_name(rng) for _ in range(rng.randint(0, 5))})
    rng.shuffle(topics)
    return Subscription(
        topics,
        _user_data(rng),
        _partitions(rng, topics + [_name(rng)]),
        None if rng.random() < 0.3 else rng.randint(0, 2**31 - 1),
        rng.choice([None, "", "rack-1", _name(rng)]),
    )


def _ok(answer: str) -> list[str]:
    status, *fields = answer.split("\t")
    assert status == "OK", answer
    return fields


def test_subscriptions_match_java_byte_for_byte(java_oracle) -> None:
    rng = random.Random(20261122)
    cases = [(_subscription(rng), rng.choice([0, 1, 2, 3, 3, 3, 4, 9])) for _ in range(CASES)]
    requests = [
        "\t".join(
            [
                "SUB",
                str(version),
                ",".join(enc_str(t) for t in sub.topics),
                enc_bytes(sub.user_data),
                enc_tps(sub.owned_partitions),
                str(-1 if sub.generation_id is None else sub.generation_id),
                enc_str(sub.rack_id),
            ]
        )
        for sub, version in cases
    ]
    for (sub, version), answer in zip(cases, java_oracle.ask(requests)):
        (java_hex,) = _ok(answer)
        assert encode_subscription(sub, version).hex() == java_hex, (sub, version)


def test_assignments_match_java_byte_for_byte(java_oracle) -> None:
    """Java writes an assignment's topics in order of first appearance and each topic's partitions as
    listed; so does kassign, on any order of input (here shuffled, topics interleaved)."""
    rng = random.Random(7)
    cases = []
    for _ in range(CASES):
        tps = _partitions(rng, [_name(rng) for _ in range(4)])
        rng.shuffle(tps)
        cases.append((Assignment(tps, _user_data(rng)), rng.choice([0, 1, 2, 3, 5])))
    assert sum(a.partitions != sorted(a.partitions, key=java_order) for a, _ in cases) > CASES // 2
    requests = ["\t".join(["ASN", str(v), enc_tps(a.partitions), enc_bytes(a.user_data)]) for a, v in cases]
    for (assignment, version), answer in zip(cases, java_oracle.ask(requests)):
        (java_hex,) = _ok(answer)
        assert encode_assignment(assignment, version).hex() == java_hex, (assignment, version)


def test_java_decodes_our_subscriptions_and_assignments_as_we_do(java_oracle) -> None:
    rng = random.Random(11)
    blobs = []
    for _ in range(CASES):
        sub = _subscription(rng)
        if rng.random() < 0.3:  # a newer version: v3 with fields appended that both sides must ignore
            data = (
                struct.pack(">h", rng.randint(4, 100))
                + encode_subscription(sub, 3)[2:]
                + rng.randbytes(rng.randint(0, 6))
            )
        else:
            data = encode_subscription(sub, rng.randint(0, 3))
        blobs.append(data)
    answers = java_oracle.ask([f"DSUB\t{b.hex()}" for b in blobs])
    for data, answer in zip(blobs, answers):
        topics, user_data, owned, generation, rack = _ok(answer)
        ours = decode_subscription(data)
        assert ours.topics == [dec_str(t) for t in topics.split(",")] if topics else ours.topics == []
        assert ours.user_data == (None if user_data == "~" else bytes.fromhex(user_data))
        assert ours.owned_partitions == dec_tps(owned)
        assert (-1 if ours.generation_id is None else ours.generation_id) == int(generation)
        assert ours.rack_id == dec_str(rack)

    asn_blobs = [
        encode_assignment(
            Assignment(_partitions(rng, [_name(rng) for _ in range(3)]), _user_data(rng)), rng.randint(0, 3)
        )
        for _ in range(CASES)
    ]
    for data, answer in zip(asn_blobs, java_oracle.ask([f"DASN\t{b.hex()}" for b in asn_blobs])):
        partitions, user_data = _ok(answer)
        ours = decode_assignment(data)
        assert ours.partitions == dec_tps(partitions)
        assert ours.user_data == (None if user_data == "~" else bytes.fromhex(user_data))


def test_sticky_user_data_matches_java(java_oracle) -> None:
    rng = random.Random(3)
    cases = [
        (_partitions(rng, [_name(rng) for _ in range(4)]), rng.choice([-1, 0, 1, rng.randint(0, 2**31 - 1)]))
        for _ in range(CASES)
    ]
    java_bytes = [
        bytes.fromhex(_ok(a)[0]) for a in java_oracle.ask([f"STK\t{enc_tps(tps)}\t{gen}" for tps, gen in cases])
    ]
    for (tps, generation), data in zip(cases, java_bytes):
        # Java lists topics in HashMap order: compare decoded, partition order kept within a topic.
        got = decode_sticky_user_data(data)
        assert got.generation == generation
        assert sorted(got.partitions) == sorted(tps)
        ours = encode_sticky_user_data(tps, generation)
        assert len(ours) == len(data)
        assert sorted(decode_sticky_user_data(ours).partitions) == sorted(got.partitions)
    # Java's own decoder reads our bytes, V1 and V0 (V1 without the trailing generation).
    ours = [encode_sticky_user_data(tps, gen) for tps, gen in cases]
    v0 = [data[:-4] for data in ours]
    answers = java_oracle.ask([f"DSTK\t{b.hex()}" for b in ours + v0])
    for data, answer in zip(ours + v0, answers):
        partitions, generation = _ok(answer)
        expected = decode_sticky_user_data(data)
        assert dec_tps(partitions) == expected.partitions
        assert (None if generation == "~" else int(generation)) == expected.generation


def test_cooperative_user_data_matches_java(java_oracle) -> None:
    generations = [-1, 0, 1, 255, 2**31 - 1, 123456789]
    for generation, answer in zip(generations, java_oracle.ask([f"COOP\t{g}" for g in generations])):
        assert encode_cooperative_user_data(generation).hex() == _ok(answer)[0]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        action = rng.random()
        if action < 0.4 and data:
            del data[rng.randrange(len(data)) :]
        elif data:
            data[rng.randrange(len(data))] = rng.choice([0x00, 0x01, 0x7F, 0xFF, rng.randrange(256)])
    return bytes(data)


def test_corrupted_bytes_fail_exactly_where_java_fails(java_oracle) -> None:
    rng = random.Random(99)
    ascii_sub = Subscription(
        ["orders", "pay"], b"\x00\x01", [TopicPartition("orders", 1), TopicPartition("pay", 0)], 5, "r"
    )
    blobs = [_mutate(rng, encode_subscription(ascii_sub, rng.randint(0, 3))) for _ in range(CASES)]
    answers = java_oracle.ask([f"DSUB\t{b.hex()}" for b in blobs])
    compared = 0
    for data, answer in zip(blobs, answers):
        try:
            decode_subscription(data)
            ours_ok = True
        except ProtocolError as exc:
            if "UTF-8" in str(exc):  # Java substitutes U+FFFD for invalid UTF-8; kassign refuses it
                continue
            ours_ok = False
        assert ours_ok == answer.startswith("OK"), (data.hex(), answer)
        compared += 1
    assert compared > CASES // 2


def test_corrupted_assignments_and_sticky_user_data_agree_with_java(java_oracle) -> None:
    rng = random.Random(100)
    assignment = encode_assignment(Assignment([TopicPartition("orders", 1), TopicPartition("pay", 0)], b"\x07"))
    blobs = [_mutate(rng, assignment) for _ in range(CASES)]
    for data, answer in zip(blobs, java_oracle.ask([f"DASN\t{b.hex()}" for b in blobs])):
        try:
            ours = decode_assignment(data)
        except ProtocolError as exc:
            assert answer.startswith("ERR") or "UTF-8" in str(exc), (data.hex(), answer)
            continue
        partitions, user_data = _ok(answer)
        assert ours.partitions == dec_tps(partitions)
        assert ours.user_data == (None if user_data == "~" else bytes.fromhex(user_data))

    sticky = encode_sticky_user_data([TopicPartition("orders", 1), TopicPartition("pay", 0)], 6)
    blobs = [_mutate(rng, sticky) for _ in range(CASES)]
    for data, answer in zip(blobs, java_oracle.ask([f"DSTK\t{b.hex()}" for b in blobs])):
        partitions, generation = _ok(answer)  # Java never throws: unreadable data is ([], -1)
        try:
            ours = decode_sticky_user_data(data)
        except ProtocolError as exc:
            assert (partitions, generation) == ("", "-1") or "UTF-8" in str(exc), (data.hex(), answer)
            continue
        assert ours.partitions == dec_tps(partitions)
        assert ours.generation == (None if generation == "~" else int(generation))
