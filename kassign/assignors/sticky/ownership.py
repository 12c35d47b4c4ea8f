"""Who owns what before a sticky assignment: members' claims resolved by generation.

Each member reports the partitions it owned and the generation it owned them in. Claims on topics
nobody subscribes to (or on partitions that do not exist) are ignored. When several members claim
the same partition, the highest generation wins; when the highest generation is shared, the claim is
invalid and the partition is owned by none of them (KAFKA-14639). Every claim that is not honoured
is remembered in :attr:`Ownership.claimers`, so that giving the partition to someone else is known
to transfer ownership (the cooperative protocol must revoke it first), and claims that lost to a
newer generation in :attr:`Ownership.older_claims`, so that a partition the newest owner must give
up can go back to the member that had it before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kassign.model import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Ownership", "resolve_ownership", "ZERO_TO_ONE"]

# bytes.translate table turning a claim-mark array into "is unowned" flags (0 -> 1, anything else -> 0).
ZERO_TO_ONE = bytes([1] + [0] * 255)


class _Unclean(Exception):
    """The fast path met a claim it cannot take as it is (unknown topic, bad index, duplicate)."""


@dataclass
class Ownership:
    """The resolved previous assignment.

    ``owned[i]``: the partitions member ``i`` owned and keeps the right to (input order kept).
    ``marks[topic]``: one byte per partition, non-zero where some member owns it.
    ``claimers``: partition -> indices of every member that claimed it, for partitions claimed by more
    than one member (other members' claims lost). Filled further as owners give partitions up.
    """

    owned: list[list[TopicPartition]]
    marks: dict[str, bytearray]
    claimers: dict[TopicPartition, set[int]]
    #: partition -> the member that owned it and gave it up in this assignment
    given_up_by: dict[TopicPartition, int] = field(default_factory=dict)
    #: partition -> members that claimed it in an older generation than its owner's, newest first
    older_claims: dict[TopicPartition, list[int]] = field(default_factory=dict)

    def release(self, member: int, partitions: Sequence[TopicPartition]) -> None:
        """Member ``member`` gives ``partitions`` up: they become unowned, claimed by it."""
        marks, claimers, given_up_by = self.marks, self.claimers, self.given_up_by
        for tp in partitions:
            marks[tp[0]][tp[1]] = 0
            given_up_by[tp] = member
            holders = claimers.get(tp)
            if holders is None:
                claimers[tp] = {member}
            else:
                holders.add(member)


def resolve_ownership(
    topics: Mapping[str, int],
    claims: Sequence[Sequence[TopicPartition]],
    generations: Sequence[int],
    member_ids: Sequence[str],
) -> Ownership:
    """Resolve member ``i``'s ``claims[i]`` made in ``generations[i]`` against topic sizes ``topics``."""
    # Marked in lists first: CPython's specialised list indexing makes this loop over every claimed
    # partition (a million in a large group) a fifth faster than indexing bytearrays.
    flags = {t: [0] * n for t, n in topics.items()}
    try:
        # Fast path: every claim exists and no partition is claimed twice (the normal case).
        for claim in claims:
            for topic, partition in claim:
                mark = flags[topic]
                if partition < 0 or mark[partition]:
                    raise _Unclean
                mark[partition] = 1
        return Ownership([list(c) for c in claims], {t: bytearray(f) for t, f in flags.items()}, {})
    except (_Unclean, KeyError, IndexError, TypeError, ValueError):
        return _resolve_slowly(topics, claims, generations, member_ids)


def _resolve_slowly(
    topics: Mapping[str, int],
    claims: Sequence[Sequence[TopicPartition]],
    generations: Sequence[int],
    member_ids: Sequence[str],
) -> Ownership:
    by_partition: dict[TopicPartition, list[int]] = {}
    valid_claims: list[list[TopicPartition]] = []
    for i, claim in enumerate(claims):
        valid: list[TopicPartition] = []
        seen: set[TopicPartition] = set()
        ignored = []
        for tp in claim:
            try:
                topic, partition = tp
                count = topics.get(topic)
                ok = count is not None and type(partition) is int and 0 <= partition < count
            except (TypeError, ValueError):
                ok = False
            if not ok:
                ignored.append(tp)
                continue
            if tp in seen:  # the same member listing a partition twice claims it once
                continue
            seen.add(tp)
            tp = TopicPartition(topic, partition)
            valid.append(tp)
            by_partition.setdefault(tp, []).append(i)
        if ignored:
            log.debug(
                "member %s claims partitions that are not subscribed or do not exist: %s", member_ids[i], ignored[:10]
            )
        valid_claims.append(valid)

    owner_of: dict[TopicPartition, int] = {}
    claimers: dict[TopicPartition, set[int]] = {}
    older_claims: dict[TopicPartition, list[int]] = {}
    newer_wins: list[str] = []
    invalid: list[str] = []
    for tp, who in by_partition.items():
        if len(who) == 1:
            owner_of[tp] = who[0]
            continue
        claimers[tp] = set(who)
        newest = max(generations[i] for i in who)
        winners = [i for i in who if generations[i] == newest]
        described = f"{tp.topic}-{tp.partition} by " + ", ".join(f"{member_ids[i]}@{generations[i]}" for i in who)
        if len(winners) == 1:
            owner_of[tp] = winners[0]
            newer_wins.append(described)
            older_claims[tp] = sorted((i for i in who if generations[i] < newest), key=lambda i: -generations[i])
        else:
            invalid.append(described)
    if newer_wins:
        log.warning(
            "%d partitions claimed by several members: kept by the newest generation (%s%s)",
            len(newer_wins),
            "; ".join(newer_wins[:5]),
            "; ..." if len(newer_wins) > 5 else "",
        )
    if invalid:
        log.error(
            "%d partitions claimed by several members in the same newest generation: the claims are invalid "
            "and the partitions reassigned (%s%s)",
            len(invalid),
            "; ".join(invalid[:5]),
            "; ..." if len(invalid) > 5 else "",
        )

    marks = {t: bytearray(n) for t, n in topics.items()}
    owned = []
    for i, valid in enumerate(valid_claims):
        mine = [tp for tp in valid if owner_of.get(tp) == i]
        for topic, partition in mine:
            marks[topic][partition] = 1
        owned.append(mine)
    return Ownership(owned, marks, claimers, older_claims=older_claims)
