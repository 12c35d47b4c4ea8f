"""Two of Java's commit guarantees that aiokafka 0.14's ``GroupCoordinator.commit_offsets`` lacks,
for kassign's coordinators (a mixin placed before aiokafka's class).

* **A commit never outlives the membership it was issued under.** aiokafka fills in the generation
  and member id when it sends a commit, not when the application issues it. A member frozen past its
  session timeout (a zombie) that commits on resuming can wait inside aiokafka while it learns it was
  removed, rejoins and gets a new generation -- and the broker then accepts the zombie's offsets under
  the new one, although its partitions may have been processed by another member meanwhile. Here a
  commit issued before the member's generation was reset fails with ``CommitFailedError``, as the
  broker would have failed it under the old generation.
* **A closing member finds its coordinator, for a while.** aiokafka stops looking the coordinator up
  once ``close()`` has begun, so a commit made while closing (a revoke callback committing its
  offsets) after the coordinator moved retried every backoff for ever and ``close()`` never returned.
  Here a closing member looks the coordinator up itself and gives the commit up after the rebalance
  timeout (Java's ``close()`` has a timeout too); the partitions' next owner resumes from the last
  committed offsets, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import aiokafka.errors as Errors
from aiokafka.client import ConnectionGroup, CoordinationType
from aiokafka.util import create_future

from kassign.adapters.aiokafka.handover import consumed_offsets
from kassign.adapters.aiokafka.internals import close_started

log = logging.getLogger(__name__)

__all__ = ["CommitGuard", "commit_failed", "rebalance_in_progress"]

# A commit that fails with a retriable error while revoking is retried this often, then given up
# (the partition's next owner resumes from the last committed offset: nothing is lost).
_REVOCATION_COMMIT_ATTEMPTS = 3


def commit_failed(message: str) -> Errors.CommitFailedError:
    """aiokafka's CommitFailedError saying ``message`` only (its default text blames max_poll_interval_ms
    whatever the cause)."""
    error = Errors.CommitFailedError()
    error.args = (message,)
    return error


def rebalance_in_progress(message: str) -> Errors.RebalanceInProgressError:
    """aiokafka's RebalanceInProgressError, marked retriable as Java's RebalanceInProgressException is
    (aiokafka's class is not): commit again once the round is over."""
    error = Errors.RebalanceInProgressError(message)
    error.retriable = True
    return error


class CommitGuard:
    """Mixin for a subclass of aiokafka's ``GroupCoordinator`` (listed before it)."""

    # What it uses of aiokafka's GroupCoordinator (annotations only: mypy sees the coordinator's attributes).
    group_id: str
    _client: Any
    _retry_backoff_ms: int
    _rebalance_timeout_ms: int
    _auto_commit_interval_ms: int
    _commit_lock: asyncio.Lock
    _do_commit_offsets: Callable[..., Awaitable[Any]]
    _is_commit_retriable: Callable[[Exception], bool]

    def _init_commit_guard(self) -> None:
        #: Generation resets so far: a commit issued before one is never sent after it.
        self._resets = 0
        #: Assignment rounds completed so far (the member knows what it owns after each): a commit
        #: that met a rebalance waits for the next one.
        self._rounds_completed = 0
        self._membership_moved_fut: asyncio.Future[None] | None = None
        #: Why the membership last ended (session expired, fenced, left), named by CommitFailedError.
        self._lost_cause: str | None = None

    def _membership_moved(self) -> None:
        """Wake the commits waiting for the membership to move on: a JoinGroup answered or a round
        completed (classic), a new epoch (KIP-848), or the membership ended."""
        if self._membership_moved_fut is not None and not self._membership_moved_fut.done():
            self._membership_moved_fut.set_result(None)
        self._membership_moved_fut = None

    async def _wait_membership_moved(self, timeout_s: float) -> None:
        """Until :meth:`_membership_moved` is called or ``timeout_s`` passes."""
        if self._membership_moved_fut is None:
            self._membership_moved_fut = create_future()
        await asyncio.wait([self._membership_moved_fut], timeout=timeout_s)

    def reset_generation(self) -> None:
        self._resets += 1
        super().reset_generation()  # type: ignore[misc]
        self._membership_moved()

    def _closing_now(self) -> bool:
        return close_started(self)

    async def ensure_coordinator_known(self) -> None:
        if self.coordinator_id is None and self._closing_now():
            await self._look_up_coordinator_once()
            return
        await super().ensure_coordinator_known()  # type: ignore[misc]

    async def _look_up_coordinator_once(self) -> None:
        """One FindCoordinator while closing (aiokafka's own lookup loop stops at close)."""
        client: Any = self._client
        try:
            coordinator_id = await client.coordinator_lookup(CoordinationType.GROUP, self.group_id)
        except Errors.KafkaError as err:
            if not err.retriable:
                raise
            log.info("group %s: no coordinator while closing (%r)", self.group_id, err)
            await client.force_metadata_update()
            return
        if await client.ready(coordinator_id, group=ConnectionGroup.COORDINATION):
            self.coordinator_id = coordinator_id
            self._coordinator_dead_fut = create_future()

    async def commit_offsets(self, assignment: Any, offsets: Mapping[Any, Any], *, consumed: bool = False) -> None:
        """aiokafka's commit loop with the two guarantees of the module docstring. ``consumed``: the
        offsets are the consumed positions of every assigned partition (``commit()`` without offsets)."""
        issued_after = self._resets
        issued_under = self._commit_issued_under()
        deadline: float | None = None
        backoff_s = self._retry_backoff_ms / 1000
        refused: Exception | None = None
        rebalance_met_at: float | None = None  # the first rebalance this commit met: its waits end a timeout later
        while True:
            if self._closing_now() and deadline is None:
                deadline = time.monotonic() + self._rebalance_timeout_ms / 1000
            await self.ensure_coordinator_known()
            sent_under = self._commit_issued_under()
            try:
                async with self._commit_lock:
                    if self._resets != issued_after:
                        raise commit_failed(
                            "Commit cannot be completed: this member's generation was reset after the commit "
                            f"was issued ({self._membership_lost_cause()}), and its partitions may belong to "
                            "another member now"
                        )
                    await asyncio.shield(self._do_commit_offsets(assignment, offsets))
            except Errors.KafkaError as err:
                if self._met_rebalance(err):
                    if rebalance_met_at is None:
                        rebalance_met_at = time.monotonic()
                    offsets, refused = await self._commit_after_rebalance(
                        err,
                        offsets,
                        issued_after=issued_after,
                        issued_under=issued_under,
                        sent_under=sent_under,
                        consumed=consumed,
                        refused=refused,
                        rebalance_met_at=rebalance_met_at,
                    )
                    if not offsets:
                        break
                    continue
                if not err.retriable:
                    raise
                if deadline is not None and time.monotonic() >= deadline:
                    log.error(
                        "group %s: giving up a commit while closing: %r; the partitions' next owner resumes "
                        "from the last committed offsets",
                        self.group_id,
                        err,
                    )
                    raise
                await asyncio.sleep(backoff_s)
            else:
                break
        if refused is not None:
            raise refused

    async def _maybe_do_autocommit(self, assignment: Any) -> float | None:
        """aiokafka's auto-commit, with a refusal that retrying cannot fix (no READ on a topic or the
        group) tried again at the next auto-commit interval, as Java's auto-commit does: aiokafka
        raised it and tried again at once, for ever (a loop of refused commits and log lines)."""
        try:
            return await super()._maybe_do_autocommit(assignment)  # type: ignore[misc]
        except Errors.KafkaError as err:
            if not self._is_commit_retriable(err):
                interval_s = self._auto_commit_interval_ms / 1000
                self._next_autocommit_deadline = time.monotonic() + interval_s
            raise

    def check_membership_for_commit(self) -> None:
        """Raise CommitFailedError, naming why, when this member is out of its group (left after
        max_poll_interval_ms, fenced, session expired) and not yet back: what it consumed is no longer
        its own to commit (Java's commitSync outside an active group)."""
        if self._out_of_group():
            raise self._membership_lost_error()

    def _membership_lost_error(self) -> Errors.CommitFailedError:
        """The CommitFailedError of a commit refused because the membership it was issued under ended."""
        return commit_failed(
            f"group {self.group_id}: commit cannot be completed: "
            f"{self._membership_lost_cause()}; its partitions may belong to another member now"
        )

    def _out_of_group(self) -> bool:
        return False

    def _met_rebalance(self, err: Errors.KafkaError) -> bool:
        """Whether a commit answered ``err`` met a rebalance or a membership change
        (:meth:`_commit_after_rebalance` decides what follows)."""
        return isinstance(
            err, (Errors.UnknownMemberIdError, Errors.IllegalGenerationError, Errors.RebalanceInProgressError)
        )

    def _commit_issued_under(self) -> Any:
        """What a commit notes of the membership when issued and when sent (the classic coordinator's
        generation and whether it was stable); read back by :meth:`_commit_after_rebalance`."""
        return None

    def _membership_lost_cause(self) -> str:
        """Why this member's generation was last reset, for the error of a commit it refuses."""
        return self._lost_cause or "fenced or left the group"

    async def _commit_after_rebalance(
        self,
        exc: Errors.KafkaError,
        offsets: Mapping[Any, Any],
        *,
        issued_after: int,
        issued_under: Any,
        sent_under: Any,
        consumed: bool,
        refused: Exception | None,
        rebalance_met_at: float,
    ) -> tuple[Mapping[Any, Any], Exception | None]:
        """A commit answered UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS: the offsets to
        commit again (empty: none) and the error to raise once they are, or raise now. ``rebalance_met_at``:
        when (``time.monotonic()``) this commit first met such an answer. Here: fail it, as aiokafka
        does; the classic coordinator completes it after the rebalance when it can."""
        raise Errors.CommitFailedError(
            "Commit cannot be completed since the group has already rebalanced and may have "
            "assigned the partitions to another member"
        ) from exc

    def _keep_held(
        self,
        offsets: Mapping[Any, Any],
        held: frozenset[Any],
        gone: frozenset[Any],
        *,
        consumed: bool,
        refused: Exception | None,
        now_under: str,
    ) -> tuple[Mapping[Any, Any], Exception | None]:
        """A commit that met a rebalance goes out again for ``held`` only (held throughout, their
        offsets still right); ``gone`` (revoked or lost meanwhile) is left out: silently for
        ``commit()`` of the consumed positions, else with the CommitFailedError raised once the held
        ones are committed. ``now_under``: the membership it goes out under, for the log."""
        if gone:
            gone_sorted = sorted(gone)
            if consumed:
                log.info(
                    "group %s: commit after the rebalance leaves out %s, no longer this member's",
                    self.group_id,
                    gone_sorted,
                )
            elif refused is None:
                refused = commit_failed(
                    f"group {self.group_id}: offsets of {gone_sorted} not committed: partitions revoked from this "
                    f"member by the rebalance to {now_under} (commit them in on_partitions_revoked); those it "
                    "kept were committed"
                )
        log.info(
            "group %s: completing a commit that met a rebalance under %s for %s", self.group_id, now_under, sorted(held)
        )
        return {tp: offset for tp, offset in offsets.items() if tp in held}, refused

    def _retry_revocation_commit(self, err: Errors.KafkaError) -> bool:
        """Whether a revocation commit that failed with ``err`` is tried again."""
        return bool(err.retriable)

    def _revoked_offsets(self, assignment: Any, partitions: AbstractSet[Any]) -> dict[Any, Any]:
        """What a revocation of ``partitions`` commits: their consumed positions in ``assignment``."""
        return consumed_offsets(assignment, partitions)

    async def _commit_revoked(self, assignment: Any, partitions: AbstractSet[Any]) -> None:
        """Commit the consumed positions of ``partitions`` before they are revoked: a few attempts, then
        given up with an error logged."""
        offsets = self._revoked_offsets(assignment, partitions)
        for attempt in range(1, _REVOCATION_COMMIT_ATTEMPTS + 1):
            try:
                async with self._commit_lock:
                    await self._do_commit_offsets(assignment, offsets)
                return
            except Errors.KafkaError as err:
                if not self._retry_revocation_commit(err) or attempt == _REVOCATION_COMMIT_ATTEMPTS:
                    log.error(
                        "group %s: committing revoked partitions %s failed: %r; their next owner resumes "
                        "from the last committed offsets",
                        self.group_id,
                        sorted(offsets),
                        err,
                    )
                    return
                await asyncio.sleep(self._retry_backoff_ms / 1000)
                await self.ensure_coordinator_known()
