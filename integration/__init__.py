"""Real-broker integration tooling: topic admin
(:mod:`integration.topics`), the group driver that runs aiokafka, confluent-kafka and Java members
(:mod:`integration.driver`) and the checks over the timelines they record
(:mod:`integration.timeline_checks`).

Not part of the installed ``kassign`` package: client libraries are imported here freely.
"""
