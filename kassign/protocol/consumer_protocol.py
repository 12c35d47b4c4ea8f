"""ConsumerProtocolSubscription and ConsumerProtocolAssignment v0-v3: the ``consumer`` protocol
metadata exchanged in JoinGroup and SyncGroup, byte for byte as Java's ``ConsumerProtocol`` writes it.

Layout (non-flexible, big-endian), after an int16 version header:

* Subscription: topics ``[]string``; user_data nullable ``bytes``; v1+ owned_partitions
  ``[](topic string, partitions []int32)``; v2+ generation_id ``int32`` (-1 = none);
  v3+ rack_id nullable ``string``.
* Assignment: assigned_partitions ``[](topic string, partitions []int32)``; user_data nullable ``bytes``.

Like Java, a version above 3 is read with the v3 schema (newer versions only append fields) and
trailing bytes are ignored; fields newer than the written version are dropped when encoding.
"""

from __future__ import annotations

from kassign.model import Assignment, Subscription, TopicPartition
from kassign.protocol.topic_partitions import expand, group_by_topic, group_sorted, java_string_order
from kassign.protocol.wire import Reader, Writer, as_buffer

__all__ = ["HIGHEST_VERSION", "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment"]

HIGHEST_VERSION = 3

# Smallest encoding of one (topic, partitions) entry: int16 topic length + int32 partition count.
_MIN_TOPIC_ENTRY = 6


def _encode_version(version: int, what: str) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise TypeError(f"{what} version must be an int, got {version!r}")
    if version < 0:
        raise ValueError(f"unsupported {what} version {version}: versions start at 0")
    # Java clamps a newer requested version to the highest it knows.
    return min(version, HIGHEST_VERSION)


def _write_topic_partitions(w: Writer, grouped: dict[str, list[int]], what: str) -> None:
    w.array_length(len(grouped))
    for topic, partitions in grouped.items():
        w.string(topic, f"{what} topic")
        w.int32_array(partitions, f"{what} partition of topic {topic!r}")


def _read_topic_partitions(r: Reader, field: str) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for _ in range(r.array_length(field, _MIN_TOPIC_ENTRY)):
        topic = r.string(f"{field}[].topic")
        expand(topic, r.int32_array(f"{field}[].partitions"), out)
    return out


def _read_version(r: Reader) -> int:
    version = r.int16("version")
    if version < 0:
        raise r.error("version", f"unsupported version {version}", 0)
    return version


def encode_subscription(sub: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """Serialize ``sub`` as ConsumerProtocolSubscription ``version`` (0-3) with its version header.

    Topics are sorted, owned partitions sorted by (topic, partition), a ``None`` or negative
    generation is written as -1; fields the version lacks are left out.
    """
    if not isinstance(sub, Subscription):
        raise TypeError(f"encode_subscription needs a kassign.Subscription, got {type(sub).__name__}")
    version = _encode_version(version, "subscription")
    if isinstance(sub.topics, str):
        raise TypeError(f"Subscription.topics must be a list of str, got the string {sub.topics!r}")
    w = Writer()
    w.int16(version)
    try:
        topics = sorted(sub.topics, key=java_string_order)
    except (TypeError, AttributeError):
        raise TypeError(f"Subscription.topics must all be str, got {sub.topics!r}") from None
    w.strings(topics, "subscribed topic")
    w.nullable_bytes(sub.user_data, "Subscription.user_data")
    if version >= 1:
        _write_topic_partitions(w, group_sorted(sub.owned_partitions, "Subscription.owned_partitions"), "owned")
    if version >= 2:
        generation = sub.generation_id
        if isinstance(generation, int) and generation < 0:
            generation = -1  # Java normalises every negative generation to "none", written as -1
        w.int32(-1 if generation is None else generation, "Subscription.generation_id")
    if version >= 3:
        w.nullable_string(sub.rack_id, "Subscription.rack_id")
    return w.getvalue()


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Parse a version-prefixed ConsumerProtocolSubscription (any version >= 0).

    Generation < 0 and absent fields decode as ``None``, a null or empty rack as ``None``, owned
    partitions as ``[]`` below v1. Raises :class:`ProtocolError` on malformed bytes.
    """
    r = Reader(as_buffer(data, "subscription data"), "ConsumerProtocolSubscription")
    version = _read_version(r)
    r.structure = f"ConsumerProtocolSubscription v{version}"
    topics = [r.string("topics[]") for _ in range(r.array_length("topics", 2))]
    user_data = r.nullable_bytes("user_data")
    owned: list[TopicPartition] = _read_topic_partitions(r, "owned_partitions") if version >= 1 else []
    generation = r.int32("generation_id") if version >= 2 else -1
    rack = r.nullable_string("rack_id") if version >= 3 else None
    return Subscription(topics, user_data, owned, generation if generation >= 0 else None, rack or None)


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """Serialize ``assignment`` as ConsumerProtocolAssignment ``version`` (0-3) with its version header.

    Partitions are grouped by topic in the order given, as Java's ``ConsumerProtocol`` writes them:
    topics in order of first appearance, each topic's partitions as listed.
    """
    if not isinstance(assignment, Assignment):
        raise TypeError(f"encode_assignment needs a kassign.Assignment, got {type(assignment).__name__}")
    version = _encode_version(version, "assignment")
    w = Writer()
    w.int16(version)
    _write_topic_partitions(w, group_by_topic(assignment.partitions, "Assignment.partitions"), "assigned")
    w.nullable_bytes(assignment.user_data, "Assignment.user_data")
    return w.getvalue()


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Parse a version-prefixed ConsumerProtocolAssignment; partitions in the order written.

    Raises :class:`ProtocolError` on malformed bytes.
    """
    r = Reader(as_buffer(data, "assignment data"), "ConsumerProtocolAssignment")
    version = _read_version(r)
    r.structure = f"ConsumerProtocolAssignment v{version}"
    partitions = _read_topic_partitions(r, "assigned_partitions")
    return Assignment(partitions, r.nullable_bytes("user_data"))
