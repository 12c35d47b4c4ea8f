"""Kafka consumer-protocol codecs: JoinGroup subscriptions, SyncGroup assignments and the sticky
assignors' user data, byte-compatible with Java's kafka-clients and librdkafka.

Pure standard library. Every malformed input raises :class:`ProtocolError` (a ``ValueError``)
naming the structure, field and byte offset.
"""

from kassign.protocol.consumer_protocol import (
    HIGHEST_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kassign.protocol.errors import ProtocolError
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
]
