"""Offset commits that never stall a poll loop through a rebalance.

aiokafka sends commits on the group coordinator connection, which a broker answers in order: during
a rebalance a commit waits there behind the JoinGroup the broker holds (0.85-1.0 s measured on
Tansu; kassign's classic consumer sends it beside the JoinGroup, but behind a SyncGroup it still
waits), and a poll loop that awaits it stops processing the partitions it keeps. So periodic commits
go out in the background, at most one in flight, and a commit that must be done before going on
(revoked partitions, closing) waits for that one first, so an older commit never lands after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["SerialCommitter"]


class SerialCommitter:
    """Sends commits through ``send`` (which handles the commit's own errors), one at a time."""

    def __init__(self, send: Callable[[dict[Any, int]], Coroutine[Any, Any, None]], name: str) -> None:
        self._send = send
        self._name = name
        self._in_flight: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """A background commit is in flight: the caller's periodic commit skips this tick (the next
        tick commits the newer offsets)."""
        return self._in_flight is not None and not self._in_flight.done()

    def commit_in_background(self, offsets: dict[Any, int]) -> None:
        """Send ``offsets`` without waiting for the answer; call only when not :attr:`busy`."""
        if self.busy:
            raise RuntimeError(f"{self._name}: a background commit is still in flight")
        if offsets:
            self._in_flight = asyncio.create_task(self._send(offsets), name=f"commit-{self._name}")

    async def wait(self) -> None:
        """Until the background commit in flight (if any) is answered."""
        task, self._in_flight = self._in_flight, None
        if task is not None:
            await task

    async def commit_now(self, offsets: dict[Any, int]) -> None:
        """Commit ``offsets`` once the background commit in flight (if any) is answered."""
        await self.wait()
        if offsets:
            await self._send(offsets)
