"""kassign's aiokafka coordinator tells a RebalanceRecorder when each rebalance starts and ends, so the
recorded rebalances are observed, not inferred from callbacks: JoinGroup/SyncGroup rounds on the
classic protocol, reconciliations (no JoinGroup or SyncGroup at all) on the consumer protocol."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("aiokafka")

from integration.protocols import consumer_config  # noqa: E402
from kassign.adapters.aiokafka import CooperativeConsumer  # noqa: E402
from kassign.telemetry import RebalanceRecorder  # noqa: E402

pytestmark = pytest.mark.timeout(60)


async def _join_and_leave(
    bootstrap: str, group_id: str, topic: str, recorder: RebalanceRecorder, protocol: str
) -> None:
    config = consumer_config(bootstrap, group_id, protocol, session_ms=1500, heartbeat_ms=250)
    consumer = CooperativeConsumer(
        bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest", **config
    )
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


@pytest.mark.asyncio
async def test_recorder_on_cooperative_consumer_records_observed_rebalances(
    bootstrap_servers, group_id, topic_factory, group_protocol
):
    topic = topic_factory(2)
    out: list[dict] = []
    recorder = RebalanceRecorder(out.append, member="c1")
    await _join_and_leave(bootstrap_servers, group_id, topic, recorder, group_protocol)
    assert recorder.close(5)
    kinds = [o["ev"] for o in out]
    assigned = kinds.index("cb_assigned")
    assert sorted(out[assigned]["parts"]) == [0, 1]
    assert kinds[-1] == "closed" and kinds.index("closing") > assigned, kinds
    assert recorder.metrics()["rebalance-total"] >= 1

    if group_protocol == "consumer":
        # No JoinGroup/SyncGroup on this protocol, observed or inferred: the hooks alone count the rebalance.
        assert recorder.protocol == "consumer"
        assert not [o for o in out if o["ev"] in ("join", "sync")], out
        assert next(o for o in out if o["ev"] == "subscribed")["protocol"] == "consumer"
        return

    # Until the first hook the recorder infers a join from ``subscribed``; from then on nothing is inferred.
    assert recorder.protocol == "cooperative"
    first_hook = next(i for i, o in enumerate(out) if o["ev"] == "join" and not o.get("inferred"))
    assert not [o for o in out[first_hook:] if o.get("inferred")], out
    observed = [o for o in out if not o.get("inferred")]
    kinds = [o["ev"] for o in observed]
    assert kinds.count("join") == kinds.count("sync") >= 1, kinds
    join, sync, assigned = kinds.index("join"), kinds.index("sync"), kinds.index("cb_assigned")
    assert join < sync < assigned, kinds
    assert observed[join].get("gen") is None  # a new member has no generation yet
    assert observed[sync]["gen"] >= 1 and observed[sync]["protocol"] == "cooperative"  # Kafka's first generation is 1
