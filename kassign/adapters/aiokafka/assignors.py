"""Drop-in replacements for aiokafka's partition assignors, backed by kassign's assignors.

``AIOKafkaConsumer(partition_assignment_strategy=(StickyAssignor,))`` (a class) or
``(StickyAssignor(),)`` (an instance) both work. aiokafka calls ``name``, ``metadata(topics)``,
``assign(cluster, members)`` and ``on_assignment(assignment)`` on whatever it was given, so when it
was given the class, every consumer of the process calls the same class (aiokafka issues #1175 and
#1176). These classes hold no state themselves: each call is routed to the state of the consumer
making it, found as the aiokafka ``GroupCoordinator`` on the call stack, and kept on that
coordinator. Two consumers therefore never share a previous assignment or generation, whether they
were given the class or even one shared instance.

What a plain ``AIOKafkaConsumer`` gives the assignor, and so what these drop-ins can do there:

* members send ``ConsumerProtocolSubscription`` v3 (topics, user data, generation), so Java,
  librdkafka and kassign leaders see everything they need; owned partitions are sent empty because
  plain aiokafka revokes everything before joining (eager), and no rack (aiokafka does not pass
  ``client_rack`` to assignors);
* as leader, aiokafka decodes subscriptions with its v0 struct and drops the raw bytes: only
  topics and user data reach ``assign``. Sticky's V1 user data carries the previous assignment and
  generation, so eager sticky is complete; cooperative-sticky loses stickiness there. Use
  :class:`~kassign.adapters.aiokafka.CooperativeConsumer` for the full subscription and for the
  cooperative protocol.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any, ClassVar

from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance, GroupCoordinator

from kassign import assignors as core
from kassign.adapters.aiokafka.group_protocol import leader_assignment, member_metadata
from kassign.assignors.base import PartitionAssignor
from kassign.model import RebalanceProtocol, Subscription, TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "core_assignor_for",
]

# How far up the stack the calling coordinator can be: aiokafka calls assignors directly from
# GroupCoordinator / CoordinatorGroupRebalance methods, one or two frames above ours.
_MAX_STACK_DEPTH = 8
_STATE_ATTRIBUTE = "_kassign_member_assignors"


class _ClassOrInstanceMethod:
    """A method that works both on the class and on an instance; the function receives whichever
    it was called on (aiokafka calls assignor methods on the class when given a class)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func
        functools.update_wrapper(self, func)  # type: ignore[arg-type]

    def __get__(self, instance: Any, owner: type) -> Callable[..., Any]:
        return functools.partial(self._func, owner if instance is None else instance)


def _calling_coordinator() -> GroupCoordinator | None:
    frame: FrameType | None = sys._getframe(2)
    for _ in range(_MAX_STACK_DEPTH):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, GroupCoordinator):
            return candidate
        if isinstance(candidate, CoordinatorGroupRebalance):
            return candidate._coordinator
        frame = frame.f_back
    return None


class _MemberAssignor:
    """One consumer's side of one drop-in assignor: its kassign assignor (which remembers the
    consumer's last assignment) and the generation that assignment belongs to."""

    def __init__(self, assignor: PartitionAssignor) -> None:
        self.assignor = assignor
        self.generation = -1


