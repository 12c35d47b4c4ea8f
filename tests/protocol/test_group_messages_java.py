"""Byte-for-byte conformance of the KIP-848 message codecs and the request/response headers with
kafka-clients 4.4.0's generated ``*Data`` classes, through one JVM (java/MessageOracle.java).

Java builds each message from the same values and writes it; kassign must write the same bytes,
decode Java's bytes to the same values, agree with Java on what cannot be written, and fail on every
truncation that Java fails on.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from group_message_samples import CASES, REFUSED, java_class, random_cases, to_java

from kassign.protocol import ProtocolError
from kassign.protocol.message_codec import Message
from kassign.protocol.offset_commit import OffsetCommitResponse

pytestmark = pytest.mark.java

ROOT = Path(__file__).resolve().parents[2]
#: kafka-clients with ConsumerGroupHeartbeat v1 and OffsetCommit/OffsetFetch v10 (3.9 has neither).
KAFKA_CLIENTS = "4.4.0"
RANDOM = random_cases(seed=20260848, per_version=40)


class MessageOracle:
    """Sends request lines to a running MessageOracle and returns its answer lines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    def ask(self, requests: Sequence[str]) -> list[tuple[str, str]]:
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None

        def send() -> None:
            stdin.write("".join(r + "\n" for r in requests))
            stdin.flush()

        # A large batch fills both pipes: write from a thread while this one reads the answers.
        writer = threading.Thread(target=send, daemon=True)
        writer.start()
        answers = []
        for _ in requests:
            status, _, payload = stdout.readline().rstrip("\n").partition("\t")
            answers.append((status, payload))
        writer.join()
        return answers

    def encode(self, cases: Sequence[tuple[Message, int]]) -> list[tuple[str, str]]:
        """Java's (status, hex or error) for each (message, version)."""
        return self.ask([f"ENC\t{java_class(type(m))}\t{v}\t{json.dumps(to_java(m))}" for m, v in cases])

    def decode(self, cases: Sequence[tuple[type[Message], bytes, int]]) -> list[tuple[str, str]]:
        """Java's (status, json or error) for each (message class, bytes, version)."""
        return self.ask([f"DEC\t{java_class(m)}\t{v}\t{data.hex()}" for m, data, v in cases])


@pytest.fixture(scope="module")
def oracle() -> Iterator[MessageOracle]:
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


def _python_view(java_json: dict[str, Any], python_json: dict[str, Any]) -> dict[str, Any]:
    """Java's dump restricted to the fields kassign models (Java also has the pre-v8 fields)."""
    out: dict[str, Any] = {}
    for key, value in python_json.items():
        theirs = java_json[key]
        if isinstance(value, dict) and isinstance(theirs, dict):
            out[key] = _python_view(theirs, value)
        elif (
            isinstance(value, list)
            and isinstance(theirs, list)
            and len(value) == len(theirs)
            and all(isinstance(v, dict) for v in value)
        ):
            out[key] = [_python_view(t, v) for t, v in zip(theirs, value)]
        else:
            out[key] = theirs
    return out


def _check_encodings(oracle: MessageOracle, cases: list[tuple[str, Message, int]]) -> None:
    answers = oracle.encode([(m, v) for _, m, v in cases])
    for (name, message, version), (status, java_hex) in zip(cases, answers):
        assert status == "OK", (name, java_hex)
        assert message.encode(version).hex() == java_hex, name
    # Decode Java's bytes in Python, and have Java decode them too: both must see the same values.
    data = [bytes.fromhex(h) for _, h in answers]
    java_views = oracle.decode([(type(m), d, v) for (_, m, v), d in zip(cases, data)])
    for (name, message, version), raw, (status, java_json) in zip(cases, data, java_views):
        assert status == "OK", (name, java_json)
        decoded = type(message).decode(raw, version)
        mine = to_java(decoded)
        assert _python_view(json.loads(java_json), mine) == mine, name
        # Every field of these messages exists at the version they are written at (or is ignorable and
        # dropped), so decoding gives back the message up to the dropped fields.
        assert decoded.encode(version) == raw, name


def test_table_of_messages_matches_java(oracle: MessageOracle) -> None:
    _check_encodings(oracle, CASES)


def test_random_messages_match_java(oracle: MessageOracle) -> None:
    _check_encodings(oracle, RANDOM)


def test_ignorable_fields_are_dropped_like_java(oracle: MessageOracle) -> None:
    # Topic names at v10 and topic ids at v9 are dropped silently by Java: kassign writes the same
    # bytes, and reads the dropped field back as its default.
    cases = [c for c in CASES if c[0].startswith(("commit-member-epoch", "fetch-member", "commit-response-v"))]
    assert len(cases) == 6
    answers = oracle.encode([(m, v) for _, m, v in cases])
    for (name, message, version), (status, java_hex) in zip(cases, answers):
        assert status == "OK" and message.encode(version).hex() == java_hex, name
        topics = type(message).decode(bytes.fromhex(java_hex), version)
        first = topics.groups[0].topics[0] if hasattr(topics, "groups") else topics.topics[0]
        if version == 10:
            assert first.name == "" and first.topic_id.int != 0, name
        else:
            assert first.name != "" and first.topic_id.int == 0, name


@pytest.mark.parametrize("name,message,version", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_java_refuses_to_write_kassign_refuses(
    oracle: MessageOracle, name: str, message: Message, version: int
) -> None:
    [(status, error)] = oracle.encode([(message, version)])
    assert status == "ERR", f"Java wrote {name}: {error}"
    with pytest.raises((TypeError, ValueError)):
        message.encode(version)


def test_every_truncation_fails_in_java_and_kassign(oracle: MessageOracle) -> None:
    cases = CASES[::3]
    prefixes = [(type(m), m.encode(v)[:cut], v) for _, m, v in cases for cut in range(len(m.encode(v)))]
    answers = oracle.decode(prefixes)
    for (message, data, version), (status, _) in zip(prefixes, answers):
        assert status == "ERR", (message.__name__, version, data.hex())
        with pytest.raises(ProtocolError):
            message.decode(data, version)


def test_trailing_bytes_are_ignored_like_java(oracle: MessageOracle) -> None:
    cases = [(type(m), m.encode(v) + b"\x07\x00\xff", v) for _, m, v in CASES[:12]]
    for (message, data, version), (status, java_json) in zip(cases, oracle.decode(cases)):
        assert status == "OK", java_json
        mine = to_java(message.decode(data, version))
        assert _python_view(json.loads(java_json), mine) == mine


def test_tags_out_of_order_from_elsewhere_decode_like_java(oracle: MessageOracle) -> None:
    # Hand-made bytes with tags out of order and repeated: Java never writes them but reads them,
    # keeping them in order; so does kassign (and refuses to write them back, see REFUSED).
    # throttle_time_ms=10, topics=[] (compact count 1), then 3 tags: 5, 2, 5.
    raw = bytes.fromhex("0000000a01030501aa02000502bbcc")
    [(status, java_json)] = oracle.decode([(OffsetCommitResponse, raw, 9)])
    assert status == "OK", java_json
    decoded = OffsetCommitResponse.decode(raw, 9)
    assert decoded.unknown_tagged_fields == ((5, b"\xaa"), (2, b""), (5, b"\xbb\xcc"))
    assert _python_view(json.loads(java_json), to_java(decoded)) == to_java(decoded)
