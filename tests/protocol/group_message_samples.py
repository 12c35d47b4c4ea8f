"""Sample KIP-848 messages for the codec tests: a named table of hand-picked cases, a seeded random
generator, and the conversion to the JSON that java/MessageOracle.java builds Java messages from."""

from __future__ import annotations

import base64
import dataclasses
import random
import uuid
from typing import Any

from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from kassign.protocol.flexible_wire import ZERO_UUID, RawTaggedField
from kassign.protocol.headers import RequestHeader, ResponseHeader
from kassign.protocol.message_codec import (
    BOOL,
    CLASSIC_NULLABLE_STRING,
    INT16,
    INT32,
    INT32_ARRAY,
    INT64,
    STRING,
    STRING_ARRAY,
    UUID,
    FlexibleStruct,
    Message,
    NestedStruct,
    StructArray,
)
from kassign.protocol.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kassign.protocol.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)

T1 = uuid.UUID("6f1c1e4a-2b3d-4c5e-8f70-81a2b3c4d5e6")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000001")
T3 = uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")
TAGS = (RawTaggedField(0, b""), RawTaggedField(3, b"\x01\x02"), RawTaggedField(200, b"x" * 130))

MESSAGES: tuple[type[Message], ...] = (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    RequestHeader,
    ResponseHeader,
)

#: (case id, message, version): every one is valid and written by Java without error.
CASES: list[tuple[str, Message, int]] = []


def _case(name: str, message: Message, *versions: int) -> None:
    for version in versions:
        CASES.append((f"{name}-v{version}", message, version))


