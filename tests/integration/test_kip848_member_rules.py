"""The KIP-848 member's rules that only Apache Kafka's group coordinator exercises (Java's
``ConsumerMembershipManager`` behaves the same way):

* every new target is acknowledged, even one equal to what the member owns: a member whose target
  grew (a new topic matching its regex, not yet nameable by the client) and shrank back (a second
  member took that topic) before it reconciled answers the broker's revocation request at once; the
  new topic's partitions do not stay with nobody until the rebalance timeout fences the member;
* a leave answered GROUP_ID_NOT_FOUND (the member left before its group existed) does not stop the
  member from subscribing again;
* on a broker with ACLs: a group authorization failure (heartbeat or FindCoordinator refused) raises
  aiokafka's ``GroupAuthorizationFailedError`` on both protocols; a topic authorization failure
  raises ``TopicAuthorizationFailedError`` once and the member recovers when the ACL goes.

    KASSIGN_BROKER=kafka python -m pytest tests/integration/test_kip848_member_rules.py
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.errors import KafkaError  # noqa: E402
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost, wait_until  # noqa: E402
from integration.group_config import set_consumer_group_timing  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.membership.consumer_group import LEAVE_EPOCH, ConsumerGroupMember, MemberState  # noqa: E402
from kassign.protocol import AiokafkaRequest  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(300)]

#: The member's rebalance timeout (its max poll interval): how long the broker waits for a revocation
#: before it fences the member -- the time the stuck partitions waited before the fix.
REBALANCE_TIMEOUT_MS = 45_000


async def _poll(consumer: CooperativeConsumer, until: float) -> None:
    """Poll ``consumer`` (keeping its poll timer alive) until ``until`` (monotonic)."""
    while time.monotonic() < until:
        await consumer.getmany(timeout_ms=100)


@contextlib.asynccontextmanager
async def _polled(consumer: CooperativeConsumer):
    """Start ``consumer`` and poll it in the background while the body runs; stop it after."""
    await consumer.start()
    task = asyncio.ensure_future(_poll(consumer, float("inf")))
    try:
        yield consumer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()


@pytest.mark.asyncio
@pytest.mark.consumer_protocol
async def test_a_target_that_grows_and_shrinks_back_is_acknowledged(bootstrap_servers, group_id, topic_factory):
    """m1 (regex ``prefix-.*``) owns x. Topic y is created: the broker assigns y to m1 too, but m1's
    client cannot name y yet (aiokafka matches the pattern on its own metadata, refreshed every 5
    min). m2 joins subscribed to y: the broker takes y back from m1 -- a target equal to what m1 owns
    -- and waits for m1's owned partitions without y before giving y to m2."""
    prefix = f"grow-{group_id[-8:]}"
    x = topic_factory(2, f"{prefix}-x")
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)

    async def scenario() -> tuple[float, float, set]:
        m1 = CooperativeConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            group_protocol="consumer",
            max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
        )
        m1.subscribe(pattern=f"{prefix}-.*", listener=ListenerCallsWithLost())
        async with _polled(m1):
            member = m1._coordinator.member
            await wait_until(lambda: m1.assignment() == {TP(x, 0), TP(x, 1)}, 30, "m1 owning x")
            y = topic_factory(2, f"{prefix}-y")
            # The broker resolves regexes again at most every few seconds: wait for y in m1's target.
            await wait_until(lambda: member.target is not None and len(member.target) == 4, 60, "y in m1's target")
            assert m1.assignment() == {TP(x, 0), TP(x, 1)}, "m1 named y: the scenario needs it unnameable"
            m2 = CooperativeConsumer(bootstrap_servers=bootstrap_servers, group_id=group_id, group_protocol="consumer")
            m2.subscribe([y], listener=ListenerCallsWithLost())
            joined = time.monotonic()
            async with _polled(m2):
                try:
                    await wait_until(
                        lambda: m2.assignment() == {TP(y, 0), TP(y, 1)}, REBALANCE_TIMEOUT_MS / 1000 + 15, "m2 owning y"
                    )
                finally:
                    unowned = time.monotonic() - joined
                owned_by_m1 = m1.assignment()
            return unowned, REBALANCE_TIMEOUT_MS / 1000, owned_by_m1

    unowned, timeout, owned_by_m1 = await scenario()
    print(
        f"\nKIP-848: y's partitions unowned for {unowned:.2f} s after m2 joined "
        f"(m1's rebalance timeout {timeout:.0f} s)"
    )
    assert unowned < 10, f"y stayed with nobody for {unowned:.1f} s: m1 never acknowledged the target"
    assert owned_by_m1 == {TP(x, 0), TP(x, 1)}, "m1 was fenced instead of acknowledging"


