"""Long processing on the classic protocol (issue #27, aiokafka issue 848), without a broker: a member
whose application has not called getmany()/getone() for max_poll_interval_ms leaves the group as
Java's does -- its partitions lost (on_partitions_lost, no commit, no more records of them), one
WARNING naming the setting -- and a late commit is refused naming the cause, until a round has the
member back."""

from __future__ import annotations

import asyncio
import logging

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from tests.adapters.test_aiokafka_classic_rules import FakeCoordinatorClient, _networked, error  # noqa: E402
from tests.adapters.test_aiokafka_cooperative_member import assignment_bytes  # noqa: E402


@pytest.mark.asyncio
async def test_a_member_past_max_poll_interval_loses_its_partitions_once_and_says_why(caplog):
    async def scenario():
        client = FakeCoordinatorClient(LeaveGroupRequest=[error(0)])
        coordinator, listener = await _networked(client)
        coordinator._max_poll_interval = 0.05
        await asyncio.sleep(0.1)  # processing: no getmany() since
        with caplog.at_level(logging.WARNING, logger="kassign"):
            await coordinator._maybe_leave_group()  # aiokafka's heartbeat routine, past max_poll_interval_ms
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "max_poll_interval_ms=50" in warnings[0], warnings
        assert listener.calls[-1] == ("lost", {TP("t", 0), TP("t", 1)})
        assert not [c for c in listener.calls if c[0] == "revoked"]
        assert coordinator._subscription.subscription.assignment.tps == frozenset()  # nothing fetched of them
        assert [name for name, _, _ in client.sent] == ["LeaveGroupRequest"]
        assert (coordinator.generation, coordinator.member_id) == (-1, "") and coordinator._rejoin_needed_fut.done()
        with pytest.raises(Errors.CommitFailedError, match="max_poll_interval_ms=50 exceeded"):
            coordinator.check_membership_for_commit()
        # Its next getmany() rejoins: once a round gives it a generation, it commits again.
        coordinator.generation, coordinator.member_id = 6, "m-2"
        await coordinator._on_join_complete(6, "m-2", "cooperative-sticky", assignment_bytes(("t", 1)))
        coordinator.check_membership_for_commit()
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_closing_is_not_a_poll_timeout():
    async def scenario():
        client = FakeCoordinatorClient(LeaveGroupRequest=[error(0)])
        coordinator, listener = await _networked(client)
        coordinator._max_poll_interval = 0.05
        await asyncio.sleep(0.1)
        coordinator._closing.set_result(None)
        await coordinator._maybe_leave_group()
        assert listener.calls[-1] == ("revoked", {TP("t", 0), TP("t", 1)})
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()


@pytest.mark.asyncio
async def test_a_heartbeat_task_cancelled_while_leaving_does_not_cancel_the_coordination_routine():
    """aiokafka's heartbeat routine calls the poll-timeout leave outside its cancellation handling; the
    coordination routine stopping it meanwhile (to rejoin) must not receive its CancelledError."""

    async def scenario():
        client = FakeCoordinatorClient()
        coordinator, _ = await _networked(client)
        leaving = asyncio.Event()

        async def heartbeat_routine():
            leaving.set()
            await asyncio.sleep(10)  # as if inside _maybe_leave_group, awaiting the LeaveGroup answer

        coordinator._heartbeat_task = asyncio.ensure_future(heartbeat_routine())
        await leaving.wait()
        await coordinator._stop_heartbeat_task()  # before: raised CancelledError here
        assert coordinator._heartbeat_task is None
        await coordinator._stop_commit_offsets_refresh_task()

    await scenario()
