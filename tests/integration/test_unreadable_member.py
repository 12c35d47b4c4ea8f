"""A cooperative member whose JoinGroup metadata the leader cannot read must not make a partition
owned twice: the leader gives it nothing (it revokes what it owns), hands out no partition that a
readable member does not claim in that round, and the next round hands them out. On Apache Kafka,
with listeners checking ownership the moment each partition is added."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka import ConsumerRebalanceListener  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

GARBAGE = b"\x00\x03\xff\xff\xff"  # a v3 header and then nothing a subscription can be read from


class Owners(ConsumerRebalanceListener):
    """One live owner map for the whole group; a partition added while another member owns it is recorded."""

    def __init__(self, table: dict, name: str, doubles: list) -> None:
        self.table, self.name, self.doubles = table, name, doubles

    def on_partitions_assigned(self, assigned):
        for tp in assigned:
            if self.table.get(tp) not in (None, self.name):
                self.doubles.append((tp, self.table[tp], self.name))
            self.table[tp] = self.name

    def on_partitions_revoked(self, revoked):
        for tp in revoked:
            if self.table.get(tp) == self.name:
                del self.table[tp]

    on_partitions_lost = on_partitions_revoked


@pytest.mark.asyncio
async def test_unreadable_metadata_never_makes_a_partition_owned_twice(bootstrap_servers, group_id, topic_factory):
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}
    table: dict = {}
    doubles: list = []

    def member(name: str) -> CooperativeConsumer:
        c = CooperativeConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            client_id=name,
            partition_assignment_strategy=(CooperativeStickyAssignor,),
            session_timeout_ms=6000,
            heartbeat_interval_ms=250,
            auto_offset_reset="earliest",
        )
        c.subscribe([topic], listener=Owners(table, name, doubles))
        return c

    async def until(consumers, done, timeout=45.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
        raise AssertionError(f"timed out; owners {table}")

    async def scenario():
        leader, odd = member("leader"), member("odd")
        await leader.start()
        await until([leader], lambda: len(leader.assignment()) == 6)
        await odd.start()
        await until([leader, odd], lambda: len(leader.assignment()) == 3 and len(odd.assignment()) == 3)
        # From now on the odd member's JoinGroup metadata is unreadable (the leader is "leader").
        odd._coordinator.join_metadata = lambda assignor, topics: GARBAGE
        newcomer = member("newcomer")
        await newcomer.start()
        group = [leader, odd, newcomer]
        await until(
            group,
            lambda: (
                not odd.assignment()
                and set(leader.assignment()) | set(newcomer.assignment()) == partitions
                and len(leader.assignment()) == len(newcomer.assignment()) == 3
            ),
        )
        final = {c: set(c.assignment()) for c in group}
        for c in group:
            await c.stop()
        return final, (leader, odd, newcomer)

    final, (leader, odd, newcomer) = await scenario()
    assert not doubles, f"partitions added while another member owned them: {doubles}"
    assert final[odd] == set()
