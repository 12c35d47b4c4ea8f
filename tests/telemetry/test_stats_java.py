"""kassign.telemetry.stats against Kafka's own metric stats (kafka-clients 3.9.1), same records, same clock."""

from __future__ import annotations

import math
import random
import subprocess

import pytest

from kassign.telemetry.stats import Avg, CumulativeCount, CumulativeSum, Max, MetricConfig, Rate

pytestmark = pytest.mark.java


def _script(seed: int) -> list[tuple[str, float, int]]:
    """Records and measures on one sensor with gaps shorter and longer than the 30 s windows."""
    rng = random.Random(seed)
    t = rng.randrange(0, 5000)
    out: list[tuple[str, float, int]] = []
    for _ in range(120):
        t += rng.choice([0, 1, 250, 4000, 17000, 29999, 30000, 31000, 59999, 60000, 95000])
        if rng.random() < 0.6:
            out.append(("record", float(rng.randrange(0, 20000)), t))
        else:
            out.append(("measure", math.nan, t))
    return out


def _ours(script: list[tuple[str, float, int]]) -> list[list[float]]:
    config = MetricConfig()
    stats = [Avg(config), Max(config), CumulativeSum(), CumulativeCount(), Rate(config, 3_600_000)]
    rows = []
    for op, value, t in script:
        if op == "record":
            for stat in stats:
                stat.record(value, t)
        else:
            rows.append([stat.measure(t) for stat in stats])
    return rows


def test_stats_match_kafka_clients() -> None:
    from kassign._java import JavaUnavailable, compile_java, java_command

    try:
        class_dir = compile_java("java/RebalanceMetricsReference.java")
    except JavaUnavailable as exc:
        pytest.fail(f"Java reference unavailable: {exc}")
    scripts = {f"s{seed}": _script(seed) for seed in range(12)}
    lines = []
    for sensor, script in scripts.items():
        for op, value, t in script:
            lines.append(f"record {sensor} {value:.0f} {t}" if op == "record" else f"measure {sensor} {t}")
    proc = subprocess.run(
        java_command(class_dir, "RebalanceMetricsReference", heap="256m"),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    java_rows = [[float(x) for x in line.split()] for line in proc.stdout.splitlines()]
    ours = [row for script in scripts.values() for row in _ours(script)]
    assert len(java_rows) == len(ours) > 100
    for i, (j, o) in enumerate(zip(java_rows, ours)):
        for name, jv, ov in zip(("avg", "max", "total", "count", "rate"), j, o):
            assert (math.isnan(jv) and math.isnan(ov)) or jv == pytest.approx(ov, rel=1e-12), (i, name, j, o)
