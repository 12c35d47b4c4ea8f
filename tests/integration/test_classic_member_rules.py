"""The classic member's rules that only a real group coordinator exercises (Java's ConsumerCoordinator
and AbstractCoordinator behave the same way):

* FENCED_INSTANCE_ID answering a JoinGroup is fencing: a static member replaced while its JoinGroup
  waits at the join barrier loses its partitions (``on_partitions_lost``), stops, and raises
  ``FencedInstanceIdError``; it never goes on fetching partitions its replacement now owns;
* a member closed during its first JoinGroup (it has a member id, no generation yet) sends a
  LeaveGroup, so the round completes without it instead of handing it partitions nobody consumes.

    KASSIGN_BROKER=kafka python -m pytest tests/integration/test_classic_member_rules.py
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from aiokafka.structs import TopicPartition as TP  # noqa: E402

from integration.consumers import ListenerCallsWithLost, wait_consumers_held  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer, CooperativeStickyAssignor, FencedInstanceIdError  # noqa: E402

pytestmark = [pytest.mark.realkafka, pytest.mark.timeout(180)]


def _consumer(
    bootstrap_servers: str, group_id: str, *, instance: str | None = None, heartbeat_ms: int, session_ms: int = 10000
) -> CooperativeConsumer:
    return CooperativeConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        group_instance_id=instance,
        partition_assignment_strategy=(CooperativeStickyAssignor,),
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=heartbeat_ms,
        auto_offset_reset="earliest",
    )


async def _poll(consumers, timeout_ms: int = 50) -> list:
    """One ``getmany`` of each consumer, as an application's loop would; a consumer without an
    assignment yet blocks in ``getmany`` until it has one, so each call is cut off after its timeout.
    Returns what each call raised (None when nothing, or when it was only cut off)."""

    async def one(consumer):
        try:
            await asyncio.wait_for(consumer.getmany(timeout_ms=timeout_ms), 2 * timeout_ms / 1000)
        except TimeoutError:
            return None
        except Exception as exc:
            return exc
        return None

    return await asyncio.gather(*(one(c) for c in consumers))


async def _until(condition, timeout: float, what: str, consumers=()) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await _poll(consumers, 20) if consumers else await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_a_static_member_replaced_during_its_join_is_fenced(bootstrap_servers, group_id, topic_factory):
    """Static member A waits at the join barrier (a new member started a round and slow member D has
    not rejoined yet, for up to 8 s) when B starts with A's group.instance.id: the broker answers A's JoinGroup
    FENCED_INSTANCE_ID. A must lose its partitions at once and raise FencedInstanceIdError; nothing
    A still consumes may be owned by another member (sampled every 100 ms for 20 s)."""
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}

    async def scenario():
        listener = ListenerCallsWithLost()
        a = _consumer(bootstrap_servers, group_id, instance="static-a", heartbeat_ms=200)
        # D learns of a round only from its heartbeat: A waits up to 8 s for it at the join barrier.
        d = _consumer(bootstrap_servers, group_id, heartbeat_ms=8000, session_ms=30000)
        a.subscribe([topic], listener=listener)
        d.subscribe([topic])
        await a.start()
        await d.start()
        before = await wait_consumers_held([a, d], partitions, 1.0, balanced=True)
        newcomer = _consumer(bootstrap_servers, group_id, heartbeat_ms=500)
        newcomer.subscribe([topic])
        starting = [asyncio.ensure_future(newcomer.start())]  # start() returns once it has an assignment
        # A learns of the round from its next heartbeat and waits at the barrier for D.
        await _until(lambda: a._coordinator._join_in_flight, 10, "A's JoinGroup at the barrier", (a, d, newcomer))
        replacement = _consumer(bootstrap_servers, group_id, instance="static-a", heartbeat_ms=200)
        replacement.subscribe([topic])
        starting.append(asyncio.ensure_future(replacement.start()))
        await _until(lambda: replacement._coordinator is not None, 10, "B's coordinator", (a, d))
        others = (d, newcomer, replacement)
        raised, overlap_s, a_held_s = [], 0.0, 0.0
        began = last = time.monotonic()
        while last - began < 20.0:
            results = await _poll((a, *others), 100)
            raised += [r for r in results[:1] if r is not None]
            now = time.monotonic()
            mine = set(a.assignment())
            if mine & {tp for c in others for tp in c.assignment()}:
                overlap_s += now - last
            if mine:
                a_held_s += now - last
            last = now
        after = [set(c.assignment()) for c in others]
        await asyncio.gather(*starting)
        for c in (a, *others):
            await c.stop()
        return before, after, raised, overlap_s, a_held_s, listener.calls

    before, after, raised, overlap_s, a_held_s, calls = await scenario()
    print(
        f"double ownership {overlap_s:.2f} s; A held partitions {a_held_s:.2f} s after B started; "
        f"A raised {sorted({type(e).__name__ for e in raised})} ({len(raised)} polls)"
    )
    assert overlap_s == 0.0, f"A consumed partitions another member owned for {overlap_s:.1f} s"
    assert raised and all(isinstance(e, FencedInstanceIdError) for e in raised), raised
    assert ("lost", set(before[0])) in calls, calls
    assert sorted(tp for owned in after for tp in owned) == sorted(partitions), after


@pytest.mark.asyncio
async def test_a_member_closed_during_its_first_join_leaves(bootstrap_servers, group_id, topic_factory):
    """B closes while its first JoinGroup waits at the barrier (A rejoins up to 3 s late): B has a member
    id (KIP-394) but no generation. Its LeaveGroup lets the round complete without it; without one, the
    leader hands B partitions that nobody consumes until B's session (10 s) expires."""
    topic = topic_factory(6)
    partitions = {TP(topic, p) for p in range(6)}

    async def scenario():
        a = _consumer(bootstrap_servers, group_id, heartbeat_ms=3000)
        a.subscribe([topic])
        await a.start()
        await wait_consumers_held([a], partitions, 0.5)
        b = _consumer(bootstrap_servers, group_id, heartbeat_ms=3000)
        b.subscribe([topic])
        starting = asyncio.ensure_future(b.start())  # returns once B has an assignment: never, here
        await _until(
            lambda: b._coordinator is not None and b._coordinator._join_in_flight and b._coordinator.member_id,
            10,
            "B's first JoinGroup at the barrier",
            (a,),
        )
        began = time.monotonic()
        await b.stop()
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await wait_consumers_held([a], partitions, 0.5, timeout=30)
        regained_s = time.monotonic() - began
        await a.stop()
        return regained_s

    regained_s = await scenario()
    print(f"A owned every partition again {regained_s:.2f} s after B began closing")
    assert regained_s < 7.0, f"the group waited {regained_s:.1f} s for a member closed during its first join"


