"""A confluent-kafka group member run as a separate process so a test can SIGKILL it (a crash).

Usage: python crash_member.py BOOTSTRAP GROUP TOPIC RECORDING
Prints "assigned P,P" / "revoked P,P" / "lost P,P" lines as its callbacks run.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer

from kassign.telemetry import MetricConfig, RebalanceRecorder


def main(bootstrap: str, group: str, topic: str, recording: str) -> None:
    recorder = RebalanceRecorder(
        recording, member="crash", group=group, protocol="eager", metric_config=MetricConfig(time_window_ms=600_000)
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 4000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "roundrobin",
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )

    def report(kind: str):
        def callback(_consumer, partitions):
            print(kind, ",".join(str(p.partition) for p in partitions), flush=True)

        return callback

    recorder.subscribe(
        consumer, [topic], on_assign=report("assigned"), on_revoke=report("revoked"), on_lost=report("lost")
    )
    while True:  # until killed
        consumer.poll(0.2)


if __name__ == "__main__":
    main(*sys.argv[1:5])
