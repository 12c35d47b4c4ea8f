"""kassign assign SCENARIO.json [SCENARIO.json ...]: run an assignor on scenario files and print the results.

The scenario file (JSON; "#" marks comments here only):

    {"assignor": "cooperative-sticky",                  # sticky | cooperative-sticky | range | roundrobin
     "partitions_per_topic": {"orders": 6, ...},
     "subscriptions": {"member-1": {"topics": ["orders"], "owned_partitions": [["orders", 0], ...],
                                     "generation_id": 4, "rack_id": "eu-1a"}, ...},
     "partition_racks": {"orders:0": ["eu-1a", "eu-1b"], ...}}   # optional

Prints each member's partitions, the per-member counts (balance) and how many previously owned
partitions changed owner (movement); --json prints the same as one JSON object (a list of them
for several files). At most 1,000,000 partitions per topic and 10,000,000 in all.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from kassign.assignors import CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor, StickyAssignor
from kassign.assignors.base import PartitionAssignor
from kassign.cli_errors import handles_errors
from kassign.cli_options import MAX_PARTITIONS_PER_TOPIC, MAX_PARTITIONS_TOTAL, ArgumentParser
from kassign.model import Subscription, TopicPartition
from kassign.protocol import encode_sticky_user_data

__all__ = ["main", "load_scenario", "run_scenario"]

DESCRIPTION = __doc__.split("\n\n", 1)[1]

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
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], str):
        raise ValueError(f'{where}: a partition is [topic, number] or "topic:number", got {_short(value)}')
    partition: object = value[1]
    if isinstance(partition, str) and partition.strip().lstrip("-").isdigit() and len(partition) < 20:
        partition = int(partition)
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise ValueError(f"{where}: partition number must be an integer, got {_short(value[1])}")
    if not 0 <= partition < MAX_PARTITIONS_PER_TOPIC:
        raise ValueError(f"{where}: partition number {partition} is outside 0..{MAX_PARTITIONS_PER_TOPIC - 1:,}")
    return TopicPartition(value[0], partition)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_json(path: str | Path) -> object:
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None


def _partition_counts(raw: object, path: str | Path) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: 'partitions_per_topic' must be an object of topic -> partition count")
    counts: dict[str, int] = {}
    for topic, n in raw.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{path}: partition count of topic {topic!r} must be an integer >= 0, got {_short(n)}")
        if n > MAX_PARTITIONS_PER_TOPIC:
            raise ValueError(
                f"{path}: topic {topic!r} has {n:,} partitions; at most "
                f"{MAX_PARTITIONS_PER_TOPIC:,} per topic are supported"
            )
        counts[topic] = n
    if sum(counts.values()) > MAX_PARTITIONS_TOTAL:
        raise ValueError(
            f"{path}: {sum(counts.values()):,} partitions in all; at most {MAX_PARTITIONS_TOTAL:,} are supported"
        )
    return counts


def _subscription(name: str, member: str, spec: object, path: str | Path) -> Subscription:
    where = f"{path}: subscription of {member!r}"
    if not isinstance(spec, dict) or not isinstance(spec.get("topics"), list):
        raise ValueError(f"{where} needs a 'topics' list")
    topics = spec["topics"]
    if not all(isinstance(t, str) for t in topics):
        raise ValueError(f"{where}: topics must be strings, got {_short(topics)}")
    raw_owned = spec.get("owned_partitions", [])
    if not isinstance(raw_owned, list):
        raise ValueError(f"{where}: 'owned_partitions' must be a list, got {_short(raw_owned)}")
    owned = [_partition(p, f"{where}: owned_partitions") for p in raw_owned]
    generation = spec.get("generation_id")
    if generation is not None and (
        isinstance(generation, bool) or not isinstance(generation, int) or not -1 <= generation < 2**31
    ):
        raise ValueError(f"{where}: 'generation_id' must be an int32 or null, got {_short(generation)}")
    rack = spec.get("rack_id")
    if rack is not None and not isinstance(rack, str):
        raise ValueError(f"{where}: 'rack_id' must be a string or null, got {_short(rack)}")
    user_data = encode_sticky_user_data(owned, generation) if name == "sticky" and owned else None
    return Subscription(list(topics), user_data, owned, generation, rack)


def _partition_racks(racks: object, path: str | Path) -> dict[TopicPartition, set[str]] | None:
    if racks is None:
        return None
    if not isinstance(racks, dict):
        raise ValueError(f"{path}: 'partition_racks' must be an object of \"topic:partition\" -> racks")
    out: dict[TopicPartition, set[str]] = {}
    for key, value in racks.items():
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise ValueError(f"{path}: partition_racks of {key!r} must be a list of rack names, got {_short(value)}")
        out[_partition(key, f"{path}: partition_racks")] = set(value)
    return out


def load_scenario(path: str | Path) -> tuple[str, dict[str, int], dict[str, Subscription], dict | None]:
    """(assignor name, partitions_per_topic, subscriptions, partition_racks) from a scenario file.

    Raises ValueError naming the file and the value for anything malformed, including partition
    counts beyond MAX_PARTITIONS_PER_TOPIC per topic or MAX_PARTITIONS_TOTAL in all.
    """
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a scenario is a JSON object, got {type(raw).__name__}")
    name = raw.get("assignor", "cooperative-sticky")
    if not isinstance(name, str) or name not in ASSIGNORS:
        raise ValueError(f"{path}: unknown assignor {_short(name)}; expected one of {sorted(ASSIGNORS)}")
    partitions_per_topic = _partition_counts(raw.get("partitions_per_topic"), path)
    members = raw.get("subscriptions") or {}
    if not isinstance(members, dict):
        raise ValueError(
            f"{path}: 'subscriptions' must be an object of member id -> subscription, got {type(members).__name__}"
        )
    subscriptions = {member: _subscription(name, member, spec, path) for member, spec in members.items()}
    return name, partitions_per_topic, subscriptions, _partition_racks(raw.get("partition_racks"), path)


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
        "scenario": str(path),
        "assignor": name,
        "assignment": {
            m: [f"{tp.topic}:{tp.partition}" for tp in sorted(parts)] for m, parts in sorted(result.items())
        },
        "counts": counts,
        "spread": (max(counts.values()) - min(counts.values())) if counts else 0,
        "kept": sum(1 for tp, m in owned.items() if now.get(tp) == m),
        "moved_or_revoked": sum(1 for tp, m in owned.items() if m in result and now.get(tp) != m),
        "changing_owner": {f"{tp.topic}:{tp.partition}": m for tp, m in sorted(moving.items())},
        # cooperative-sticky leaves these out until their owner has revoked them (next rebalance)
        "held_back": name == "cooperative-sticky",
    }


def _print_text(report: dict) -> None:
    print(f"assignor: {report['assignor']}")
    for member, parts in report["assignment"].items():
        print(f"  {member} ({len(parts)}): {', '.join(parts) or '-'}")
    print(f"balance: counts {sorted(report['counts'].values())}, max - min = {report['spread']}")
    print(f"movement: {report['kept']} owned partitions kept, {report['moved_or_revoked']} moved or revoked")
    if report["changing_owner"]:
        label = "held back until revoked" if report["held_back"] else "changing owner"
        print(
            f"{label} ({len(report['changing_owner'])}): "
            + ", ".join(f"{tp} -> {m}" for tp, m in report["changing_owner"].items())
        )


@handles_errors("assign")
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of kassign assign; returns the exit code."""
    parser = ArgumentParser(
        prog="kassign assign", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario JSON file(s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (a list of them for several files)")
    args = parser.parse_args(argv)
    reports = [run_scenario(path) for path in args.scenarios]  # all checked before anything is printed
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        return 0
    for i, (path, report) in enumerate(zip(args.scenarios, reports)):
        if len(reports) > 1:
            print(("\n" if i else "") + f"== {path}")
        _print_text(report)
    return 0
