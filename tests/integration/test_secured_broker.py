"""kassign's ``CooperativeConsumer`` on a secured Apache Kafka (``start_kafka(security="sasl-ssl")``:
SCRAM-SHA-512 over TLS, StandardAuthorizer, ACLs), on both group protocols:

* a group of two members rebalances cooperatively: the first member gives up only what the second
  gets, nothing is lost, every record is read;
* a user without READ on the group gets aiokafka's ``GroupAuthorizationFailedError``, and one without
  READ on the topic its ``TopicAuthorizationFailedError``: raised to the application, no traceback
  logged; the raises and log lines in 10 s of polling are counted, and a retry loop in the client
  (today: the refused auto-commits of the topic cases) is an expected failure naming the numbers;
* a wrong password fails ``start()`` at once (KafkaConnectionError) after one clear log line naming
  SaslAuthenticationFailed, invalid credentials and the mechanism;
* the settings ``kassign broker start --security ...`` prints work as they are.

Opt-in (the ``security`` marker, its own CI tier)::

    flock /tmp/broker-tests.lock python -m pytest -m security
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("aiokafka")

from aiokafka.errors import (  # noqa: E402
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.broker import BrokerInfo, start_kafka  # noqa: E402

pytestmark = [pytest.mark.security, pytest.mark.realkafka, pytest.mark.timeout(300)]

#: The users besides the super user admin: a member with its ACLs, and two with one READ missing.
USERS = ("member", "no-group-read", "no-topic-read")
#: Short KIP-848 heartbeats for the whole (throw-away) cluster: the admin sets no group configs here.
SETTINGS = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "10000"}
#: How long the tests keep polling after an authorization error, counting what comes.
WATCH_S = 10.0


@pytest.fixture(scope="module")
def secured(kafka_broker: BrokerInfo):
    if kafka_broker.kind != "kafka":
        pytest.skip(f"a secured broker needs Apache Kafka from jars; the session broker is {kafka_broker.kind}")
    with start_kafka(
        version=kafka_broker.version, security="sasl-ssl", users=dict.fromkeys(USERS), settings=SETTINGS
    ) as info:
        yield info


def _admin(info: BrokerInfo):  # noqa: ANN202
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": info.bootstrap, "log_level": 3, **info.security.librdkafka_settings()})


def _allow(info: BrokerInfo, user: str, resource: str, name: str, operation: str) -> None:
    """ALLOW ``operation`` on the topic or group ``name`` for ``User:user`` (as the super user)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    kind = ResourceType.GROUP if resource == "group" else ResourceType.TOPIC
    binding = AclBinding(
        kind,
        name,
        ResourcePatternType.LITERAL,
        f"User:{user}",
        "*",
        getattr(AclOperation, operation),
        AclPermissionType.ALLOW,
    )
    admin = _admin(info)  # held until the answers: a collected client destroys its handle mid-request
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)


