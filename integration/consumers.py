"""Helpers for aiokafka consumers that run inside the test process (not group-driver subprocesses)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from aiokafka import ConsumerRebalanceListener

from kassign.adapters.aiokafka.live_group import ownership_settled, wait_stable


class ListenerCalls(ConsumerRebalanceListener):
    """A rebalance listener as most applications write one -- no ``on_partitions_lost``, so lost
    partitions come to ``on_partitions_revoked`` -- recording each call as ``(kind, partitions)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, set]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.calls.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.calls.append(("assigned", set(assigned)))


class ListenerCallsWithLost(ListenerCalls):
    """:class:`ListenerCalls` with ``on_partitions_lost`` (recorded as ``("lost", partitions)``)."""

    def on_partitions_lost(self, lost: Any) -> None:
        self.calls.append(("lost", set(lost)))


async def wait_until(condition: Any, timeout: float, what: str, *, every: float = 0.05) -> None:
    """Return once ``condition()`` holds (checked every ``every`` seconds); AssertionError naming
    ``what`` after ``timeout`` seconds."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        await asyncio.sleep(every)


async def wait_consumers_settled(
    consumers: Sequence[Any], partitions: set, timeout: float = 40.0, stable_for: float = 1.0
) -> list[set]:
    """Wait until ``partitions`` have exactly one owner among ``consumers``, every consumer owns
    something, and that holds for ``stable_for`` seconds; returns each consumer's assignment, in order.

    Raises AssertionError with the last assignments when it does not happen within ``timeout`` seconds.
    """
    owned: list[set] = []

    def settled() -> bool:
        owned[:] = [set(c.assignment()) for c in consumers]
        return ownership_settled(owned, partitions)

    if await wait_stable(settled, timeout, stable_for=stable_for, poll=0.1) is None:
        raise AssertionError(f"group did not settle within {timeout}s: {[sorted(o) for o in owned]}")
    return owned


async def wait_consumers_held(
    consumers: Sequence[Any],
    partitions: Sequence[Any] | set,
    hold_s: float = 1.0,
    timeout: float = 60.0,
    *,
    balanced: bool = False,
) -> list[frozenset]:
    """Poll ``consumers`` (``getmany``, so their loops run as an application's would) until every one
    of ``partitions`` is owned once, every consumer owns something (``balanced``: shares within one
    of each other -- a cooperative group passes through fully owned, unbalanced states between its
    rounds), and that holds ``hold_s`` seconds; returns each consumer's assignment, in order.
    AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    since, last = None, None
    while time.monotonic() < deadline:
        owned = [frozenset(c.assignment()) for c in consumers]
        sizes = [len(o) for o in owned]
        done = (
            sorted(tp for o in owned for tp in o) == sorted(partitions)
            and all(owned)
            and (not balanced or max(sizes) - min(sizes) <= 1)
        )
        if done and owned == last:
            if time.monotonic() - since >= hold_s:
                return owned
        else:
            since = time.monotonic() if done else None
        last = owned
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
    raise AssertionError(f"no held assignment within {timeout}s: {last}")
