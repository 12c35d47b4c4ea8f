"""Wire format of the delayed-reassignment state (KIP-415 style) carried in consumer user data.

The leader running :class:`kassign.assignors.delayed.DelayedCooperativeStickyAssignor` writes one
:class:`DelayState` into every member's assignment user data: the partitions it holds back for
departed members (the lost-assignment snapshot), how long until they are released, the members
waiting for them (candidates), whether members must rejoin and when, and who the leader was. Every
member echoes the state back in its JoinGroup user data (:class:`DelaySubscriptionData`, with the
delay counted down on its own clock), so whichever member leads the next rebalance carries the delay
on; this is how Kafka Connect's ``ExtendedAssignment`` carries ``delay`` and the leader, made
independent of which member leads. The state's size grows with the held-back partitions only, not
with the group's whole assignment.

Layout (big-endian, Kafka's non-flexible primitives: int16-prefixed strings, int32-counted arrays)::

    DelayState v0:
      int16  version (0)
      int32  epoch                       # +1 per assignment; the highest one echoed wins
      int32  delay_ms                    # until held-back partitions are released; 0: none pending
      int32  rejoin_after_ms             # -1: no follow-up rebalance needed
      int16  has_leader, then MemberIdentity if 1
      array  topics: string              # table the partition lists index into
      array  held_back: WorkerPartitions
      array  candidates: MemberIdentity
    WorkerPartitions: MemberIdentity, array of (int32 topic index, int32 array partitions)
    MemberIdentity:   string member_id, nullable string group_instance_id, nullable string worker_id

    DelaySubscriptionData v0:
      int16  version (0)
      nullable string worker_id
      int32  generation                  # -1: none
      int32  state length (-1: no state), then a DelayState

Bytes of a higher version are read as v0 and the rest ignored, as Kafka's consumer protocol does;
v0 bytes with trailing data, or any truncated/garbled field, raise :class:`ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kassign.model import TopicPartition
from kassign.protocol.errors import ProtocolError
from kassign.protocol.topic_partitions import expand, group_sorted
from kassign.protocol.wire import Reader, Writer, as_buffer

__all__ = [
    "MemberIdentity",
    "WorkerPartitions",
    "DelayState",
    "DelaySubscriptionData",
    "encode_delay_state",
    "decode_delay_state",
    "encode_delay_subscription_data",
    "decode_delay_subscription_data",
]

_VERSION = 0
_STATE = "DelayState"
_SUBSCRIPTION = "DelaySubscriptionData"
# Smallest encodings, used to reject array counts that cannot fit in the bytes left.
_MIN_IDENTITY_BYTES = 6
_MIN_WORKER_PARTITIONS_BYTES = _MIN_IDENTITY_BYTES + 4


@dataclass(frozen=True)
class MemberIdentity:
    """Who a member is across rebalances and restarts.

    ``member_id`` changes when a dynamic member restarts; ``group_instance_id`` (static membership)
    and ``worker_id`` (chosen by the application, sent in the subscription user data) survive it.
    The assignor takes two identities for the same member when any of the three agree.
    """

    member_id: str
    group_instance_id: str | None = None
    worker_id: str | None = None


@dataclass(frozen=True)
class WorkerPartitions:
    """Partitions attributed to one member (in a state: what is held back for it), sorted on the wire."""

    worker: MemberIdentity
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class DelayState:
    """The delayed-reassignment state one leader hands the whole group."""

    epoch: int
    delay_ms: int = 0
    rejoin_after_ms: int = -1
    leader: MemberIdentity | None = None
    held_back: tuple[WorkerPartitions, ...] = ()
    candidates: tuple[MemberIdentity, ...] = ()


@dataclass(frozen=True)
class DelaySubscriptionData:
    """What a member sends in its JoinGroup user data: its worker id, generation and echoed state."""

    worker_id: str | None
    generation: int = -1
    state: DelayState | None = None


def _write_identity(writer: Writer, identity: MemberIdentity, what: str) -> None:
    if not isinstance(identity, MemberIdentity):
        raise TypeError(f"{what} must be a MemberIdentity, got {identity!r}")
    writer.string(identity.member_id, f"{what}.member_id")
    writer.nullable_string(identity.group_instance_id, f"{what}.group_instance_id")
    writer.nullable_string(identity.worker_id, f"{what}.worker_id")


def _read_identity(reader: Reader, what: str) -> MemberIdentity:
    return MemberIdentity(
        reader.string(f"{what}.member_id"),
        reader.nullable_string(f"{what}.group_instance_id"),
        reader.nullable_string(f"{what}.worker_id"),
    )


def _topic_table(state: DelayState) -> list[str]:
    topics: set[str] = set()
    for entry in state.held_back:
        topics.update(tp[0] for tp in entry.partitions)
    return sorted(topics)


def _write_worker_partitions(
    writer: Writer, entries: Iterable[WorkerPartitions], topic_index: dict[str, int], what: str
) -> None:
    entries = list(entries)
    writer.array_length(len(entries))
    for entry in entries:
        if not isinstance(entry, WorkerPartitions):
            raise TypeError(f"{what} must hold WorkerPartitions, got {entry!r}")
        _write_identity(writer, entry.worker, f"{what}.worker")
        grouped = group_sorted(entry.partitions, f"{what}.partitions")
        writer.array_length(len(grouped))
        for topic, partitions in grouped.items():
            writer.int32(topic_index[topic], f"{what}.topic_index")
            writer.int32_array(partitions, f"{what}.partitions")


def _read_worker_partitions(reader: Reader, topics: list[str], what: str) -> tuple[WorkerPartitions, ...]:
    entries = []
    for _ in range(reader.array_length(what, _MIN_WORKER_PARTITIONS_BYTES)):
        identity = _read_identity(reader, f"{what}.worker")
        partitions: list[TopicPartition] = []
        for _ in range(reader.array_length(f"{what}.topics", 8)):
            start = reader.pos
            index = reader.int32(f"{what}.topic_index")
            if not 0 <= index < len(topics):
                reason = f"topic index {index} outside the table of {len(topics)} topics"
                raise reader.error(f"{what}.topic_index", reason, start)
            expand(topics[index], reader.int32_array(f"{what}.partitions"), partitions)
        entries.append(WorkerPartitions(identity, tuple(partitions)))
    return tuple(entries)


def _write_state(writer: Writer, state: DelayState) -> None:
    if not isinstance(state, DelayState):
        raise TypeError(f"state must be a DelayState, got {type(state).__name__}")
    writer.int16(_VERSION)
    writer.int32(state.epoch, "epoch")
    writer.int32(state.delay_ms, "delay_ms")
    writer.int32(state.rejoin_after_ms, "rejoin_after_ms")
    writer.int16(0 if state.leader is None else 1)
    if state.leader is not None:
        _write_identity(writer, state.leader, "leader")
    topics = _topic_table(state)
    writer.strings(topics, "topics")
    topic_index = {topic: i for i, topic in enumerate(topics)}
    _write_worker_partitions(writer, state.held_back, topic_index, "held_back")
    writer.array_length(len(state.candidates))
    for candidate in state.candidates:
        _write_identity(writer, candidate, "candidates")


def _read_state(reader: Reader) -> tuple[DelayState, int]:
    start = reader.pos
    version = reader.int16("version")
    if version < 0:
        raise reader.error("version", f"negative version {version}", start)
    epoch = reader.int32("epoch")
    delay_ms = reader.int32("delay_ms")
    rejoin_after_ms = reader.int32("rejoin_after_ms")
    flag_at = reader.pos
    has_leader = reader.int16("has_leader")
    if has_leader not in (0, 1):
        raise reader.error("has_leader", f"expected 0 or 1, got {has_leader}", flag_at)
    leader = _read_identity(reader, "leader") if has_leader else None
    topics = [reader.string("topics") for _ in range(reader.array_length("topics", 2))]
    held_back = _read_worker_partitions(reader, topics, "held_back")
    candidates = tuple(
        _read_identity(reader, "candidates") for _ in range(reader.array_length("candidates", _MIN_IDENTITY_BYTES))
    )
    state = DelayState(epoch, delay_ms, rejoin_after_ms, leader, held_back, candidates)
    return state, version


def encode_delay_state(state: DelayState) -> bytes:
    """Encode the state the leader puts in every member's assignment user data."""
    writer = Writer()
    _write_state(writer, state)
    return writer.getvalue()


