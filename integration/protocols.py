"""What a test run on both group protocols (the suite's ``group_protocol`` fixture) changes per protocol.

On the classic protocol each member states its own session timeout and heartbeat interval and
assigns with kassign's cooperative-sticky assignor; on the consumer protocol (KIP-848) the broker
owns both settings per group (set here as an operator would) and assigns itself (its default
``uniform`` assignor), and ``CooperativeConsumer`` refuses the classic-only settings.
"""

from __future__ import annotations

from typing import Any

from integration.driver import GroupDriver, GroupTiming
from kassign.broker.group_config import set_consumer_group_timing

__all__ = ["CONSUMER", "COOPERATIVE", "consumer_config", "group_driver", "start_kassign_member"]

CONSUMER = "kassign.adapters.aiokafka:CooperativeConsumer"
COOPERATIVE = "kassign.adapters.aiokafka:CooperativeStickyAssignor"


def consumer_config(
    bootstrap: str, group_id: str, protocol: str, *, session_ms: int, heartbeat_ms: int
) -> dict[str, Any]:
    """``CooperativeConsumer`` keyword arguments giving the group ``session_ms`` and ``heartbeat_ms``
    on ``protocol``: the member's own settings (classic), or the group's on the broker, set here (consumer)."""
    if protocol == "consumer":
        set_consumer_group_timing(bootstrap, group_id, session_ms=session_ms, heartbeat_ms=heartbeat_ms)
        return {"group_protocol": "consumer"}
    if protocol != "classic":
        raise ValueError(f"unknown group protocol {protocol!r}")
    return {"group_protocol": "classic", "session_timeout_ms": session_ms, "heartbeat_interval_ms": heartbeat_ms}


def group_driver(
    bootstrap: str, group_id: str, topics: str | list[str], protocol: str, timing: GroupTiming
) -> GroupDriver:
    """A :class:`GroupDriver` whose members get ``timing``'s session timeout and heartbeat interval on
    ``protocol`` (on the consumer protocol the group's own, set on the broker before anyone joins)."""
    if protocol == "consumer":
        set_consumer_group_timing(bootstrap, group_id, session_ms=timing.session_ms, heartbeat_ms=timing.heartbeat_ms)
    return GroupDriver(bootstrap, group_id, topics, timing=timing)


def start_kassign_member(group: GroupDriver, protocol: str, **kwargs: Any) -> str:
    """Start a kassign ``CooperativeConsumer`` member on ``protocol`` (cooperative-sticky on classic,
    the broker's assignor on consumer); returns its id."""
    return group.start_member("aiokafka", COOPERATIVE, consumer_factory=CONSUMER, group_protocol=protocol, **kwargs)
