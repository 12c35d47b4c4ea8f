"""OffsetCommit (API key 8), versions 9-10: committing offsets as a member of a KIP-848 consumer group.

From version 9 the coordinator reads ``generation_id_or_member_epoch`` as the member epoch of a
consumer group member (and still as the generation of a classic-group member), so a commit from a
member fenced out of its epoch fails with STALE_MEMBER_EPOCH. Version 10 names topics by id instead of
by name; like Java, ``name`` is dropped at version 10 and ``topic_id`` at version 9.
"""

from __future__ import annotations

import dataclasses
import uuid

from kassign.protocol.flexible_wire import ZERO_UUID
from kassign.protocol.message_codec import (
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ApiMessage,
    Field,
    FlexibleStruct,
    StructArray,
    TaggedFields,
)

__all__ = [
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitRequest",
    "OffsetCommitResponsePartition",
    "OffsetCommitResponseTopic",
    "OffsetCommitResponse",
]

API_KEY = 8
# Versions 9 and 10 are the ones a KIP-848 member uses; both are flexible.
_LOWEST, _HIGHEST = 9, 10


@dataclasses.dataclass(frozen=True)
class OffsetCommitResponsePartition(FlexibleStruct):
    """The outcome of one partition's commit."""

    partition_index: int = 0
    error_code: int = 0
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("partition_index", INT32),
        Field.of("error_code", INT16),
    )


@dataclasses.dataclass(frozen=True)
class OffsetCommitResponseTopic(FlexibleStruct):
    """The outcomes for one topic: ``name`` at version 9, ``topic_id`` at version 10."""

    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[OffsetCommitResponsePartition] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("name", STRING, "0-9", ignorable=True),
        Field.of("topic_id", UUID, "10+", ignorable=True),
        Field.of("partitions", StructArray(OffsetCommitResponsePartition)),
    )


@dataclasses.dataclass(frozen=True)
class OffsetCommitResponse(ApiMessage):
    """The coordinator's answer: one error code per committed partition."""

    throttle_time_ms: int = 0
    topics: list[OffsetCommitResponseTopic] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    SCHEMA = (
        Field.of("throttle_time_ms", INT32),
        Field.of("topics", StructArray(OffsetCommitResponseTopic)),
    )


@dataclasses.dataclass(frozen=True)
class OffsetCommitRequestPartition(FlexibleStruct):
    """One partition's offset to commit; ``committed_leader_epoch=-1`` when unknown."""

    partition_index: int = 0
    committed_offset: int = 0
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("partition_index", INT32),
        Field.of("committed_offset", INT64),
        Field.of("committed_leader_epoch", INT32),
        Field.of("committed_metadata", STRING, nullable_versions="0+"),
    )


@dataclasses.dataclass(frozen=True)
class OffsetCommitRequestTopic(FlexibleStruct):
    """The offsets of one topic: set ``name`` for version 9, ``topic_id`` for version 10."""

    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[OffsetCommitRequestPartition] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("name", STRING, "0-9", ignorable=True),
        Field.of("topic_id", UUID, "10+", ignorable=True),
        Field.of("partitions", StructArray(OffsetCommitRequestPartition)),
    )


@dataclasses.dataclass(frozen=True)
class OffsetCommitRequest(ApiMessage):
    """A commit; a KIP-848 member sends its member id and epoch (-1 commits outside any group membership)."""

    group_id: str
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    topics: list[OffsetCommitRequestTopic] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    RESPONSE = OffsetCommitResponse
    SCHEMA = (
        Field.of("group_id", STRING),
        Field.of("generation_id_or_member_epoch", INT32),
        Field.of("member_id", STRING),
        Field.of("group_instance_id", STRING, "7+", nullable_versions="7+"),
        Field.of("topics", StructArray(OffsetCommitRequestTopic)),
    )
