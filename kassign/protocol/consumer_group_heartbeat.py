"""ConsumerGroupHeartbeat (API key 68), versions 0-1: the one request of the next-generation
consumer group protocol (KIP-848), byte for byte as kafka-clients 4.x writes it.

A member joins with ``member_epoch=0``, leaves with -1 (a static member with -2), and otherwise
heartbeats with its current epoch. Every nullable field of the request means "unchanged since my
last heartbeat" when ``None``, so a steady-state heartbeat carries only the group, member id and
epoch. Version 1 adds ``subscribed_topic_regex``; writing one at version 0 is an error (Java's too).
"""

from __future__ import annotations

import dataclasses
import uuid

from kassign.protocol.flexible_wire import ZERO_UUID
from kassign.protocol.message_codec import (
    INT16,
    INT32,
    INT32_ARRAY,
    STRING,
    STRING_ARRAY,
    UUID,
    ApiMessage,
    Field,
    FlexibleStruct,
    NestedStruct,
    StructArray,
    TaggedFields,
)

__all__ = [
    "TopicIdPartitions",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatAssignment",
    "ConsumerGroupHeartbeatResponse",
]

API_KEY = 68


@dataclasses.dataclass(frozen=True)
class TopicIdPartitions(FlexibleStruct):
    """Partitions of one topic named by its id (the request's owned and the response's assigned partitions)."""

    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[int] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("topic_id", UUID),
        Field.of("partitions", INT32_ARRAY),
    )


@dataclasses.dataclass(frozen=True)
class ConsumerGroupHeartbeatAssignment(FlexibleStruct):
    """The partitions the coordinator assigns to the member, usable at once."""

    topic_partitions: list[TopicIdPartitions] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (Field.of("topic_partitions", StructArray(TopicIdPartitions)),)


@dataclasses.dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse(ApiMessage):
    """The coordinator's answer; ``assignment`` is ``None`` when the assignment did not change."""

    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: ConsumerGroupHeartbeatAssignment | None = None
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = 0
    HIGHEST_VERSION = 1
    SCHEMA = (
        Field.of("throttle_time_ms", INT32),
        Field.of("error_code", INT16),
        Field.of("error_message", STRING, nullable_versions="0+"),
        Field.of("member_id", STRING, nullable_versions="0+"),
        Field.of("member_epoch", INT32),
        Field.of("heartbeat_interval_ms", INT32),
        Field.of("assignment", NestedStruct(ConsumerGroupHeartbeatAssignment), nullable_versions="0+"),
    )


@dataclasses.dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest(ApiMessage):
    """A member's heartbeat; ``None`` fields (and ``rebalance_timeout_ms=-1``) mean "unchanged"."""

    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list[TopicIdPartitions] | None = None
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = 0
    HIGHEST_VERSION = 1
    RESPONSE = ConsumerGroupHeartbeatResponse
    SCHEMA = (
        Field.of("group_id", STRING),
        Field.of("member_id", STRING),
        Field.of("member_epoch", INT32),
        Field.of("instance_id", STRING, nullable_versions="0+"),
        Field.of("rack_id", STRING, nullable_versions="0+"),
        Field.of("rebalance_timeout_ms", INT32),
        Field.of("subscribed_topic_names", STRING_ARRAY, nullable_versions="0+"),
        Field.of("subscribed_topic_regex", STRING, "1+", nullable_versions="1+"),
        Field.of("server_assignor", STRING, nullable_versions="0+"),
        Field.of("topic_partitions", StructArray(TopicIdPartitions), nullable_versions="0+"),
    )
