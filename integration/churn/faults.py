"""The churn soak's faults (issue 16), played on a replicated 3-broker cluster by the runner
(:mod:`integration.churn.runner`): a coordinator failover in the middle of a rebalance, a zombie
member (SIGSTOP past its session timeout, then SIGCONT) and the slow revoker's timing.

Each fault leaves its marks on the timeline so the judge (:mod:`integration.churn.fault_checks`)
can tell excused effects from broken invariants: the runner's ``node_killed``/``node_restarted``
events (member ``cluster``), the driver's ``freeze``/``thaw`` events, and the members' own
``resumed``/``late_commit`` events and ``slow_ms`` on a slow ``cb_revoked``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from integration.churn.generator import ChurnSequence, ChurnStep
from integration.churn.group_pool import GroupPool
from integration.driver import GroupTiming
from kassign.model import TopicPartition
from kassign.timeline.events import Event

if TYPE_CHECKING:
    from kassign.broker import BrokerInfo

log = logging.getLogger(__name__)

__all__ = ["CLUSTER", "REBALANCING", "slow_revoke_ms", "group_state", "run_failover", "run_zombie"]

#: The timeline id of the runner's own cluster events.
CLUSTER = "cluster"
#: Group states (confluent-kafka's names) in which a rebalance is under way.
REBALANCING = frozenset({"PREPARING_REBALANCING", "COMPLETING_REBALANCING"})
#: How much longer than the group's rebalance timeout a slow revoker's callback takes.
_SLOW_MARGIN_MS = 1500


def slow_revoke_ms(sequence: ChurnSequence, timing: GroupTiming) -> int:
    """How long a slow revoker's ``on_partitions_revoked`` takes: longer than the group's rebalance
    timeout, which the broker takes as the longest any member asks for: aiokafka's is its session
    timeout, Java's and librdkafka's their max.poll.interval.ms."""
    kinds = {m.kind for m in sequence.initial} | {s.start.kind for s in sequence.steps if s.start is not None}
    timeout = max(timing.max_poll_ms if kind in ("java", "confluent") else timing.session_ms for kind in kinds)
    return timeout + _SLOW_MARGIN_MS


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def group_state(admin: Any, group_id: str) -> str:
    """The broker's state of ``group_id`` (e.g. ``STABLE``, ``PREPARING_REBALANCING``; ``UNKNOWN`` when it
    does not answer in time)."""
    try:
        description = admin.describe_consumer_groups([group_id], request_timeout=2)[group_id].result(timeout=3)
    except Exception as exc:  # a coordinator moving or loading: the state is not known right now
        log.debug("describe %s: %s", group_id, exc)
        return "UNKNOWN"
    return description.state.name


def _wait_rebalancing(admin: Any, group_id: str, timeout: float) -> str:
    """Poll the group's state until a rebalance is under way (or ``timeout``); returns the last state."""
    deadline = time.monotonic() + timeout
    state = group_state(admin, group_id)
    while state not in REBALANCING and time.monotonic() < deadline:
        time.sleep(0.01)
        state = group_state(admin, group_id)
    return state


def run_failover(
    pool: GroupPool,
    step: ChurnStep,
    cluster: BrokerInfo,
    partitions: Mapping[str, Sequence[TopicPartition]],
    settle_timeout: float,
) -> None:
    """Start the step's rebalance, SIGKILL the coordinating node as soon as the broker reports the
    group rebalancing (a Kafka round takes some 20-300 ms here, so the kill follows the report at
    once), wait until another node coordinates the group, the group is stable there and settled
    with that node down, leave it down ``fault_s`` seconds more and restart it.

    The node is restarted whatever happens meanwhile (a stall too), so the next sequence has three."""
    admin = _admin(cluster.bootstrap)
    node = cluster.coordinator_node(pool.group_id)
    if step.start is not None:
        pool.start(step.start)
    else:
        pool.request_leave(step.member)
    state = _wait_rebalancing(admin, pool.group_id, timeout=20.0)
    cluster.kill_node(node)
    pool.note(Event(CLUSTER, time.time(), "node_killed", extra={"node": node, "group_state": state}))
    log.info("killed coordinator node %s of %s (group %s)", node, pool.group_id, state)
    try:
        deadline = time.monotonic() + settle_timeout
        moved_to = cluster.coordinator_node(pool.group_id)
        while moved_to == node:  # until the controller has fenced the dead node and elected a leader
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"group {pool.group_id}: coordinator still node {node} {settle_timeout:.0f}s after it was killed"
                )
            time.sleep(0.1)
            moved_to = cluster.coordinator_node(pool.group_id)
        state = group_state(admin, pool.group_id)
        while state != "STABLE":
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"group {pool.group_id} not stable on node {moved_to} within {settle_timeout:.0f}s "
                    f"of the kill (state {state})"
                )
            time.sleep(0.1)
            state = group_state(admin, pool.group_id)
        pool.note(Event(CLUSTER, time.time(), "coordinator", extra={"node": moved_to, "group_state": state}))
        pool.wait_settled(partitions, max(1.0, deadline - time.monotonic()))
        time.sleep(step.fault_s)
    finally:
        took = cluster.restart_node(node)
        pool.note(Event(CLUSTER, time.time(), "node_restarted", extra={"node": node, "took": round(took, 2)}))


def run_zombie(
    pool: GroupPool,
    step: ChurnStep,
    timing: GroupTiming,
    partitions: Mapping[str, Sequence[TopicPartition]],
    settle_timeout: float,
) -> None:
    """Freeze ``step.member`` (SIGSTOP) once the group has settled, for its session timeout plus
    ``fault_s`` seconds, resume it (SIGCONT) and wait until it has reported its late commit and
    the loss of its partitions (the judge says what is missing when that does not come)."""
    pool.wait_settled(partitions, settle_timeout)  # so the zombie owns partitions when it freezes
    pool.freeze(step.member)
    time.sleep(timing.session_ms / 1000 + step.fault_s)
    thawed = pool.thaw(step.member)

    def reported(events: list[Event]) -> bool:
        after = {e.ev for e in events if e.id == step.member and e.t >= thawed}
        return {"late_commit", "cb_lost"} <= after

    _poll(pool.events, reported, timeout=settle_timeout)


def _poll(events: Callable[[], list[Event]], done: Callable[[list[Event]], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done(events()):
            return True
        time.sleep(0.1)
    return False
