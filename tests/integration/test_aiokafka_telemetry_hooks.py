"""kassign's aiokafka coordinator tells a RebalanceRecorder when each JoinGroup/SyncGroup round starts
and ends, so the recorded rebalances are observed, not inferred from callbacks."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("aiokafka")

from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.telemetry import RebalanceRecorder  # noqa: E402

pytestmark = pytest.mark.timeout(60)


async def _join_and_leave(bootstrap: str, group_id: str, topic: str, recorder: RebalanceRecorder) -> None:
    consumer = CooperativeConsumer(bootstrap_servers=bootstrap, group_id=group_id, session_timeout_ms=1500,
                                   heartbeat_interval_ms=250, auto_offset_reset="earliest")
    recorder.attach(consumer)
    consumer.subscribe([topic])
    await consumer.start()
    try:
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "no assignment within 20 s"
            await consumer.getmany(timeout_ms=100)
    finally:
        await consumer.stop()


def test_recorder_on_cooperative_consumer_records_observed_join_and_sync(bootstrap_servers, group_id,
                                                                         topic_factory):
    topic = topic_factory(2)
    out: list[dict] = []
    recorder = RebalanceRecorder(out.append, member="c1")
    asyncio.run(_join_and_leave(bootstrap_servers, group_id, topic, recorder))
    assert recorder.close(5)

    # Until the first hook the recorder infers a join from ``subscribed``; from then on nothing is inferred.
    first_hook = next(i for i, o in enumerate(out) if o["ev"] == "join" and not o.get("inferred"))
    assert not [o for o in out[first_hook:] if o.get("inferred")], out
    observed = [o for o in out if not o.get("inferred")]
    kinds = [o["ev"] for o in observed]
    assert kinds.count("join") == kinds.count("sync") >= 1, kinds
    out = observed
    join, sync, assigned = kinds.index("join"), kinds.index("sync"), kinds.index("cb_assigned")
    assert join < sync < assigned, kinds
    assert out[join].get("gen") is None  # a new member has no generation yet
    assert out[sync]["gen"] >= 1 and out[sync]["protocol"] == "cooperative"  # Kafka's first generation is 1
    assert sorted(out[assigned]["parts"]) == [0, 1]
    assert kinds[-1] == "closed" and kinds.index("closing") > assigned, kinds
    assert recorder.metrics()["rebalance-total"] >= 1
