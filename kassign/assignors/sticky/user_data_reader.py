"""The group leader's fast reading of StickyAssignor user data (schema V1, or V0 without generation).

A leader of 2,000 members that each owned one partition of each of 500 topics reads a million
(topic, partitions) entries per rebalance. :func:`kassign.protocol.decode_sticky_user_data` checks
every field for a precise error message; this reader decodes the common well-formed case with one
struct call per entry and topic names shared across members, and defers to it for anything unusual
(so results, and errors, are the codec's).

In a large group many members' user data share one *layout*: the same topics with the same partition
counts in the same order (a round-robin assignment gives every member one partition of each topic).
Once a layout recurs, the reader compiles it into two structs and decodes each further member with
the same layout in two C calls: one reads the fixed parts (lengths, names, counts) to verify them
against the layout, the other reads every partition id and the generation.

Layouts that almost recur (a member holding two partitions of one topic where the others hold one)
are read against a compiled layout with the same first topic, segment by segment: where an entry's
topic starts one of the layout's runs of :data:`_SEGMENT_ENTRIES` entries, the run is verified and
read in two C calls; where it does not match, entries are read one by one up to the next run's start,
so an entry added, missing or changed costs one run, not the rest of the buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import repeat

from kassign.model import TopicPartition
from kassign.protocol import decode_sticky_user_data

__all__ = ["StickyUserDataReader"]

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_new = tuple.__new__

# States of a layout key without a compiled layout: seen once so far, or not worth compiling.
_SEEN_ONCE = 1
_UNUSABLE = 2
# A compiled layout is dropped when the members sharing its key miss it this many times more than they hit it.
_MAX_EXCESS_MISSES = 3
# Entries per segment of a layout: small enough that a deviation costs few entry-by-entry reads, large
# enough that the per-segment calls stay a small share of the work.
_SEGMENT_ENTRIES = 32


class _Segment:
    """A run of a layout's entries, verified and read at any position of a buffer."""

    __slots__ = ("entries", "size", "fixed", "expected_fixed", "values", "topic_per_partition")

    def __init__(self, entries: list[tuple[bytes, str, int]]) -> None:
        self.entries = len(entries)
        self.size = sum(6 + len(raw) + 4 * count for raw, _, count in entries)
        self.fixed = struct.Struct(">" + "".join(f"{6 + len(raw)}s{4 * count}x" for raw, _, count in entries))
        self.expected_fixed = tuple(_INT16.pack(len(raw)) + raw + _INT32.pack(count) for raw, _, count in entries)
        self.values = struct.Struct(">" + "".join(f"{6 + len(raw)}x{count}i" for raw, _, count in entries))
        self.topic_per_partition = tuple(topic for _, topic, count in entries for _ in range(count))


class _Layout:
    """A compiled user data layout: the entries' topics and partition counts in order, then a generation."""

    __slots__ = (
        "fixed",
        "expected_fixed",
        "values",
        "topic_per_partition",
        "hits",
        "misses",
        "entries",
        "_segments",
        "similar_hits",
        "similar_misses",
    )

    def __init__(self, buf: bytes, entries: list[tuple[bytes, str, int]]) -> None:
        # fixed: the array length, then per entry (int16 length, name, int32 count) as one chunk,
        # skipping the partition ids; values: every partition id, then the generation.
        self.fixed = struct.Struct(">4s" + "".join(f"{6 + len(raw)}s{4 * count}x" for raw, _, count in entries))
        self.values = struct.Struct(">4x" + "".join(f"{6 + len(raw)}x{count}i" for raw, _, count in entries) + "i")
        self.expected_fixed = self.fixed.unpack_from(buf)
        self.topic_per_partition = tuple(topic for _, topic, count in entries for _ in range(count))
        self.hits = self.misses = 0
        self.entries = entries
        self._segments: dict[bytes, _Segment] | None = None
        # buffers read against this layout by segments: mostly by segments (hits) or mostly not (misses)
        self.similar_hits = self.similar_misses = 0

    def segment_starts(self) -> dict[bytes, _Segment]:
        """The layout cut into segments of :data:`_SEGMENT_ENTRIES` entries, by the raw name of each
        segment's first topic (built on first use)."""
        if self._segments is None:
            entries = self.entries
            self._segments = {}
            for k in range(0, len(entries), _SEGMENT_ENTRIES):
                self._segments.setdefault(entries[k][0], _Segment(entries[k : k + _SEGMENT_ENTRIES]))
        return self._segments

    def read(self, buf: bytes) -> tuple[list[TopicPartition], int] | None:
        """The partitions and generation in ``buf``, or None if ``buf`` does not have this layout."""
        if self.fixed.unpack_from(buf) != self.expected_fixed:
            return None
        values = self.values.unpack_from(buf)
        # zip stops before the last value, the generation.
        return list(map(_new, repeat(TopicPartition), zip(self.topic_per_partition, values))), values[-1]


