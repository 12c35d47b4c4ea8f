"""Every tested Apache Kafka line starts with ``kassign broker start --version V`` and serves a kassign
group: the newest patch of 3.3, 3.7, 3.9, 4.0 and 4.4 from Maven Central (kassign.broker.versions).

Each version: start a detached broker through the command line, check what ApiVersions says about the
consumer group protocol (KIP-848: 4.0 and newer only), produce ten records and consume them with a
``CooperativeConsumer`` in a classic group, then ``kassign broker stop``. Opt-in (the ``kafka_versions``
marker, its own CI tier)::

    flock /tmp/broker-tests.lock python -m pytest -m kafka_versions -s
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

import pytest

from kassign.broker.probe import consumer_group_protocol_missing
from kassign.broker.versions import TESTED_KAFKA_VERSIONS, version_tuple

pytestmark = [pytest.mark.kafka_versions, pytest.mark.timeout(300)]


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kassign.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )


async def _produce_and_consume(bootstrap: str, topic: str, count: int = 10) -> int:
    from aiokafka import AIOKafkaProducer

    from kassign.adapters.aiokafka import CooperativeConsumer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(count):
            await producer.send(topic, str(i).encode(), partition=i % 2)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = CooperativeConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        group_protocol="classic",
    )
    await consumer.start()
    seen = 0
    try:
        deadline = time.monotonic() + 60
        while seen < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            seen += sum(len(records) for records in batches.values())
    finally:
        await consumer.stop()
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize("version", TESTED_KAFKA_VERSIONS)
async def test_each_tested_kafka_version_starts_and_serves_a_group(version, tmp_path):
    from integration.topics import create_topic

    env = {"KASSIGN_RUN_DIR": str(tmp_path)}
    began = time.monotonic()
    started = _cli("broker", "start", "--version", version, env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert f"Apache Kafka {version}" in started.stdout, started.stdout
        bootstrap = re.search(r"^bootstrap: (\S+)$", started.stdout, re.M).group(1)
        startup = float(re.search(r"started in ([\d.]+) s", started.stdout).group(1))
        missing = consumer_group_protocol_missing(bootstrap)
        if version_tuple(version) >= (4, 0, 0):
            assert missing is None, missing
        else:
            assert missing is not None and "4.0" in missing
        topic = create_topic(bootstrap, f"t-versions-{uuid.uuid4().hex[:8]}", 2)
        consumed = await _produce_and_consume(bootstrap, topic)
        assert consumed == 10
    finally:
        stopped = _cli("broker", "stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    print(
        f"\nKafka {version}: started in {startup:.1f} s (supervisor), consumer group protocol "
        f"{'yes' if missing is None else 'no'}, 10/10 records consumed by a classic CooperativeConsumer; "
        f"{time.monotonic() - began:.1f} s in all"
    )


def test_a_version_before_kraft_or_malformed_is_one_line(tmp_path):
    """No broker starts: kassign refuses before it resolves anything."""
    for bad, needle in (("3.2.3", "3.3.0 or newer"), ("4.x", "MAJOR.MINOR.PATCH")):
        res = _cli("broker", "start", "--version", bad, env={"KASSIGN_RUN_DIR": str(tmp_path)})
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr and needle in res.stderr and bad in res.stderr, res.stderr
