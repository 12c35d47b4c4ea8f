"""Kafka replica placement: which brokers hold each partition's replicas, rack-aware as Kafka does it.

Pure standard library; ``kassign replicas`` (:mod:`kassign.placement.cli`) turns a plan into
kafka-reassign-partitions JSON or creates the topic with it.
"""

from kassign.placement.plan import PlacementSummary, reassignment_json, summarize
from kassign.placement.replica_assignment import assign_replicas_to_brokers, rack_alternated_broker_list

__all__ = [
    "assign_replicas_to_brokers",
    "rack_alternated_broker_list",
    "reassignment_json",
    "summarize",
    "PlacementSummary",
]
