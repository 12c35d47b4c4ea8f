"""The demo member's commits: periodic ones in the background (at most one in flight), the one
for revoked partitions only after the commit in flight. No broker: the consumer is a stand-in."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiokafka")

from aiokafka import TopicPartition as TP  # noqa: E402

from kassign.demo.group import DemoGroup, DemoMember  # noqa: E402


class SlowCommits:
    """Records each commit when sent and when answered; answers only when ``release`` is set."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict]] = []
        self.release = asyncio.Event()

    async def commit(self, offsets):
        self.log.append(("sent", dict(offsets)))
        await self.release.wait()
        self.log.append(("answered", dict(offsets)))


def _member() -> tuple[DemoMember, SlowCommits]:
    group = DemoGroup("127.0.0.1:9", "g", "t", 2, object, protocol_name="test")
    member = DemoMember("m1", group)
    member.consumer = SlowCommits()
    return member, member.consumer


@pytest.mark.asyncio
async def test_background_commit_never_blocks_and_stays_single():
    async def scenario():
        member, consumer = _member()
        member.next_offsets = {TP("t", 0): 5, TP("t", 1): 7}
        member.commit_in_background()  # returns at once although the commit is not answered
        await asyncio.sleep(0)
        member.next_offsets[TP("t", 0)] = 9
        member.commit_in_background()  # one still in flight: no second one
        await asyncio.sleep(0)
        assert consumer.log == [("sent", {TP("t", 0): 5, TP("t", 1): 7})]
        consumer.release.set()
        await member.committer.wait()
        member.commit_in_background()
        await member.committer.wait()
        assert consumer.log[-1] == ("answered", {TP("t", 0): 9, TP("t", 1): 7})

    await scenario()


@pytest.mark.asyncio
async def test_revocation_commit_waits_for_the_commit_in_flight():
    async def scenario():
        member, consumer = _member()
        member.next_offsets = {TP("t", 0): 5, TP("t", 1): 7}
        member.commit_in_background()
        await asyncio.sleep(0)
        member.next_offsets[TP("t", 1)] = 8
        revoking = asyncio.create_task(member.commit([TP("t", 1)]))
        await asyncio.sleep(0.01)
        assert [kind for kind, _ in consumer.log] == ["sent"]  # the older commit goes first, alone
        assert TP("t", 1) not in member.next_offsets  # no later background commit can carry it
        consumer.release.set()
        await revoking
        first = {TP("t", 0): 5, TP("t", 1): 7}
        assert consumer.log == [
            ("sent", first),
            ("answered", first),
            ("sent", {TP("t", 1): 8}),
            ("answered", {TP("t", 1): 8}),
        ]

    await scenario()
