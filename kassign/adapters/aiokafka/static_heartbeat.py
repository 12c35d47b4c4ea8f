"""Heartbeat v3 for static members (KIP-345) and the FENCED_INSTANCE_ID error aiokafka lacks.

aiokafka 0.14 heartbeats with v0/v1, which carry no ``group.instance.id``. When a second instance
takes over a static member's id, the broker answers the replaced one UNKNOWN_MEMBER_ID, so it
rejoins under the same id and fences its replacement in turn: the two keep taking the id from each
other and both believe they own its partitions. With v3 the broker knows the instance and answers
FENCED_INSTANCE_ID, which is final, as Java treats it.
"""

from __future__ import annotations

from typing import TypeAlias

import aiokafka.errors as Errors
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.group import HeartbeatRequest_v0, HeartbeatRequest_v1
from aiokafka.protocol.types import Int16, Int32, Schema, String

__all__ = ["FENCED_INSTANCE_ID", "FencedInstanceIdError", "InstanceHeartbeatRequest"]

FENCED_INSTANCE_ID = 82


class FencedInstanceIdError(Errors.BrokerResponseError):
    """Another consumer with this consumer's ``group_instance_id`` joined the group: this one is fenced
    for good (its partitions are lost); close it."""

    errno = FENCED_INSTANCE_ID
    message = "FENCED_INSTANCE_ID"
    description = "The broker rejected this static member since another member with the same group.instance.id joined"


class HeartbeatResponse_v3(Response):
    API_KEY = 12
    API_VERSION = 3
    SCHEMA = Schema(("throttle_time_ms", Int32), ("error_code", Int16))


class HeartbeatRequest_v3(RequestStruct):
    API_KEY = 12
    API_VERSION = 3
    RESPONSE_TYPE = HeartbeatResponse_v3
    SCHEMA = Schema(
        ("group", String("utf-8")),
        ("generation_id", Int32),
        ("member_id", String("utf-8")),
        ("group_instance_id", String("utf-8")),
    )


_Structs: TypeAlias = "HeartbeatRequest_v0 | HeartbeatRequest_v1 | HeartbeatRequest_v3"


class InstanceHeartbeatRequest(Request[HeartbeatRequest_v3]):
    """A heartbeat naming the static member's instance when the broker speaks v3 (Kafka 2.3+)."""

    API_KEY = 12

    def __init__(self, group: str, generation_id: int, member_id: str, group_instance_id: str | None) -> None:
        self._fields = (group, generation_id, member_id)
        self._group_instance_id = group_instance_id

    def build(self, request_struct_class: type[_Structs]) -> _Structs:
        if request_struct_class.API_VERSION >= 3:
            return request_struct_class(*self._fields, self._group_instance_id)
        return request_struct_class(*self._fields)


# aiokafka reads the versions a request supports from its generic argument (a ``v0 | v1 | v3`` union);
# they are set here instead so that the module also imports where aiokafka is mocked (the API docs).
InstanceHeartbeatRequest._CLASSES = (HeartbeatRequest_v0, HeartbeatRequest_v1, HeartbeatRequest_v3)