_REASSIGN_JAVA = """
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;

public class Reassign {
    public static void main(String[] args) throws Exception {
        try (Admin admin = Admin.create(Map.<String, Object>of("bootstrap.servers", args[0]))) {
            TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
            NewPartitionReassignment target = new NewPartitionReassignment(List.of(Integer.parseInt(args[3])));
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(target))).all().get();
        }
    }
}
"""


def _move_replica(cluster, tmp_path, topic: str, partition: int, broker: int) -> None:
    """Move the partition's only replica to ``broker`` with Java's Admin client (neither Python client
    has AlterPartitionReassignments); the move itself completes in the background."""
    import os
    import subprocess

    from kassign.broker.jvm import find_java
    from kassign.broker.kafka import kafka_jars

    source = tmp_path / "Reassign.java"
    source.write_text(_REASSIGN_JAVA)
    classpath = os.pathsep.join(str(jar) for jar in kafka_jars(cluster.version))
    subprocess.run(
        [find_java().executable, "-cp", classpath, str(source), cluster.bootstrap, topic, str(partition), str(broker)],
        check=True,
        timeout=120,
        capture_output=True,
    )


@pytest.mark.asyncio
async def test_a_rack_aware_leader_rebalances_when_replica_racks_change(rack_cluster, group_id, tmp_path):
    """KIP-881: members on racks r1 and r2, partition p on broker p + 1 (racks r1, r2, r3). Partition 0's
    replica moves from r1 to r2: the leader sees it in its next metadata and rebalances, and partition 0
    goes to the r2 member. (Java's leader compares the racks of every partition's replicas.)"""
    from confluent_kafka.admin import AdminClient, NewTopic

    from integration.topics import wait_for_partitions

    topic = f"racks-{group_id}"
    admin = AdminClient({"bootstrap.servers": rack_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replica_assignment=[[p + 1] for p in range(3)])])[
        topic
    ].result(timeout=20)
    wait_for_partitions(rack_cluster.bootstrap, topic, 3)
    partitions = {TP(topic, p) for p in range(3)}

    async def scenario():
        consumers = [
            CooperativeConsumer(
                bootstrap_servers=rack_cluster.bootstrap,
                group_id=group_id,
                client_rack=rack,
                metadata_max_age_ms=1000,
                partition_assignment_strategy=(CooperativeStickyAssignor,),
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
                auto_offset_reset="earliest",
            )
            for rack in ("r1", "r2")
        ]
        for c in consumers:  # the r1 member starts first and leads
            c.subscribe([topic])
            await c.start()
        before = await wait_consumers_held(consumers, partitions, 1.0, balanced=True)
        generation = consumers[0]._coordinator.generation
        await asyncio.get_running_loop().run_in_executor(None, _move_replica, rack_cluster, tmp_path, topic, 0, 2)
        moved_at = time.monotonic()
        await _until(
            lambda: consumers[0]._coordinator.generation > generation,
            30,
            "a rebalance after the replica move",
            consumers,
        )
        rebalanced_s = time.monotonic() - moved_at
        after = await wait_consumers_held(consumers, partitions, 1.0)
        for c in consumers:
            await c.stop()
        return before, after, rebalanced_s

    before, after, rebalanced_s = await scenario()
    shares = [[sorted(tp.partition for tp in owned) for owned in run] for run in (before, after)]
    print(f"rebalanced {rebalanced_s:.2f} s after the replica move; partitions of r1, r2: {shares[0]} -> {shares[1]}")
    assert TP(topic, 0) in before[0] and TP(topic, 1) in before[1], before
    assert TP(topic, 0) in after[1], after
