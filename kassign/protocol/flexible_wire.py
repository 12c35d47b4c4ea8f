"""Kafka's flexible-version wire primitives (KIP-482): unsigned varints, compact strings and arrays,
UUIDs, int64 and tagged-field sections, read and written the way Java's generated messages do.

Extends :mod:`kassign.protocol.wire` (same cursor, same error reporting). A compact length ``n`` is
written as the unsigned varint ``n + 1``, so 0 means null.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from kassign.protocol.wire import Reader, Writer, as_buffer

__all__ = ["RawTaggedField", "FlexReader", "FlexWriter", "ZERO_UUID"]

#: Kafka's ``Uuid.ZERO_UUID``: the "no topic id" value and the default of every uuid field.
ZERO_UUID = uuid.UUID(int=0)

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_MAX_STRING_BYTES = 0x7FFF
# Java's readUnsignedVarint accepts at most 5 bytes (a 32-bit value).
_MAX_VARINT_BYTES = 5


class RawTaggedField(NamedTuple):
    """A tagged field this codec has no name for, kept as Java keeps it: tag and raw bytes."""

    tag: int
    data: bytes


def _check_int(value: object, field: str, low: int, high: int, kind: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{field} {value} does not fit in an {kind}")
    return value


class FlexReader(Reader):
    """A :class:`Reader` that also reads the flexible-version types."""

    __slots__ = ()

    def int8(self, field: str) -> int:
        """Read a signed byte."""
        self._need(1, field, self.pos)
        value: int
        (value,) = _INT8.unpack_from(self._view, self.pos)
        self.pos += 1
        return value

    def boolean(self, field: str) -> bool:
        """Read a boolean byte; like Java, any non-zero byte is true."""
        return self.int8(field) != 0

    def int64(self, field: str) -> int:
        """Read a big-endian int64."""
        self._need(8, field, self.pos)
        value: int
        (value,) = _INT64.unpack_from(self._view, self.pos)
        self.pos += 8
        return value

    def uuid(self, field: str) -> uuid.UUID:
        """Read a 16-byte UUID (most significant half first, as Java's ``Uuid``)."""
        self._need(16, field, self.pos)
        value = uuid.UUID(bytes=bytes(self._view[self.pos : self.pos + 16]))
        self.pos += 16
        return value

    def uvarint(self, field: str) -> int:
        """Read an unsigned varint of at most 5 bytes, as Java's ``readUnsignedVarint``."""
        start = self.pos
        value = 0
        for i in range(_MAX_VARINT_BYTES):
            self._need(1, field, start)
            b = self._view[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                # Java keeps only the low 32 bits of a 5-byte varint.
                return value & _UINT32_MAX
        raise self.error(field, "unsigned varint is longer than 5 bytes", start)

    def compact_length(self, field: str) -> int | None:
        """Read a compact length (varint ``n + 1``); ``None`` for the null marker 0."""
        raw = self.uvarint(field)
        return None if raw == 0 else raw - 1

    def compact_nullable_string(self, field: str) -> str | None:
        """Read a compact nullable UTF-8 string."""
        start = self.pos
        length = self.compact_length(field)
        if length is None:
            return None
        if length > _MAX_STRING_BYTES:
            raise self.error(field, f"string length {length} is above Kafka's {_MAX_STRING_BYTES}", start)
        return self._utf8(length, field, start)

    def compact_string(self, field: str) -> str:
        """Read a compact non-nullable string; the null marker is an error."""
        start = self.pos
        value = self.compact_nullable_string(field)
        if value is None:
            raise self.error(field, "non-nullable string is null", start)
        return value

    def compact_array_length(self, field: str, min_element_size: int, nullable: bool) -> int | None:
        """Read a compact array count, checking it can fit in the remaining bytes; ``None`` if null."""
        start = self.pos
        count = self.compact_length(field)
        if count is None:
            if nullable:
                return None
            raise self.error(field, "non-nullable array is null", start)
        if count * min_element_size > self.remaining:
            raise self.error(
                field, f"array of {count} elements cannot fit in the {self.remaining} bytes remaining", start
            )
        return count

    def compact_int32_array(self, field: str, nullable: bool = False) -> list[int] | None:
        """Read a compact array of big-endian int32."""
        count = self.compact_array_length(field, 4, nullable)
        if count is None:
            return None
        return self._int32s(count).tolist()

    def tagged_fields(self, field: str) -> tuple[RawTaggedField, ...]:
        """Read a tagged-field section, keeping every field in the order written."""
        fields: list[RawTaggedField] = []
        count = self.uvarint(f"{field} count")
        for _ in range(count):
            tag = self.uvarint(f"{field} tag")
            start = self.pos
            size = self.uvarint(f"{field} tag {tag} size")
            self._need(size, f"{field} tag {tag}", start)
            fields.append(RawTaggedField(tag, bytes(self._view[self.pos : self.pos + size])))
            self.pos += size
        return tuple(fields)


class FlexWriter(Writer):
    """A :class:`Writer` that also writes the flexible-version types."""

    __slots__ = ()

    def int16_checked(self, value: int, field: str) -> None:
        """Append a big-endian int16, rejecting values outside int16 range."""
        self._parts.append(_INT16.pack(_check_int(value, field, _INT16_MIN, _INT16_MAX, "int16")))

    def int64(self, value: int, field: str) -> None:
        """Append a big-endian int64, rejecting values outside int64 range."""
        self._parts.append(_INT64.pack(_check_int(value, field, _INT64_MIN, _INT64_MAX, "int64")))

    def boolean(self, value: bool, field: str) -> None:
        """Append a boolean as one byte, 1 or 0."""
        if not isinstance(value, bool):
            raise TypeError(f"{field} must be a bool, got {value!r}")
        self._parts.append(b"\x01" if value else b"\x00")

    def nullable_marker(self, present: bool) -> None:
        """Append the byte before a nullable struct: -1 for null, 1 for present."""
        self._parts.append(b"\x01" if present else b"\xff")

    def uuid(self, value: uuid.UUID, field: str) -> None:
        """Append a 16-byte UUID."""
        if not isinstance(value, uuid.UUID):
            raise TypeError(f"{field} must be a uuid.UUID, got {value!r}")
        self._parts.append(value.bytes)

    def uvarint(self, value: int, field: str = "varint") -> None:
        """Append an unsigned varint (0 to 2**32 - 1)."""
        _check_int(value, field, 0, _UINT32_MAX, "unsigned varint")
        out = bytearray()
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._parts.append(bytes(out))

    def compact_nullable_string(self, value: str | None, field: str) -> None:
        """Append a compact UTF-8 string, or the null marker for None."""
        if value is None:
            self._parts.append(b"\x00")
            return
        raw = self._utf8(value, field)
        self.uvarint(len(raw) + 1)
        self._parts.append(raw)

    def compact_string(self, value: str, field: str) -> None:
        """Append a compact non-nullable string."""
        if value is None:
            raise TypeError(f"{field} must be a str, got None")
        self.compact_nullable_string(value, field)

    def compact_array_length(self, count: int | None) -> None:
        """Append a compact array count, or the null marker for None."""
        self.uvarint(0 if count is None else count + 1)

    def compact_int32_array(self, values: Sequence[int], field: str) -> None:
        """Append a compact array of int32."""
        self.compact_array_length(len(values))
        try:
            self._parts.append(struct.pack(f">{len(values)}i", *values))
        except struct.error:
            for value in values:
                self.int32(value, field)  # raises, naming the first bad value
            raise

    def tagged_fields(self, fields: Iterable[RawTaggedField], field: str) -> None:
        """Append a tagged-field section; tags must be strictly ascending, as Java requires."""
        fields = list(fields)
        previous = -1
        for item in fields:
            if not isinstance(item, tuple) or len(item) != 2:
                raise TypeError(f"{field} must hold (tag, bytes) pairs, got {item!r}")
            tag = _check_int(item[0], f"{field} tag", 0, _UINT32_MAX, "unsigned varint")
            if tag <= previous:
                raise ValueError(f"{field}: tag {tag} comes after tag {previous}; tags must be strictly ascending")
            previous = tag
        self.uvarint(len(fields))
        for tag, data in fields:
            raw = bytes(as_buffer(data, f"{field} tag {tag}"))
            self.uvarint(tag)
            self.uvarint(len(raw))
            self._parts.append(raw)
