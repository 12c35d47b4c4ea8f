"""Send a kassign request message over aiokafka's connection, without importing aiokafka.

``AIOKafkaConnection.send(request)`` (aiokafka 0.14) needs three things, all duck-typed:

* ``request.prepare(versions)`` where ``versions`` maps each API key to the broker's
  ``(min, max)`` version (from ApiVersions), returning the request at one version;
* on that prepared request, ``build_request_header(correlation_id=..., client_id=...)`` returning
  an object whose ``encode()`` gives the header bytes, and ``encode()`` giving the body;
* for the answer, ``parse_response_header(buffer)`` (the frame as a ``BytesIO`` without its size)
  returning an object with ``correlation_id``, then ``RESPONSE_TYPE.decode(buffer)`` for the body.

:class:`AiokafkaRequest` provides them for any :class:`~kassign.protocol.message_codec.ApiMessage`
request, at the highest version both sides support.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kassign.protocol.flexible_wire import FlexReader
from kassign.protocol.headers import RequestHeader, ResponseHeader, request_header_version, response_header_version
from kassign.protocol.message_codec import ApiMessage

__all__ = ["AiokafkaRequest", "PreparedRequest", "UnsupportedApiVersion"]


class UnsupportedApiVersion(Exception):
    """The broker supports no version of the request's API that kassign can write."""


class _Buffer(Protocol):
    """What aiokafka hands over: an ``io.BytesIO`` of the frame after its size."""

    def read(self, size: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class _ResponseReader:
    """aiokafka's ``RESPONSE_TYPE``: decodes the rest of a response buffer as one body at one version."""

    def __init__(self, message: type[ApiMessage], version: int) -> None:
        self.message = message
        self.version = version

    def decode(self, buffer: _Buffer | bytes | bytearray | memoryview) -> ApiMessage:
        """Parse the body: the remaining bytes of ``buffer``, or ``buffer`` itself if it is bytes-like."""
        data = buffer if isinstance(buffer, (bytes, bytearray, memoryview)) else buffer.read()
        return self.message.decode(data, self.version)

    def __repr__(self) -> str:
        return f"{self.message.__name__}_v{self.version}"


class PreparedRequest:
    """A request message fixed at one version, as aiokafka's connection sends and answers it."""

    def __init__(self, message: ApiMessage, version: int) -> None:
        response = type(message).RESPONSE
        if response is None:
            raise TypeError(f"{type(message).__name__} is not a request (it has no RESPONSE)")
        self.message = message
        self.API_KEY = message.API_KEY
        self.API_VERSION = type(message).check_version(version)
        self.RESPONSE_TYPE = _ResponseReader(response, version)
        self._header_version = request_header_version(type(message), version)
        self._response_header_version = response_header_version(type(message), version)

    def build_request_header(self, correlation_id: int, client_id: str | None) -> _EncodableHeader:
        """The request header aiokafka writes in front of :meth:`encode`'s body."""
        header = RequestHeader(self.API_KEY, self.API_VERSION, correlation_id, client_id)
        return _EncodableHeader(header, self._header_version)

    def encode(self) -> bytes:
        """The request body at this version."""
        return self.message.encode(self.API_VERSION)

    def parse_response_header(self, buffer: _Buffer | bytes | bytearray | memoryview) -> ResponseHeader:
        """Read the response header from the front of ``buffer``, leaving a stream positioned at the body."""
        if isinstance(buffer, (bytes, bytearray, memoryview)):
            return ResponseHeader.decode(buffer, self._response_header_version)
        # The flexible header ends with a tagged-field section of unknown length: parse from the
        # rest of the stream, then put the stream back at the start of the body.
        start = buffer.tell()
        r = FlexReader(buffer.read(), "ResponseHeader")
        header = ResponseHeader.read(r, self._response_header_version)
        buffer.seek(start + r.pos)
        return header

    def __repr__(self) -> str:
        return f"{self.message!r} (v{self.API_VERSION})"


class _EncodableHeader:
    """A request header with the version already chosen: aiokafka calls ``encode()`` with no arguments."""

    def __init__(self, header: RequestHeader, version: int) -> None:
        self.header = header
        self.version = version

    def encode(self) -> bytes:
        return self.header.encode(self.version)

    def __repr__(self) -> str:
        return f"{self.header!r} (v{self.version})"


class AiokafkaRequest:
    """Wraps a request message so ``AIOKafkaConnection.send`` can send it.

    ``max_version`` caps the version (e.g. to stay on ConsumerGroupHeartbeat v0) and ``min_version``
    refuses older ones (e.g. an OffsetCommit that must name topics by id); by default the highest
    version both the message class and the broker support is used.
    """

    def __init__(self, message: ApiMessage, *, max_version: int | None = None, min_version: int | None = None) -> None:
        if not isinstance(message, ApiMessage) or type(message).RESPONSE is None:
            raise TypeError(f"AiokafkaRequest needs a kassign request message, got {type(message).__name__}")
        self.message = message
        self.max_version = type(message).HIGHEST_VERSION if max_version is None else max_version
        self.min_version = type(message).LOWEST_VERSION if min_version is None else min_version

    @property
    def API_KEY(self) -> int:
        """The message's API key (aiokafka reads it from requests)."""
        return self.message.API_KEY

    def prepare(self, versions: Mapping[int, tuple[int, int]]) -> PreparedRequest:
        """The request at the highest version in both the broker's range and ours.

        Raises :class:`UnsupportedApiVersion` if the broker does not support the API or the ranges
        do not overlap.
        """
        cls = type(self.message)
        if self.API_KEY not in versions:
            raise UnsupportedApiVersion(f"the broker does not support {cls.__name__} (API key {self.API_KEY})")
        broker_min, broker_max = versions[self.API_KEY]
        version = min(broker_max, cls.HIGHEST_VERSION, self.max_version)
        if version < max(broker_min, cls.LOWEST_VERSION, self.min_version):
            raise UnsupportedApiVersion(
                f"{cls.__name__}: the broker supports versions {broker_min}-{broker_max}, kassign "
                f"{max(cls.LOWEST_VERSION, self.min_version)}-{min(cls.HIGHEST_VERSION, self.max_version)}"
            )
        return PreparedRequest(self.message, version)

    def __repr__(self) -> str:
        return f"AiokafkaRequest({self.message!r})"
