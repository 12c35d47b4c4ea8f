"""Hypothesis strategies for consumer-protocol values, and the line encoding ProtocolOracle speaks."""

from __future__ import annotations

from hypothesis import strategies as st

from kassign import Assignment, Subscription, TopicPartition

INT32 = st.integers(-(2**31), 2**31 - 1)
# Any Unicode text (not just Kafka's legal topic characters): the codec must not care.
names = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
partitions = st.lists(st.builds(TopicPartition, names, INT32), max_size=20)
user_data = st.none() | st.binary(max_size=40)
subscriptions = st.builds(
    Subscription,
    topics=st.lists(names, max_size=8),
    user_data=user_data,
    owned_partitions=partitions,
    generation_id=st.none() | st.integers(0, 2**31 - 1),
    rack_id=st.none() | names,
)
assignments = st.builds(Assignment, partitions, user_data)


def java_order(tp: TopicPartition) -> tuple[bytes, int]:
    """(topic, partition) in Java's String.compareTo order (UTF-16 code units)."""
    return tp.topic.encode("utf-16-be"), tp.partition


def enc_str(value: str | None) -> str:
    return "~" if value is None else "x" + value.encode("utf-8").hex()


def enc_bytes(value: bytes | None) -> str:
    return "~" if value is None else value.hex()


def enc_tps(tps: list[TopicPartition]) -> str:
    return ",".join(f"{enc_str(t)}:{p}" for t, p in tps)


def dec_str(field: str) -> str | None:
    return None if field == "~" else bytes.fromhex(field[1:]).decode("utf-8")


def dec_tps(field: str) -> list[TopicPartition]:
    if not field:
        return []
    out = []
    for item in field.split(","):
        topic, _, partition = item.rpartition(":")
        out.append(TopicPartition(dec_str(topic), int(partition)))
    return out
