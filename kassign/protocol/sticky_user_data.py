"""The user data of Kafka's sticky assignors.

* ``sticky`` (StickyAssignor): schema V1 = previous_assignment ``[](topic string, partitions []int32)``
  followed by generation ``int32``; V0, from before Kafka 2.3, has no generation. Java tries V1
  first and falls back to V0. librdkafka's cooperative-sticky members send this V1 layout too.
* ``cooperative-sticky`` (CooperativeStickyAssignor): schema V0 = generation ``int32``.

No version header: the layouts are told apart only by whether the generation is present.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from kassign.model import TopicPartition
from kassign.protocol.topic_partitions import expand, group_by_topic
from kassign.protocol.wire import Reader, Writer, as_buffer

__all__ = [
    "StickyUserData",
    "encode_sticky_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "decode_cooperative_user_data",
]

_MIN_TOPIC_ENTRY = 6  # int16 topic length + int32 partition count


class StickyUserData(NamedTuple):
    """A decoded sticky user data: the member's previous partitions and, for V1, its generation."""

    partitions: list[TopicPartition]
    generation: int | None


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """StickyAssignor user data schema V1: ``partitions`` grouped by topic (in order of first
    appearance, partitions in input order) and ``generation`` (``None`` is written as -1)."""
    grouped = group_by_topic(partitions, "sticky user data partitions")
    w = Writer()
    w.array_length(len(grouped))
    for topic, parts in grouped.items():
        w.string(topic, "sticky user data topic")
        w.int32_array(parts, f"partition of topic {topic!r}")
    w.int32(-1 if generation is None else generation, "sticky user data generation")
    return w.getvalue()


def _read_previous_assignment(r: Reader) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for _ in range(r.array_length("previous_assignment", _MIN_TOPIC_ENTRY)):
        topic = r.string("previous_assignment[].topic")
        expand(topic, r.int32_array("previous_assignment[].partitions"), out)
    return out


def decode_sticky_user_data(data: bytes | bytearray | memoryview) -> StickyUserData:
    """Parse StickyAssignor user data: V1 gives ``(partitions, generation)``, V0 ``(partitions, None)``.

    Partitions come back in the order written; trailing bytes after the generation are ignored.
    Raises :class:`ProtocolError` when the previous assignment itself is malformed (neither layout).
    """
    buf = as_buffer(data, "sticky user data")
    r = Reader(buf, "StickyAssignor user data V1")
    partitions = _read_previous_assignment(r)
    if r.remaining >= 4:
        return StickyUserData(partitions, r.int32("generation"))
    # V0: the previous assignment alone. Like Java's fallback, 1-3 stray bytes after it are ignored.
    return StickyUserData(partitions, None)


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data V0: the generation as one big-endian int32."""
    w = Writer()
    w.int32(generation, "cooperative-sticky user data generation")
    return w.getvalue()


def decode_cooperative_user_data(data: bytes | bytearray | memoryview) -> int:
    """The generation in CooperativeStickyAssignor user data V0 (trailing bytes ignored, as Java does)."""
    reader = Reader(as_buffer(data, "cooperative-sticky user data"), "CooperativeStickyAssignor user data V0")
    return reader.int32("generation")
