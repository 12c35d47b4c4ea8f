"""kassign for aiokafka.

* Drop-in assignors for ``AIOKafkaConsumer(partition_assignment_strategy=(...))``, as classes or
  instances: :class:`StickyAssignor`, :class:`CooperativeStickyAssignor`, :class:`RangeAssignor`,
  :class:`RoundRobinAssignor` (Kafka's protocol names, so they interoperate with Java and librdkafka).
* :class:`CooperativeConsumer`: an AIOKafkaConsumer that sends full subscriptions and rebalances
  cooperatively (KIP-429) when every listed assignor supports it; with ``group_protocol="consumer"``
  it is a member of a KIP-848 consumer group instead (the broker assigns, with ``group_remote_assignor``).
* :func:`group_id_of`: what the rest of kassign (telemetry) may read of an aiokafka consumer.
"""

from kassign.adapters.aiokafka.accessors import group_id_of
from kassign.adapters.aiokafka.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
)
from kassign.adapters.aiokafka.consumer import CooperativeConsumer
from kassign.adapters.aiokafka.group_protocol import IllegalCooperativeAssignment
from kassign.adapters.aiokafka.static_heartbeat import FencedInstanceIdError

__all__ = [
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "CooperativeConsumer",
    "IllegalCooperativeAssignment",
    "FencedInstanceIdError",
    "group_id_of",
]
