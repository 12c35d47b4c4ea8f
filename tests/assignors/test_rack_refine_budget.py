"""The rack refinement's work bound: whatever the budget, the answer is valid, as balanced as without
refinement, never more cross-rack, and the same for the same input (the bound counts work, not time)."""

from __future__ import annotations

import random

import pytest

from kassign import Subscription, TopicPartition
from kassign.assignors import CooperativeStickyAssignor, StickyAssignor
from kassign.assignors.sticky import refine as sticky_refine


def _group(seed: int):
    rng = random.Random(seed)
    topics = {f"t{i}": 12 for i in range(12)}
    racks = ["r1", "r2", "r3"]
    partition_racks = {TopicPartition(t, p): {rng.choice(racks)} for t in topics for p in range(12)}
    subs = {f"m{i:03d}": Subscription(rng.sample(sorted(topics), 4), rack_id=rng.choice(racks)) for i in range(40)}
    return topics, subs, partition_racks


def _cross_rack(subs, partition_racks, result) -> int:
    return sum(1 for m, parts in result.items() for tp in parts if subs[m].rack_id not in partition_racks[tp])


@pytest.mark.parametrize("assignor", [StickyAssignor, CooperativeStickyAssignor])
def test_any_budget_keeps_the_answer_valid_balanced_and_no_less_local(monkeypatch, assignor):
    topics, subs, racks = _group(3)
    answers = {}
    for budget in (0, 5_000, sticky_refine.RELAXATION_BUDGET):
        monkeypatch.setattr(sticky_refine, "RELAXATION_BUDGET", budget)
        answers[budget] = assignor().assign(topics, subs, partition_racks=racks)
        assert assignor().assign(topics, subs, partition_racks=racks) == answers[budget]  # deterministic
    unrefined = answers[0]
    for result in answers.values():
        owned = [tp for parts in result.values() for tp in parts]
        assert len(owned) == len(set(owned)) == 144
        assert all(tp.topic in subs[m].topics for m, parts in result.items() for tp in parts)
        assert sorted(map(len, result.values())) == sorted(map(len, unrefined.values()))
        assert _cross_rack(subs, racks, result) <= _cross_rack(subs, racks, unrefined)
    # the full budget does strictly better than none on this group
    assert _cross_rack(subs, racks, answers[sticky_refine.RELAXATION_BUDGET]) < _cross_rack(subs, racks, unrefined)
