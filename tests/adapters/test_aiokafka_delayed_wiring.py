"""The delayed assignor's and the telemetry hooks' wiring in kassign's aiokafka coordinator, without a
broker: the leader sends the assignor's state to every member, a member hands it back to its
assignor and rejoins when the assignor asks, and listener hooks never break a rebalance."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("aiokafka")

from aiokafka.util import create_future  # noqa: E402

from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator  # noqa: E402
from kassign.adapters.aiokafka.group_protocol import leader_assignment, member_metadata  # noqa: E402
from kassign.assignors import CooperativeStickyAssignor, DelayedCooperativeStickyAssignor  # noqa: E402
from kassign.membership import ClassicMember  # noqa: E402
from kassign.model import Assignment, RebalanceProtocol, Subscription  # noqa: E402
from kassign.protocol import decode_assignment, decode_subscription  # noqa: E402
from tests.adapters.fakes import FakeCluster  # noqa: E402

COOPERATIVE = RebalanceProtocol.COOPERATIVE


def _subscriptions(assignors, owned=None, generation=-1):
    """The JoinGroup subscriptions of members named by their worker ids, as the leader decodes them."""
    owned = owned or {}
    subs = {}
    for worker, assignor in assignors.items():
        data = member_metadata(assignor, ["t"], owned=owned.get(worker, []), generation=generation)
        subs[worker] = decode_subscription(data)
    return subs


def _offline_coordinator(listener=None) -> KassignGroupCoordinator:
    """Just the state the scheduling and hook code reads (aiokafka's network setup skipped)."""
    coordinator = KassignGroupCoordinator.__new__(KassignGroupCoordinator)
    coordinator.group_id = "g"
    coordinator._subscription = SimpleNamespace(listener=listener)
    coordinator._scheduled_rejoin = None
    coordinator._rejoin_needed_fut = create_future()
    coordinator._commit_response_for = None
    coordinator._joining = False
    coordinator._rebalance_timeout_ms = 30000
    coordinator._member = ClassicMember(RebalanceProtocol.COOPERATIVE)
    coordinator.generation = 2
    return coordinator


def _delayed_round_with_a_departure(delay_ms: int):
    """Round 1 with workers a, b, c; c leaves; round 2's assignments (a leads both rounds)."""
    assignors = {w: DelayedCooperativeStickyAssignor(delay_ms, worker_id=w) for w in "abc"}
    cluster = FakeCluster({"t": 6})
    first = leader_assignment(assignors["a"], cluster, _subscriptions(assignors), COOPERATIVE)
    owned = {}
    for worker, data in first.items():
        received = decode_assignment(data)
        owned[worker] = list(received.partitions)
        assignors[worker].on_assignment(owned[worker], 1)
        assignors[worker].on_assignment_user_data(received.user_data)
    del assignors["c"]
    second = leader_assignment(assignors["a"], cluster, _subscriptions(assignors, owned, 1), COOPERATIVE)
    return assignors, owned, second


def test_leader_sends_the_assignor_state_to_every_member():
    assignors, owned, second = _delayed_round_with_a_departure(60_000)
    state = assignors["a"].assignment_user_data
    assert state  # the leader wrote a state this round
    decoded = {w: decode_assignment(data) for w, data in second.items()}
    assert {w: d.user_data for w, d in decoded.items()} == {"a": state, "b": state}
    held = set(owned["c"])
    assert held and not held & {tp for d in decoded.values() for tp in d.partitions}  # c's partitions wait


def test_assignors_without_state_send_no_user_data():
    assignor = CooperativeStickyAssignor()
    out = leader_assignment(assignor, FakeCluster({"t": 2}), {"m": Subscription(["t"])}, COOPERATIVE)
    assert decode_assignment(out["m"]).user_data is None and len(out["m"]) > 0


def _follow(coordinator, assignor, user_data) -> None:
    """What the coordinator does with an assignment's user data: the membership core reads it
    through the assignor, the coordinator replaces its rejoin schedule."""
    outcome = coordinator._member.on_sync(coordinator.generation, Assignment([], user_data), {"t"}, assignor)
    assert outcome.reschedule
    coordinator._reschedule_rejoin(assignor, outcome.rejoin_after_s)


async def _after_a_delayed_assignment(scenario):
    """Await ``scenario(coordinator, member, user_data)`` once member "b"'s coordinator has followed
    an assignment whose user data holds a 100 ms delay."""
    assignors, _, second = _delayed_round_with_a_departure(100)
    member, user_data = assignors["b"], decode_assignment(second["b"]).user_data
    coordinator = _offline_coordinator()
    _follow(coordinator, member, user_data)
    return await scenario(coordinator, member, user_data)


@pytest.mark.asyncio
async def test_member_rejoins_when_the_delay_it_received_ends():
    async def scenario(coordinator, member, _user_data):
        assert member.rejoin_after_s is not None and 0 < member.rejoin_after_s <= 0.1
        assert not coordinator._rejoin_needed_fut.done()
        await asyncio.sleep(member.rejoin_after_s + 0.1)
        return coordinator._rejoin_needed_fut.done()

    assert await _after_a_delayed_assignment(scenario)


@pytest.mark.asyncio
async def test_a_new_assignment_or_closing_cancels_the_pending_rejoin():
    async def scenario(coordinator, member, user_data):
        _follow(coordinator, member, None)  # the next assignment carries no delay
        assert member.rejoin_after_s is None
        cancelled_by_assignment = coordinator._scheduled_rejoin is None
        _follow(coordinator, member, user_data)
        coordinator._cancel_scheduled_rejoin()  # what close() and leaving do first
        await asyncio.sleep(0.3)
        return cancelled_by_assignment, coordinator._rejoin_needed_fut.done()

    assert await _after_a_delayed_assignment(scenario) == (True, False)


@pytest.mark.asyncio
async def test_listener_hooks_are_called_and_their_failures_only_logged(caplog):
    calls = []

    class Listener:
        def rebalance_started(self, generation):
            calls.append(("started", generation))
            raise RuntimeError("telemetry bug")

        def rebalance_completed(self, ok, generation, error):
            calls.append(("completed", ok, generation, error))

    async def drive():
        coordinator = _offline_coordinator(Listener())
        with caplog.at_level(logging.ERROR):
            coordinator._call_hook("rebalance_started", None)
            coordinator._call_hook("rebalance_completed", True, 3, None)
        _offline_coordinator(object())._call_hook("rebalance_started", 1)  # a listener without hooks
        _offline_coordinator(None)._call_hook("rebalance_started", 1)  # no listener

    await drive()
    assert calls == [("started", None), ("completed", True, 3, None)]
    assert "rebalance_started" in caplog.text and "telemetry bug" in caplog.text


@pytest.mark.asyncio
async def test_cooperative_consumer_takes_a_delayed_assignor_instance():
    async def build():
        assignor = DelayedCooperativeStickyAssignor(3000, worker_id="w1")
        consumer = CooperativeConsumer(
            bootstrap_servers="127.0.0.1:1", group_id="g", partition_assignment_strategy=(assignor,)
        )
        return assignor, consumer

    assignor, consumer = await build()
    assert consumer._kassign_assignors == [assignor]
    assert assignor.name == "kassign-delayed-cooperative-sticky"
    assert consumer.rebalance_protocol is COOPERATIVE
