"""``kassign replicas plan``: the printed plan, the reassignment JSON, errors, and --create on a broker."""

from __future__ import annotations

import json
import uuid

import pytest

from kassign.cli import main as kassign_main
from kassign.placement.cli import main, parse_brokers


def test_plan_writes_reassignment_json(tmp_path, capsys) -> None:
    out = tmp_path / "plan.json"
    rc = main(
        [
            "plan",
            "--brokers",
            "5:r1,1:r3,2:r3,3:r2,4:r2,0:r1",
            "--partitions",
            "7",
            "--replication-factor",
            "3",
            "--start-index",
            "0",
            "--topic",
            "orders",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["version"] == 1
    # Kafka's rack-aware vector (brokers sorted by id whatever order they were given in).
    assert [(e["topic"], e["partition"], e["replicas"]) for e in doc["partitions"]] == [
        ("orders", 0, [0, 3, 1]),
        ("orders", 1, [3, 1, 5]),
        ("orders", 2, [1, 5, 4]),
        ("orders", 3, [5, 4, 2]),
        ("orders", 4, [4, 2, 0]),
        ("orders", 5, [2, 0, 3]),
        ("orders", 6, [0, 4, 2]),
    ]
    printed = capsys.readouterr().out
    assert "partition 6: replicas [0, 4, 2]" in printed and "rack-aware" in printed
    assert "3 racks x7" in printed


def test_plan_json_to_stdout_keeps_stdout_parseable(capsys) -> None:
    assert (
        kassign_main(
            [
                "replicas",
                "plan",
                "--brokers",
                "0,1,2,3,4",
                "--partitions",
                "10",
                "--replication-factor",
                "3",
                "--start-index",
                "0",
                "--out",
                "-",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["partitions"][9] == {"topic": "my-topic", "partition": 9, "replicas": [4, 1, 2]}
    assert "rack-unaware" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--brokers", "0:r1,1", "--partitions", "3", "--replication-factor", "1"],
            "Not all brokers have rack information",
        ),
        (["--brokers", "0,1", "--partitions", "3", "--replication-factor", "3"], "larger than available brokers: 2"),
        (["--brokers", "0,x", "--partitions", "3", "--replication-factor", "1"], "'x'"),
        (["--partitions", "3", "--replication-factor", "1"], "--brokers"),
        (["--brokers", "0", "--partitions", "1", "--replication-factor", "1", "--create"], "--bootstrap-servers"),
    ],
)
def test_plan_errors(argv, message, capsys) -> None:
    assert main(["plan", *argv]) == 2
    assert message in capsys.readouterr().err


def test_parse_brokers() -> None:
    assert parse_brokers("2:b, 0:a ,1") == {0: "a", 1: None, 2: "b"}
    with pytest.raises(ValueError, match="twice"):
        parse_brokers("1,1")


def test_create_topic_with_planned_placement(bootstrap_servers, capsys) -> None:
    from confluent_kafka.admin import AdminClient

    topic = f"placement-{uuid.uuid4().hex[:8]}"
    rc = main(
        [
            "plan",
            "--bootstrap-servers",
            bootstrap_servers,
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--topic",
            topic,
            "--start-index",
            "0",
            "--create",
            "--out",
            "-",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    planned = {e["partition"]: e["replicas"] for e in json.loads(captured.out)["partitions"]}
    meta = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(topic=topic, timeout=10).topics[topic]
    assert meta.error is None
    assert {p: list(m.replicas) for p, m in meta.partitions.items()} == planned
