"""The leader's sticky user data reader when many members share a layout (compiled layouts).

One reader decodes every member of a rebalance, so these tests feed one reader many buffers whose
layouts recur, collide (same length and first topic, different layout) or are damaged, and compare
each result with the codec's.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kassign import Subscription, TopicPartition
from kassign.assignors import StickyAssignor
from kassign.assignors.sticky_user_data_reader import StickyUserDataReader
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
