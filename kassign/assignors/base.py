"""The contract every kassign assignor fulfils, and the input checks they share.

An assignor instance belongs to one consumer: it remembers that consumer's last assignment and
generation (``on_assignment``) and turns them into the user data it sends when it next joins
(``subscription_user_data``). When the consumer is the group leader, ``assign`` computes every
member's partitions from the decoded subscriptions.
"""

from __future__ import annotations

import abc
import gc
from collections.abc import Collection, Iterable, Mapping, Sequence

from kassign.model import RebalanceProtocol, Subscription, TopicPartition

__all__ = ["PartitionAssignor", "validate_assign_input"]

#: From this many partitions on, ``assign`` pauses the cyclic garbage collector while it runs.
LARGE_GROUP_PARTITIONS = 50_000


def validate_assign_input(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    partition_racks: Mapping[TopicPartition, Collection[str]] | None = None,
) -> None:
    """Raise TypeError/ValueError naming the offending value if ``assign``'s input is malformed."""
    if not isinstance(partitions_per_topic, Mapping):
        raise TypeError(
            "partitions_per_topic must be a mapping of topic -> partition count, "
            f"got {type(partitions_per_topic).__name__}"
        )
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str):
            raise TypeError(f"topic names must be str, got {topic!r}")
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"partition count of topic {topic!r} must be an int, got {count!r}")
        if count < 0:
            raise ValueError(f"partition count of topic {topic!r} must be >= 0, got {count}")
    if not isinstance(subscriptions, Mapping):
        raise TypeError(
            f"subscriptions must be a mapping of member id -> Subscription, got {type(subscriptions).__name__}"
        )
    for member, sub in subscriptions.items():
        if not isinstance(member, str):
            raise TypeError(f"member ids must be str, got {member!r}")
        if not isinstance(sub, Subscription):
            raise TypeError(
                f"subscription of member {member!r} must be a kassign.Subscription, got {type(sub).__name__}"
            )
        if isinstance(sub.topics, str):
            raise TypeError(f"topics of member {member!r} must be a list of str, got the string {sub.topics!r}")
        try:
            # str.join checks in C that every item is a str: a leader of 2,000 members on 500 topics
            # checks a million names.
            "".join(sub.topics)
        except TypeError:
            bad: object = next((t for t in sub.topics if not isinstance(t, str)), sub.topics)
            raise TypeError(f"member {member!r} subscribes to a non-string topic {bad!r}") from None
        generation = sub.generation_id
        if generation is not None:
            if isinstance(generation, bool) or not isinstance(generation, int):
                raise TypeError(f"generation_id of member {member!r} must be an int or None, got {generation!r}")
            if not -(2**31) <= generation < 2**31:
                raise ValueError(f"generation_id of member {member!r} must fit an int32, got {generation}")
    if partition_racks is not None and not isinstance(partition_racks, Mapping):
        raise TypeError(
            f"partition_racks must be a mapping of TopicPartition -> racks, got {type(partition_racks).__name__}"
        )


class PartitionAssignor(abc.ABC):
    """Base of kassign's assignors: Kafka's ``ConsumerPartitionAssignor`` in Python.

    Subclasses set ``name`` and implement :meth:`_assign`; input is validated here once.
    """

    name: str = ""
    supported_protocols: Sequence[RebalanceProtocol] = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        #: After :meth:`assign`: partitions whose owner changes this round -> new owner, or None
        #: where the algorithm does not compute it.
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = None
        self._last_assignment: list[TopicPartition] | None = None
        self._generation: int = -1

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        *,
        partition_racks: Mapping[TopicPartition, Collection[str]] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        """Assign the partitions of the subscribed topics to the members.

        ``partitions_per_topic`` maps topic -> partition count (a topic missing from it has no
        partitions); ``subscriptions`` maps member id -> :class:`~kassign.Subscription`;
        ``partition_racks`` maps a partition to the racks of its replicas (for rack-aware
        assignment). Returns member id -> partitions, with every member present.
        """
        validate_assign_input(partitions_per_topic, subscriptions, partition_racks)
        self.partitions_transferring_ownership = None
        # A large assignment allocates millions of acyclic TopicPartition tuples; with the cyclic GC on,
        # each allocation burst triggers passes that rescan all of them and can double the run time, while
        # there is no cycle to find. Reference counting still frees everything meanwhile.
        paused = sum(partitions_per_topic.values()) >= LARGE_GROUP_PARTITIONS and gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._assign(partitions_per_topic, subscriptions, partition_racks)
        finally:
            if paused:
                # The last step, so that the collection now due (one pass over the new tuples, which
                # untracks them) runs at the caller's next allocation, as after any code building them
                # with the collector off, instead of inside this call.
                gc.enable()

    @abc.abstractmethod
    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        """The algorithm proper, on validated input."""

    def on_assignment(self, partitions: Iterable[TopicPartition], generation: int) -> None:
        """Remember this consumer's assignment and generation after a SyncGroup."""
        self._last_assignment = list(partitions)
        self._generation = generation

    def subscription_user_data(self, topics: Iterable[str]) -> bytes | None:
        """User data to send in the next JoinGroup; ``None`` for assignors that need none."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
