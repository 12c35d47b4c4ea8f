"""kassign's "fast follow-up" mark in an assignment's user data: its wire format, written and read
alike by every kassign member, whichever driver runs it (:mod:`kassign.membership.follow_up` decides when).

Under the cooperative protocol a leader whose assignor withholds partitions (they must be revoked
before they can move) knows a follow-up rebalance is needed. A kassign leader then marks every
member's assignment "follow-up pending, for generation N"; a kassign member that receives the mark
rejoins as soon as its own revocations are done instead of waiting for its next heartbeat to
report the rebalance. Members that are not kassign ignore the mark.

The mark wraps whatever user data the assignor itself hands out, so assignors that use the
assignment user data (the delayed assignor) keep working: ``MAGIC``, the int32 generation, then
the assignor's bytes.
"""

from __future__ import annotations

import struct

__all__ = ["mark_follow_up", "read_follow_up"]

MAGIC = b"KFU1"
_GENERATION = struct.Struct(">i")
_HEADER = len(MAGIC) + _GENERATION.size


def mark_follow_up(generation: int, user_data: bytes | None) -> bytes:
    """``user_data`` marked "follow-up pending" for ``generation``."""
    if generation < 0:
        raise ValueError(f"a follow-up mark needs a generation >= 0, got {generation!r}")
    return MAGIC + _GENERATION.pack(generation) + (user_data or b"")


def read_follow_up(user_data: bytes | None) -> tuple[int | None, bytes | None]:
    """(generation of the mark or None, the assignor's own user data or None)."""
    if user_data is None or not user_data.startswith(MAGIC) or len(user_data) < _HEADER:
        return None, user_data
    (generation,) = _GENERATION.unpack_from(user_data, len(MAGIC))
    rest = user_data[_HEADER:]
    return generation, rest or None
