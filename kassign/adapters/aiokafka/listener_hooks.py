"""The rebalance listener's telemetry hooks, as kassign's two coordinators call them.

A listener may define hooks beside its callbacks (kassign's recording listener does):
``rebalance_started(generation)``, ``rebalance_completed(ok, generation, error)`` and, on the
consumer group protocol, ``heartbeat_completed(latency_ms, error, answered)``. A listener without
them is left alone, and a hook that raises is only logged: telemetry never changes the rebalance.

The classic coordinator calls the rebalance hooks around each JoinGroup/SyncGroup round. On the
consumer group protocol (KIP-848) :class:`ConsumerGroupHooks` calls them where Java's
``AsyncKafkaConsumer`` records its rebalance and heartbeat metrics
(``AbstractMembershipManager.transitionTo``, ``onHeartbeatFailure``;
``AbstractHeartbeatRequestManager``).
"""

from __future__ import annotations

import logging
from typing import Any

from kassign.membership.consumer_group import ConsumerGroupMember, MemberState

log = logging.getLogger(__name__)

__all__ = ["call_hook", "ConsumerGroupHooks"]

# Java's isCompletingRebalance: RECONCILING -> one of these.
_SETTLED = frozenset({MemberState.STABLE, MemberState.ACKNOWLEDGING})


def call_hook(listener: Any, name: str, *args: Any, group_id: str) -> None:
    """Call ``listener``'s telemetry hook ``name`` if it has one; its failures are only logged."""
    hook = getattr(listener, name, None)
    if hook is None:
        return
    try:
        hook(*args)
    except Exception:
        log.exception("rebalance listener hook %s of group %s failed", name, group_id)


class ConsumerGroupHooks:
    """Calls a KIP-848 member's listener hooks at the points Java records its metrics.

    ``subscription`` is aiokafka's SubscriptionState (its listener is read at each call, since a new
    subscription may bring another). The driver reports every member state change that can start or
    end a rebalance (:meth:`transition`) and the outcome of every heartbeat.
    """

    def __init__(self, subscription: Any, group_id: str) -> None:
        self._subscription = subscription
        self._group_id = group_id
        # Java's rebalanceStarted(): a rebalance started and has not ended (a failure leaves it open).
        self._open = False

    def _call(self, name: str, *args: Any) -> None:
        call_hook(self._subscription.listener, name, *args, group_id=self._group_id)

    def transition(self, before: MemberState, member: ConsumerGroupMember) -> None:
        """The member went from ``before`` to its current state: a rebalance starts when it starts
        reconciling and ends when the reconciliation is done."""
        after = member.state
        if before is MemberState.RECONCILING and after in _SETTLED:
            self._open = False
            self._call("rebalance_completed", True, member.member_epoch, None)
        elif before is not MemberState.RECONCILING and after is MemberState.RECONCILING:
            self._open = True
            self._call("rebalance_started", member.member_epoch)

    def heartbeat_answered(self, latency_ms: float, error: str | None, epoch: int) -> None:
        """A heartbeat was answered after ``latency_ms``, with the error name ``error`` (None: no error).
        Java counts every error answer as a failed rebalance while one is open."""
        self._call("heartbeat_completed", latency_ms, error, True)
        if error is not None:
            self._rebalance_failed(epoch, error)

    def heartbeat_unanswered(self, latency_ms: float, error: BaseException, epoch: int) -> None:
        """A heartbeat failed without an answer after ``latency_ms``; unless the error is retriable
        (a disconnect, a timeout), Java counts it as a failed rebalance while one is open."""
        self._call("heartbeat_completed", latency_ms, repr(error), False)
        if not getattr(error, "retriable", False):
            self._rebalance_failed(epoch, repr(error))

    def _rebalance_failed(self, epoch: int, error: str) -> None:
        if self._open:
            self._call("rebalance_completed", False, epoch, error)
