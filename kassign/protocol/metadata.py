"""Metadata (API key 3), versions 12-13: cluster metadata with topic ids, byte for byte as kafka-clients 4.x
writes it.

A KIP-848 member is assigned partitions by topic id; aiokafka's own Metadata request (up to v5)
predates topic ids, so kassign asks with this one to name them. Version 13 adds a top-level error
code. A request with ``topics=None`` asks for every topic; naming topics by id (a null name) is
what version 12 allows, but kassign asks by name, which every 4.x broker answers.
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
    STRING,
    UUID,
    ApiMessage,
    Field,
    FlexibleStruct,
    StructArray,
    TaggedFields,
)

__all__ = [
    "MetadataRequestTopic",
    "MetadataRequest",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "MetadataResponse",
]

API_KEY = 3
# The flexible versions that carry topic ids and accept a null topic name.
_LOWEST, _HIGHEST = 12, 13
_NO_OPERATIONS = -(2**31)  # Java's "authorized operations not requested"


@dataclasses.dataclass(frozen=True)
class MetadataResponseBroker(FlexibleStruct):
    """One broker of the cluster."""

    node_id: int = 0
    host: str = ""
    port: int = 0
    rack: str | None = None
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("node_id", INT32),
        Field.of("host", STRING),
        Field.of("port", INT32),
        Field.of("rack", STRING, nullable_versions="0+"),
    )


@dataclasses.dataclass(frozen=True)
class MetadataResponsePartition(FlexibleStruct):
    """One partition: its leader and replicas."""

    error_code: int = 0
    partition_index: int = 0
    leader_id: int = 0
    leader_epoch: int = -1
    replica_nodes: list[int] = dataclasses.field(default_factory=list)
    isr_nodes: list[int] = dataclasses.field(default_factory=list)
    offline_replicas: list[int] = dataclasses.field(default_factory=list)
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("error_code", INT16),
        Field.of("partition_index", INT32),
        Field.of("leader_id", INT32),
        Field.of("leader_epoch", INT32),
        Field.of("replica_nodes", INT32_ARRAY),
        Field.of("isr_nodes", INT32_ARRAY),
        Field.of("offline_replicas", INT32_ARRAY),
    )


@dataclasses.dataclass(frozen=True)
class MetadataResponseTopic(FlexibleStruct):
    """One topic: its id, name (null when asked by an unknown id) and partitions, or its error."""

    error_code: int = 0
    name: str | None = ""
    topic_id: uuid.UUID = ZERO_UUID
    is_internal: bool = False
    partitions: list[MetadataResponsePartition] = dataclasses.field(default_factory=list)
    topic_authorized_operations: int = _NO_OPERATIONS
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("error_code", INT16),
        Field.of("name", STRING, nullable_versions="0+"),
        Field.of("topic_id", UUID, ignorable=True),
        Field.of("is_internal", BOOL, ignorable=True),
        Field.of("partitions", StructArray(MetadataResponsePartition)),
        Field.of("topic_authorized_operations", INT32),
    )


@dataclasses.dataclass(frozen=True)
class MetadataResponse(ApiMessage):
    """The cluster's brokers and the topics asked for; ``error_code`` (v13) is a request-level error."""

    throttle_time_ms: int = 0
    brokers: list[MetadataResponseBroker] = dataclasses.field(default_factory=list)
    cluster_id: str | None = None
    controller_id: int = -1
    topics: list[MetadataResponseTopic] = dataclasses.field(default_factory=list)
    error_code: int = 0
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    SCHEMA = (
        Field.of("throttle_time_ms", INT32, ignorable=True),
        Field.of("brokers", StructArray(MetadataResponseBroker)),
        Field.of("cluster_id", STRING, nullable_versions="0+", ignorable=True),
        Field.of("controller_id", INT32, ignorable=True),
        Field.of("topics", StructArray(MetadataResponseTopic)),
        Field.of("error_code", INT16, "13+", ignorable=True),
    )

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name of every topic answered without an error."""
        return {
            t.topic_id: t.name
            for t in self.topics
            if t.error_code == 0 and t.name is not None and t.topic_id != ZERO_UUID
        }


@dataclasses.dataclass(frozen=True)
class MetadataRequestTopic(FlexibleStruct):
    """One topic to describe, by ``name`` (or by ``topic_id`` with ``name=None``)."""

    topic_id: uuid.UUID = ZERO_UUID
    name: str | None = ""
    unknown_tagged_fields: TaggedFields = ()

    SCHEMA = (
        Field.of("topic_id", UUID, ignorable=True),
        Field.of("name", STRING, nullable_versions="0+"),
    )


@dataclasses.dataclass(frozen=True)
class MetadataRequest(ApiMessage):
    """Describe ``topics`` (None: every topic)."""

    topics: list[MetadataRequestTopic] | None = None
    allow_auto_topic_creation: bool = False
    include_topic_authorized_operations: bool = False
    unknown_tagged_fields: TaggedFields = ()

    API_KEY = API_KEY
    LOWEST_VERSION = _LOWEST
    HIGHEST_VERSION = _HIGHEST
    RESPONSE = MetadataResponse
    SCHEMA = (
        Field.of("topics", StructArray(MetadataRequestTopic), nullable_versions="0+"),
        Field.of("allow_auto_topic_creation", BOOL),
        Field.of("include_topic_authorized_operations", BOOL),
    )

    @classmethod
    def for_topics(cls, names: list[str] | None) -> MetadataRequest:
        """Describe the topics named (None: every topic), never creating one."""
        return cls(None if names is None else [MetadataRequestTopic(name=n) for n in names])
