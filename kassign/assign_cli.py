"""``kassign assign SCENARIO.json``: run an assignor on a scenario file and print the result.

The scenario file::

    {"assignor": "cooperative-sticky",                  # sticky | cooperative-sticky | range | roundrobin
     "partitions_per_topic": {"orders": 6, ...},
     "subscriptions": {"member-1": {"topics": ["orders"], "owned_partitions": [["orders", 0], ...],
                                     "generation_id": 4, "rack_id": "eu-1a"}, ...},
     "partition_racks": {"orders:0": ["eu-1a", "eu-1b"], ...}}   # optional

Prints each member's partitions, the per-member counts (balance) and how many previously owned
partitions changed owner (movement); ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kassign.assignors import CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor, StickyAssignor
from kassign.assignors.base import PartitionAssignor
from kassign.model import Subscription, TopicPartition
from kassign.protocol import encode_sticky_user_data

__all__ = ["main", "load_scenario", "run_scenario"]

ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
}


def _partition(value: object, where: str) -> TopicPartition:
    if isinstance(value, str) and ":" in value:
        topic, _, number = value.rpartition(":")
        value = [topic, number]
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{where}: a partition is [topic, number] or \"topic:number\", got {value!r}")
    try:
        return TopicPartition(str(value[0]), int(value[1]))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: partition number must be an integer, got {value[1]!r}") from None


def load_scenario(path: str | Path) -> tuple[str, dict[str, int], dict[str, Subscription], dict | None]:
    """(assignor name, partitions_per_topic, subscriptions, partition_racks) from a scenario file."""
    raw = json.loads(Path(path).read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a scenario is a JSON object, got {type(raw).__name__}")
    name = raw.get("assignor", "cooperative-sticky")
    if name not in ASSIGNORS:
        raise ValueError(f"{path}: unknown assignor {name!r}; expected one of {sorted(ASSIGNORS)}")
    partitions_per_topic = raw.get("partitions_per_topic")
    if not isinstance(partitions_per_topic, dict):
        raise ValueError(f"{path}: 'partitions_per_topic' must be an object of topic -> partition count")
    subscriptions = {}
    for member, spec in (raw.get("subscriptions") or {}).items():
        if not isinstance(spec, dict) or not isinstance(spec.get("topics"), list):
            raise ValueError(f"{path}: subscription of {member!r} needs a 'topics' list")
        owned = [_partition(p, f"{path}: owned_partitions of {member!r}") for p in spec.get("owned_partitions", [])]
        generation = spec.get("generation_id")
        user_data = encode_sticky_user_data(owned, generation) if name == "sticky" and owned else None
        subscriptions[member] = Subscription(list(spec["topics"]), user_data, owned, generation, spec.get("rack_id"))
    racks = raw.get("partition_racks")
    partition_racks = None
    if racks is not None:
        partition_racks = {_partition(k, f"{path}: partition_racks"): set(v) for k, v in racks.items()}
    return name, partitions_per_topic, subscriptions, partition_racks


def run_scenario(path: str | Path) -> dict:
    """Assign a scenario file; returns assignment, counts, movement and partitions changing owner."""
    name, partitions_per_topic, subscriptions, partition_racks = load_scenario(path)
    assignor = ASSIGNORS[name]()
    result = assignor.assign(partitions_per_topic, subscriptions, partition_racks=partition_racks)
    now = {tp: m for m, parts in result.items() for tp in parts}
    owned = {tp: m for m, s in subscriptions.items() for tp in s.owned_partitions}
    counts = {m: len(parts) for m, parts in result.items()}
    moving = assignor.partitions_transferring_ownership or {}
    return {
        "assignor": name,
        "assignment": {m: [f"{tp.topic}:{tp.partition}" for tp in sorted(parts)]
                       for m, parts in sorted(result.items())},
        "counts": counts,
        "spread": (max(counts.values()) - min(counts.values())) if counts else 0,
        "kept": sum(1 for tp, m in owned.items() if now.get(tp) == m),
        "moved_or_revoked": sum(1 for tp, m in owned.items() if m in result and now.get(tp) != m),
        "changing_owner": {f"{tp.topic}:{tp.partition}": m for tp, m in sorted(moving.items())},
        # cooperative-sticky leaves these out until their owner has revoked them (next rebalance)
        "held_back": name == "cooperative-sticky",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kassign assign``."""
    parser = argparse.ArgumentParser(prog="kassign assign", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", help="scenario JSON file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        report = run_scenario(args.scenario)
    except (OSError, ValueError, TypeError) as exc:
        print(f"kassign assign: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"assignor: {report['assignor']}")
    for member, parts in report["assignment"].items():
        print(f"  {member} ({len(parts)}): {', '.join(parts) or '-'}")
    print(f"balance: counts {sorted(report['counts'].values())}, max - min = {report['spread']}")
    print(f"movement: {report['kept']} owned partitions kept, {report['moved_or_revoked']} moved or revoked")
    if report["changing_owner"]:
        label = "held back until revoked" if report["held_back"] else "changing owner"
        print(f"{label} ({len(report['changing_owner'])}): "
              + ", ".join(f"{tp} -> {m}" for tp, m in report["changing_owner"].items()))
    return 0
