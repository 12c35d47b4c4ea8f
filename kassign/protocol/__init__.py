"""Kafka consumer-protocol codecs: JoinGroup subscriptions, SyncGroup assignments and the sticky
assignors' user data, byte-compatible with Java's kafka-clients and librdkafka; and the messages of
the next-generation consumer group protocol (KIP-848: ConsumerGroupHeartbeat, OffsetCommit and
OffsetFetch at the versions that carry the member epoch, Metadata with topic ids) with their request/response headers,
byte-compatible with kafka-clients 4.x.

Pure standard library. Every malformed input raises :class:`ProtocolError` (a ``ValueError``)
naming the structure, field and byte offset.
"""

from kassign.protocol.aiokafka_request import AiokafkaRequest, PreparedRequest, UnsupportedApiVersion
from kassign.protocol.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from kassign.protocol.consumer_protocol import (
    HIGHEST_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kassign.protocol.errors import ProtocolError
from kassign.protocol.flexible_wire import ZERO_UUID, RawTaggedField
from kassign.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request_frame,
    decode_response_frame,
    encode_request_frame,
    encode_response_frame,
)
from kassign.protocol.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
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
from kassign.protocol.sticky_user_data import (
    StickyUserData,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

__all__ = [
    "HIGHEST_VERSION",
    "ProtocolError",
    "StickyUserData",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "encode_sticky_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "decode_cooperative_user_data",
    # KIP-848 messages, headers and frames
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupHeartbeatAssignment",
    "TopicIdPartitions",
    "OffsetCommitRequest",
    "OffsetCommitRequestTopic",
    "OffsetCommitRequestPartition",
    "OffsetCommitResponse",
    "OffsetCommitResponseTopic",
    "OffsetCommitResponsePartition",
    "OffsetFetchRequest",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopics",
    "OffsetFetchResponse",
    "OffsetFetchResponseGroup",
    "OffsetFetchResponseTopics",
    "OffsetFetchResponsePartitions",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "RawTaggedField",
    "ZERO_UUID",
    "RequestHeader",
    "ResponseHeader",
    "encode_request_frame",
    "decode_request_frame",
    "encode_response_frame",
    "decode_response_frame",
    "AiokafkaRequest",
    "PreparedRequest",
    "UnsupportedApiVersion",
]
