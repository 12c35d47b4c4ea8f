"""Grouping partitions by topic for the wire, and building TopicPartition lists back from it fast."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat

from kassign.model import TopicPartition

__all__ = ["group_by_topic", "group_sorted", "expand", "java_string_order"]

# TopicPartition(topic, p) through the NamedTuple's __new__ costs a Python-level call per partition;
# tuple.__new__ builds the same object in C, which matters for assignments of 10^5-10^6 partitions.
_new_tuple = tuple.__new__


def java_string_order(value: str) -> bytes:
    """Sort key matching Java's ``String.compareTo`` (UTF-16 code units), so that names outside
    the Basic Multilingual Plane sort as Java sorts them; identical to ``str`` order for ASCII."""
    return value.encode("utf-16-be", "surrogatepass")


def expand(topic: str, partitions: Iterable[int], out: list[TopicPartition]) -> None:
    """Append ``TopicPartition(topic, p)`` for each partition to ``out``."""
    out.extend(map(_new_tuple, repeat(TopicPartition), zip(repeat(topic), partitions)))


def _check(tp: object, what: str) -> tuple[str, int]:
    if not isinstance(tp, tuple) or len(tp) != 2:
        raise TypeError(f"{what} must hold TopicPartition(topic, partition) items, got {tp!r}")
    return tp


def group_by_topic(partitions: Iterable[TopicPartition], what: str) -> dict[str, list[int]]:
    """topic -> partitions, topics in order of first appearance, partitions in input order."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        topic, partition = _check(tp, what)
        bucket = grouped.get(topic)
        if bucket is None:
            grouped[topic] = bucket = []
        bucket.append(partition)
    return grouped


def group_sorted(partitions: Iterable[TopicPartition], what: str) -> dict[str, list[int]]:
    """topic -> sorted partitions, topics sorted: the order Java's ConsumerProtocol writes."""
    grouped = group_by_topic(partitions, what)
    try:
        return {topic: sorted(grouped[topic]) for topic in sorted(grouped, key=java_string_order)}
    except (TypeError, AttributeError):
        bad = next((tp for tp in grouped if not isinstance(tp, str)), None)
        raise TypeError(
            f"{what}: topics must be str and partitions int, got topic {bad!r}"
            if bad is not None
            else f"{what}: partitions must be int"
        ) from None
