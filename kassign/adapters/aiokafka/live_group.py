"""What an application's aiokafka consumers do beside reading records, shared by ``kassign demo``
(:mod:`kassign.demo.group`) and the integration members and tests: the generation a consumer is in,
its partitions' positions for a progress report, whether a group's ownership has settled, and
waiting until that holds for a while. Commits that never stall a poll loop are
:class:`~kassign.adapters.aiokafka.commits.SerialCommitter`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any

from aiokafka.errors import KafkaError

__all__ = ["consumer_generation", "positions", "ownership_settled", "wait_stable"]


def consumer_generation(consumer: Any) -> int:
    """The group generation ``consumer`` is in (-1 before its first join, or when it has none)."""
    return int(getattr(getattr(consumer, "_coordinator", None), "generation", -1))


async def positions(consumer: Any, partitions: Iterable[Any], timeout: float = 0.2) -> dict[str, int]:
    """``"topic:partition"`` -> the consumer's position, for the partitions whose position it knows
    within ``timeout`` seconds (none right after an assignment, nor for a partition that just moved
    away). Asked together: one by one, partitions just assigned would hold a poll loop ``timeout`` each."""
    asked = sorted(partitions)

    async def position(tp: Any) -> int | None:
        try:
            return await asyncio.wait_for(consumer.position(tp), timeout)
        except (TimeoutError, KafkaError, AssertionError, ValueError):
            return None

    found = await asyncio.gather(*(position(tp) for tp in asked))
    return {f"{tp.topic}:{tp.partition}": p for tp, p in zip(asked, found) if p is not None}


def ownership_settled(owned: Iterable[Collection[Any]], partitions: Collection[Any]) -> bool:
    """Whether the members' ``owned`` partitions (one collection per live member) cover ``partitions``
    exactly once, nothing else, and every member owns some (when there are at least as many
    partitions as members). No member: not settled."""
    owned = list(owned)
    if not owned:
        return False
    counts = Counter(tp for parts in owned for tp in parts)
    if set(counts) != set(partitions) or any(n != 1 for n in counts.values()):
        return False
    return len(partitions) < len(owned) or all(owned)


async def wait_stable(
    holds: Callable[[], bool], timeout: float, *, stable_for: float, poll: float = 0.05
) -> float | None:
    """Poll ``holds`` until it has returned true for ``stable_for`` seconds on end; returns the wall
    clock time it began to hold, or None when that did not happen within ``timeout`` seconds.
    Whatever ``holds`` raises (a member that failed, say) ends the wait."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    since_wall = 0.0
    while True:
        if holds():
            if since is None:
                since, since_wall = time.monotonic(), time.time()
            if time.monotonic() - since >= stable_for:
                return since_wall
        else:
            since = None
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(poll)