@pytest.mark.asyncio
@pytest.mark.consumer_protocol
async def test_group_id_not_found_answering_a_leave_lets_the_member_subscribe_again(
    bootstrap_servers, group_id, topic_factory
):
    """A member that subscribed and left before its group existed: the coordinator answers the leave
    GROUP_ID_NOT_FOUND (asked here on a live consumer's coordinator connection, for a group nobody
    joined); the member takes it as the end of a leave, not a fatal error, and can subscribe again."""
    topic = topic_factory(1)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=10000, heartbeat_ms=500)

    async def scenario() -> tuple[int, MemberState, list, MemberState]:
        consumer = CooperativeConsumer(
            bootstrap_servers=bootstrap_servers, group_id=group_id, group_protocol="consumer"
        )
        consumer.subscribe([topic], listener=ListenerCallsWithLost())
        async with _polled(consumer):
            await wait_until(lambda: consumer.assignment() == {TP(topic, 0)}, 30, "owning the topic")
            member = ConsumerGroupMember(f"{group_id}-never-joined")
            member.subscribe([topic])
            member.leave()
            member.leave_prepared()
            leave = member.build_heartbeat()
            assert leave is not None and leave.member_epoch == LEAVE_EPOCH
            response = await consumer._coordinator._send_req(AiokafkaRequest(leave))
            member.on_heartbeat_response(response)
            left = member.state
            again = member.subscribe([topic])
            return response.error_code, left, again, member.state

    code, left, again, state = await scenario()
    assert code == 69, f"expected GROUP_ID_NOT_FOUND (69), the coordinator answered {code}"
    assert left is MemberState.UNSUBSCRIBED and again == [] and state is MemberState.JOINING


# -- authorization failures (#26 item 7, and item 3 on the broker): a broker with ACLs ------------------------

#: Every request is from User:ANONYMOUS (PLAINTEXT); a resource without ACLs stays open to it, so a DENY
#: on one group or topic refuses just that (the cluster's own traffic has no ACL against it).
ACL_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture(scope="module")
def acl_broker(kafka_broker):
    if kafka_broker.kind != "kafka":
        pytest.skip(
            f"a broker with an authorizer needs Apache Kafka from jars; the session broker is {kafka_broker.kind}"
        )
    from kassign.broker import start_kafka

    with start_kafka(version=kafka_broker.version, settings=ACL_SETTINGS) as info:
        yield info