def _topic(info: BrokerInfo, partitions: int = 4, records: int = 20) -> str:
    """A new topic (as admin) holding ``records`` records spread over its partitions."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    name = f"t-sec-{uuid.uuid4().hex[:8]}"
    admin = _admin(info)  # held until the answers (as above)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": info.bootstrap, "log_level": 3, **info.security.librdkafka_settings()})
    for i in range(records):
        producer.produce(name, str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return name


def _consumer(info: BrokerInfo, user: str, group_id: str, group_protocol: str, **overrides) -> CooperativeConsumer:
    timing = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 500} if group_protocol == "classic" else {}
    return CooperativeConsumer(
        bootstrap_servers=info.bootstrap,
        group_id=group_id,
        group_protocol=group_protocol,
        auto_offset_reset="earliest",
        **timing,
        **info.client_settings(user, **overrides),
    )


async def _poll_until(consumers, condition, timeout: float, seen: dict) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {[sorted(c.assignment()) for c in consumers]}")
        for consumer in consumers:
            for tp, records in (await consumer.getmany(timeout_ms=100)).items():
                seen.setdefault(tp, set()).update(r.offset for r in records)


@pytest.mark.asyncio
async def test_a_sasl_ssl_group_rebalances_cooperatively(secured, group_id, group_protocol):
    topic = _topic(secured)
    _allow(secured, "member", "topic", topic, "READ")
    _allow(secured, "member", "group", group_id, "READ")
    everything = {TP(topic, p) for p in range(4)}

    async def scenario():
        first_calls, second_calls = ListenerCallsWithLost(), ListenerCallsWithLost()
        first = _consumer(secured, "member", group_id, group_protocol)
        second = _consumer(secured, "member", group_id, group_protocol)
        seen: dict = {}
        await first.start()
        first.subscribe([topic], listener=first_calls)
        try:
            await _poll_until([first], lambda: first.assignment() == everything, 60, seen)
            await second.start()
            second.subscribe([topic], listener=second_calls)
            try:

                def shared() -> bool:
                    a, b = first.assignment(), second.assignment()
                    return a | b == everything and not a & b and len(a) == len(b) == 2

                began = time.monotonic()
                await _poll_until([first, second], shared, 60, seen)
                took = time.monotonic() - began
                await _poll_until([first, second], lambda: sum(len(o) for o in seen.values()) >= 20, 30, seen)
                # copies: stopping revokes what each member still owns
                return list(first_calls.calls), list(second_calls.calls), set(second.assignment()), seen, took
            finally:
                await second.stop()
        finally:
            await first.stop()

    first_calls, second_calls, moved, seen, took = await scenario()
    revoked = set().union(*(parts for kind, parts in first_calls if kind == "revoked"))
    assert revoked == moved, f"the first member revoked {sorted(revoked)}; the second got {sorted(moved)}"
    assert not [c for c in first_calls + second_calls if c[0] == "lost"]
    assert {tp: len(offsets) for tp, offsets in seen.items()} == {tp: 5 for tp in everything}
    print(
        f"\n{group_protocol} over SASL_SSL (SCRAM-SHA-512): second member's join to 2+2 partitions {took:.2f} s; "
        f"the first revoked only the 2 it handed over"
    )


async def _watch_errors(make_consumer, topic: str, watch_s: float) -> tuple[list[BaseException], int]:
    """Start, subscribe and poll as an application that logs an error and carries on would (getmany
    with a 200 ms timeout, a 200 ms pause after an error), until ``watch_s`` seconds after the first
    error; returns every raise and the number of getmany calls."""
    consumer = make_consumer()
    await consumer.start()
    consumer.subscribe([topic])
    raised: list[BaseException] = []
    calls, first_at = 0, None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < (first_at + watch_s if first_at else deadline):
            calls += 1
            try:
                await consumer.getmany(timeout_ms=200)
            except KafkaError as exc:
                raised.append(exc)
                first_at = first_at or time.monotonic()
                await asyncio.sleep(0.2)
    finally:
        with contextlib.suppress(KafkaError):  # a failed coordination may raise again on close
            await consumer.stop()
    return raised, calls


def _error_lines(caplog) -> tuple[list[logging.LogRecord], list[logging.LogRecord]]:
    """(records logged at WARNING or above, those with a traceback)."""
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    return loud, [r for r in loud if r.exc_info]


@pytest.mark.asyncio
@pytest.mark.parametrize("missing", ["group", "topic"])
async def test_a_user_without_read_gets_aiokafkas_authorization_error_without_a_retry_loop(
    secured, group_id, group_protocol, missing, caplog
):
    """``no-group-read`` may read the topic but not the group; ``no-topic-read`` may use the group and
    describe the topic but not read it. The error reaches the application as aiokafka's class, with no
    traceback logged; the client must not spin in a loop of its own (more than two warning/error log
    lines a second while watched)."""
    topic = _topic(secured, partitions=2, records=4)
    user = f"no-{missing}-read"
    if missing == "group":
        _allow(secured, user, "topic", topic, "READ")
        expected = GroupAuthorizationFailedError
    else:
        _allow(secured, user, "group", group_id, "READ")
        _allow(secured, user, "topic", topic, "DESCRIBE")
        expected = TopicAuthorizationFailedError
    caplog.set_level(logging.INFO)
    raised, calls = await _watch_errors(lambda: _consumer(secured, user, group_id, group_protocol), topic, WATCH_S)
    loud, tracebacks = _error_lines(caplog)
    kinds = sorted({type(e).__name__ for e in raised})
    messages = sorted({r.getMessage()[:100] for r in loud})
    summary = (
        f"{group_protocol}, no READ on the {missing}: {len(raised)} raise(s) of {kinds} in {calls} getmany "
        f"calls and {len(loud)} warning/error log line(s) {messages[:2]} in {WATCH_S:.0f} s after the first"
    )
    print("\n" + summary)
    assert raised and all(isinstance(e, expected) for e in raised), f"raised {raised!r}"
    assert not tracebacks, f"a traceback was logged: {tracebacks[0].getMessage()}"
    # aiokafka's fetcher warns once for each getmany() that raises the topic's refusal: the application's
    # pace, not the client's. Besides those, paced retries (FindCoordinator every ~0.8 s, a refused
    # auto-commit once an interval, as Java's) are not a loop; before the auto-commit was paced the topic
    # cases logged 81-85 lines in 10 s on the classic protocol and 263-271 on the consumer protocol
    # (50 getmany calls), after it 57 and 63, of which 51 and 52 the fetcher's.
    per_poll = [r for r in loud if r.name == "aiokafka.consumer.fetcher"]
    assert len(per_poll) <= calls + 2, f"more fetcher warnings than polls: {summary}"
    assert len(loud) - len(per_poll) <= 2 * WATCH_S + 2, f"a retry loop: {summary}"


@pytest.mark.asyncio
async def test_a_wrong_password_fails_start_with_one_clear_line(secured, group_id, group_protocol, caplog):
    topic = _topic(secured, partitions=1, records=0)
    caplog.set_level(logging.INFO)

    async def scenario() -> BaseException | None:
        consumer = _consumer(secured, "member", group_id, group_protocol, password="not-the-password")
        try:
            await consumer.start()
            consumer.subscribe([topic])
        except Exception as exc:  # noqa: BLE001 -- the class and text are what the test checks
            return exc
        finally:
            with contextlib.suppress(KafkaError):
                await consumer.stop()
        return None

    began = time.monotonic()
    raised = await scenario()
    took = time.monotonic() - began
    loud, tracebacks = _error_lines(caplog)
    print(
        f"\n{group_protocol}, wrong password: start() raised {type(raised).__name__} after {took:.1f} s "
        f"({raised}); {len(loud)} warning/error log line(s): {[r.getMessage() for r in loud][:3]}"
    )
    # aiokafka's bootstrap logs the broker's answer as one line and start() raises KafkaConnectionError
    # ("Unable to bootstrap from ..."): no retry, no traceback.
    assert isinstance(raised, KafkaConnectionError), f"start() raised {raised!r}"
    assert len(loud) == 1 and not tracebacks, [r.getMessage() for r in loud]
    line = loud[0].getMessage()
    assert "\n" not in line and "SaslAuthenticationFailed" in line and "invalid credentials" in line, line
    assert "SCRAM-SHA-512" in line, line
    assert took < 10


@pytest.mark.asyncio
async def test_the_printed_client_settings_work_as_they_are(tmp_path, kafka_broker):
    """``kassign broker start --security ssl|sasl-scram``: the printed keyword arguments, pasted into a
    ``CooperativeConsumer`` (and an admin client), reach the cluster as admin."""
    if kafka_broker.kind != "kafka":
        pytest.skip("needs Apache Kafka from jars")
    env = {**os.environ, "KASSIGN_RUN_DIR": str(tmp_path)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kassign.cli", "broker", *args], capture_output=True, text=True, timeout=240, env=env
        )

    for mode in ("ssl", "sasl-scram"):
        started = cli("start", "--security", mode, "--version", kafka_broker.version, "--user", "alice")
        try:
            assert started.returncode == 0, started.stderr
            lines = started.stdout.splitlines()
            at = next(
                i
                for i, line in enumerate(lines)
                if line.startswith("CooperativeConsumer / aiokafka settings for admin")
            )
            pasted = []
            for line in lines[at + 1 :]:
                if not line.startswith("  "):
                    break
                pasted.append(line.strip())
            from aiokafka.helpers import create_ssl_context  # what the printed line says to import

            settings = eval("dict(" + " ".join(pasted) + ")", {"create_ssl_context": create_ssl_context})  # noqa: S307
            assert "alice" in started.stdout and "super user" in started.stdout
            assert await _join_alone(settings) == "ok"
        finally:
            stopped = cli("stop")
        assert stopped.returncode == 0, stopped.stderr
        print(f"\n--security {mode}: printed settings ({len(pasted)} lines) work in a CooperativeConsumer")


async def _join_alone(settings: dict) -> str:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = f"t-cli-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(**settings)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    consumer = CooperativeConsumer(topic, group_id=f"g-{uuid.uuid4().hex[:8]}", **settings)
    await consumer.start()
    try:
        deadline = time.monotonic() + 30
        while consumer.assignment() != {TP(topic, 0)}:
            assert time.monotonic() < deadline, "no assignment"
            await consumer.getmany(timeout_ms=200)
    finally:
        await consumer.stop()
    return "ok"


def test_sasl_on_a_kafka_before_3_5_is_one_line(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "kassign.cli", "broker", "start", "--security", "sasl-ssl", "--version", "3.4.1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KASSIGN_RUN_DIR": str(tmp_path)},
    )
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert re.search(r"needs Apache Kafka 3\.5 or newer.*3\.4\.1", res.stderr), res.stderr
