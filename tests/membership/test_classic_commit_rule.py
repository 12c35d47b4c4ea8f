"""The rule a commit completed after a rebalance follows (issue #27): only partitions the member owned
without interruption since the commit was issued may be committed."""

from __future__ import annotations

from kassign.membership import ClassicMember
from kassign.model import Assignment, RebalanceProtocol, TopicPartition


def tps(*parts: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition("t", p) for p in parts)


def _synced(member: ClassicMember, generation: int, *parts: int) -> None:
    member.on_sync(generation, Assignment(sorted(tps(*parts))), {"t"})


def test_cooperative_kept_partitions_are_held_since_the_commit_revoked_and_returned_ones_are_not():
    member = ClassicMember(RebalanceProtocol.COOPERATIVE)
    _synced(member, 4, 0, 1, 2)
    _synced(member, 5, 0, 2, 3)  # t-1 revoked, t-3 added
    _synced(member, 6, 0, 1, 3)  # t-1 back, t-2 revoked
    assert member.held_since(4, tps(0, 1, 2)) == (tps(0), tps(1, 2))
    assert member.held_since(5, tps(0, 3)) == (tps(0, 3), tps())


def test_eager_partitions_reassigned_to_the_same_member_are_not_held_through_the_round():
    member = ClassicMember(RebalanceProtocol.EAGER)
    _synced(member, 4, 0, 1)
    member.prepare_join({"t"})  # eager: everything revoked before joining
    _synced(member, 5, 0, 1)
    assert member.held_since(4, tps(0, 1)) == (tps(), tps(0, 1))


def test_nothing_is_held_through_a_loss():
    member = ClassicMember(RebalanceProtocol.COOPERATIVE)
    _synced(member, 4, 0)
    member.lose_all()
    _synced(member, 7, 0)
    assert member.held_since(4, tps(0)) == (tps(), tps(0))
