"""Local brokers for tests, examples and the demo: Apache Kafka from Maven Central's jars (KRaft) or the
embedded Tansu, started under a supervisor so that none outlives its owner; and the choice of broker
for a run (:func:`open_broker`).
"""

from kassign.broker.choose import kafka_bootstrap, kafka_broker, open_broker, planned_broker
from kassign.broker.errors import BrokerUnavailable
from kassign.broker.kafka import DEFAULT_KAFKA_VERSION, replicated_settings
from kassign.broker.launch import BrokerInfo, start_kafka, start_tansu
from kassign.broker.probe import free_port, wait_for_broker

__all__ = [
    "BrokerInfo",
    "BrokerUnavailable",
    "DEFAULT_KAFKA_VERSION",
    "open_broker",
    "kafka_broker",
    "kafka_bootstrap",
    "planned_broker",
    "start_kafka",
    "start_tansu",
    "wait_for_broker",
    "free_port",
    "replicated_settings",
]
