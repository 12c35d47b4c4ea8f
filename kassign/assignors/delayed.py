"""Cooperative-sticky with Kafka Connect's scheduled rebalance delay (KIP-415) for consumer groups.

When a member leaves, its partitions are held back (left unassigned) for up to
``scheduled_rebalance_max_delay_ms`` so that a restarting member can take them back: in a rolling
deploy only the leader's partitions move (see below). Within the delay:

* a returning member (same member id, ``group_instance_id`` or worker id) gets its partitions back
  at once; the worker id is sent in the subscription user data because dynamic members get a new
  member id on every restart (Connect uses the worker URL the same way);
* no member has partitions revoked for balance (Connect's "no revocations while delayed"), and
  members that own nothing are remembered as candidates;
* when the delay expires, the partitions still held back go round-robin to the candidates (the
  members that had nothing during the delay, typically a replacement with a new identity), or,
  with no candidate left, are spread as new work by cooperative-sticky.

Which partitions a departed member had is known from the leader's record of the assignment it
made last round (Connect's ``previousAssignment``); it is kept in the leader's memory, not sent
to the group, so a departing *leader* takes that record with it and its partitions are reassigned
at once, starting no delay (Connect's rule). The leader recognises its record as current from the
state: the newest state echoed must be the one it wrote (same epoch, itself as leader).

Whatever is already held back, and the remaining delay, is carried across rebalances and leader
changes: the leader writes a :class:`~kassign.protocol.delay_user_data.DelayState` into every
member's assignment user data, each member counts the delay down on its own clock and echoes the
state in its next JoinGroup, and the next leader (whoever it is) continues from the newest one.

The balancing itself is :class:`CooperativeStickyAssignor`'s, run over the members present and the
partitions not held back, so with a delay of 0 this assignor is exactly cooperative-sticky. Under
the EAGER protocol (members own nothing when they join) the leader's record keeps the assignment
sticky and the delay works the same way.

Wiring (member side): after each SyncGroup call :meth:`on_assignment` and
:meth:`on_assignment_user_data` with the assignment's user data; when :attr:`rejoin_after_s` is not
None the member must rejoin the group that many seconds later (the delay has ended, or a follow-up
round is needed). Leader side: after :meth:`assign`, :attr:`assignment_user_data` is the user data
to send to every member (or use :meth:`assign_group`).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace

from kassign.assignors.base import PartitionAssignor
from kassign.assignors.sticky.cooperative import CooperativeStickyAssignor
from kassign.model import Assignment, RebalanceProtocol, Subscription, TopicPartition
from kassign.protocol.delay_user_data import (
    DelayState,
    DelaySubscriptionData,
    MemberIdentity,
    WorkerPartitions,
    decode_delay_state,
    decode_delay_subscription_data,
    encode_delay_state,
    encode_delay_subscription_data,
)
from kassign.protocol.errors import ProtocolError
from kassign.protocol.topic_partitions import expand

__all__ = ["DelayedCooperativeStickyAssignor"]

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class _Member:
    """One member as the leader sees it this round."""

    member_id: str
    identity: MemberIdentity
    generation: int
    state: DelayState | None


class _Roster:
    """Finds the present member an identity from an earlier round refers to."""

    def __init__(self, members: Iterable[_Member]) -> None:
        self._by_member: dict[str, str] = {}
        self._by_instance: dict[str, str] = {}
        self._by_worker: dict[str, str] = {}
        for m in members:  # in member id order, so a shared instance/worker id resolves to the first
            self._by_member[m.member_id] = m.member_id
            if m.identity.group_instance_id is not None:
                self._by_instance.setdefault(m.identity.group_instance_id, m.member_id)
            if m.identity.worker_id is not None:
                self._by_worker.setdefault(m.identity.worker_id, m.member_id)

    def find(self, identity: MemberIdentity) -> str | None:
        """The member id of the present member that is ``identity``, or None if it is gone."""
        found = self._by_member.get(identity.member_id)
        if found is None and identity.group_instance_id is not None:
            found = self._by_instance.get(identity.group_instance_id)
        if found is None and identity.worker_id is not None:
            found = self._by_worker.get(identity.worker_id)
        return found


@dataclass
class _Plan:
    """What the delay logic decided before balancing: who gets what back, what stays held."""

    given_back: dict[str, set[TopicPartition]]
    held: list[WorkerPartitions]
    deadline_ms: int | None
    candidates: list[MemberIdentity]


def _partitions_of(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> set[TopicPartition]:
    """Every partition of every topic some member subscribes to."""
    topics = {topic for sub in subscriptions.values() for topic in sub.topics}
    partitions: list[TopicPartition] = []
    for topic in topics:
        expand(topic, range(partitions_per_topic.get(topic, 0)), partitions)
    return set(partitions)


class DelayedCooperativeStickyAssignor(PartitionAssignor):
    """Cooperative-sticky that holds a departed member's partitions back for a while (KIP-415).

    Protocol name ``"kassign-delayed-cooperative-sticky"``: every member of the group must use this
    assignor (its user data is not cooperative-sticky's), so it has its own name for the group to
    agree on. ``clock`` returns seconds (``time.monotonic`` by default; only differences within one
    process are used, the delay travels between processes as a remaining duration). ``worker_id``
    identifies this consumer across restarts and must be unique in the group; set it to something
    stable (pod name, host:port) so a restarted consumer gets its partitions back at once. By
    default it is random: then only ``group_instance_id`` recognises a restarted consumer, which
    otherwise waits as a new member and receives the held partitions when the delay expires.
    ``base_assignor`` is the balancing assignor (a fresh ``CooperativeStickyAssignor`` by default).
    """

    name = "kassign-delayed-cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(
        self,
        scheduled_rebalance_max_delay_ms: int = 300_000,
        *,
        worker_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        base_assignor: PartitionAssignor | None = None,
    ) -> None:
        super().__init__()
        delay = scheduled_rebalance_max_delay_ms
        if isinstance(delay, bool) or not isinstance(delay, int):
            raise TypeError(f"scheduled_rebalance_max_delay_ms must be an int, got {delay!r}")
        if not 0 <= delay <= _INT32_MAX:
            raise ValueError(f"scheduled_rebalance_max_delay_ms must be in [0, {_INT32_MAX}], got {delay}")
        if worker_id is not None and not isinstance(worker_id, str):
            raise TypeError(f"worker_id must be a str or None, got {worker_id!r}")
        if worker_id == "":
            raise ValueError("worker_id must not be empty, got ''")
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning seconds, got {clock!r}")
        if base_assignor is None:
            base_assignor = CooperativeStickyAssignor()
        elif not isinstance(base_assignor, PartitionAssignor):
            raise TypeError(f"base_assignor must be a PartitionAssignor, got {base_assignor!r}")
        self.scheduled_rebalance_max_delay_ms = delay
        self.worker_id = worker_id if worker_id is not None else uuid.uuid4().hex
        self._clock = clock
        self._base = base_assignor
        #: Leader side, after :meth:`assign`: the user data to send to every member.
        self.assignment_user_data: bytes | None = None
        #: Leader side, after :meth:`assign`: ms until the group must rebalance again, None if never.
        self.next_rebalance_delay_ms: int | None = None
        #: Leader side, after :meth:`assign`: the state written (for logging and inspection).
        self.last_state: DelayState | None = None
        #: Member side: seconds after the last assignment at which to rejoin, None if not needed.
        self.rejoin_after_s: float | None = None
        self._received_state: DelayState | None = None
        self._received_at_ms = 0
        # Leader side: the epoch of the last state written and the assignment made with it.
        self._record: tuple[int, tuple[WorkerPartitions, ...]] | None = None

    # ---------------------------------------------------------------- member side

    def subscription_user_data(self, topics: Iterable[str]) -> bytes:
        """Worker id, generation and the last state received, its delay counted down to now."""
        state = self._received_state
        if state is not None:
            elapsed = self._now_ms() - self._received_at_ms
            rejoin_after_ms = state.rejoin_after_ms
            if rejoin_after_ms >= 0:
                rejoin_after_ms = max(0, rejoin_after_ms - elapsed)
            state = replace(state, delay_ms=max(0, state.delay_ms - elapsed), rejoin_after_ms=rejoin_after_ms)
        return encode_delay_subscription_data(DelaySubscriptionData(self.worker_id, self._generation, state))

    def on_assignment_user_data(self, data: bytes | None) -> None:
        """Take the leader's state from this member's assignment user data; sets :attr:`rejoin_after_s`.

        Unparseable bytes are logged and treated as no state (no delay, no rejoin).
        """
        state = None
        if data is not None:
            try:
                state = decode_delay_state(data)
            except ProtocolError as exc:
                log.warning("ignoring unparseable delayed-assignor state in the assignment: %s", exc)
        self._received_state = state
        self._received_at_ms = self._now_ms()
        self.rejoin_after_s = None if state is None or state.rejoin_after_ms < 0 else state.rejoin_after_ms / 1000

    # ---------------------------------------------------------------- leader side

    def assign_group(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        *,
        partition_racks: Mapping[TopicPartition, Collection[str]] | None = None,
    ) -> dict[str, Assignment]:
        """:meth:`assign`, with the state as every member's assignment user data."""
        result = self.assign(partitions_per_topic, subscriptions, partition_racks=partition_racks)
        return {member: Assignment(partitions, self.assignment_user_data) for member, partitions in result.items()}

    def _assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
    ) -> dict[str, list[TopicPartition]]:
        now_ms = self._now_ms()
        members = {member_id: self._decode_member(member_id, sub) for member_id, sub in sorted(subscriptions.items())}
        previous, remaining_ms = self._latest_state(members.values())
        # The leader's own configuration bounds every delay, whatever a member echoes.
        remaining_ms = min(remaining_ms, self.scheduled_rebalance_max_delay_ms)
        all_partitions = _partitions_of(partitions_per_topic, subscriptions)

        if self.scheduled_rebalance_max_delay_ms == 0:
            plan = _Plan({}, [], None, [])
        else:
            record = self._last_assignment_record(previous)
            plan = self._plan(subscriptions, members, previous, record, remaining_ms, now_ms, all_partitions)
        held = {tp for entry in plan.held for tp in entry.partitions}

        base_subscriptions = self._base_subscriptions(subscriptions, members, plan.given_back)
        result = self._run_base(partitions_per_topic, base_subscriptions, partition_racks, held)

        if held:
            # While the delay runs nobody is revoked for balance: owners keep what the base took away.
            owners = self._owners(base_subscriptions, all_partitions)
            assigned_now = {tp for parts in result.values() for tp in parts}
            vetoed = {
                tp
                for tp, owner in owners.items()
                if tp not in held and tp not in assigned_now and tp.topic in subscriptions[owner].topics
            }
            for tp in sorted(vetoed):
                result[owners[tp]].append(tp)
            if self.partitions_transferring_ownership is not None:
                self.partitions_transferring_ownership = {
                    tp: m for tp, m in self.partitions_transferring_ownership.items() if tp not in vetoed
                }

        # A given-back partition the base moved on is unassigned this round, and no member revokes it
        # (none really owns it), so no member would start the follow-up round: the leader asks for one.
        assigned = {tp for parts in result.values() for tp in parts}
        orphans = {tp for back in plan.given_back.values() for tp in back} - assigned
        if orphans:
            log.info("%d partitions need a follow-up rebalance (e.g. %s)", len(orphans), min(orphans))
        delay_ms = max(0, plan.deadline_ms - now_ms) if held and plan.deadline_ms is not None else 0
        rejoin_after_ms = 0 if orphans else (delay_ms if held else -1)

        state = DelayState(
            epoch=(previous.epoch + 1) if previous is not None else 1,
            delay_ms=delay_ms,
            rejoin_after_ms=rejoin_after_ms,
            leader=self._leader_identity(members.values()),
            held_back=tuple(plan.held),
            candidates=tuple(plan.candidates) if held else (),
        )
        self.last_state = state
        self._record = (
            state.epoch,
            tuple(WorkerPartitions(m.identity, tuple(result[m.member_id])) for m in members.values()),
        )
        self.assignment_user_data = encode_delay_state(state)
        self.next_rebalance_delay_ms = None if rejoin_after_ms < 0 else rejoin_after_ms
        if held:
            log.info(
                "holding back %d partitions of %d departed members for %d ms more",
                len(held),
                len(plan.held),
                delay_ms,
            )
        return result

    # ---------------------------------------------------------------- the delay logic

    def _plan(
        self,
        subscriptions: Mapping[str, Subscription],
        members: Mapping[str, _Member],
        previous: DelayState | None,
        last_assignment: tuple[WorkerPartitions, ...],
        remaining_ms: int,
        now_ms: int,
        all_partitions: set[TopicPartition],
    ) -> _Plan:
        """Decide what returning members get back, what stays held and until when."""
        taken = {tp for sub in subscriptions.values() for tp in sub.owned_partitions}
        given_back: dict[str, set[TopicPartition]] = {}

        def free(entry: WorkerPartitions) -> set[TopicPartition]:
            return {tp for tp in entry.partitions if tp in all_partitions and tp not in taken}

        present = _Roster(members.values()).find

        departed: list[WorkerPartitions] = []
        still_held: list[WorkerPartitions] = []
        if previous is not None:
            for entries, departed_list in ((last_assignment, departed), (previous.held_back, still_held)):
                for entry in entries:
                    member_id = present(entry.worker)
                    if member_id is None:
                        departed_list.append(entry)
                        continue
                    back = {tp for tp in free(entry) if tp.topic in subscriptions[member_id].topics}
                    if back:
                        log.info("member %s gets back %d partitions it had before", member_id, len(back))
                        given_back.setdefault(member_id, set()).update(back)
                        taken |= back

        pending = previous is not None and bool(previous.held_back)
        expired = pending and remaining_ms <= 0
        candidates = [] if previous is None else [c for c in previous.candidates if present(c) is not None]
        if expired:
            released = sorted({tp for entry in still_held for tp in free(entry)})
            targets = sorted({member_id for c in candidates if (member_id := present(c)) is not None})
            self._release_to_candidates(released, targets, subscriptions, given_back)
            taken.update(released)
            still_held, candidates, pending = [], [], False

        held = [WorkerPartitions(e.worker, tuple(sorted(free(e)))) for e in still_held]
        for entry in departed:
            lost = free(entry)
            if not lost:
                continue
            log.info("member %s left: holding back its %d partitions", entry.worker.member_id, len(lost))
            held.append(WorkerPartitions(entry.worker, tuple(sorted(lost))))
        held = [entry for entry in held if entry.partitions]
        if not held:
            return _Plan(given_back, [], None, [])

        deadline_ms = now_ms + (remaining_ms if pending else self.scheduled_rebalance_max_delay_ms)
        already = {present(c) for c in candidates}
        for member in members.values():
            owns_nothing = not given_back.get(member.member_id) and not any(
                tp in all_partitions for tp in subscriptions[member.member_id].owned_partitions
            )
            if owns_nothing and member.member_id not in already:
                candidates.append(member.identity)
        return _Plan(given_back, held, deadline_ms, candidates)

    @staticmethod
    def _release_to_candidates(
        released: list[TopicPartition],
        targets: list[str],
        subscriptions: Mapping[str, Subscription],
        given_back: dict[str, set[TopicPartition]],
    ) -> None:
        """Delay expired: deal the held partitions round-robin to the candidates still present."""
        if not targets:
            log.info("delay expired, no candidate member: spreading %d partitions as new work", len(released))
            return
        log.info("delay expired: dealing %d partitions to candidate members %s", len(released), targets)
        dealt = 0
        for tp in released:
            eligible = [member_id for member_id in targets if tp.topic in subscriptions[member_id].topics]
            if eligible:
                given_back.setdefault(eligible[dealt % len(eligible)], set()).add(tp)
                dealt += 1

    # ---------------------------------------------------------------- helpers

    def _last_assignment_record(self, previous: DelayState | None) -> tuple[WorkerPartitions, ...]:
        """This leader's record of last round's assignment, if the newest state is the one it wrote."""
        if previous is None:
            return ()
        if (
            self._record is not None
            and previous.epoch == self._record[0]
            and previous.leader is not None
            and previous.leader.worker_id == self.worker_id
        ):
            return self._record[1]
        log.info(
            "the last assignment was made by another leader (%s): partitions of members that left since "
            "are reassigned at once",
            "unknown" if previous.leader is None else previous.leader.member_id,
        )
        return ()

    def _now_ms(self) -> int:
        return math.floor(self._clock() * 1000)

    def _decode_member(self, member_id: str, sub: Subscription) -> _Member:
        data = DelaySubscriptionData(None)
        if sub.user_data is not None:
            try:
                data = decode_delay_subscription_data(sub.user_data)
            except ProtocolError as exc:
                log.warning("member %s sent unparseable user data, treating it as new: %s", member_id, exc)
        if data.state is not None and not 0 <= data.state.epoch < _INT32_MAX:
            # The next epoch is this one + 1 and must fit an int32: a state no leader could have written.
            log.warning(
                "member %s echoed delay state epoch %d, outside [0, %d): treating its user data as unreadable",
                member_id,
                data.state.epoch,
                _INT32_MAX - 1,
            )
            data = DelaySubscriptionData(None)
        generation = sub.generation_id if sub.generation_id is not None else data.generation
        identity = MemberIdentity(member_id, sub.group_instance_id, data.worker_id)
        return _Member(member_id, identity, generation, data.state)

    @staticmethod
    def _latest_state(members: Iterable[_Member]) -> tuple[DelayState | None, int]:
        """The newest state echoed, and its remaining delay (the smallest any member reports)."""
        states = [m.state for m in members if m.state is not None]
        if not states:
            return None, 0
        epoch = max(s.epoch for s in states)
        newest = [s for s in states if s.epoch == epoch]
        return newest[0], min(s.delay_ms for s in newest)

    def _leader_identity(self, members: Iterable[_Member]) -> MemberIdentity | None:
        mine = [m.identity for m in members if m.identity.worker_id == self.worker_id]
        if len(mine) != 1:
            log.warning(
                "cannot tell which member is this leader (%d members carry worker id %r)", len(mine), self.worker_id
            )
            return None
        return mine[0]

    @staticmethod
    def _base_subscriptions(
        subscriptions: Mapping[str, Subscription],
        members: Mapping[str, _Member],
        given_back: Mapping[str, set[TopicPartition]],
    ) -> dict[str, Subscription]:
        """Subscriptions as the base assignor expects them; given-back partitions count as owned."""
        newest = max([0, *(m.generation for m in members.values())])
        newest_claim: dict[TopicPartition, int] = {}
        if given_back:
            for member_id, sub in subscriptions.items():
                for tp in sub.owned_partitions:
                    newest_claim[tp] = max(newest_claim.get(tp, -1), members[member_id].generation)
        result = {}
        for member_id, sub in subscriptions.items():
            generation = members[member_id].generation
            owned = list(sub.owned_partitions)
            back = given_back.get(member_id)
            if back:
                # Raising the generation makes the base honour the given-back partitions; claims that a
                # member of a newer generation also makes must not win by that, so they are dropped.
                owned = sorted({tp for tp in owned if newest_claim[tp] <= generation} | back)
                generation = newest
            result[member_id] = replace(
                sub, user_data=None, owned_partitions=owned, generation_id=generation if generation >= 0 else None
            )
        return result

    @staticmethod
    def _owners(
        subscriptions: Mapping[str, Subscription], all_partitions: set[TopicPartition]
    ) -> dict[TopicPartition, str]:
        """Partition -> the one member owning it in the newest generation (ambiguous claims dropped)."""
        best: dict[TopicPartition, tuple[int, list[str]]] = {}
        for member_id, sub in sorted(subscriptions.items()):
            generation = sub.generation_id if sub.generation_id is not None else -1
            for tp in sub.owned_partitions:
                if tp not in all_partitions:
                    continue
                current = best.get(tp)
                if current is None or generation > current[0]:
                    best[tp] = (generation, [member_id])
                elif generation == current[0]:
                    current[1].append(member_id)
        return {tp: ids[0] for tp, (_, ids) in best.items() if len(ids) == 1}

    def _run_base(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, Collection[str]] | None,
        held: set[TopicPartition],
    ) -> dict[str, list[TopicPartition]]:
        """Run the base assignor over every partition but the held ones.

        The base only takes partition counts, so the partitions left of a topic with held ones are
        renumbered 0..k-1 in order (which keeps its tie-breaks) and mapped back afterwards.
        """
        if not held:
            result = self._base.assign(partitions_per_topic, subscriptions, partition_racks=partition_racks)
            self.partitions_transferring_ownership = self._base.partitions_transferring_ownership
            return {member_id: list(result.get(member_id, [])) for member_id in subscriptions}

        held_by_topic: dict[str, set[int]] = {}
        for topic, partition in held:
            held_by_topic.setdefault(topic, set()).add(partition)
        to_virtual: dict[TopicPartition, TopicPartition] = {}
        counts = dict(partitions_per_topic)
        for topic, held_partitions in sorted(held_by_topic.items()):
            kept = [p for p in range(partitions_per_topic.get(topic, 0)) if p not in held_partitions]
            counts[topic] = len(kept)
            real_tps: list[TopicPartition] = []
            virtual_tps: list[TopicPartition] = []
            expand(topic, kept, real_tps)
            expand(topic, range(len(kept)), virtual_tps)
            to_virtual.update(zip(real_tps, virtual_tps))
        to_real = {v: r for r, v in to_virtual.items()}
        renumbered = held_by_topic.keys()

        def virtual(tp: TopicPartition) -> TopicPartition | None:
            return to_virtual.get(tp) if tp.topic in renumbered else tp

        def real(tp: TopicPartition) -> TopicPartition:
            return to_real[tp] if tp.topic in renumbered else tp

        virtual_subs = {
            member_id: replace(sub, owned_partitions=[v for v in map(virtual, sub.owned_partitions) if v is not None])
            for member_id, sub in subscriptions.items()
        }
        virtual_racks = None
        if partition_racks is not None:
            virtual_racks = {v: racks for tp, racks in partition_racks.items() if (v := virtual(tp)) is not None}
        result = self._base.assign(counts, virtual_subs, partition_racks=virtual_racks)
        transferring = self._base.partitions_transferring_ownership
        self.partitions_transferring_ownership = (
            None if transferring is None else {real(tp): member for tp, member in transferring.items()}
        )
        return {member_id: [real(tp) for tp in result.get(member_id, [])] for member_id in subscriptions}