_case(
    "heartbeat-join",
    ConsumerGroupHeartbeatRequest(
        "orders-group",
        "",
        0,
        instance_id="instance-1",
        rack_id="rack-a",
        rebalance_timeout_ms=300_000,
        subscribed_topic_names=["orders", "payments"],
        server_assignor="uniform",
        topic_partitions=[],
    ),
    0,
    1,
)
_case(
    "heartbeat-join-regex",
    ConsumerGroupHeartbeatRequest(
        "orders-group",
        "",
        0,
        rebalance_timeout_ms=45_000,
        subscribed_topic_names=[],
        subscribed_topic_regex="orders-.*",
        topic_partitions=[],
    ),
    1,
)
_case("heartbeat-steady-all-null", ConsumerGroupHeartbeatRequest("g", "9dEw2kQ_Ri-1xYwq8nLr0A", 17), 0, 1)
_case(
    "heartbeat-ack-owned",
    ConsumerGroupHeartbeatRequest(
        "g",
        "m",
        18,
        topic_partitions=[
            TopicIdPartitions(T1, [0, 1, 2]),
            TopicIdPartitions(T2, []),
            TopicIdPartitions(T3, [2**31 - 1, -1]),
        ],
    ),
    0,
    1,
)
_case("heartbeat-leave", ConsumerGroupHeartbeatRequest("g", "m", -1), 0, 1)
_case("heartbeat-static-leave", ConsumerGroupHeartbeatRequest("g", "m", -2, instance_id="i"), 0, 1)
_case(
    "heartbeat-empty-strings",
    ConsumerGroupHeartbeatRequest(
        "", "", 0, instance_id="", rack_id="", subscribed_topic_names=[""], server_assignor=""
    ),
    0,
    1,
)
_case(
    "heartbeat-non-ascii",
    ConsumerGroupHeartbeatRequest(
        "gr\u00fcppe", "m\U0001f600", 3, rack_id="\uff21", subscribed_topic_names=["t\u00e9", "\U0001f600"]
    ),
    0,
    1,
)
_case(
    "heartbeat-unknown-tags",
    ConsumerGroupHeartbeatRequest(
        "g",
        "m",
        1,
        topic_partitions=[TopicIdPartitions(T1, [4], unknown_tagged_fields=TAGS[1:2])],
        unknown_tagged_fields=TAGS,
    ),
    0,
    1,
)
_case("heartbeat-response-no-assignment", ConsumerGroupHeartbeatResponse(0, 0, None, None, 17, 5000), 0, 1)
_case(
    "heartbeat-response-joined",
    ConsumerGroupHeartbeatResponse(
        12, 0, None, "9dEw2kQ_Ri-1xYwq8nLr0A", 1, 5000, ConsumerGroupHeartbeatAssignment([])
    ),
    0,
    1,
)
_case(
    "heartbeat-response-assignment",
    ConsumerGroupHeartbeatResponse(
        0,
        0,
        None,
        None,
        2,
        3000,
        ConsumerGroupHeartbeatAssignment(
            [TopicIdPartitions(T1, [5, 3, 1]), TopicIdPartitions(T2, [0])], unknown_tagged_fields=TAGS[:1]
        ),
    ),
    0,
    1,
)
_case(
    "heartbeat-response-fenced",
    ConsumerGroupHeartbeatResponse(0, 110, "The member epoch is fenced.", None, -1, 0),
    0,
    1,
)
_case("heartbeat-response-tags", ConsumerGroupHeartbeatResponse(unknown_tagged_fields=TAGS), 0, 1)
_case(
    "commit-member-epoch",
    OffsetCommitRequest(
        "g",
        7,
        "m",
        None,
        [
            OffsetCommitRequestTopic(
                "orders",
                T1,
                [OffsetCommitRequestPartition(0, 42, 3, ""), OffsetCommitRequestPartition(1, 2**63 - 1, -1, None)],
            ),
            OffsetCommitRequestTopic("payments", T2, [OffsetCommitRequestPartition(9, 0, 0, "meta\u00e9")]),
        ],
    ),
    9,
    10,
)
_case("commit-static-empty", OffsetCommitRequest("g", -1, "", "instance-1", []), 9, 10)
_case(
    "commit-topic-no-partitions",
    OffsetCommitRequest(
        "g",
        3,
        "m",
        topics=[OffsetCommitRequestTopic("t", T3, [], unknown_tagged_fields=TAGS[2:])],
        unknown_tagged_fields=TAGS[:2],
    ),
    9,
    10,
)
_case(
    "commit-response",
    OffsetCommitResponse(
        5,
        [
            OffsetCommitResponseTopic(
                "orders", T1, [OffsetCommitResponsePartition(0, 0), OffsetCommitResponsePartition(1, 113)]
            ),
            OffsetCommitResponseTopic("x", T2, []),
        ],
    ),
    9,
    10,
)
_case("commit-response-empty", OffsetCommitResponse(), 9, 10)
_case(
    "fetch-member",
    OffsetFetchRequest(
        [
            OffsetFetchRequestGroup(
                "g", "m", 7, [OffsetFetchRequestTopics("orders", T1, [0, 1, 2]), OffsetFetchRequestTopics("p", T2, [])]
            )
        ],
        True,
    ),
    9,
    10,
)
_case("fetch-all-topics", OffsetFetchRequest([OffsetFetchRequestGroup("g", None, -1, None)]), 9, 10)
_case(
    "fetch-no-topics-two-groups",
    OffsetFetchRequest(
        [OffsetFetchRequestGroup("a", "m", 1, []), OffsetFetchRequestGroup("b", "", 0, [], unknown_tagged_fields=TAGS)]
    ),
    9,
    10,
)
_case("fetch-no-groups", OffsetFetchRequest(), 9, 10)
_case(
    "fetch-response",
    OffsetFetchResponse(
        0,
        [
            OffsetFetchResponseGroup(
                "g",
                [
                    OffsetFetchResponseTopics(
                        "orders",
                        T1,
                        [
                            OffsetFetchResponsePartitions(0, 42, 3, "", 0),
                            OffsetFetchResponsePartitions(1, -1, -1, None, 0),
                        ],
                    )
                ],
                0,
            ),
            OffsetFetchResponseGroup("h", [], 16),
        ],
    ),
    9,
    10,
)
_case("request-header", RequestHeader(68, 1, 7, "kassign-client"), 1, 2)
_case("request-header-null-client", RequestHeader(8, 10, -(2**31), None), 1, 2)
_case("request-header-non-ascii", RequestHeader(9, 9, 2**31 - 1, "cl\u00efent-\U0001f600"), 1, 2)
_case("request-header-tags", RequestHeader(68, 0, 1, "", unknown_tagged_fields=TAGS), 2)
_case("response-header", ResponseHeader(123), 0, 1)
_case("response-header-tags", ResponseHeader(-1, unknown_tagged_fields=TAGS), 1)

#: (case id, message, version) that Java refuses to write, and kassign too (TypeError or ValueError).
REFUSED: list[tuple[str, Message, int]] = [
    ("regex-at-v0", ConsumerGroupHeartbeatRequest("g", "m", 0, subscribed_topic_regex="a.*"), 0),
    ("tags-not-ascending", ConsumerGroupHeartbeatRequest("g", unknown_tagged_fields=(TAGS[1], TAGS[0])), 1),
    ("tags-repeated", OffsetCommitResponse(unknown_tagged_fields=(TAGS[1], TAGS[1])), 9),
    (
        "nested-tags-not-ascending",
        ConsumerGroupHeartbeatResponse(
            assignment=ConsumerGroupHeartbeatAssignment(unknown_tagged_fields=(TAGS[2], TAGS[1]))
        ),
        0,
    ),
    ("tags-on-header-v1", RequestHeader(68, 0, 1, "c", unknown_tagged_fields=TAGS[:1]), 1),
    ("tags-on-header-v0", ResponseHeader(1, unknown_tagged_fields=TAGS[:1]), 0),
    ("null-non-nullable-member-id", ConsumerGroupHeartbeatRequest("g", None), 0),  # type: ignore[arg-type]
    ("null-topic-name", OffsetCommitRequest("g", topics=[OffsetCommitRequestTopic(None)]), 9),  # type: ignore[arg-type]
    ("null-partitions", ConsumerGroupHeartbeatRequest("g", topic_partitions=[TopicIdPartitions(T1, None)]), 0),  # type: ignore[arg-type]
    ("null-assignment-topics", ConsumerGroupHeartbeatResponse(assignment=ConsumerGroupHeartbeatAssignment(None)), 1),  # type: ignore[arg-type]
    ("string-too-long", ConsumerGroupHeartbeatRequest("g" * 0x8000), 0),
]


