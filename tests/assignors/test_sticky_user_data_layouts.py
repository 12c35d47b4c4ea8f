"""The leader's sticky user data reader when many members share a layout (compiled layouts).

One reader decodes every member of a rebalance, so these tests feed one reader many buffers whose
layouts recur, collide (same length and first topic, different layout), almost recur (an entry or
two changed, added, missing or swapped: read by segments) or are damaged, and compare each result
with the codec's.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kassign import Subscription, TopicPartition
from kassign.assignors import StickyAssignor
from kassign.assignors.sticky.user_data_reader import StickyUserDataReader
from kassign.protocol import ProtocolError, decode_sticky_user_data, encode_sticky_user_data

TP = TopicPartition
# Names of equal length, so that layouts differing only in names or order collide on (length, first topic).
NAMES = ["ab", "ba", "cd", "tx", "é"]


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


layouts = st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 3)), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(layouts, min_size=1, max_size=3), st.integers(0, 2**32 - 1), st.integers(2, 30))
def test_one_reader_agrees_with_the_codec_on_recurring_layouts(base_layouts, seed, n_members):
    rnd = random.Random(seed)
    reader = StickyUserDataReader()
    for _ in range(n_members):
        layout = rnd.choice(base_layouts)
        partitions = [TP(t, rnd.randrange(-2, 2**31 - 1)) for t, count in layout for _ in range(count)]
        data = encode_sticky_user_data(partitions, rnd.choice([None, -1, 1, 2**31 - 1]))
        damage = rnd.randrange(8)
        if damage == 0 and data:
            data = data[: rnd.randrange(len(data))]  # truncated (maybe into a V0-looking buffer)
        elif damage == 1:
            data += bytes(rnd.randrange(1, 5))  # trailing bytes are ignored
        elif damage == 2 and len(data) > 4:
            flip = bytearray(data)
            flip[rnd.randrange(len(flip))] ^= 1 << rnd.randrange(8)  # one bit anywhere, same length
            data = bytes(flip)
        assert read(reader, data) == expected(data)


def test_colliding_layout_is_not_mistaken_for_the_compiled_one():
    reader = StickyUserDataReader()
    same = encode_sticky_user_data([TP("ab", 1), TP("cd", 2)], 3)
    for _ in range(3):  # the second read compiles the layout, the third uses it
        assert read(reader, same) == ([TP("ab", 1), TP("cd", 2)], 3)
    # Same length and first topic: another second topic; another count, padded with ignored trailing bytes.
    other_name = encode_sticky_user_data([TP("ab", 7), TP("tx", 8)], 3)
    other_counts = encode_sticky_user_data([TP("ab", 5), TP("ab", 6)], 4)
    other_counts += bytes(len(same) - len(other_counts))
    assert len(other_name) == len(same) == len(other_counts)
    assert read(reader, other_name) == ([TP("ab", 7), TP("tx", 8)], 3)
    assert read(reader, other_counts) == ([TP("ab", 5), TP("ab", 6)], 4)
    assert read(reader, same[:-2]) == expected(same[:-2])


def test_large_uniform_group_assigns_as_with_the_codec():
    """Round-robin leftovers: every member owns one partition of each topic (one shared layout)."""
    topics = {f"topic-{t}": 12 for t in range(30)}
    members = [f"member-{k:02d}" for k in range(12)]
    previous = {m: [TP(t, k) for t in topics] for k, m in enumerate(members)}
    previous[members[3]] = [TP(t, 3) for t in reversed(list(topics))]  # one member lists them the other way round
    del previous[members[5]]  # left the group

    class CodecStickyAssignor(StickyAssignor):
        def member_data(self, member_id, subscription):
            partitions, generation = decode_sticky_user_data(subscription.user_data)
            return list(partitions), generation

    subs = {m: Subscription(list(topics), encode_sticky_user_data(p, 2)) for m, p in previous.items()}
    fast = StickyAssignor().assign(topics, subs)
    assert fast == CodecStickyAssignor().assign(topics, subs)
    assert all(set(fast[m]) >= set(p) for m, p in previous.items())  # 30 partitions each before and after


# -- layouts that almost recur (read by segments) -------------------------------------------------
# Members of a large group often hold one partition of each of hundreds of topics, some of them two
# of one topic and none of another: their layouts differ from the shared one in an entry or two, and
# the reader reads those against a compiled layout run by run.

# Varying lengths, so that a shifted entry never lines up with the compiled one by accident.
SEGMENT_NAMES = [f"t{k}" for k in range(12)] + [f"topic-{k}" for k in range(100)]


def mutate(rnd: random.Random, layout: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``layout`` with up to two entries changed, added, removed or swapped."""
    out = list(layout)
    for _ in range(rnd.randrange(3)):
        k = rnd.randrange(len(out))
        kind = rnd.randrange(4)
        if kind == 0:
            out[k] = (out[k][0], rnd.randrange(3))
        elif kind == 1:
            out.insert(k, (rnd.choice(SEGMENT_NAMES), rnd.randrange(1, 3)))
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
    base = [(rnd.choice(SEGMENT_NAMES), rnd.choice([1, 1, 1, 2, 0])) for _ in range(n_entries)]
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
