"""``kassign demo --quick --protocol consumer`` end to end on a local Apache Kafka: the eager
baseline, kassign's classic default and kassign on KIP-848, each on its own group; and a cluster
refusing the KIP-848 group's timing stopping the demo in one line.

The demo starts its own broker, as on a fresh machine. Run under ``flock /tmp/kassign-broker.lock``.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

pytest.importorskip("aiokafka")
pytest.importorskip("confluent_kafka")

from integration.timeline_checks import assert_exclusive, current_assignment  # noqa: E402
from kassign.broker import planned_broker  # noqa: E402
from kassign.demo import main  # noqa: E402
from kassign.demo.runs import run_labels  # noqa: E402
from kassign.timeline.events import read_events  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.consumer_protocol, pytest.mark.timeout(300)]

LABELS = run_labels("consumer")
KIP848 = "consumer-uniform"


def _owned_during(events, start, end):
    """member -> partitions it held at ``start``, and member -> partitions revoked or lost in [start, end)."""
    at_start = {m: set(ps) for m, ps in current_assignment([e for e in events if e.t < start]).items()}
    revoked: dict[str, set] = defaultdict(set)
    for e in events:
        if start <= e.t < end and e.ev in ("cb_revoked", "cb_lost"):
            revoked[e.id].update(e.parts or ())
    return at_start, revoked


def test_quick_demo_on_the_consumer_protocol(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    if planned_broker().startswith("Tansu"):
        pytest.skip("the consumer group protocol needs Apache Kafka; this machine would start Tansu")
    out = tmp_path / "demo-out"
    code = main(["--quick", "--protocol", "consumer", "--no-plot", "--out", str(out)])
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == list(LABELS)
    for label, run in summary.items():
        assert run["unsettled"] == [], f"the {label} group did not settle after {run['unsettled']}"
        assert run["records"]["produced"] > 0 and run["records"]["lost"] == 0, (label, run["records"])
    assert code == 0

    # The broker itself describes the KIP-848 run's group as a consumer group, the others as classic.
    assert {label: run["broker_group_type"] for label, run in summary.items()} == {
        "classic-eager": "classic",
        "classic-fast-follow-up": "classic",
        KIP848: "consumer",
    }
    assert summary[KIP848]["group_protocol"] == "consumer"
    assert "kassign KIP-848 (consumer, uniform)" in printed and "partition-s unowned" in printed

    for label, run in summary.items():
        events = list(read_events(out / f"{label}.jsonl", default_topic=run["topic"]))
        assert_exclusive(events)  # no partition ever had two owners, in any run
        spoke = {e.extra.get("group_protocol") for e in events if e.ev == "subscribed"}
        assert spoke == {"consumer" if label == KIP848 else "classic"}, (label, spoke)

    run = summary[KIP848]
    events = list(read_events(out / f"{KIP848}.jsonl", default_topic=run["topic"]))
    # After the scale-out settled: four members, each with its own partitions, all six owned.
    phase = run["phases"]["scale out 2\u21924"]
    owned = {m: set(ps) for m, ps in current_assignment([e for e in events if e.t < phase["end"]]).items()}
    assert sorted(owned) == ["m1", "m2", "m3", "m4"], owned
    assert sum(map(len, owned.values())) == len(set().union(*owned.values())) == 6, owned
    # KIP-848 reconciles incrementally: the two original members keep part of what they had.
    at_start, revoked = _owned_during(events, phase["start"], phase["end"])
    assert sorted(m for m, ps in at_start.items() if ps) == ["m1", "m2"], at_start
    for member, parts in at_start.items():
        assert parts - revoked[member], (member, parts, dict(revoked))


@pytest.mark.realkafka
def test_a_cluster_refusing_the_groups_timing_stops_the_demo_in_one_line(bootstrap_servers, tmp_path, capsys):
    # Below the local broker's bounds (1000 ms session, 100 ms heartbeat), as Kafka's defaults refuse 6 s.
    code = main(
        [
            "--quick",
            "--protocol",
            "consumer",
            "--bootstrap",
            bootstrap_servers,
            "--session-ms",
            "900",
            "--heartbeat-ms",
            "90",
            "--no-plot",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert "refused consumer.session.timeout.ms=900 and consumer.heartbeat.interval.ms=90" in lines[0]
    # The broker's INVALID_CONFIG, told apart from other refusals: the line says which bounds to lower.
    assert "lower group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms" in lines[0]
    assert not (tmp_path / "summary.json").exists()  # stopped before the first run
