"""Helpers for aiokafka consumers that run inside the test process (not group-driver subprocesses)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any


async def wait_consumers_settled(consumers: Sequence[Any], partitions: set, timeout: float = 40.0,
                                 stable_for: float = 1.0) -> list[set]:
    """Wait until ``partitions`` have exactly one owner among ``consumers``, every consumer owns
    something, and that holds for ``stable_for`` seconds; returns each consumer's assignment, in order.

    Raises AssertionError with the last assignments when it does not happen within ``timeout`` seconds.
    """
    deadline, since = time.monotonic() + timeout, None
    owned: list[set] = []
    while time.monotonic() < deadline:
        owned = [set(c.assignment()) for c in consumers]
        if set().union(*owned) == partitions and sum(map(len, owned)) == len(partitions) and all(owned):
            since = since or time.monotonic()
            if time.monotonic() - since >= stable_for:
                return owned
        else:
            since = None
        await asyncio.sleep(0.1)
    raise AssertionError(f"group did not settle within {timeout}s: {[sorted(o) for o in owned]}")
