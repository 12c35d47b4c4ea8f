"""The churn runner's diagnosis and healing of Tansu's leaderless-group defect (issue 9, seed 36).

A group's leader sends LeaveGroup while the group is forming (between its JoinGroup and its
SyncGroup); Apache Kafka makes another member the leader, Tansu 0.6.0 keeps the departed one, so every
later round fails. Raw protocol requests stand in for the members (a churn sequence hits this by chance).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from integration.churn import leaderless_group
from integration.topics import create_topic

aiokafka = pytest.importorskip("aiokafka")
from aiokafka.client import AIOKafkaClient  # noqa: E402
from aiokafka.coordinator.protocol import (  # noqa: E402
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.group import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest  # noqa: E402


class _Member:
    """One group member speaking the JoinGroup/SyncGroup protocol itself."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.client = AIOKafkaClient(bootstrap_servers=bootstrap)
        self.group, self.member_id = group, ""
        self.protocols = [("range", ConsumerProtocolMemberMetadata(0, [topic], b"").encode())]

    async def start(self) -> None:
        await self.client.bootstrap()
        self.node = await self.client.coordinator_lookup(0, self.group)

    async def join(self):
        while True:
            response = await self.client.send(self.node, JoinGroupRequest(
                self.group, 1500, 30000, self.member_id, None, "consumer", self.protocols))
            self.member_id = response.member_id or self.member_id
            if response.error_code != 79:  # MEMBER_ID_REQUIRED
                assert response.error_code == 0, response
                return response

    async def round(self) -> bool:
        """One JoinGroup/SyncGroup round (the leader assigns nothing to anyone); True when it synced."""
        joined = await self.join()
        empty = ConsumerProtocolMemberAssignment(0, [], b"").encode()
        assignments = [(m[0], empty) for m in joined.members] if joined.leader_id == self.member_id else []
        synced = await self.client.send(self.node, SyncGroupRequest(
            self.group, joined.generation_id, self.member_id, None, assignments))
        return synced.error_code == 0

    async def leave(self) -> None:
        await self.client.send(self.node, LeaveGroupRequest(self.group, self.member_id))


@pytest.mark.timeout(60)
def test_leader_leaving_a_forming_group_is_diagnosed_and_healed(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, f"leaderless-{uuid.uuid4().hex[:8]}", 2)
    group = f"leaderless-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[bool, str | None, bool]:
        leader, survivor = _Member(bootstrap, group, topic), _Member(bootstrap, group, topic)
        await leader.start()
        await survivor.start()
        joined = await leader.join()
        assert joined.leader_id == leader.member_id  # first in: the group's leader
        await leader.leave()  # before its SyncGroup: the group is still forming
        first = await survivor.round()
        diagnosis = await asyncio.to_thread(leaderless_group, bootstrap, group, evict=True)
        deadline, healed = time.monotonic() + 20, first
        while not healed and time.monotonic() < deadline:
            healed = await survivor.round()
        await survivor.leave()
        await leader.client.close()
        await survivor.client.close()
        return first, diagnosis, healed

    first, diagnosis, healed = asyncio.run(scenario())
    if first:  # a broker that hands leadership over (Apache Kafka): nothing to diagnose
        assert diagnosis is None
    else:  # Tansu: the departed member is still the leader, and the probe says so
        assert diagnosis is not None and "is not a member of the group" in diagnosis, diagnosis
    assert healed, "the survivor never completed a round"
