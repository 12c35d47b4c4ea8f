"""The opt-in fast follow-up in kassign's aiokafka coordinator, without a broker: when the leader
marks, when a member acts, that marked assignments stay readable by other clients' codecs, and
that nothing changes with the option off. (The broker test is in tests/integration.)"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("aiokafka")

from aiokafka.consumer.subscription_state import SubscriptionState  # noqa: E402
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment  # noqa: E402
from aiokafka.util import create_future  # noqa: E402

from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.adapters.aiokafka.coordinator import KassignGroupCoordinator  # noqa: E402
from kassign.adapters.aiokafka.group_protocol import member_metadata  # noqa: E402
from kassign.assignors import CooperativeStickyAssignor  # noqa: E402
from kassign.membership import FollowUpPolicy, mark_assignments  # noqa: E402
from kassign.model import Assignment, RebalanceProtocol, TopicPartition  # noqa: E402
from kassign.protocol import decode_assignment, encode_assignment  # noqa: E402
from kassign.protocol.follow_up_mark import read_follow_up  # noqa: E402

COOPERATIVE, EAGER = RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER


def _bytes(parts, user_data=None) -> bytes:
    return encode_assignment(Assignment([TopicPartition("t", p) for p in parts], user_data))


def _marked_bytes(data: bytes, generation: int) -> bytes:
    return encode_assignment(mark_assignments({"m": decode_assignment(data)}, generation)["m"])


# -- the mark on the wire ----------------------------------------------------------------------


def test_marked_assignments_keep_partitions_and_the_assignor_user_data():
    plain = {"a": _bytes([0, 2]), "b": _bytes([1], b"delay-state"), "c": _bytes([])}
    marked = {m: _marked_bytes(data, 7) for m, data in plain.items()}
    for member, data in marked.items():
        before, after = decode_assignment(plain[member]), decode_assignment(data)
        assert after.partitions == before.partitions
        assert read_follow_up(after.user_data) == (7, before.user_data)


def test_marked_assignments_decode_with_the_plain_consumer_protocol_struct():
    # aiokafka's v0 ConsumerProtocol struct reads what Java's and librdkafka's readers read: the
    # partitions, then user data as opaque bytes.
    data = _marked_bytes(_bytes([3, 1]), 4)
    decoded = ConsumerProtocolMemberAssignment.decode(data)
    assert [(t, sorted(ps)) for t, ps in decoded.assignment] == [("t", [1, 3])]
    assert read_follow_up(decoded.user_data) == (4, None)


# -- the rules -----------------------------------------------------------------------------------


def test_leader_marks_only_cooperative_rounds_that_withhold_partitions():
    on, off = FollowUpPolicy(True), FollowUpPolicy(False)
    withheld = {TopicPartition("t", 0): "m2"}
    assert on.leader_marks(True, withheld, 3)
    assert not on.leader_marks(True, {}, 5) and not on.leader_marks(True, None, 5)
    assert not on.leader_marks(False, withheld, 5)
    assert not off.leader_marks(True, withheld, 5)


def test_leader_marks_one_generation_withholding_again_not_two():
    """Generation 4 withholding p1 again with the same members: p1's owner did not hear of 3 in time
    (on Kafka its SyncGroup lost the race with the early rejoiners); marked once more. Generation 5
    doing it again: unmarked, so a broker without a join barrier gets no storm. A generation
    withholding fewer partitions than the one before (some owners revoked), one with a new member, or
    one withholding only new partitions, is marked."""
    leader = FollowUpPolicy(True)
    p0, p1, p2 = (TopicPartition("t", p) for p in range(3))
    both = {p0: "m2", p1: "m2"}
    assert leader.leader_marks(True, both, 3, ["m1", "m2"])
    assert leader.leader_marks(True, both, 4, ["m1", "m2"])  # withheld again: marked once
    assert not leader.leader_marks(True, both, 5, ["m1", "m2"])  # and again: unmarked
    assert leader.leader_marks(True, {p1: "m2"}, 7, ["m1", "m2"])  # not right after a marked one
    assert leader.leader_marks(True, {p1: "m2"}, 8, ["m1", "m2"])  # again once
    assert leader.leader_marks(True, {p1: "m3"}, 9, ["m1", "m2", "m3"])  # a new member: marked
    assert leader.leader_marks(True, {p2: "m3"}, 10, ["m1", "m2", "m3"])  # new partitions only: marked
    assert leader.leader_marks(True, {p2: "m1"}, 11, ["m1", "m3"])  # withheld again once
    assert not leader.leader_marks(True, {p2: "m1"}, 12, ["m1", "m3"])


def test_leader_keeps_marking_while_fewer_partitions_are_withheld():
    """A slow member can miss two rounds in a row (its SyncGroup overtaken each time) while the
    others revoke: the withheld set shrinks, the group is not stuck, so the leader keeps marking
    (unmarked, the third round waited a heartbeat interval: 2.2 partition-seconds in a 6-member run
    whose others took 0.2). Once it stops shrinking, the old bound applies."""
    leader = FollowUpPolicy(True)
    p0, p1, p2 = (TopicPartition("t", p) for p in range(3))
    members = ["m1", "m2", "m3"]
    assert leader.leader_marks(True, {p0: "m3", p1: "m3", p2: "m3"}, 3, members)
    assert leader.leader_marks(True, {p1: "m3", p2: "m3"}, 4, members)  # p0's owner revoked
    assert leader.leader_marks(True, {p2: "m3"}, 5, members)  # p1's too
    assert leader.leader_marks(True, {p2: "m3"}, 6, members)  # stuck: marked once more
    assert not leader.leader_marks(True, {p2: "m3"}, 7, members)  # and no further


def test_member_acts_once_per_marked_generation():
    policy = FollowUpPolicy(True)
    assert policy.should_rejoin(5)
    assert not policy.should_rejoin(5)  # the same mark again
    assert policy.should_rejoin(6)  # the generation right after: the leader marked it, so it is new work
    assert not policy.should_rejoin(4)  # an older mark
    assert policy.should_rejoin(9)
    assert FollowUpPolicy(True).should_rejoin(0)
    assert not FollowUpPolicy(False).should_rejoin(9)


def test_withheld_partitions_are_what_the_cooperative_assignor_reports():
    assignor = CooperativeStickyAssignor()
    counts = {"t": 6}
    subs = {m: _subscription(assignor, []) for m in ("m1", "m2")}
    first = assignor.assign(counts, subs)
    assert not assignor.partitions_transferring_ownership  # a fresh group moves nothing: no mark
    owned = {"m1": first["m1"] + first["m2"], "m2": []}  # m2 restarted empty: half of m1's must move
    subs = {m: _subscription(assignor, owned[m], generation=1) for m in owned}
    subs["m3"] = _subscription(assignor, [])
    assignor.assign(counts, subs)
    assert FollowUpPolicy(True).leader_marks(True, assignor.partitions_transferring_ownership, 2)


def _subscription(assignor, owned, generation=-1):
    from kassign.protocol import decode_subscription

    return decode_subscription(member_metadata(assignor, ["t"], owned=owned, generation=generation))


# -- the coordinator ---------------------------------------------------------------------------


class _Assignor:
    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def __init__(self):
        self.user_data = []

    def on_assignment(self, partitions, generation):
        pass

    def on_assignment_user_data(self, user_data):
        self.user_data.append(user_data)

    rejoin_after_s = None


class _Offline(KassignGroupCoordinator):
    """The coordinator's member logic without aiokafka's network setup."""

    def __init__(self, fast_follow_up: bool, protocol=COOPERATIVE):  # noqa: D107 - skips network setup
        subscription = SubscriptionState()
        subscription.subscribe({"t"})
        self._subscription = subscription
        self._assignors = (_Assignor(),)
        self._protocol = protocol
        self._init_member_state(fast_follow_up)
        self._enable_auto_commit = False
        self._commit_refresh_task = None
        self._rebalance_timeout_ms = 30000
        self._retry_backoff_ms = 10
        self._commit_lock = asyncio.Lock()
        self.group_id = "g"
        self.generation = 1
        self.member_id = "m-1"

    async def _maybe_refresh_commit_offsets(self, assignment):
        return True

    def rejoin_requested(self) -> bool:
        return self._rejoin_needed_fut.done()

    def clear_rejoin(self) -> None:
        self._rejoin_needed_fut = create_future()


async def _sync(member: _Offline, generation: int, parts, mark: int | None, user_data=None) -> bool:
    """Hand ``member`` one SyncGroup answer; whether it asked to rejoin."""
    member.clear_rejoin()
    data = _bytes(parts, user_data)
    if mark is not None:
        data = _marked_bytes(data, mark)
    await member._on_join_complete(generation, "m-1", "cooperative-sticky", data)
    await asyncio.sleep(0)
    return member.rejoin_requested()


@pytest.mark.asyncio
async def test_marked_member_with_nothing_to_revoke_rejoins_at_once_only_when_on():
    async def drive(fast):
        member = _Offline(fast)
        first = await _sync(member, 1, [0, 1], None)
        kept_only = await _sync(member, 2, [0, 1], 2)  # kept everything; the round withheld elsewhere
        return first, kept_only, member._assignors[0].user_data

    assert await drive(True) == (False, True, [None, None])
    assert await drive(False) == (False, False, [None, None])  # option off: waits for a heartbeat


@pytest.mark.asyncio
async def test_mark_is_stripped_before_the_assignor_sees_its_user_data():
    async def drive():
        member = _Offline(False)
        await _sync(member, 1, [0], 1, user_data=b"delay-state")
        return member._assignors[0].user_data

    assert await drive() == [b"delay-state"]


@pytest.mark.asyncio
async def test_member_acts_once_per_marked_generation_and_revokers_rejoin_anyway():
    async def drive():
        member = _Offline(True)
        out = [await _sync(member, 1, [0, 1, 2], None)]
        out.append(await _sync(member, 2, [0, 1, 2], 2))  # acts on the mark
        out.append(await _sync(member, 3, [0, 1, 2], 3))  # marked again right after (new work): acts
        out.append(await _sync(member, 3, [0, 1, 2], 3))  # the same generation's mark again: waits
        out.append(await _sync(member, 4, [0, 1], None))  # revokes 2: rejoins as KIP-429 says, mark or not
        out.append(await _sync(member, 5, [0, 1], None))
        out.append(await _sync(member, 6, [0, 1], 2))  # an old generation's mark: waits
        return out

    assert await drive() == [False, True, True, False, True, False, False]


@pytest.mark.asyncio
async def test_unmarked_and_eager_assignments_never_trigger_a_follow_up():
    async def drive(protocol, mark):
        member = _Offline(True, protocol)
        await _sync(member, 1, [0], None)
        return await _sync(member, 2, [0], mark)

    assert await drive(COOPERATIVE, None) is False
    assert await drive(EAGER, 2) is False


@pytest.mark.asyncio
async def test_leader_marks_every_assignment_of_a_round_that_withholds():
    async def lead(fast, owned):
        assignor = CooperativeStickyAssignor()
        leader = _Offline(fast)
        leader._lookup_assignor = lambda name: assignor
        leader._cluster = SimpleNamespace(partitions_for_topic=lambda t: set(range(4)), broker_metadata=lambda n: None)

        async def no_wait():
            return None

        leader._client = SimpleNamespace(set_topics=lambda topics: None, _maybe_wait_metadata=no_wait)
        leader._get_metadata_snapshot = lambda: {}
        members = [
            (m, member_metadata(assignor, ["t"], owned=parts, generation=1 if parts else -1))
            for m, parts in owned.items()
        ]
        leader.generation = 2
        out = await leader._perform_assignment(SimpleNamespace(group_protocol="cooperative-sticky", members=members))
        return {m: read_follow_up(decode_assignment(data).user_data)[0] for m, data in out.items()}

    tps = [TopicPartition("t", p) for p in range(4)]
    joiner = {"a": tps, "b": []}  # a must give two partitions to b: withheld this round
    assert await lead(True, joiner) == {"a": 2, "b": 2}
    assert await lead(False, joiner) == {"a": None, "b": None}
    settled = {"a": tps[:2], "b": tps[2:]}  # nothing moves: no mark, no extra round
    assert await lead(True, settled) == {"a": None, "b": None}


@pytest.mark.asyncio
async def test_cooperative_consumer_passes_the_option_and_defaults_it_on():
    async def build(**kwargs):
        return CooperativeConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", **kwargs)

    assert (await build())._kassign_fast_follow_up is True
    assert (await build(fast_follow_up=False))._kassign_fast_follow_up is False
