"""Hypothesis strategies for sticky-assignor scenarios: topics, subscriptions, previous ownership, racks."""

from __future__ import annotations

from hypothesis import strategies as st

from kassign import Subscription, TopicPartition

RACKS = ("r0", "r1", "r2")


@st.composite
def scenarios(draw, *, equal: bool | None = None, racks: bool | None = None, max_members: int = 7):
    """(partitions_per_topic, claims {member: (owned, generation)}, topics {member: [topics]},
    member_racks {member: rack|None}, partition_racks or None)."""
    n_topics = draw(st.integers(1, 4))
    topics = {f"t{i}": draw(st.integers(0, 9)) for i in range(n_topics)}
    names = list(topics)
    members = [f"m{i}" for i in range(draw(st.integers(1, max_members)))]
    if equal is None:
        equal = draw(st.booleans())
    if equal:
        common = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        subs = {m: list(common) for m in members}
    else:
        subs = {m: draw(st.lists(st.sampled_from(names + ["missing"]), min_size=1, unique=True)) for m in members}
    all_tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    claims = {}
    for m in members:
        owned = draw(st.lists(st.sampled_from(all_tps), unique=True, max_size=8)) if all_tps else []
        claims[m] = (owned, draw(st.sampled_from([-1, 1, 2, 3])))
    use_racks = draw(st.booleans()) if racks is None else racks
    member_racks = {m: (draw(st.sampled_from((None,) + RACKS)) if use_racks else None) for m in members}
    partition_racks = None
    if use_racks:
        partition_racks = {tp: draw(st.sets(st.sampled_from(RACKS), max_size=2)) for tp in all_tps}
    return topics, claims, subs, member_racks, partition_racks


def cooperative_subscriptions(subs, claims, member_racks):
    return {
        m: Subscription(
            list(subs[m]), None, list(claims[m][0]), None if claims[m][1] < 0 else claims[m][1], member_racks.get(m)
        )
        for m in subs
    }
