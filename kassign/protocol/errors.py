"""The one exception type kassign's codecs raise for malformed bytes."""

from __future__ import annotations

__all__ = ["ProtocolError"]


class ProtocolError(ValueError):
    """Bytes that do not parse as the expected Kafka consumer-protocol structure.

    ``structure`` names what was being decoded (e.g. ``"ConsumerProtocolSubscription v3"``),
    ``field`` the field that failed and ``offset`` the byte offset where it starts.
    """

    def __init__(self, structure: str, field: str, offset: int, reason: str) -> None:
        super().__init__(f"malformed {structure}: field {field!r} at byte offset {offset}: {reason}")
        self.structure = structure
        self.field = field
        self.offset = offset
        self.reason = reason
