"""Checks shared by the sticky and cooperative-sticky tests: validity, balance, movement."""

from __future__ import annotations

from collections.abc import Mapping

from kassign import Subscription, TopicPartition


def effective_topics(partitions_per_topic: Mapping[str, int], sub: Subscription) -> set[str]:
    return {t for t in sub.topics if partitions_per_topic.get(t, 0) > 0}


def assert_valid(partitions_per_topic, subscriptions, assignment) -> None:
    """Every member present; each subscribed partition exactly once, only to a subscriber."""
    assert set(assignment) == set(subscriptions)
    seen: dict[TopicPartition, str] = {}
    for member, parts in assignment.items():
        topics = effective_topics(partitions_per_topic, subscriptions[member])
        for tp in parts:
            assert isinstance(tp, TopicPartition), tp
            assert tp.topic in topics, f"{member} got {tp} of a topic it does not subscribe to"
            assert 0 <= tp.partition < partitions_per_topic[tp.topic], tp
            assert tp not in seen, f"{tp} given to {seen[tp]} and {member}"
            seen[tp] = member
    wanted = {t for s in subscriptions.values() for t in effective_topics(partitions_per_topic, s)}
    expected = {TopicPartition(t, p) for t in wanted for p in range(partitions_per_topic[t])}
    assert set(seen) == expected, f"unassigned: {sorted(expected - set(seen))[:5]}"


def imbalance_witness(partitions_per_topic, subscriptions, assignment):
    """A (partition, from, to) that could move to a subscriber with 2+ fewer partitions, or None."""
    counts = {m: len(p) for m, p in assignment.items()}
    subscribers: dict[str, list[str]] = {}
    for m, s in subscriptions.items():
        for t in effective_topics(partitions_per_topic, s):
            subscribers.setdefault(t, []).append(m)
    for m, parts in assignment.items():
        for tp in parts:
            for other in subscribers[tp.topic]:
                if counts[other] <= counts[m] - 2:
                    return tp, m, other
    return None


def assert_balanced(partitions_per_topic, subscriptions, assignment) -> None:
    subs = [frozenset(effective_topics(partitions_per_topic, s)) for s in subscriptions.values()]
    counts = [len(p) for p in assignment.values()]
    if len(set(subs)) == 1 and counts:
        assert max(counts) - min(counts) <= 1, counts
    witness = imbalance_witness(partitions_per_topic, subscriptions, assignment)
    assert witness is None, f"{witness[0]} could move from {witness[1]} to {witness[2]}"


def resolved_owners(claims: Mapping[str, tuple[list[TopicPartition], int]], partitions_per_topic) -> dict:
    """partition -> owner by the generation rule (highest generation wins; a tie at the top: nobody)."""
    by_tp: dict[TopicPartition, list[tuple[int, str]]] = {}
    for m, (parts, gen) in claims.items():
        for tp in set(parts):
            if 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                by_tp.setdefault(tp, []).append((gen, m))
    owners = {}
    for tp, who in by_tp.items():
        top = max(g for g, _ in who)
        winners = [m for g, m in who if g == top]
        if len(winners) == 1:
            owners[tp] = winners[0]
    return owners


def moves(owners: Mapping[TopicPartition, str], assignment) -> int:
    """Previously owned partitions that now belong to another member (or to nobody)."""
    now = {tp: m for m, parts in assignment.items() for tp in parts}
    return sum(1 for tp, m in owners.items() if m in assignment and now.get(tp) != m)