def _deny(bootstrap: str, resource: str, name: str, operation: str, *, remove: bool = False) -> None:
    """Add (or remove) a DENY ``operation`` ACL for User:ANONYMOUS on the group or topic ``name``."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    kind = ResourceType.GROUP if resource == "group" else ResourceType.TOPIC
    args = (
        kind,
        name,
        ResourcePatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        getattr(AclOperation, operation),
        AclPermissionType.DENY,
    )
    futures = admin.delete_acls([AclBindingFilter(*args)]) if remove else admin.create_acls([AclBinding(*args)])
    for future in futures.values():
        future.result(timeout=30)
    time.sleep(1.0)  # the ACL reaches the broker through the metadata log


@pytest.mark.asyncio
@pytest.mark.parametrize("operation", ["READ", "ALL"], ids=["heartbeat/join refused", "FindCoordinator refused"])
async def test_a_group_authorization_failure_is_aiokafkas_error_on_both_protocols(
    acl_broker, group_id, group_protocol, operation, caplog
):
    """DENY READ on the group refuses its heartbeat (JoinGroup on classic); DENY ALL refuses even
    FindCoordinator. Either way getmany() raises aiokafka's GroupAuthorizationFailedError, whatever
    the protocol, and the consumer protocol logs no traceback."""
    from aiokafka.errors import GroupAuthorizationFailedError

    bootstrap = acl_broker.bootstrap
    topic = create_topic_on(bootstrap)
    _deny(bootstrap, "group", group_id, operation)

    async def scenario() -> BaseException | None:
        consumer = CooperativeConsumer(bootstrap_servers=bootstrap, group_id=group_id, group_protocol=group_protocol)
        await consumer.start()
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    await consumer.getmany(timeout_ms=200)
                except Exception as exc:  # noqa: BLE001 -- the class is what the test checks
                    return exc
            return None
        finally:
            with contextlib.suppress(KafkaError):  # the failed coordination may raise again on close
                await consumer.stop()

    raised = await scenario()
    assert isinstance(raised, GroupAuthorizationFailedError), f"{group_protocol}: raised {raised!r}"
    if group_protocol == "consumer":  # classic: aiokafka's coordinator may log "Task exception was never retrieved"
        assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.asyncio
@pytest.mark.consumer_protocol
async def test_a_topic_authorization_failure_is_raised_once_and_the_member_recovers(acl_broker, group_id):
    """DENY DESCRIBE on the subscribed topic: the heartbeat answers TOPIC_AUTHORIZATION_FAILED;
    getmany() raises aiokafka's TopicAuthorizationFailedError once, the member stays in the group,
    and when the ACL goes the member gets the topic's partitions (Java, KAFKA-18813)."""
    from aiokafka.errors import TopicAuthorizationFailedError

    bootstrap = acl_broker.bootstrap
    topic = create_topic_on(bootstrap)
    _deny(bootstrap, "topic", topic, "DESCRIBE")

    async def scenario() -> tuple[list[BaseException], set, float]:
        consumer = CooperativeConsumer(bootstrap_servers=bootstrap, group_id=group_id, group_protocol="consumer")
        await consumer.start()
        consumer.subscribe([topic])
        errors: list[BaseException] = []
        try:
            deadline = time.monotonic() + 20
            while not errors and time.monotonic() < deadline:
                try:
                    await consumer.getmany(timeout_ms=200)
                except TopicAuthorizationFailedError as exc:
                    errors.append(exc)
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: _deny(bootstrap, "topic", topic, "DESCRIBE", remove=True)
            )
            allowed = time.monotonic()
            deadline = allowed + 30
            while consumer.assignment() != {TP(topic, 0), TP(topic, 1)} and time.monotonic() < deadline:
                try:
                    await consumer.getmany(timeout_ms=200)
                except TopicAuthorizationFailedError as exc:  # a heartbeat answered before the ACL went
                    errors.append(exc)
            return errors, consumer.assignment(), time.monotonic() - allowed
        finally:
            await consumer.stop()

    errors, owned, took = await scenario()
    assert errors, "TOPIC_AUTHORIZATION_FAILED never reached the application"
    assert owned == {TP(topic, 0), TP(topic, 1)}, "the member did not recover once the ACL went"
    print(
        f"\nKIP-848: TOPIC_AUTHORIZATION_FAILED raised {len(errors)} time(s); partitions owned {took:.2f} s "
        "after the ACL went"
    )


def create_topic_on(bootstrap: str, partitions: int = 2) -> str:
    from integration.topics import create_topic

    return create_topic(bootstrap, f"t-acl-{time.monotonic_ns() % 10**10}", partitions)


