"""A replica placement as kafka-reassign-partitions JSON, and how evenly it spreads load and racks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["reassignment_json", "summarize", "PlacementSummary"]


def reassignment_json(topic: str, assignment: Mapping[int, Sequence[int]]) -> dict:
    """The document ``kafka-reassign-partitions.sh --reassignment-json-file`` reads."""
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic must be a non-empty str, got {topic!r}")
    return {
        "version": 1,
        "partitions": [{"topic": topic, "partition": p, "replicas": list(assignment[p])} for p in sorted(assignment)],
    }


@dataclass(frozen=True)
class PlacementSummary:
    """Per-broker leader and replica counts, and how many racks each partition spans."""

    leaders: dict[int, int]
    replicas: dict[int, int]
    racks_per_partition: dict[int, int] | None  # None when brokers have no racks

    def render(self) -> str:
        """A few human-readable lines."""
        lines = [f"  broker {b}: {self.leaders[b]} leaders, {self.replicas[b]} replicas" for b in sorted(self.replicas)]
        if self.racks_per_partition:
            spans = Counter(self.racks_per_partition.values())
            lines.append("  racks per partition: " + ", ".join(f"{n} racks x{c}" for n, c in sorted(spans.items())))
        return "\n".join(lines)


def summarize(
    assignment: Mapping[int, Sequence[int]], brokers: Mapping[int, str | None] | Sequence[int]
) -> PlacementSummary:
    """Count leaders and replicas per broker (every broker listed, even with none) and racks per partition."""
    ids = list(brokers)
    leaders = dict.fromkeys(ids, 0)
    replicas = dict.fromkeys(ids, 0)
    for partition_replicas in assignment.values():
        leaders[partition_replicas[0]] = leaders.get(partition_replicas[0], 0) + 1
        for broker in partition_replicas:
            replicas[broker] = replicas.get(broker, 0) + 1
    racks_per_partition = None
    if isinstance(brokers, Mapping) and all(brokers.get(b) for b in ids):
        racks_per_partition = {p: len({brokers[b] for b in rs}) for p, rs in assignment.items()}
    return PlacementSummary(leaders, replicas, racks_per_partition)