class _DropInAssignor:
    """aiokafka's assignor interface over a kassign assignor."""

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]]
    # The kassign assignor's name in kassign.assignors, looked up when a consumer needs one.
    _core_name: ClassVar[str]

    def __init__(self) -> None:
        # Used only when called outside any consumer (tests, direct use); a consumer's calls
        # use state kept on that consumer's coordinator.
        self._standalone: _MemberAssignor | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @classmethod
    def create_assignor(cls) -> PartitionAssignor:
        """A fresh kassign assignor for one consumer."""
        return getattr(core, cls._core_name)()

    @staticmethod
    def _member(handle: _DropInAssignor | type[_DropInAssignor]) -> tuple[_MemberAssignor, GroupCoordinator | None]:
        coordinator = _calling_coordinator()
        if coordinator is not None:
            members = vars(coordinator).setdefault(_STATE_ATTRIBUTE, {})
            member = members.get(handle.name)
            if member is None:
                member = members[handle.name] = _MemberAssignor(handle.create_assignor())
            return member, coordinator
        if isinstance(handle, type):
            raise TypeError(
                f"{handle.__name__}.{handle.name!r} was called on the class outside a consumer's rebalance; "
                f"call it on an instance ({handle.__name__}()) so the state has an owner"
            )
        if handle._standalone is None:
            handle._standalone = _MemberAssignor(handle.create_assignor())
        return handle._standalone, None

    @_ClassOrInstanceMethod
    def metadata(handle, topics: Iterable[str]) -> bytes:  # noqa: N805 - class or instance
        """JoinGroup metadata: a v3 subscription with this consumer's user data and the generation of
        its last assignment (not of the last JoinGroup: metadata that changes on every failed round
        keeps a broker without a join barrier, such as Tansu, rebalancing)."""
        member, _ = _DropInAssignor._member(handle)
        return member_metadata(member.assignor, topics, generation=member.generation)

    @_ClassOrInstanceMethod
    def assign(handle, cluster: Any, members: Mapping[str, Any]) -> dict[str, bytes]:  # noqa: N805
        """Leader: assign partitions from aiokafka's decoded (v0) member metadata."""
        member, _ = _DropInAssignor._member(handle)
        subscriptions = {}
        for member_id, metadata in members.items():
            user_data = getattr(metadata, "user_data", None)
            subscriptions[member_id] = Subscription([str(t) for t in metadata.subscription], user_data or None)
        return leader_assignment(member.assignor, cluster, subscriptions, RebalanceProtocol.EAGER)

    @_ClassOrInstanceMethod
    def on_assignment(handle, assignment: Any) -> None:  # noqa: N805
        """Remember this consumer's new assignment and the generation it belongs to."""
        member, coordinator = _DropInAssignor._member(handle)
        if coordinator is not None:
            member.generation = coordinator.generation
        partitions = [TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()]
        member.assignor.on_assignment(partitions, member.generation)

    @_ClassOrInstanceMethod
    def on_generation_assignment(handle, generation: int) -> None:  # noqa: N805
        """aiokafka's (currently uncalled) generation hook; recorded for the next assignment."""
        member, _ = _DropInAssignor._member(handle)
        member.generation = generation


class RangeAssignor(_DropInAssignor):
    """Kafka's range assignor (eager), protocol name ``range``."""

    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)
    _core_name = "RangeAssignor"


class RoundRobinAssignor(_DropInAssignor):
    """Kafka's round-robin assignor (eager), protocol name ``roundrobin``."""

    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)
    _core_name = "RoundRobinAssignor"


class StickyAssignor(_DropInAssignor):
    """Kafka's sticky assignor (eager), protocol name ``sticky``; user data is Java's V1."""

    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)
    _core_name = "StickyAssignor"


class CooperativeStickyAssignor(_DropInAssignor):
    """Kafka's cooperative-sticky assignor, protocol name ``cooperative-sticky``.

    With :class:`~kassign.adapters.aiokafka.CooperativeConsumer` it runs the cooperative protocol;
    with a plain AIOKafkaConsumer it runs eager (aiokafka revokes everything on every rebalance).
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    _core_name = "CooperativeStickyAssignor"


def core_assignor_for(strategy: Any) -> PartitionAssignor:
    """A kassign assignor for one consumer from an entry of ``partition_assignment_strategy``.

    Accepts the drop-in classes or instances above (always a fresh kassign assignor, so consumers
    never share one) and kassign assignor classes or instances (an instance is used as given).
    """
    if isinstance(strategy, type) and issubclass(strategy, _DropInAssignor):
        return strategy.create_assignor()
    if isinstance(strategy, _DropInAssignor):
        return type(strategy).create_assignor()
    if isinstance(strategy, type) and issubclass(strategy, PartitionAssignor):
        return strategy()
    if isinstance(strategy, PartitionAssignor):
        return strategy
    raise TypeError(
        f"partition assignment strategy {strategy!r} is not a kassign assignor; use "
        "kassign.adapters.aiokafka.{CooperativeStickyAssignor, StickyAssignor, RangeAssignor, RoundRobinAssignor}"
    )
