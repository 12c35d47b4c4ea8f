"""Kafka's replica placement for new topics and partitions (``AdminUtils.assignReplicasToBrokers``).

Rack-unaware: partition ``p``'s leader is broker ``(p + start) % n`` of the broker list, and its
followers follow at an offset (the "shift") that grows by one after every full pass over the
brokers, so that each broker's followers spread over all other brokers.

Rack-aware (every broker has a rack): the same walk over a broker list that alternates racks
(first broker of each rack in rack-name order, then the second of each, ...), except that a
follower is skipped while its rack already holds a replica and some rack holds none, or while
its broker already holds one and some broker holds none.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

__all__ = ["assign_replicas_to_brokers", "rack_alternated_broker_list"]

_INT32_MAX = 2**31 - 1


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered to alternate racks: racks sorted by name, brokers of a rack by id, taking
    one broker from each rack in turn (``{0: "a", 1: "a", 2: "b"}`` -> ``[0, 2, 1]``)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    # Java sorts rack names with String.compareTo: UTF-16 code units.
    racks = sorted(by_rack, key=lambda r: r.encode("utf-16-be", "surrogatepass"))
    queues = [sorted(by_rack[rack], reverse=True) for rack in racks]
    result: list[int] = []
    while len(result) < len(broker_racks):
        for queue in queues:
            if queue:
                result.append(queue.pop())
    return result


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of the j-th follower candidate: 1..n-1 places after the leader, rotating with ``shift``."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _normalize_brokers(brokers: Mapping[int, str | None] | Sequence[int]) -> list[tuple[int, str | None]]:
    if isinstance(brokers, Mapping):
        items = list(brokers.items())
    elif isinstance(brokers, (str, bytes)) or not isinstance(brokers, Sequence):
        raise TypeError(f"brokers must be a mapping of broker id -> rack or a sequence of broker ids, got {brokers!r}")
    else:
        items = [(b, None) for b in brokers]
    seen: set[int] = set()
    out = []
    for broker, rack in items:
        if isinstance(broker, bool) or not isinstance(broker, int):
            raise TypeError(f"broker ids must be ints, got {broker!r}")
        if not 0 <= broker <= _INT32_MAX:
            raise ValueError(f"broker ids are between 0 and {_INT32_MAX} (Kafka's node.id), got {broker}")
        if broker in seen:
            raise ValueError(f"broker id {broker} is listed twice")
        seen.add(broker)
        if rack is not None and not isinstance(rack, str):
            raise TypeError(f"rack of broker {broker} must be a str or None, got {rack!r}")
        out.append((broker, rack or None))  # an empty rack name is no rack, as an unset broker.rack
    return out


def _check_int(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if not minimum <= value <= _INT32_MAX:
        raise ValueError(f"{name} must be between {minimum} and {_INT32_MAX}, got {value}")


def assign_replicas_to_brokers(
    brokers: Mapping[int, str | None] | Sequence[int],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Place ``replication_factor`` replicas of each of ``n_partitions`` partitions on ``brokers``.

    ``brokers`` maps broker id -> rack (or ``None``), or lists ids without racks; for the
    rack-unaware algorithm their order matters, as in Kafka (whose admin tools pass them sorted
    by id). Rack-aware when every broker has a rack. Returns partition id -> replica broker ids,
    leader first, for partition ids ``start_partition_id`` (0 when -1) onwards.

    ``fixed_start_index`` >= 0 fixes both the first leader's index and the initial follower
    shift, which makes the result identical to Kafka's; -1 draws both at random from ``rng`` (a
    fresh ``random.Random()`` when None), giving one of the outcomes Kafka could produce.

    Raises ValueError with Kafka's reason for: ``n_partitions`` <= 0, ``replication_factor`` <= 0
    or above the number of brokers, and racks on some brokers only.
    """
    entries = _normalize_brokers(brokers)
    for name, value in (("n_partitions", n_partitions), ("replication_factor", replication_factor)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    _check_int("fixed_start_index", fixed_start_index, -1)
    _check_int("start_partition_id", start_partition_id, -1)
    if n_partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ValueError("Replication factor must be larger than 0.")
    if replication_factor > len(entries):
        raise ValueError(f"Replication factor: {replication_factor} larger than available brokers: {len(entries)}.")
    if n_partitions + max(0, start_partition_id) - 1 > _INT32_MAX:
        raise ValueError(f"partition ids from {max(0, start_partition_id)} to +{n_partitions} exceed int32")

    racks = {broker: rack for broker, rack in entries}
    if all(rack is None for rack in racks.values()):
        broker_list = [broker for broker, _ in entries]
        rack_of = None
    elif any(rack is None for rack in racks.values()):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    else:
        broker_list = rack_alternated_broker_list(racks)  # type: ignore[arg-type]
        rack_of = racks

    n = len(broker_list)
    if fixed_start_index >= 0:
        start_index = shift = fixed_start_index
    else:
        rng = rng or random.Random()
        start_index = rng.randrange(n)
        shift = rng.randrange(n)
    first_partition = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        if rack_of is None:
            replicas = [broker_list[first]]
            replicas += [broker_list[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            replicas = _rack_aware_replicas(broker_list, rack_of, first, shift, replication_factor)
        assignment[partition] = replicas
    return assignment


def _rack_aware_replicas(
    broker_list: list[int], rack_of: Mapping[int, str | None], first: int, shift: int, replication_factor: int
) -> list[int]:
    n = len(broker_list)
    n_racks = len(set(rack_of.values()))
    leader = broker_list[first]
    replicas = [leader]
    racks_used = {rack_of[leader]}
    brokers_used = {leader}
    k = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = broker_list[_follower_index(first, shift * n_racks, k, n)]
            k += 1
            rack = rack_of[broker]
            # Skip a broker whose rack already has a replica while another rack has none, and a
            # broker already holding one while another broker holds none.
            if (rack not in racks_used or len(racks_used) == n_racks) and (
                broker not in brokers_used or len(brokers_used) == n
            ):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
                break
    return replicas