class StickyUserDataReader:
    """Decodes the members' user data of one rebalance; topic names are decoded once and shared, and
    layouts that recur across members are compiled (see the module docstring)."""

    def __init__(self) -> None:
        self._names: dict[bytes, str] = {}
        #: topic name length -> unpack_from of (name, partition count, first partition)
        self._entry_heads: dict[int, Callable[[bytes, int], tuple[bytes, int, int]]] = {}
        self._layouts: dict[tuple[int, bytes], _Layout | int] = {}
        #: first topic (raw) -> the compiled layout buffers starting with it are read against by segments
        self._similar: dict[bytes, _Layout | int] = {}

    def read(self, data: bytes | bytearray | memoryview) -> tuple[list[TopicPartition], int | None]:
        """(partitions in the order written, generation or None for V0); ProtocolError if malformed."""
        buf = bytes(data)
        try:
            return self._read_by_layout(buf) or self._read(buf)
        except (struct.error, ValueError):
            partitions, generation = decode_sticky_user_data(data)  # raises the precise ProtocolError
            return list(partitions), generation

    def _read_by_layout(self, buf: bytes) -> tuple[list[TopicPartition], int | None] | None:
        # Same length and same first topic: very likely the same layout (verified before use).
        first_length = int.from_bytes(buf[4:6], "big")
        first = buf[6 : 6 + first_length]
        key = (len(buf), first)
        layout = self._layouts.get(key)
        if layout is None:
            self._layouts[key] = _SEEN_ONCE
            return self._read_similar(buf, first)
        if layout == _SEEN_ONCE:
            # Compile only layouts that recur: a member-specific layout would cost more to compile than to loop.
            layout = self._layouts[key] = self._compile(buf) or _UNUSABLE
            if isinstance(layout, _Layout):
                self._similar.setdefault(first, layout)
        if not isinstance(layout, _Layout):  # _UNUSABLE
            return self._read_similar(buf, first)
        result = layout.read(buf)
        if result is not None:
            layout.hits += 1
            return result
        # Members sharing a key with different layouts (e.g. one extra partition each) waste the check.
        layout.misses += 1
        if layout.misses > layout.hits + _MAX_EXCESS_MISSES:
            self._layouts[key] = _UNUSABLE
        return self._read_similar(buf, first)

    def _read_similar(self, buf: bytes, first: bytes) -> tuple[list[TopicPartition], int | None] | None:
        """``buf`` read by segments against the compiled layout for its first topic; None if there is none."""
        layout = self._similar.get(first)
        if not isinstance(layout, _Layout):
            return None
        (n_entries,) = _INT32.unpack_from(buf, 0)
        if n_entries < 0:
            raise ValueError("negative array length")
        out: list[TopicPartition] = []
        append, extend, tp_type = out.append, out.extend, TopicPartition
        int16, int32, names = _INT16.unpack_from, _INT32.unpack_from, self._names
        starts = layout.segment_starts()
        pos, done, size, by_segments = 4, 0, len(buf), 0
        while done < n_entries:
            # The segment starting with this entry's topic, verified at the current position: entries
            # added, missing or changed before it only shift it.
            (length,) = int16(buf, pos)
            raw = buf[pos + 2 : pos + 2 + length]
            segment = starts.get(raw)
            if (
                segment is not None
                and done + segment.entries <= n_entries
                and pos + segment.size <= size
                and segment.fixed.unpack_from(buf, pos) == segment.expected_fixed
            ):
                extend(
                    map(_new, repeat(tp_type), zip(segment.topic_per_partition, segment.values.unpack_from(buf, pos)))
                )
                pos += segment.size
                done += segment.entries
                by_segments += segment.entries
                continue
            # This one entry read here, its name already in hand.
            if length < 0:
                raise ValueError("negative topic length")
            pos += 2 + length
            (count,) = int32(buf, pos)
            if count < 0:
                raise ValueError("negative partition count")
            topic = names.get(raw)
            if topic is None:
                topic = names[raw] = raw.decode("utf-8")
            pos += 4
            if count == 1:
                append(_new(tp_type, (topic, int32(buf, pos)[0])))
            else:
                extend(map(_new, repeat(tp_type), zip(repeat(topic), struct.unpack_from(f">{count}i", buf, pos))))
            pos += 4 * count
            done += 1
        if 2 * by_segments >= n_entries:
            layout.similar_hits += 1
        else:
            layout.similar_misses += 1
            if layout.similar_misses > layout.similar_hits + _MAX_EXCESS_MISSES:
                self._similar[first] = _UNUSABLE
        if size - pos >= 4:
            return out, _INT32.unpack_from(buf, pos)[0]
        return out, None

    def _compile(self, buf: bytes) -> _Layout | None:
        """The layout of well-formed V1 ``buf``; None for V0 or anything :meth:`_read` would reject."""
        (n_entries,) = _INT32.unpack_from(buf, 0)
        if n_entries < 0:
            return None
        entries = []
        pos = 4
        for _ in range(n_entries):
            (length,) = _INT16.unpack_from(buf, pos)
            end = pos + 2 + length
            if length < 0 or end > len(buf):
                return None
            raw = buf[pos + 2 : end]
            (count,) = _INT32.unpack_from(buf, end)
            if count < 0:
                return None
            entries.append((raw, self._topic(raw), count))
            pos = end + 4 + 4 * count
        if len(buf) - pos < 4:
            return None
        return _Layout(buf, entries)

    def _topic(self, raw: bytes) -> str:
        topic = self._names.get(raw)
        if topic is None:
            topic = self._names[raw] = raw.decode("utf-8")
        return topic

    def _read(self, buf: bytes) -> tuple[list[TopicPartition], int | None]:
        (entries,) = _INT32.unpack_from(buf, 0)
        if entries < 0:
            raise ValueError("negative array length")
        out: list[TopicPartition] = []
        pos = self._read_entries(buf, 4, entries, out)
        if len(buf) - pos >= 4:
            return out, _INT32.unpack_from(buf, pos)[0]
        return out, None

    def _read_entries(self, buf: bytes, pos: int, entries: int, out: list[TopicPartition]) -> int:
        """Append the partitions of ``entries`` entries starting at ``pos`` to ``out``; the position after them."""
        names, heads = self._names, self._entry_heads
        append, extend = out.append, out.extend
        int16, tp_type = _INT16.unpack_from, TopicPartition
        for _ in range(entries):
            (length,) = int16(buf, pos)
            head = heads.get(length)
            if head is None:
                if length < 0:
                    raise ValueError("negative topic length")
                head = heads[length] = struct.Struct(f">{length}sii").unpack_from
            # The name, the partition count and the first partition in one call (most entries have one).
            raw, count, first = head(buf, pos + 2)
            topic = names.get(raw)
            if topic is None:
                topic = names[raw] = raw.decode("utf-8")
            if count == 1:
                append(_new(tp_type, (topic, first)))
                pos += length + 10
            else:
                if count < 0:
                    raise ValueError("negative partition count")
                pos += length + 6
                extend(map(_new, repeat(tp_type), zip(repeat(topic), struct.unpack_from(f">{count}i", buf, pos))))
                pos += 4 * count
        return pos
