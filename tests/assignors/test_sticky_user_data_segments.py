"""The leader's sticky user data reader on layouts that almost recur (read by segments).

Members of a large group often hold one partition of each of hundreds of topics, some of them two
of one topic and none of another: their layouts differ from the shared one in an entry or two. The
reader reads those against a compiled layout run by run; these tests derive many such members from
one long layout (entries changed, added, missing, swapped, damaged) and compare every result with
the codec's.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kassign import TopicPartition
from kassign.assignors.sticky_user_data_reader import StickyUserDataReader
from kassign.protocol import ProtocolError, decode_sticky_user_data, encode_sticky_user_data

TP = TopicPartition
# Varying lengths, so that a shifted entry never lines up with the compiled one by accident.
NAMES = [f"t{k}" for k in range(12)] + [f"topic-{k}" for k in range(100)]


def expected(data: bytes):
    try:
        partitions, generation = decode_sticky_user_data(data)
    except ProtocolError:
        return ProtocolError
    return list(partitions), generation


def read(reader: StickyUserDataReader, data: bytes):
    try:
        partitions, generation = reader.read(data)
    except ProtocolError:
        return ProtocolError
    return list(partitions), generation


def mutate(rnd: random.Random, layout: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``layout`` with up to two entries changed, added, removed or swapped."""
    out = list(layout)
    for _ in range(rnd.randrange(3)):
        k = rnd.randrange(len(out))
        kind = rnd.randrange(4)
        if kind == 0:
            out[k] = (out[k][0], rnd.randrange(3))
        elif kind == 1:
            out.insert(k, (rnd.choice(NAMES), rnd.randrange(1, 3)))
        elif kind == 2 and len(out) > 1:
            del out[k]
        else:
            j = rnd.randrange(len(out))
            out[k], out[j] = out[j], out[k]
    return out


def encode(rnd: random.Random, layout: list[tuple[str, int]], generation: int | None) -> bytes:
    partitions = [TP(t, rnd.randrange(-1, 5000)) for t, count in layout for _ in range(count)]
    return encode_sticky_user_data(partitions, generation)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(40, 130))
def test_one_reader_agrees_with_the_codec_on_near_recurring_layouts(seed, n_entries):
    rnd = random.Random(seed)
    base = [(rnd.choice(NAMES), rnd.choice([1, 1, 1, 2, 0])) for _ in range(n_entries)]
    reader = StickyUserDataReader()
    for _ in range(2):  # the shared layout recurs: compiled
        data = encode(rnd, base, 3)
        assert read(reader, data) == expected(data)
    for _ in range(12):
        data = encode(rnd, mutate(rnd, base), rnd.choice([3, None, -1]))
        damage = rnd.randrange(6)
        if damage == 0:
            data = data[: rnd.randrange(len(data))]
        elif damage == 1:
            flip = bytearray(data)
            flip[rnd.randrange(len(flip))] ^= 1 << rnd.randrange(8)
            data = bytes(flip)
        elif damage == 2:
            data += bytes(rnd.randrange(1, 6))
        assert read(reader, data) == expected(data)


def test_member_with_one_topic_doubled_and_one_missing_is_read_by_segments():
    """The S4_last1 join shape: 499 entries where the shared layout has 500, one of them with two partitions."""
    topics = [f"topic-{k}" for k in range(500)]
    reader = StickyUserDataReader()
    shared = [[TP(t, m) for t in topics] for m in range(3)]
    for partitions in shared:
        assert read(reader, encode_sticky_user_data(partitions, 1)) == (partitions, 1)
    odd = [TP(t, 7) for t in topics[:200]] + [TP(topics[200], 7), TP(topics[200], 8)] + [TP(t, 7) for t in topics[202:]]
    assert len(odd) == 500
    data = encode_sticky_user_data(odd, 1)
    assert read(reader, data) == (odd, 1)
    layout = reader._similar[b"topic-0"]
    assert layout.similar_hits == 1  # read mostly by segments, not entry by entry