# ---- the JSON the Java oracle reads and writes ----


def camel(name: str) -> str:
    """Kafka's generated field name for a snake_case field."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def to_java(value: Any) -> Any:
    """``value`` as the JSON MessageOracle.java builds a Java message from (and dumps one as)."""
    if isinstance(value, FlexibleStruct):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "unknown_tagged_fields":
                out["_unknownTaggedFields"] = [[tag, data.hex()] for tag, data in item]
            else:
                out[camel(f.name)] = to_java(item)
        return out
    if isinstance(value, uuid.UUID):
        return kafka_uuid(value)
    if isinstance(value, (list, tuple)):
        return [to_java(v) for v in value]
    return value


def java_class(message: type[Message]) -> str:
    """The kafka-clients class of ``message``: ``ConsumerGroupHeartbeatRequest`` -> ``...RequestData``."""
    return f"{message.__name__}Data"


# ---- random messages, driven by each message's schema ----

_ALPHABET = ["a", "b", "-", ".", "_", "\u00e9", "\uff21", "\U0001f600"]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.choice([0, 1, 3, 8])))


def _int(rng: random.Random, bits: int) -> int:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return rng.choice([0, -1, low, high, rng.randint(low, high), rng.randint(0, 100)])


def _tags(rng: random.Random) -> tuple[RawTaggedField, ...]:
    if rng.random() < 0.7:
        return ()
    tags = sorted(rng.sample([0, 1, 5, 127, 128, 300, 2**20], rng.randint(1, 3)))
    return tuple(RawTaggedField(t, rng.randbytes(rng.choice([0, 1, 5, 200]))) for t in tags)


def random_struct(rng: random.Random, struct: type[FlexibleStruct], version: int, depth: int = 0) -> Any:
    """A random ``struct`` whose every field is in ``version`` (fields outside keep their defaults)."""
    values: dict[str, Any] = {}
    for f in struct.SCHEMA:
        if version not in f.versions:
            continue
        if version in f.nullable_versions and rng.random() < 0.25:
            values[f.name] = None
            continue
        t = f.type
        if t is INT16:
            values[f.name] = _int(rng, 16)
        elif t is INT32:
            values[f.name] = _int(rng, 32)
        elif t is INT64:
            values[f.name] = _int(rng, 64)
        elif t is BOOL:
            values[f.name] = rng.random() < 0.5
        elif t is UUID:
            values[f.name] = rng.choice([ZERO_UUID, T1, uuid.UUID(bytes=rng.randbytes(16))])
        elif t is STRING or t is CLASSIC_NULLABLE_STRING:
            values[f.name] = _string(rng)
        elif t is INT32_ARRAY:
            values[f.name] = [_int(rng, 32) for _ in range(rng.randint(0, 5))]
        elif t is STRING_ARRAY:
            values[f.name] = [_string(rng) for _ in range(rng.randint(0, 4))]
        elif isinstance(t, StructArray):
            count = 0 if depth > 3 else rng.randint(0, 3)
            values[f.name] = [random_struct(rng, t.struct, version, depth + 1) for _ in range(count)]
        elif isinstance(t, NestedStruct):
            values[f.name] = random_struct(rng, t.struct, version, depth + 1)
        else:
            raise AssertionError(f"no generator for {f.name}")
    if version in struct.FLEXIBLE_VERSIONS:
        values["unknown_tagged_fields"] = _tags(rng)
    for f in dataclasses.fields(struct):  # required fields outside the version (none today) get a value
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = 0
    return struct(**values)


def random_cases(seed: int, per_version: int) -> list[tuple[str, Message, int]]:
    """``per_version`` random messages of every class at every supported version."""
    rng = random.Random(seed)
    return [
        (f"{m.__name__}-v{v}-{i}", random_struct(rng, m, v), v)
        for m in MESSAGES
        for v in range(m.LOWEST_VERSION, m.HIGHEST_VERSION + 1)
        for i in range(per_version)
    ]
