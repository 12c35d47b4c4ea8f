"""A ``benchmarks/rebalance.py`` recording's ``meta.json`` as the simulator's settings.

Each recorded run of the rebalance benchmark names its mode (which client, assignor and follow-up its
members ran), its timeouts and its per-batch processing. :func:`bench_config` turns that into a
:class:`~kassign.sim.config.SimConfig` with the client's Kafka 4.4 latencies
(:data:`~kassign.sim.config.KAFKA44_PRESETS`). ``kassign simulate --replay`` of such a run uses it
(:mod:`kassign.sim.replay`), and so does the calibration against those recordings
(:mod:`kassign.sim.calibration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kassign.sim.config import SimConfig, kafka44_presets

__all__ = [
    "BENCH_COMMIT_MS",
    "BenchMode",
    "BENCH_MODES",
    "MODE_NAMES",
    "KIND_CLIENTS",
    "mode_of",
    "is_bench_meta",
    "processing_of",
    "client_of",
    "bench_client",
    "bench_config",
]

#: The benchmark's members report progress and commit what they processed every 200 ms (its
#: ``GroupTiming(progress_ms=200)``), at the first turn of their poll loop past each tick.
BENCH_COMMIT_MS = 200.0


@dataclass(frozen=True)
class BenchMode:
    """How a benchmark mode's members are simulated."""

    assignor: str
    client: str
    fast_follow_up: bool = False
    group_protocol: str = "classic"  # "consumer": KIP-848, the broker assigns (``assignor`` unused)


#: The benchmark's modes, by the short names of its run directories.
BENCH_MODES: dict[str, BenchMode] = {
    "eager": BenchMode("roundrobin", "aiokafka"),  # aiokafka 0.14's default assignor
    "coop": BenchMode("cooperative-sticky", "aiokafka"),  # kassign, fast_follow_up=False
    "fast": BenchMode("cooperative-sticky", "aiokafka", fast_follow_up=True),  # kassign's default
    "static": BenchMode("cooperative-sticky", "aiokafka", fast_follow_up=True),  # + group_instance_id
    "java": BenchMode("cooperative-sticky", "java"),  # kafka-clients 3.9.1
    "rdkafka": BenchMode("cooperative-sticky", "librdkafka"),  # librdkafka 2.16.0
    "kip848": BenchMode("cooperative-sticky", "aiokafka", group_protocol="consumer"),  # kassign on KIP-848
    "java848": BenchMode("cooperative-sticky", "java", group_protocol="consumer"),  # kafka-clients 4.4.0
    "rdkafka848": BenchMode("cooperative-sticky", "librdkafka", group_protocol="consumer"),
}
#: meta.json's ``mode`` -> the short name.
MODE_NAMES = {
    "eager": "eager",
    "cooperative": "coop",
    "cooperative+fast-follow-up": "fast",
    "cooperative+static": "static",
    "java-cooperative": "java",
    "librdkafka-cooperative": "rdkafka",
    "consumer": "kip848",
    "java-consumer": "java848",
    "librdkafka-consumer": "rdkafka848",
}
#: meta.json's member ``kind`` -> the simulator's client.
KIND_CLIENTS = {"aiokafka": "aiokafka", "java": "java", "confluent": "librdkafka"}


def mode_of(meta: Mapping[str, Any]) -> str:
    """A run's mode, short name (``fast``...), from its meta.json."""
    mode = str(meta.get("mode", ""))
    short = MODE_NAMES.get(mode, mode)
    if short not in BENCH_MODES:
        raise ValueError(f"unknown benchmark mode {mode!r}; expected one of {sorted(MODE_NAMES)}")
    return short


def is_bench_meta(meta: Mapping[str, Any] | None) -> bool:
    """Whether a meta.json is a ``benchmarks/rebalance.py`` recording's (it names its triggers and mode)."""
    if not meta:
        return False
    return "triggers" in meta and str(meta.get("mode", "")) in MODE_NAMES


def processing_of(meta: Mapping[str, Any]) -> dict[str, float | None]:
    """``processing_ms``/``processing_max_ms`` from meta.json's ``process_ms``: ``[LO, HI]`` uniform,
    ``[MS, MS]`` or ``MS`` fixed, ``[0, 0]`` or absent none."""
    spec = meta.get("process_ms")
    if spec is None:
        return {"processing_ms": 0.0, "processing_max_ms": None}
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return {"processing_ms": float(spec), "processing_max_ms": None}
    if (
        isinstance(spec, (list, tuple))
        and len(spec) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec)
    ):
        lo, hi = float(spec[0]), float(spec[1])
        return {"processing_ms": lo, "processing_max_ms": None if hi == lo else hi}
    raise ValueError(f"process_ms must be MS or [LO, HI] in ms, got {spec!r}")


def client_of(meta: Mapping[str, Any]) -> str | None:
    """The simulator client of a recording's members: meta's ``kind`` (aiokafka, java, confluent),
    else its ``mode``; None when neither says."""
    kind = meta.get("kind")
    if kind in KIND_CLIENTS:
        return KIND_CLIENTS[str(kind)]
    mode = MODE_NAMES.get(str(meta.get("mode", "")))
    return BENCH_MODES[mode].client if mode else None


def bench_client(meta: Mapping[str, Any]) -> str:
    """The simulated client of a benchmark run: :func:`client_of`, else its mode's."""
    return client_of(meta) or BENCH_MODES[mode_of(meta)].client


def bench_config(meta: Mapping[str, Any], **overrides: Any) -> SimConfig:
    """The simulator configuration of a benchmark run: Apache Kafka, the mode's assignor, client and
    fast follow-up, static membership, the run's timeouts and per-batch processing, and the client's
    Kafka 4.4 latencies; ``overrides`` last."""
    mode = BENCH_MODES[mode_of(meta)]
    client = bench_client(meta)
    values: dict[str, Any] = {
        "assignor": mode.assignor,
        "broker": "kafka",
        "client": client,
        "fast_follow_up": mode.fast_follow_up,
        "group_protocol": mode.group_protocol,
        "static_membership": bool(meta.get("static", False)),
        "session_timeout_ms": float(meta.get("session_ms", 1500)),
        "heartbeat_interval_ms": float(meta.get("heartbeat_ms", 250)),
        "rebalance_timeout_ms": float(meta.get("max_poll_ms", 30000)),
        "commit_interval_ms": BENCH_COMMIT_MS,
        **processing_of(meta),
        **kafka44_presets(client, mode.group_protocol),
    }
    values.update(overrides)
    return SimConfig(**values)
