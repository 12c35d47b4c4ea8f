"""Synthetic recordings of the group-size benchmark for the calibration's tests."""

from __future__ import annotations

from typing import Any


def scale_in_meta(members: int, mode: str = "eager") -> dict[str, Any]:
    """``meta.json`` of a recorded scale-in of ``members`` by one (24 partitions, trigger at t=100 s,
    session 10 s, heartbeat 1 s, at half the heartbeat interval)."""
    return {
        "scenario": "scale-in",
        "mode": mode,
        "profile": "instant",
        "phase": 0.5,
        "members": members,
        "change": 1,
        "partitions": 24,
        "triggers": [100.0],
        "end": 110.0,
        "heartbeat_ms": 1000,
        "session_ms": 10000,
    }
