"""The live-group helpers shared by kassign demo and the integration members (no broker)."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka import TopicPartition as TP  # noqa: E402
from aiokafka.errors import KafkaError  # noqa: E402

from kassign.adapters.aiokafka.live_group import (  # noqa: E402
    consumer_generation,
    ownership_settled,
    positions,
    wait_stable,
)

A0, A1, A2 = TP("a", 0), TP("a", 1), TP("a", 2)


def test_settled_means_every_partition_once_nothing_else_and_every_member_owning_some():
    assert ownership_settled([{A0, A1}, {A2}], {A0, A1, A2})
    assert not ownership_settled([], {A0})
    assert not ownership_settled([{A0, A1}, {A1, A2}], {A0, A1, A2})  # A1 owned twice
    assert not ownership_settled([{A0}, {A1}], {A0, A1, A2})  # A2 owned by nobody
    assert not ownership_settled([{A0, A1, A2, TP("b", 0)}, {TP("a", 3)}], {A0, A1, A2})  # other partitions
    assert not ownership_settled([{A0, A1, A2}, set()], {A0, A1, A2})  # a member owns nothing
    assert ownership_settled([{A0}, set()], {A0})  # more members than partitions: idle ones are fine


class _Consumer:
    def __init__(self, known: dict) -> None:
        self.known = known

    async def position(self, tp):
        value = self.known[tp]
        if isinstance(value, BaseException):
            raise value
        if value is None:
            await asyncio.sleep(10)
        return value


@pytest.mark.asyncio
async def test_positions_keep_the_known_ones_within_the_timeout():
    consumer = _Consumer({A0: 5, A1: None, A2: KafkaError()})
    started = time.monotonic()
    assert await positions(consumer, {A2, A1, A0}, timeout=0.1) == {"a:0": 5}
    assert time.monotonic() - started < 1.0  # asked together, not one after another


def test_generation_of_a_consumer_without_a_coordinator_is_minus_one():
    class Coordinator:
        generation = 7

    class Consumer:
        _coordinator = Coordinator()

    assert consumer_generation(object()) == -1
    assert consumer_generation(Consumer()) == 7


@pytest.mark.asyncio
async def test_wait_stable_returns_when_the_condition_began_to_hold_or_none():
    calls: list[float] = []

    def holds() -> bool:
        calls.append(time.time())
        return len(calls) >= 3

    began = await wait_stable(holds, 5.0, stable_for=0.05, poll=0.01)
    assert began is not None and began >= calls[2] - 1e-3
    assert await wait_stable(lambda: False, 0.05, stable_for=0.0, poll=0.01) is None


@pytest.mark.asyncio
async def test_what_the_condition_raises_ends_the_wait():
    def failed() -> bool:
        raise RuntimeError("member m1 failed")

    with pytest.raises(RuntimeError, match="m1"):
        await wait_stable(failed, 5.0, stable_for=0.1)
