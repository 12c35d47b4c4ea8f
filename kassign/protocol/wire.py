"""Kafka's non-flexible wire primitives: big-endian ints, int16-prefixed strings, int32-prefixed
bytes and arrays, read and written the way Java's generated messages and ``Schema`` types do.

Arrays of int32 are decoded in one call (``array.frombytes`` + byteswap) because partition lists
are the bulk of every consumer-protocol payload.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Sequence

from kassign.protocol.errors import ProtocolError

__all__ = ["Reader", "Writer", "as_buffer"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_MAX_STRING_BYTES = 0x7FFF
_SWAP = sys.byteorder == "little"
if array("i").itemsize != 4:  # pragma: no cover - every CPython platform kassign targets has 4-byte C ints
    raise ImportError("kassign.protocol needs array('i') with 4-byte items")


def as_buffer(data: object, what: str) -> bytes | bytearray | memoryview:
    """Return ``data`` if it is bytes-like, else raise TypeError naming ``what``."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    raise TypeError(f"{what} must be bytes, bytearray or memoryview, got {type(data).__name__}")


class Reader:
    """A cursor over one payload; every failure raises :class:`ProtocolError` naming field and offset."""

    __slots__ = ("_view", "pos", "structure")

    def __init__(self, data: bytes | bytearray | memoryview, structure: str, pos: int = 0) -> None:
        # bytes slice and unpack directly; other buffers go through a flat byte view.
        if not isinstance(data, bytes):
            view = memoryview(data)
            # A strided view (e.g. data[::2]) cannot be cast in place: read a copy of its bytes.
            data = view.cast("B") if view.c_contiguous else view.tobytes()
        self._view = data
        self.pos = pos
        self.structure = structure

    def error(self, field: str, reason: str, offset: int | None = None) -> ProtocolError:
        """A ProtocolError for ``field`` at ``offset`` (default: the cursor)."""
        return ProtocolError(self.structure, field, self.pos if offset is None else offset, reason)

    @property
    def remaining(self) -> int:
        """Bytes left after the cursor."""
        return len(self._view) - self.pos

    def _need(self, n: int, field: str, start: int) -> None:
        if n > len(self._view) - self.pos:
            raise self.error(field, f"needs {n} bytes, only {len(self._view) - self.pos} remain", start)

    def int16(self, field: str) -> int:
        """Read a big-endian int16."""
        self._need(2, field, self.pos)
        value: int
        (value,) = _INT16.unpack_from(self._view, self.pos)
        self.pos += 2
        return value

    def int32(self, field: str) -> int:
        """Read a big-endian int32."""
        self._need(4, field, self.pos)
        value: int
        (value,) = _INT32.unpack_from(self._view, self.pos)
        self.pos += 4
        return value

    def nullable_string(self, field: str) -> str | None:
        """Read an int16-length-prefixed UTF-8 string; a negative length is null."""
        start = self.pos
        length = self.int16(field)
        if length < 0:
            return None
        return self._utf8(length, field, start)

    def _utf8(self, length: int, field: str, start: int) -> str:
        """The next ``length`` bytes as UTF-8 text (a string field whose length began at ``start``)."""
        self._need(length, field, start)
        raw = self._view[self.pos : self.pos + length]
        self.pos += length
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(field, f"string is not valid UTF-8 ({exc.reason})", start) from None

    def string(self, field: str) -> str:
        """Read a non-nullable string; a negative length is an error."""
        start = self.pos
        value = self.nullable_string(field)
        if value is None:
            raise self.error(field, "non-nullable string has a negative length", start)
        return value

    def nullable_bytes(self, field: str) -> bytes | None:
        """Read int32-length-prefixed bytes; a negative length is null."""
        start = self.pos
        length = self.int32(field)
        if length < 0:
            return None
        self._need(length, field, start)
        value = bytes(self._view[self.pos : self.pos + length])
        self.pos += length
        return value

    def array_length(self, field: str, min_element_size: int) -> int:
        """Read a non-nullable array's int32 count, checking it can fit in the remaining bytes."""
        start = self.pos
        count = self.int32(field)
        if count < 0:
            raise self.error(field, f"non-nullable array has negative length {count}", start)
        if count * min_element_size > len(self._view) - self.pos:
            remaining = len(self._view) - self.pos
            raise self.error(field, f"array of {count} elements cannot fit in the {remaining} bytes remaining", start)
        return count

    def int32_array(self, field: str) -> array[int]:
        """Read an int32-counted array of big-endian int32 as an ``array('i')``."""
        return self._int32s(self.array_length(field, 4))

    def _int32s(self, count: int) -> array[int]:
        """The next ``count`` big-endian int32 (the count already checked against what remains)."""
        values = array("i")
        end = self.pos + 4 * count
        values.frombytes(self._view[self.pos : end])
        if _SWAP:
            values.byteswap()
        self.pos = end
        return values


class Writer:
    """Accumulates one payload's parts; ``getvalue`` joins them."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, value: int) -> None:
        """Append a big-endian int16."""
        self._parts.append(_INT16.pack(value))

    def int32(self, value: int, field: str) -> None:
        """Append a big-endian int32, rejecting values outside int32 range."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{field} must be an int, got {value!r}")
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise ValueError(f"{field} {value} does not fit in an int32")
        self._parts.append(_INT32.pack(value))

    def nullable_string(self, value: str | None, field: str) -> None:
        """Append an int16-length-prefixed UTF-8 string, or length -1 for None."""
        if value is None:
            self._parts.append(_INT16.pack(-1))
            return
        raw = self._utf8(value, field)
        self._parts.append(_INT16.pack(len(raw)))
        self._parts.append(raw)

    @staticmethod
    def _utf8(value: str, field: str) -> bytes:
        """``value`` as UTF-8, checked to be a str no longer than a Kafka string may be."""
        if not isinstance(value, str):
            raise TypeError(f"{field} must be a str, got {value!r}")
        raw = value.encode("utf-8")
        if len(raw) > _MAX_STRING_BYTES:
            raise ValueError(
                f"{field} {value[:40]!r}... is {len(raw)} bytes of UTF-8, more than Kafka's {_MAX_STRING_BYTES}"
            )
        return raw

    def string(self, value: str, field: str) -> None:
        """Append a non-nullable string."""
        if value is None:
            raise TypeError(f"{field} must be a str, got None")
        self.nullable_string(value, field)

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None, field: str) -> None:
        """Append int32-length-prefixed bytes, or length -1 for None."""
        if value is None:
            self._parts.append(_INT32.pack(-1))
            return
        raw = bytes(as_buffer(value, field))
        self._parts.append(_INT32.pack(len(raw)))
        self._parts.append(raw)

    def array_length(self, count: int) -> None:
        """Append an array's int32 count."""
        self._parts.append(_INT32.pack(count))

    def int32_array(self, values: Sequence[int], field: str) -> None:
        """Append an int32-counted array of int32."""
        try:
            self._parts.append(struct.pack(f">i{len(values)}i", len(values), *values))
        except struct.error:
            for value in values:
                self.int32(value, field)  # raises, naming the first bad value
            raise

    def strings(self, values: Iterable[str], field: str) -> None:
        """Append an int32-counted array of non-nullable strings."""
        values = list(values)
        self.array_length(len(values))
        for value in values:
            self.string(value, field)

    def getvalue(self) -> bytes:
        """The payload written so far."""
        return b"".join(self._parts)
