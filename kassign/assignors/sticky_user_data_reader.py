"""The group leader's fast reading of StickyAssignor user data (schema V1, or V0 without generation).

A leader of 2,000 members that each owned one partition of each of 500 topics reads a million
(topic, partitions) entries per rebalance. :func:`kassign.protocol.decode_sticky_user_data` checks
every field for a precise error message; this reader decodes the common well-formed case with one
struct call per entry and topic names shared across members, and defers to it for anything unusual
(so results, and errors, are the codec's).
"""

from __future__ import annotations

import struct
from itertools import repeat

from kassign.model import TopicPartition
from kassign.protocol import decode_sticky_user_data

__all__ = ["StickyUserDataReader"]

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_COUNT_AND_PARTITION = struct.Struct(">ii")
_new = tuple.__new__


class StickyUserDataReader:
    """Decodes the members' user data of one rebalance; topic names are decoded once and shared."""

    def __init__(self) -> None:
        self._names: dict[bytes, str] = {}

    def read(self, data: bytes | bytearray | memoryview) -> tuple[list[TopicPartition], int | None]:
        """(partitions in the order written, generation or None for V0); ProtocolError if malformed."""
        buf = bytes(data)
        try:
            return self._read(buf)
        except (struct.error, ValueError):
            partitions, generation = decode_sticky_user_data(data)  # raises the precise ProtocolError
            return list(partitions), generation

    def _read(self, buf: bytes) -> tuple[list[TopicPartition], int | None]:
        names = self._names
        (entries,) = _INT32.unpack_from(buf, 0)
        if entries < 0:
            raise ValueError("negative array length")
        out: list[TopicPartition] = []
        append, extend = out.append, out.extend
        pos = 4
        int16, pair, tp_type = _INT16.unpack_from, _COUNT_AND_PARTITION.unpack_from, TopicPartition
        for _ in range(entries):
            (length,) = int16(buf, pos)
            start = pos + 2
            end = start + length
            if length < 0 or end > len(buf):
                raise ValueError("bad topic length")
            key = buf[start:end]
            topic = names.get(key)
            if topic is None:
                topic = names[key] = key.decode("utf-8")
            count, first = pair(buf, end)
            if count == 1:
                append(_new(tp_type, (topic, first)))
                pos = end + 8
            else:
                if count < 0:
                    raise ValueError("negative partition count")
                partitions = struct.unpack_from(f">{count}i", buf, end + 4)
                extend(map(_new, repeat(tp_type), zip(repeat(topic), partitions)))
                pos = end + 4 + 4 * count
        if len(buf) - pos >= 4:
            return out, _INT32.unpack_from(buf, pos)[0]
        return out, None
