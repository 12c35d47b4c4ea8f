"""Heartbeat v3 carries a static member's instance id (KIP-345); older brokers get v1 without it."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("aiokafka")

from kassign.adapters.aiokafka import FencedInstanceIdError  # noqa: E402
from kassign.adapters.aiokafka.static_heartbeat import FENCED_INSTANCE_ID, InstanceHeartbeatRequest  # noqa: E402


def test_v3_names_the_instance_and_v1_does_not():
    request = InstanceHeartbeatRequest("g", 7, "m-1", "pod-3")
    v3 = request.prepare({12: (0, 4)})
    assert v3.API_VERSION == 3 and v3.group_instance_id == "pod-3"
    body = v3.encode()
    assert body.endswith(struct.pack(">h", 5) + b"pod-3")  # the instance id is the last field
    v1 = request.prepare({12: (0, 1)})
    assert v1.API_VERSION == 1 and not hasattr(v1, "group_instance_id")


def test_a_dynamic_member_sends_a_null_instance_id_in_v3():
    v3 = InstanceHeartbeatRequest("g", 1, "m", None).prepare({12: (3, 3)})
    assert v3.encode().endswith(struct.pack(">h", -1))


def test_the_fenced_error_is_kafkas_code_82():
    assert FencedInstanceIdError.errno == FENCED_INSTANCE_ID == 82
    assert str(FencedInstanceIdError("x")).startswith("[Error 82] FencedInstanceIdError")
