"""The KIP-848 coordinator calls the recorder's hooks where Java records its metrics: a scripted group
coordinator (the fakes of tests/adapters) answers the heartbeats, a recorder listens, and the
recording says which rebalances, failures and heartbeats there were."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiokafka")

from kassign.adapters.aiokafka.listener_hooks import ConsumerGroupHooks, call_hook  # noqa: E402
from kassign.membership.consumer_group import MemberState  # noqa: E402
from kassign.telemetry import RebalanceRecorder  # noqa: E402
from kassign.telemetry.aiokafka_glue import protocol_of  # noqa: E402
from tests.adapters.test_aiokafka_consumer_group import (  # noqa: E402
    FakeGroupCoordinator,
    coordinator,
    tps,
    until,
)


class SlowRevoke:
    """A user listener whose revocation takes a while (the test scripts a heartbeat error meanwhile)."""

    def __init__(self, group: FakeGroupCoordinator) -> None:
        self.group = group
        self.revoking = False

    async def on_partitions_revoked(self, revoked):
        if revoked:
            self.revoking = True
            await asyncio.sleep(0.3)

    def on_partitions_assigned(self, assigned):
        pass


@pytest.mark.asyncio
async def test_coordinator_hooks_give_java_s_rebalance_and_heartbeat_metrics() -> None:
    out: list[dict] = []
    recorder = RebalanceRecorder(out.append, member="m1", group="g", protocol="consumer")

    async def scenario():
        group = FakeGroupCoordinator()
        user = SlowRevoke(group)
        coord, subscription = coordinator(group, recorder.wrap_listener(user))
        await until(
            lambda: (
                subscription.subscription.assignment is not None
                and subscription.subscription.assignment.tps == tps(0, 1)
            ),
            what="first assignment",
        )
        await until(lambda: any(o["ev"] == "reconciled" for o in out), what="first reconciliation")
        group.next_error = 14  # COORDINATOR_LOAD_IN_PROGRESS, answered while nothing is reconciling: no failure
        await until(lambda: group.next_error == 0, what="error answered")
        await until(lambda: any(o.get("error") == "COORDINATOR_LOAD_IN_PROGRESS" for o in out), what="error heartbeat")
        group.epoch, group.target = 2, [0]
        await until(lambda: user.revoking, what="revocation under way")
        group.next_error = 14  # the same error while the member reconciles: a failed rebalance
        await until(lambda: sum(o["ev"] == "reconciled" for o in out) == 2, timeout=10, what="second reconciliation")
        await coord.close()
        return group

    group = await asyncio.wait_for(scenario(), 30)
    recorder.close()
    kinds = [o["ev"] for o in out if o["ev"] != "heartbeat"]
    # (A callback is written once it returned, at its start time: the failure during it comes first.)
    assert kinds == [
        "reconcile",
        "cb_assigned",
        "reconciled",
        "reconcile",
        "rebalance_failed",
        "cb_revoked",
        "cb_revoked_done",
        "cb_assigned",
        "reconciled",
        "cb_revoked",
        "cb_revoked_done",
    ], kinds  # closing revokes: no rebalance
    revoked = next(o for o in out if o["ev"] == "cb_revoked")
    failed = next(o for o in out if o["ev"] == "rebalance_failed")
    assert revoked["t"] < failed["t"] < revoked["t"] + revoked["dur"], "the failure came while the callback ran"
    assert [o["epoch"] for o in out if o["ev"] in ("reconcile", "reconciled")] == [1, 1, 2, 2]
    heartbeats = [o for o in out if o["ev"] == "heartbeat"]
    assert len(heartbeats) == len(group.heartbeats), "one event per heartbeat, the leave included"
    assert sum(o.get("error") == "COORDINATOR_LOAD_IN_PROGRESS" for o in heartbeats) == 2
    m = recorder.metrics()
    assert m["rebalance-total"] == 2
    assert m["failed-rebalance-total"] == 1, "the error answer outside a reconciliation is not a failed rebalance"
    assert 300.0 <= m["rebalance-latency-max"] < 5000.0, "the second rebalance waited for the slow revocation"
    assert m["partition-revoked-latency-max"] >= 300.0
    assert m["heartbeat-total"] == len(group.heartbeats)
    assert 0.0 <= m["heartbeat-response-time-max"] < 1000.0
    assert m["last-heartbeat-seconds-ago"] == 0


class Member:
    """The parts of ConsumerGroupMember the hooks read."""

    def __init__(self) -> None:
        self.state = MemberState.JOINING
        self.member_epoch = 0


class Listener:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def rebalance_started(self, generation):
        self.calls.append(("started", generation))

    def rebalance_completed(self, ok, generation, error):
        self.calls.append(("completed", ok, generation, error))

    def heartbeat_completed(self, latency_ms, error, answered):
        self.calls.append(("heartbeat", latency_ms, error, answered))


def test_hooks_follow_java_s_state_transitions_and_failure_rule() -> None:
    listener = Listener()
    subscription = type("Subscription", (), {"listener": listener})()
    hooks, member = ConsumerGroupHooks(subscription, "g"), Member()

    def move(state: MemberState, epoch: int | None = None) -> None:
        before, member.state = member.state, state
        member.member_epoch = member.member_epoch if epoch is None else epoch
        hooks.transition(before, member)

    hooks.heartbeat_answered(3.0, "NOT_COORDINATOR", 0)  # nothing open: no failure
    move(MemberState.RECONCILING, 1)  # started
    move(MemberState.RECONCILING)  # a newer target meanwhile: no new start
    hooks.heartbeat_unanswered(40.0, ConnectionError("down"), 1)  # not retriable (no .retriable): failed
    move(MemberState.ACKNOWLEDGING)  # completed
    move(MemberState.RECONCILING)  # acknowledging went back: started
    move(MemberState.FENCED, 0)  # fenced: stays open
    hooks.heartbeat_answered(2.0, "COORDINATOR_NOT_AVAILABLE", 0)  # failed again
    move(MemberState.JOINING)
    move(MemberState.STABLE, 3)  # not from RECONCILING: nothing
    assert listener.calls == [
        ("heartbeat", 3.0, "NOT_COORDINATOR", True),
        ("started", 1),
        ("heartbeat", 40.0, "ConnectionError('down')", False),
        ("completed", False, 1, "ConnectionError('down')"),
        ("completed", True, 1, None),
        ("started", 1),
        ("heartbeat", 2.0, "COORDINATOR_NOT_AVAILABLE", True),
        ("completed", False, 0, "COORDINATOR_NOT_AVAILABLE"),
    ]


def test_a_retriable_failure_and_a_raising_hook_change_nothing(caplog: pytest.LogCaptureFixture) -> None:
    import aiokafka.errors as Errors

    listener = Listener()
    hooks, member = ConsumerGroupHooks(type("S", (), {"listener": listener})(), "g"), Member()
    before, member.state = member.state, MemberState.RECONCILING
    hooks.transition(before, member)
    hooks.heartbeat_unanswered(5.0, Errors.RequestTimedOutError(), 0)
    assert listener.calls[-1][0] == "heartbeat", "a retriable failure is no failed rebalance"

    class Raising:
        def rebalance_started(self, generation):
            raise RuntimeError("broken telemetry")

    call_hook(Raising(), "rebalance_started", 1, group_id="g")
    call_hook(object(), "rebalance_started", 1, group_id="g")  # no hook: nothing
    assert "broken telemetry" in caplog.text


@pytest.mark.asyncio
async def test_attach_detects_the_consumer_group_protocol() -> None:
    from kassign.adapters.aiokafka import CooperativeConsumer

    async def make():
        classic = CooperativeConsumer(bootstrap_servers="127.0.0.1:1", group_id="g")
        consumer = CooperativeConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", group_protocol="consumer")
        rec = RebalanceRecorder(None, member="m")
        rec.attach(consumer)
        found = protocol_of(classic), rec.protocol
        await consumer.stop()
        await classic.stop()
        return found

    assert await make() == ("cooperative", "consumer")
