"""Which Apache Kafka versions kassign starts, and which it tests.

kassign runs Kafka as a KRaft cluster (no ZooKeeper), so the oldest it starts is 3.3.0, the first
release whose KRaft mode is production-ready. CI starts every version of :data:`TESTED_KAFKA_VERSIONS`
(the newest patch of each line, from Maven Central) and runs the classic-protocol broker tier on two
3.x lines; the whole suite runs on :data:`kassign.broker.kafka.DEFAULT_KAFKA_VERSION`. What each line
lacks:

* before 3.5: SCRAM users cannot be created at format time (``--security`` needs 3.5+, KIP-900);
* before 4.0: no consumer group protocol (KIP-848): tests of it skip, naming the broker.
"""

from __future__ import annotations

import re

from kassign.broker.errors import BrokerUnavailable

__all__ = ["TESTED_KAFKA_VERSIONS", "MIN_KAFKA_VERSION", "kafka_version", "version_tuple"]

#: The newest patch of each tested line (Maven Central, checked 2026-11-27), oldest first.
TESTED_KAFKA_VERSIONS = ("3.3.2", "3.7.2", "3.9.2", "4.0.2", "4.4.0")
#: The oldest Kafka kassign starts: KRaft became production-ready in 3.3.
MIN_KAFKA_VERSION = (3, 3, 0)

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"3.9.2"`` as ``(3, 9, 2)``; :class:`BrokerUnavailable` naming anything else."""
    match = _VERSION.match(version.strip())
    if match is None:
        raise BrokerUnavailable(f"Kafka version {version!r} is not of the form MAJOR.MINOR.PATCH (e.g. 4.4.0)")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def kafka_version(version: str) -> str:
    """``version`` checked: of the form MAJOR.MINOR.PATCH and at least 3.3.0 (a one-line
    :class:`BrokerUnavailable` naming it otherwise). Versions outside :data:`TESTED_KAFKA_VERSIONS`
    are allowed (a Maven Central release kassign has not tested)."""
    if version_tuple(version) < MIN_KAFKA_VERSION:
        low = ".".join(map(str, MIN_KAFKA_VERSION))
        raise BrokerUnavailable(
            f"Kafka version {version}: kassign runs Kafka in KRaft mode, which needs {low} or "
            f"newer (tested: {', '.join(TESTED_KAFKA_VERSIONS)})"
        )
    return version.strip()
