"""Helpers for aiokafka consumers that run inside the test process (not group-driver subprocesses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kassign.adapters.aiokafka.live_group import ownership_settled, wait_stable


async def wait_consumers_settled(consumers: Sequence[Any], partitions: set, timeout: float = 40.0,
                                 stable_for: float = 1.0) -> list[set]:
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
