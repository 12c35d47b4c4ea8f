"""Delayed reassignment (KIP-415 style) through kassign's aiokafka coordinator, on a real broker.

Members are ``CooperativeConsumer`` subprocesses whose assignor is a
``DelayedCooperativeStickyAssignor`` (built by :func:`delayed_member` below). The delay travels in
the assignment user data and each member rejoins when it ends, so the held-back partitions are
handed out by the follow-up rebalance that the members themselves start.
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("aiokafka")

from integration.driver import GroupDriver  # noqa: E402
from integration.timeline_checks import assert_exclusive, current_assignment, ownership_intervals  # noqa: E402
from kassign.model import TopicPartition  # noqa: E402
from kassign.timeline.events import Event  # noqa: E402

# Member subprocesses import this module by this path (the repository root is on their PYTHONPATH).
FACTORY = "tests.integration.test_delayed_reassignment:delayed_member"
STRATEGY = "kassign.assignors:DelayedCooperativeStickyAssignor"  # replaced by the factory's instance
DELAY_ENV = "KASSIGN_TEST_DELAY_MS"

pytestmark = pytest.mark.timeout(120)


def delayed_member(**config):
    """A CooperativeConsumer with the delayed assignor; the delay comes from ``KASSIGN_TEST_DELAY_MS``.

    The worker id is the member's client id up to the first ``.``, so ``m2.back`` is ``m2`` restarted.
    """
    from kassign.adapters.aiokafka import CooperativeConsumer
    from kassign.assignors import DelayedCooperativeStickyAssignor

    config.pop("partition_assignment_strategy")
    assignor = DelayedCooperativeStickyAssignor(
        scheduled_rebalance_max_delay_ms=int(os.environ[DELAY_ENV]),
        worker_id=config["client_id"].partition(".")[0],
    )
    return CooperativeConsumer(partition_assignment_strategy=(assignor,), **config)


def _start(group: GroupDriver, member_id: str) -> str:
    return group.start_member("aiokafka", STRATEGY, member_id=member_id, consumer_factory=FACTORY)


def _start_group(group: GroupDriver) -> dict[str, list[TopicPartition]]:
    # m1 joins alone first, so it leads the group (the first member to join leads).
    _start(group, "m1")
    group.wait_settled(40)
    _start(group, "m2")
    _start(group, "m3")
    return group.wait_settled(40)


def _first_owned_by_others(
    events: list[Event], partitions: list[TopicPartition], gone: set[str], after: float
) -> dict[TopicPartition, tuple[str, float]]:
    """Partition -> (member, time) of its first ownership starting after ``after`` by a member not in ``gone``."""
    out: dict[TopicPartition, tuple[str, float]] = {}
    for interval in ownership_intervals(events):
        if interval.partition in partitions and interval.member not in gone and interval.start > after:
            out.setdefault(interval.partition, (interval.member, interval.start))
    return out


def _assert_moved_within(
    events: list[Event], held: list[TopicPartition], gone: str, gone_at: float, earliest_s: float, latest_s: float
) -> None:
    """Every partition of ``held`` went to another member between ``earliest_s`` and ``latest_s`` after
    ``gone_at``, and no partition was ever owned twice."""
    moved = _first_owned_by_others(events, held, {gone}, gone_at)
    assert sorted(moved) == sorted(held), moved
    for tp, (member, at) in moved.items():
        assert earliest_s <= at - gone_at < latest_s, (tp, member, at - gone_at)
    assert_exclusive(events)


def _all_owned_by(members: list[str], partitions: list[TopicPartition]):
    def check(events: list[Event]) -> bool:
        assignment = current_assignment(events)
        owned = [tp for m in members for tp in assignment.get(m, [])]
        return sorted(owned) == sorted(partitions) and set(assignment) <= set(members)

    return check


def test_departed_member_partitions_wait_for_the_delay_then_move(
    bootstrap_servers, group_id, topic_factory, monkeypatch
):
    delay_s = 3.0
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        before = _start_group(group)
        held = before["m2"]
        stopped_at = time.time()
        group.stop_member("m2")
        # Well inside the delay, after the leave's rebalance: m2's partitions belong to nobody and
        # the others kept exactly what they had.
        time.sleep(delay_s / 2)
        during = current_assignment(group.events())
        events = group.wait_for(
            _all_owned_by(["m1", "m3"], group.partitions), 20 + delay_s, "held partitions reassigned after the delay"
        )
    assert during == {"m1": before["m1"], "m3": before["m3"]}, during
    # The delay runs from the leader's assignment, which comes after m2 left.
    _assert_moved_within(events, held, "m2", stopped_at, delay_s * 0.9, delay_s + 15)


def test_member_returning_within_the_delay_takes_its_partitions_back(
    bootstrap_servers, group_id, topic_factory, monkeypatch
):
    delay_s = 12.0  # room for a new member process to start and join
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        before = _start_group(group)
        held = before["m2"]
        stopped_at = time.time()
        group.stop_member("m2")
        _start(group, "m2.back")  # same worker id "m2", new member id
        events = group.wait_for(
            lambda ev: current_assignment(ev).get("m2.back") == held, delay_s + 10, "m2.back owns m2's partitions"
        )
        back_at = max(i.start for i in ownership_intervals(events) if i.member == "m2.back" and i.partition in held)
        after = group.wait_settled(20)
        events = group.events()
    assert back_at - stopped_at < delay_s, back_at - stopped_at
    assert after == {"m1": before["m1"], "m2.back": held, "m3": before["m3"]}, after
    # Once m2 had left, nobody but m2.back had its partitions.
    owners_of_held = {i.member for i in ownership_intervals(events) if i.partition in held and i.start > stopped_at}
    assert owners_of_held == {"m2.back"}, owners_of_held
    assert_exclusive(events)


def test_leader_leaving_has_its_partitions_reassigned_at_once(bootstrap_servers, group_id, topic_factory, monkeypatch):
    delay_s = 20.0
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        before = _start_group(group)
        stopped_at = time.time()
        group.stop_member("m1")
        events = group.wait_for(
            _all_owned_by(["m2", "m3"], group.partitions),
            delay_s / 2,
            "the leader's partitions reassigned without delay",
        )
    _assert_moved_within(events, before["m1"], "m1", stopped_at, 0.0, delay_s / 2)


def test_crashed_member_partitions_wait_for_the_delay_after_its_session_expires(
    bootstrap_servers, group_id, topic_factory, monkeypatch
):
    delay_s = 3.0
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        before = _start_group(group)
        held = before["m3"]
        crashed_at = time.time()
        group.crash_member("m3")  # no LeaveGroup: the broker notices when the session (1.5 s) expires
        events = group.wait_for(
            _all_owned_by(["m1", "m2"], group.partitions),
            25 + delay_s,
            "a crashed member's partitions reassigned after the delay",
        )
    _assert_moved_within(events, held, "m3", crashed_at, delay_s * 0.9, group.timing.session_ms / 1000 + delay_s + 15)
    # The survivors were never interrupted: they kept what they had all along.
    for member in ("m1", "m2"):
        kept = [i for i in ownership_intervals(events) if i.member == member and i.partition in before[member]]
        assert all(i.end == float("inf") for i in kept if i.start < crashed_at), (member, kept)


def test_first_worker_takes_everything_and_a_joining_worker_its_share_at_once(
    bootstrap_servers, group_id, topic_factory, monkeypatch
):
    # Seed cases 1 and 2: a join starts no delay, the newcomer gets its share in the follow-up round.
    delay_s = 20.0
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        _start(group, "m1")
        alone = group.wait_settled(40)
        joined_at = time.time()
        _start(group, "m2")
        events = group.wait_for(
            lambda ev: len(current_assignment(ev).get("m2", [])) == 3, delay_s / 2, "the joining worker owns its share"
        )
        after = current_assignment(events)
    assert sorted(alone["m1"]) == sorted(group.partitions)
    assert set(after["m1"]) < set(alone["m1"]) and len(after["m1"]) == 3  # m1 kept half of its own
    got_at = max(i.start for i in ownership_intervals(events) if i.member == "m2")
    assert got_at - joined_at < delay_s / 2
    assert_exclusive(events)


def test_leader_leaving_and_returning_rejoins_as_a_worker(bootstrap_servers, group_id, topic_factory, monkeypatch):
    # Seed case 6: the leader's work moves at once (no delay); when it returns it gets a fair share.
    delay_s = 20.0
    monkeypatch.setenv(DELAY_ENV, str(int(delay_s * 1000)))
    topic = topic_factory(6)
    with GroupDriver(bootstrap_servers, group_id, topic) as group:
        before = _start_group(group)
        group.stop_member("m1")
        group.wait_for(
            _all_owned_by(["m2", "m3"], group.partitions),
            delay_s / 2,
            "the leader's partitions reassigned without delay",
        )
        _start(group, "m1.back")
        events = group.wait_for(
            lambda ev: len(current_assignment(ev).get("m1.back", [])) == 2, delay_s, "the returning leader owns a share"
        )
        after = current_assignment(events)
    assert sorted(tp for ps in after.values() for tp in ps) == sorted(group.partitions)
    assert {m: len(ps) for m, ps in after.items()} == {"m1.back": 2, "m2": 2, "m3": 2}
    assert set(before["m2"]) <= set(after["m2"]) | set(after["m1.back"])
    assert_exclusive(events)
