"""The zero-Java path stays working: the embedded Tansu broker (no Java, no Maven) runs a mixed
kassign + librdkafka cooperative group and the quick demo. Everything else runs on Apache Kafka.

Tansu's coordinator differs from Kafka's (no join barrier, no protocol voting, no static membership,
followers' SyncGroup held, a departed leader of a forming group kept: docs/brokers.md, "Tansu"), so these
tests check only end states and invariants.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiokafka")

from integration.driver import GroupDriver  # noqa: E402
from integration.timeline_checks import assert_exclusive  # noqa: E402
from integration.topics import create_topic  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

COOP = "kassign.adapters.aiokafka:CooperativeStickyAssignor"
CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"


def test_kassign_and_librdkafka_cooperative_group_on_tansu(tansu_broker, group_id):
    topic = create_topic(tansu_broker.bootstrap, f"tansu-{group_id}", 6)
    with GroupDriver(tansu_broker.bootstrap, group_id, topic) as group:
        producer = group.start_producer(rate=200)
        group.start_member("aiokafka", COOP, consumer_factory=CONSUMER)
        group.wait_settled(60)
        group.start_member("confluent", "cooperative-sticky")
        group.start_member("aiokafka", COOP, consumer_factory=CONSUMER)
        final = group.wait_settled(90, balanced=True)
        producer.stop()
        events = group.wait_all_processed(producer, 60)
    assert sorted(map(len, final.values())) == [2, 2, 2]
    assert_exclusive(events)


def test_quick_demo_on_tansu(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from kassign.demo import main

    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    out = tmp_path / "demo-out"
    code = main(["--quick", "--tansu", "--only", "cooperative", "--out", str(out), "--no-plot"])
    summary = json.loads((out / "summary.json").read_text())["cooperative"]
    assert code == 0 and summary["unsettled"] == [] and summary["records"]["lost"] == 0, summary
    assert "broker Tansu" in capsys.readouterr().out
