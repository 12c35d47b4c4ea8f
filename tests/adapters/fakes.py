"""Stand-ins for the parts of aiokafka an assignor reads, shared by the adapter tests."""


class FakeCluster:
    """aiokafka's ClusterMetadata as an assignor sees it: partitions per topic, no broker racks."""

    def __init__(self, topics):
        self.topics = topics

    def partitions_for_topic(self, topic):
        n = self.topics.get(topic)
        return None if n is None else set(range(n))

    def broker_metadata(self, node_id):
        return None
