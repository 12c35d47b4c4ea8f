"""Kafka request and response headers, and whole frames (int32 size, header, body).

A request at a flexible version goes out with request header v2 (api key, api version, correlation
id, an int16-prefixed client id, tagged fields) and is answered with response header v1
(correlation id, tagged fields); a non-flexible one uses v1 and v0, without the tagged fields.
(ApiVersions answers with header v0 at every version; kassign does not frame ApiVersions.)
"""

from __future__ import annotations

import dataclasses
import struct
from typing import TypeVar

from kassign.protocol.flexible_wire import FlexReader
from kassign.protocol.message_codec import (
    CLASSIC_NULLABLE_STRING,
    INT16,
    INT32,
    ApiMessage,
    Field,
    Message,
    TaggedFields,
    Versions,
)
from kassign.protocol.wire import as_buffer

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "request_header_version",
    "response_header_version",
    "encode_request_frame",
    "decode_request_frame",
    "encode_response_frame",
    "decode_response_frame",
]

_SIZE = struct.Struct(">i")


@dataclasses.dataclass(frozen=True)
class RequestHeader(Message):
    """The header in front of every request body (versions 1-2; 2 adds tagged fields)."""

    request_api_key: int
    request_api_version: int
    correlation_id: int = 0
    client_id: str | None = ""
    unknown_tagged_fields: TaggedFields = ()

    LOWEST_VERSION = 1
    HIGHEST_VERSION = 2
    FLEXIBLE_VERSIONS = Versions.parse("2+")
    SCHEMA = (
        Field.of("request_api_key", INT16),
        Field.of("request_api_version", INT16),
        Field.of("correlation_id", INT32),
        # Never a compact string: a broker must read the client id before it knows the header version.
        Field.of("client_id", CLASSIC_NULLABLE_STRING, nullable_versions="1+"),
    )

    def encode(self, version: int = 2) -> bytes:
        """Serialize at ``version`` (default 2, the flexible header)."""
        return super().encode(version)


@dataclasses.dataclass(frozen=True)
class ResponseHeader(Message):
    """The header in front of every response body (versions 0-1; 1 adds tagged fields)."""

    correlation_id: int = 0
    unknown_tagged_fields: TaggedFields = ()

    LOWEST_VERSION = 0
    HIGHEST_VERSION = 1
    FLEXIBLE_VERSIONS = Versions.parse("1+")
    SCHEMA = (Field.of("correlation_id", INT32),)

    def encode(self, version: int = 1) -> bytes:
        """Serialize at ``version`` (default 1, the flexible header)."""
        return super().encode(version)


def request_header_version(message: type[ApiMessage], version: int) -> int:
    """The request header version that goes with ``message`` at ``version``: 2 if flexible, else 1."""
    return 2 if version in message.FLEXIBLE_VERSIONS else 1


def response_header_version(message: type[ApiMessage], version: int) -> int:
    """The response header version that goes with ``message`` at ``version``: 1 if flexible, else 0."""
    return 1 if version in message.FLEXIBLE_VERSIONS else 0


def _framed(header: bytes, body: bytes) -> bytes:
    return _SIZE.pack(len(header) + len(body)) + header + body


def encode_request_frame(message: ApiMessage, version: int, correlation_id: int, client_id: str | None) -> bytes:
    """The bytes to send for ``message`` at ``version``: int32 size, request header, body."""
    body = message.encode(version)
    header = RequestHeader(message.API_KEY, version, correlation_id, client_id)
    return _framed(header.encode(request_header_version(type(message), version)), body)


M = TypeVar("M", bound=ApiMessage)


def decode_request_frame(frame: bytes | bytearray | memoryview, message: type[M]) -> tuple[RequestHeader, M]:
    """Parse a request (without its int32 size) as ``message`` at the version its header names.

    Raises :class:`ProtocolError` on malformed bytes and ValueError if the header names another
    API or a version ``message`` does not support.
    """
    data = as_buffer(frame, "request frame")
    # Read the fixed part first: the header version depends on the api version it carries.
    probe = RequestHeader.read(FlexReader(data, "RequestHeader v1"), 1)
    if probe.request_api_key != message.API_KEY:
        raise ValueError(
            f"request frame is for API key {probe.request_api_key}, not {message.__name__} ({message.API_KEY})"
        )
    version = message.check_version(probe.request_api_version)
    r = FlexReader(data, "RequestHeader")
    header = RequestHeader.read(r, request_header_version(message, version))
    return header, message.read(r, version)


def encode_response_frame(message: ApiMessage, version: int, correlation_id: int) -> bytes:
    """The bytes a broker sends for ``message`` at ``version``: int32 size, response header, body."""
    body = message.encode(version)
    return _framed(ResponseHeader(correlation_id).encode(response_header_version(type(message), version)), body)


def decode_response_frame(
    frame: bytes | bytearray | memoryview, message: type[M], version: int
) -> tuple[ResponseHeader, M]:
    """Parse a response (without its int32 size) to a request sent at ``version``.

    Raises :class:`ProtocolError` on malformed bytes.
    """
    r = FlexReader(as_buffer(frame, "response frame"), "ResponseHeader")
    header = ResponseHeader.read(r, response_header_version(message, version))
    return header, message.read(r, version)
