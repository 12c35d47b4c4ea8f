"""kassign: Kafka's sticky and cooperative-sticky partition assignment and the incremental
cooperative rebalance protocol (KIP-429) for Python consumers.

The core (model, codecs, assignors, simulator, placement) imports only the standard library;
client glue lives in :mod:`kassign.adapters`.
"""

from kassign.model import Assignment, GroupSubscription, RebalanceProtocol, Subscription, TopicPartition

__all__ = ["TopicPartition", "Subscription", "Assignment", "RebalanceProtocol", "GroupSubscription"]
__version__ = "0.2.0"
