"""OffsetFetch (API key 9), versions 9-10: reading committed offsets as a member of a KIP-848 group.

Version 9 adds the member id and epoch to each group, so the coordinator can refuse a fetch from a
member that is no longer part of the group (and, with ``require_stable``, wait for pending
transactional commits). Version 10 names topics by id instead of by name; like Java, ``name`` is
dropped at version 10 and ``topic_id`` at version 9. A request group with ``topics=None`` asks for
every committed partition.
"""

from __future__ import annotations

import dataclasses
import uuid

from kassign.protocol.flexible_wire import ZERO_UUID
from kassign.protocol.message_codec import (
    BOOL,
    INT16,
    INT32,
    INT32_ARRAY,
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
    "OffsetFetchRequestTopics",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequest",
    "OffsetFetchResponsePartitions",
    "OffsetFetchResponseTopics",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponse",
]

API_KEY = 9
# Versions 9 and 10 carry the member epoch; both are flexible.
_LOWEST, _HIGHEST = 9, 10


@dataclasses.dataclass(frozen=True)
class OffsetFetchResponsePartitions(FlexibleStruct):
    """One partition's committed offset (-1 when none), leader epoch (-1 when unknown) and metadata."""

    partition_index: int = 0
    committed_offset: int = 0
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("partition_index", INT32),
        Field.of("committed_offset", INT64),
        Field.of("committed_leader_epoch", INT32),
        Field.of("metadata", STRING, nullable_versions="0+"),
        Field.of("error_code", INT16),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchResponseTopics(FlexibleStruct):
    """The committed offsets of one topic: ``name`` at version 9, ``topic_id`` at version 10."""

    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partitions: list[OffsetFetchResponsePartitions] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("name", STRING, "0-9", ignorable=True),
        Field.of("topic_id", UUID, "10+", ignorable=True),
        Field.of("partitions", StructArray(OffsetFetchResponsePartitions)),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchResponseGroup(FlexibleStruct):
    """One group's committed offsets, or its group-level error."""

    group_id: str = ""
    topics: list[OffsetFetchResponseTopics] = dataclasses.field(default_factory=list)
    error_code: int = 0
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("group_id", STRING),
        Field.of("topics", StructArray(OffsetFetchResponseTopics)),
        Field.of("error_code", INT16),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchResponse(ApiMessage):
    """The coordinator's answer, one entry per requested group."""

    throttle_time_ms: int = 0
    groups: list[OffsetFetchResponseGroup] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    SCHEMA = (
        Field.of("throttle_time_ms", INT32),
        Field.of("groups", StructArray(OffsetFetchResponseGroup)),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchRequestTopics(FlexibleStruct):
    """The partitions of one topic to fetch: set ``name`` for version 9, ``topic_id`` for version 10."""

    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID
    partition_indexes: list[int] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("name", STRING, "8-9", ignorable=True),
        Field.of("topic_id", UUID, "10+", ignorable=True),
        Field.of("partition_indexes", INT32_ARRAY),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchRequestGroup(FlexibleStruct):
    """One group to fetch from; ``member_id=None`` and ``member_epoch=-1`` fetch without membership."""

    group_id: str = ""
    member_id: str | None = None
    member_epoch: int = -1
    topics: list[OffsetFetchRequestTopics] | None = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("group_id", STRING),
        Field.of("member_id", STRING, "9+", nullable_versions="9+"),
        Field.of("member_epoch", INT32, "9+"),
        Field.of("topics", StructArray(OffsetFetchRequestTopics), nullable_versions="8+"),
    )


@dataclasses.dataclass(frozen=True)
class OffsetFetchRequest(ApiMessage):
    """A fetch of committed offsets for one or more groups."""

    groups: list[OffsetFetchRequestGroup] = dataclasses.field(default_factory=list)
    require_stable: bool = False
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    RESPONSE = OffsetFetchResponse
    SCHEMA = (
        Field.of("groups", StructArray(OffsetFetchRequestGroup)),
        Field.of("require_stable", BOOL),
    )