# -- owned partitions while reconciling (#28: two owners at once in 96-member KIP-848 runs) ------------


@pytest.mark.asyncio
@pytest.mark.consumer_protocol
async def test_a_member_still_taking_partitions_is_asked_to_revoke_them(bootstrap_servers, group_id, topic_factory):
    """m1 is given all 4 partitions and is still taking them (its ``on_partitions_assigned`` runs) when
    m2 joins and its heartbeat fails, so the next one lists every field. The broker skips any revocation
    that heartbeat says is done: listing only what m1 had reconciled (nothing) would let it move m1 on
    and hand 2 of the 4 to m2 while m1 takes them. m1 lists them, so the broker asks m1 to revoke them
    and m2 gets them only after m1's acknowledgement. Raw heartbeats, so the order is exact."""
    from aiokafka.client import AIOKafkaClient, CoordinationType

    topic = topic_factory(4)
    # a new target at once (KIP-1263's interval would leave it to chance which heartbeat sees it first)
    set_consumer_group_timing(bootstrap_servers, group_id, session_ms=30000, heartbeat_ms=500, assignment_interval_ms=0)
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    try:
        for _ in range(100):  # a fresh broker creates __consumer_offsets on the first lookup
            with contextlib.suppress(KafkaError):
                coordinator = await client.coordinator_lookup(CoordinationType.GROUP, group_id)
                break
            await asyncio.sleep(0.1)

        async def beat(member: ConsumerGroupMember) -> None:
            request = member.build_heartbeat()
            assert request is not None, f"{member.member_id} sends no heartbeat in state {member.state.name}"
            member.on_heartbeat_response(await client.send(coordinator, AiokafkaRequest(request)))

        def owned(member: ConsumerGroupMember) -> set[int]:
            return {p.partition for p in member.owned}

        def target(member: ConsumerGroupMember) -> set[int]:
            return {p.partition for p in member.target or ()}

        m1 = ConsumerGroupMember(group_id, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, server_assignor="uniform")
        m2 = ConsumerGroupMember(group_id, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, server_assignor="uniform")
        m1.subscribe([topic])
        await beat(m1)
        assert target(m1) == {0, 1, 2, 3}, f"m1 alone should be given every partition, got {target(m1)}"
        taking = m1.maybe_reconcile(lambda _: topic)  # m1's on_partitions_assigned starts ...
        assert taking is not None and owned(m1) == set()
        m2.subscribe([topic])
        await beat(m2)  # ... m2 joins: the new target gives it 2 of m1's partitions, still with m1
        assert target(m2) == set(), f"m2 was given partitions m1 holds: {target(m2)}"
        m1.on_heartbeat_failure("a heartbeat lost on purpose")
        epoch_before = m1.member_epoch
        await beat(m1)  # the full heartbeat, while m1 is still taking all 4
        keep = target(m1)
        assert len(keep) == 2 and m1.member_epoch == epoch_before, (
            f"the broker moved m1 to epoch {m1.member_epoch} with {sorted(keep)} without a revocation"
        )
        await beat(m2)
        assert target(m2) == set(), f"m2 got {sorted(target(m2))} while m1 still takes them"

        assert m1.reconciliation_done(taking) and owned(m1) == {0, 1, 2, 3}  # m1 owns all 4 ...
        await beat(m1)
        giving = m1.maybe_reconcile(lambda _: topic)  # ... and revokes 2 of them
        assert giving is not None and {p.partition for p in giving.revoked} == {0, 1, 2, 3} - keep
        assert m1.reconciliation_done(giving)
        await beat(m1)  # the revocation's acknowledgement
        for _ in range(3):
            await beat(m2)
        assert target(m2) == {0, 1, 2, 3} - keep, f"m2 should now get m1's revoked partitions, got {target(m2)}"
    finally:
        await client.close()
