"""Commits against a moving membership, without a broker: a zombie's commit issued before its
generation was reset is never sent under the next one, and a closing member's commit gives up
after the rebalance timeout instead of retrying for ever (both seen in the fault soak on Kafka 4.4)."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

import aiokafka.errors as Errors  # noqa: E402
from aiokafka.util import create_future  # noqa: E402

from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator  # noqa: E402


class _Client:
    """No coordinator to be found: every lookup fails with a retriable error."""

    def __init__(self) -> None:
        self.lookups = 0

    async def coordinator_lookup(self, kind, group):
        self.lookups += 1
        raise Errors.GroupCoordinatorNotAvailableError()

    async def force_metadata_update(self) -> bool:
        return True

    async def ready(self, node_id, group=None) -> bool:
        return True


def _coordinator(*, closing: bool, rebalance_timeout_ms: int = 30000) -> KassignGroupCoordinator:
    c = KassignGroupCoordinator.__new__(KassignGroupCoordinator)
    c.group_id = "g"
    c.generation, c.member_id = 3, "m-1"
    c.coordinator_id = None if closing else 1
    c._client = _Client()
    c._closing = create_future()
    if closing:
        c._closing.set_result(None)
    c._commit_lock = asyncio.Lock()
    c._retry_backoff_ms = 20
    c._rebalance_timeout_ms = rebalance_timeout_ms
    c._commit_response_for = None
    c._commit_reset_wanted = False
    c._member_id_kept = False
    c._joining = False
    c._rejoin_needed_fut = create_future()
    c._init_commit_guard()
    c.sent = []
    return c


@pytest.mark.asyncio
async def test_a_commit_issued_before_a_generation_reset_is_never_sent_after_it() -> None:
    async def drive():
        c = _coordinator(closing=False)

        async def record(assignment, offsets):
            c.sent.append((c.generation, c.member_id, dict(offsets)))

        c._do_commit_offsets = record
        async with c._commit_lock:  # the commit waits (a zombie just resumed, a commit in flight)
            pending = asyncio.ensure_future(c.commit_offsets(None, {"tp": 5}))
            await asyncio.sleep(0.01)
            c.reset_generation()  # its heartbeat learns it was removed
            c.generation, c.member_id = 5, "m-2"  # and it rejoins as a new member
        with pytest.raises(Errors.CommitFailedError, match="generation was reset"):
            await pending
        await c.commit_offsets(None, {"tp": 7})  # a commit issued now goes out
        return c.sent

    assert await drive() == [(5, "m-2", {"tp": 7})]


@pytest.mark.asyncio
async def test_a_closing_members_commit_gives_up_after_the_rebalance_timeout() -> None:
    async def drive():
        c = _coordinator(closing=True, rebalance_timeout_ms=200)

        async def no_coordinator(assignment, offsets):
            raise Errors.GroupCoordinatorNotAvailableError()

        c._do_commit_offsets = no_coordinator
        began = time.monotonic()
        with pytest.raises(Errors.GroupCoordinatorNotAvailableError):
            await asyncio.wait_for(c.commit_offsets(None, {"tp": 1}), 5)
        return time.monotonic() - began, c._client.lookups

    took, lookups = await drive()
    assert 0.2 <= took < 2 and lookups >= 2  # it kept looking the coordinator up while closing
