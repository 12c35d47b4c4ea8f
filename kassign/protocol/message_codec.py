"""A small declarative codec for Kafka's generated messages: each message is a frozen dataclass
with a ``SCHEMA`` that lists its fields as Kafka's message JSON does (name, type, versions,
nullable versions, ignorable), and one generic reader and writer walk it.

The rules are those of Java's generated ``*Data`` classes:

* a field outside the version is skipped on write; if it holds a non-default value the write fails,
  unless the field is ignorable (then the value is dropped), and on read it takes its default;
* at flexible versions every struct ends with a tagged-field section; tags this codec has no name
  for are kept in ``unknown_tagged_fields`` and written back, in strictly ascending tag order;
* a nullable struct is preceded by a marker byte (-1 null, 1 present);
* bytes after the message are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from kassign.protocol.flexible_wire import FlexReader, FlexWriter, RawTaggedField
from kassign.protocol.wire import as_buffer

__all__ = [
    "Versions",
    "Field",
    "FieldType",
    "INT16",
    "INT32",
    "INT64",
    "BOOL",
    "UUID",
    "STRING",
    "CLASSIC_NULLABLE_STRING",
    "INT32_ARRAY",
    "STRING_ARRAY",
    "StructArray",
    "NestedStruct",
    "FlexibleStruct",
    "Message",
    "ApiMessage",
    "TaggedFields",
]

#: The type of every struct's ``unknown_tagged_fields``.
TaggedFields = tuple[RawTaggedField, ...]

# Above any version Kafka will define: the open end of "N+".
_NO_END = 1 << 15


@dataclasses.dataclass(frozen=True)
class Versions:
    """An inclusive version range written as in Kafka's JSON: ``"0+"``, ``"9"``, ``"2-9"``, or ``""`` for none."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        """Parse Kafka's version-range notation."""
        if not text:
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), _NO_END)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high


class FieldType(Protocol):
    """How one field type is written and read; ``nullable`` says whether null is allowed at this version."""

    #: The fewest bytes one value takes, to reject array counts that cannot fit.
    min_size: int

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None: ...

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> Any: ...


def _not_null(value: Any, nullable: bool, label: str) -> None:
    if value is None and not nullable:
        raise TypeError(f"{label} is not nullable at this version, got None")


class _Fixed:
    """A fixed-size, non-nullable type read and written by one FlexReader/FlexWriter method each."""

    def __init__(self, min_size: int, writer: str, reader: str) -> None:
        self.min_size = min_size
        self._writer, self._reader = writer, reader

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        getattr(w, self._writer)(value, label)

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> Any:
        return getattr(r, self._reader)(label)


class _String:
    min_size = 1

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        _not_null(value, nullable, label)
        w.compact_nullable_string(value, label)

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> str | None:
        return r.compact_nullable_string(label) if nullable else r.compact_string(label)


class _ClassicNullableString:
    """An int16-length-prefixed nullable string even at flexible versions (the request header's client id)."""

    min_size = 2

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        w.nullable_string(value, label)

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> str | None:
        return r.nullable_string(label)


def _as_list(value: Any, label: str) -> Sequence[Any]:
    # A str or a set would be accepted by len() and iteration but has no wire meaning here.
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{label} must be a list, got {value!r}")
    return value


class _Int32Array:
    min_size = 1

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        _not_null(value, nullable, label)
        if value is None:
            w.compact_array_length(None)
        else:
            w.compact_int32_array(_as_list(value, label), label)

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> list[int] | None:
        return r.compact_int32_array(label, nullable)


class _StringArray:
    min_size = 1

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        _not_null(value, nullable, label)
        if value is None:
            w.compact_array_length(None)
            return
        value = _as_list(value, label)
        w.compact_array_length(len(value))
        for item in value:
            w.compact_string(item, f"{label}[]")

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> list[str] | None:
        count = r.compact_array_length(label, 1, nullable)
        return None if count is None else [r.compact_string(f"{label}[]") for _ in range(count)]


S = TypeVar("S", bound="FlexibleStruct")


class StructArray:
    """A compact array of ``struct`` elements."""

    min_size = 1

    def __init__(self, struct: type[FlexibleStruct]) -> None:
        self.struct = struct

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        _not_null(value, nullable, label)
        if value is None:
            w.compact_array_length(None)
            return
        value = _as_list(value, label)
        w.compact_array_length(len(value))
        for item in value:
            _write_struct(w, item, self.struct, version, f"{label}[]")

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> list[Any] | None:
        # Every struct ends with at least its one-byte tagged-field count.
        count = r.compact_array_length(label, 1, nullable)
        return None if count is None else [_read_struct(r, self.struct, version, f"{label}[]") for _ in range(count)]


class NestedStruct:
    """A struct-typed field; when nullable it is preceded by a marker byte."""

    min_size = 1

    def __init__(self, struct: type[FlexibleStruct]) -> None:
        self.struct = struct

    def write(self, w: FlexWriter, value: Any, nullable: bool, version: int, label: str) -> None:
        _not_null(value, nullable, label)
        if nullable:
            w.nullable_marker(value is not None)
        if value is not None:
            _write_struct(w, value, self.struct, version, label)

    def read(self, r: FlexReader, nullable: bool, version: int, label: str) -> Any:
        if nullable and r.int8(label) < 0:
            return None
        return _read_struct(r, self.struct, version, label)


INT16: FieldType = _Fixed(2, "int16_checked", "int16")
INT32: FieldType = _Fixed(4, "int32", "int32")
INT64: FieldType = _Fixed(8, "int64", "int64")
BOOL: FieldType = _Fixed(1, "boolean", "boolean")
UUID: FieldType = _Fixed(16, "uuid", "uuid")
STRING: FieldType = _String()
CLASSIC_NULLABLE_STRING: FieldType = _ClassicNullableString()
INT32_ARRAY: FieldType = _Int32Array()
STRING_ARRAY: FieldType = _StringArray()


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a message schema, in the terms of Kafka's message JSON."""

    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions
    ignorable: bool

    @classmethod
    def of(
        cls, name: str, type: FieldType, versions: str = "0+", nullable_versions: str = "", ignorable: bool = False
    ) -> Field:
        """A field from Kafka's notation, e.g. ``Field.of("member_id", STRING, "9+", nullable_versions="9+")``."""
        return cls(name, type, Versions.parse(versions), Versions.parse(nullable_versions), ignorable)


class FlexibleStruct:
    """Base of the message dataclasses: subclasses are frozen dataclasses that declare ``SCHEMA``
    and end with ``unknown_tagged_fields: TaggedFields = ()``."""

    SCHEMA: ClassVar[tuple[Field, ...]] = ()
    #: The versions that end each struct with a tagged-field section (all, for KIP-848's messages).
    FLEXIBLE_VERSIONS: ClassVar[Versions] = Versions.parse("0+")
    unknown_tagged_fields: TaggedFields


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _default(struct: type, name: str) -> Any:
    defaults = _DEFAULTS.get(struct)
    if defaults is None:
        defaults = {}
        for f in dataclasses.fields(struct):
            if f.default is not dataclasses.MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                defaults[f.name] = f.default_factory()
        _DEFAULTS[struct] = defaults
    return defaults.get(name, dataclasses.MISSING)


def _join(label: str, name: str) -> str:
    return f"{label}.{name}" if label else name


def _write_struct(w: FlexWriter, obj: Any, struct: type[FlexibleStruct], version: int, label: str) -> None:
    if not isinstance(obj, struct):
        raise TypeError(f"{label} must be a {struct.__name__}, got {obj!r}")
    for f in struct.SCHEMA:
        value = getattr(obj, f.name)
        if version in f.versions:
            f.type.write(w, value, version in f.nullable_versions, version, _join(label, f.name))
        elif not f.ignorable and value != _default(struct, f.name):
            # Java refuses to drop a non-ignorable field silently; so does kassign.
            raise ValueError(
                f"{_join(label, f.name)}={value!r} cannot be written at version {version}, which lacks the field"
            )
    if version in struct.FLEXIBLE_VERSIONS:
        w.tagged_fields(obj.unknown_tagged_fields, _join(label, "unknown_tagged_fields"))
    elif obj.unknown_tagged_fields:
        raise ValueError(
            f"{_join(label, 'unknown_tagged_fields')} cannot be written at version {version}, which is not flexible"
        )


def _read_struct(r: FlexReader, struct: type[S], version: int, label: str) -> S:
    values: dict[str, Any] = {}
    for f in struct.SCHEMA:
        if version in f.versions:
            values[f.name] = f.type.read(r, version in f.nullable_versions, version, _join(label, f.name))
    if version in struct.FLEXIBLE_VERSIONS:
        values["unknown_tagged_fields"] = r.tagged_fields(_join(label, "tagged_fields"))
    return struct(**values)


M = TypeVar("M", bound="Message")


class Message(FlexibleStruct):
    """A top-level structure with its own version range: an API body or a header."""

    LOWEST_VERSION: ClassVar[int]
    HIGHEST_VERSION: ClassVar[int]

    @classmethod
    def check_version(cls, version: int) -> int:
        """Return ``version`` if this message supports it, else raise TypeError or ValueError."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(f"{cls.__name__} version must be an int, got {version!r}")
        if not cls.LOWEST_VERSION <= version <= cls.HIGHEST_VERSION:
            raise ValueError(
                f"{cls.__name__} supports versions {cls.LOWEST_VERSION}-{cls.HIGHEST_VERSION}, not {version}"
            )
        return version

    def encode(self, version: int) -> bytes:
        """Serialize at ``version``, byte for byte as Java does.

        Raises TypeError or ValueError for values the version cannot carry.
        """
        self.check_version(version)
        w = FlexWriter()
        _write_struct(w, self, type(self), version, type(self).__name__)
        return w.getvalue()

    @classmethod
    def decode(cls: type[M], data: bytes | bytearray | memoryview, version: int) -> M:
        """Parse bytes written at ``version``; raises :class:`ProtocolError` on malformed bytes.

        Bytes after the message are ignored, as Java ignores them.
        """
        cls.check_version(version)
        return cls.read(FlexReader(as_buffer(data, f"{cls.__name__} data"), f"{cls.__name__} v{version}"), version)

    @classmethod
    def read(cls: type[M], r: FlexReader, version: int) -> M:
        """Parse the message at ``r``'s cursor, leaving the cursor after it (for a header and a body in one frame)."""
        cls.check_version(version)
        r.structure = f"{cls.__name__} v{version}"  # errors name the message being read, not the frame
        return _read_struct(r, cls, version, "")


class ApiMessage(Message):
    """A request or response body of one Kafka API."""

    API_KEY: ClassVar[int]
    #: On a request: the response body it is answered with, at the same version.
    RESPONSE: ClassVar[type[ApiMessage] | None] = None