def decode_delay_state(data: bytes | bytearray | memoryview) -> DelayState:
    """Decode :func:`encode_delay_state`'s bytes; malformed bytes raise :class:`ProtocolError`."""
    reader = Reader(as_buffer(data, "delay state"), _STATE)
    state, version = _read_state(reader)
    _check_consumed(reader, version)
    return state


def encode_delay_subscription_data(data: DelaySubscriptionData) -> bytes:
    """Encode a member's JoinGroup user data: worker id, generation and the echoed state."""
    if not isinstance(data, DelaySubscriptionData):
        raise TypeError(f"data must be a DelaySubscriptionData, got {type(data).__name__}")
    writer = Writer()
    writer.int16(_VERSION)
    writer.nullable_string(data.worker_id, "worker_id")
    writer.int32(data.generation, "generation")
    writer.nullable_bytes(None if data.state is None else encode_delay_state(data.state), "state")
    return writer.getvalue()


def decode_delay_subscription_data(data: bytes | bytearray | memoryview) -> DelaySubscriptionData:
    """Decode :func:`encode_delay_subscription_data`'s bytes; malformed bytes raise :class:`ProtocolError`."""
    reader = Reader(as_buffer(data, "delay subscription data"), _SUBSCRIPTION)
    start = reader.pos
    version = reader.int16("version")
    if version < 0:
        raise reader.error("version", f"negative version {version}", start)
    worker_id = reader.nullable_string("worker_id")
    generation = reader.int32("generation")
    state_at = reader.pos
    raw_state = reader.nullable_bytes("state")
    state = None
    if raw_state is not None:
        try:
            state = decode_delay_state(raw_state)
        except ProtocolError as exc:
            # Re-anchor the nested error's offset in the outer payload so it points at the bad byte.
            raise ProtocolError(_SUBSCRIPTION, f"state.{exc.field}", state_at + 4 + exc.offset, exc.reason) from None
    _check_consumed(reader, version)
    return DelaySubscriptionData(worker_id, generation, state)


def _check_consumed(reader: Reader, version: int) -> None:
    # A newer version may append fields we do not know; v0 itself must end exactly here.
    if version == _VERSION and reader.remaining:
        raise reader.error("end", f"{reader.remaining} unexpected trailing bytes after a v{version} payload")
