"""The churn group's members across several :class:`~integration.driver.GroupDriver` instances on
one group id, as the churn runner (:mod:`integration.churn.runner`) and the faults it plays
(:mod:`integration.churn.faults`) drive them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from integration.churn.generator import SUBSCRIPTIONS, MemberSpec
from integration.churn.judge import settle_problems
from integration.driver import GroupDriver, GroupTiming, KeyedProducer
from kassign.model import TopicPartition
from kassign.timeline.events import Event

__all__ = ["GroupPool"]

_STRATEGY_BY_KIND = {"confluent": "cooperative-sticky", "java": "cooperative-sticky"}


class GroupPool:
    """The group's members across several :class:`GroupDriver` instances on the same group id.

    A driver starts each member name once and gives all its members the driver's topics, so a
    restart under the same name, or a member with another subscription, uses another driver of the
    same group; the timeline is all drivers' events merged.
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Mapping[str, str],
        timing: GroupTiming,
        log_dir: Path,
        slow_revoke_ms: int = 0,
    ) -> None:
        self.bootstrap, self.group_id, self.topics, self.timing, self.log_dir = (
            bootstrap,
            group_id,
            topics,
            timing,
            log_dir,
        )
        self.slow_revoke_ms = slow_revoke_ms
        self._drivers: list[tuple[str, GroupDriver, set[str]]] = []
        self.current: dict[str, tuple[MemberSpec, GroupDriver]] = {}
        self._notes: list[Event] = []  # the runner's own events (faults on the cluster)

    def _new_driver(self, subscription: str) -> tuple[str, GroupDriver, set[str]]:
        topics = [self.topics[role] for role in SUBSCRIPTIONS[subscription]]
        driver = GroupDriver(
            self.bootstrap,
            self.group_id,
            topics,
            timing=self.timing,
            log_dir=self.log_dir / f"driver{len(self._drivers)}",
        )
        self._drivers.append((subscription, driver, set()))
        return self._drivers[-1]

    def _driver_for(self, spec: MemberSpec) -> GroupDriver:
        free = [d for d in self._drivers if d[0] == spec.subscription and spec.name not in d[2]]
        _, driver, names = free[0] if free else self._new_driver(spec.subscription)
        names.add(spec.name)
        return driver

    def start(self, spec: MemberSpec) -> None:
        driver = self._driver_for(spec)
        if spec.kind == "aiokafka":
            driver.start_member(
                "aiokafka",
                "kassign.adapters.aiokafka:CooperativeStickyAssignor",
                member_id=spec.name,
                consumer_factory="kassign.adapters.aiokafka:CooperativeConsumer",
                slow_revoke_ms=self.slow_revoke_ms if spec.slow_revoke else 0,
            )
        else:
            driver.start_member(spec.kind, _STRATEGY_BY_KIND[spec.kind], member_id=spec.name)
        self.current[spec.name] = (spec, driver)

    def stop(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.stop_member(name)

    def crash(self, name: str) -> None:
        _, driver = self.current.pop(name)
        driver.crash_member(name)

    def request_leave(self, name: str) -> None:
        """Ask a member to close cleanly without waiting for it to exit."""
        _, driver = self.current.pop(name)
        driver.request_stop(name)

    def freeze(self, name: str) -> float:
        return self.current[name][1].freeze_member(name)

    def thaw(self, name: str) -> float:
        return self.current[name][1].thaw_member(name)

    def note(self, event: Event) -> None:
        """Add one of the runner's own events to the timeline."""
        self._notes.append(event)

    def start_producer(self, role: str, rate: float) -> KeyedProducer:
        _, driver, _ = self._drivers[0] if self._drivers else self._new_driver("ab")
        return driver.start_producer(rate, topic=self.topics[role])

    def live(self) -> dict[str, list[str]]:
        """Live member -> topics it reads."""
        running = {m for _, d, _ in self._drivers for m in d.live_members()}
        return {name: list(driver.topics) for name, (_, driver) in sorted(self.current.items()) if name in running}

    def failed(self) -> dict[str, str]:
        return {m: d.member_log(m, 10) for _, d, _ in self._drivers for m in d.failed_members()}

    def events(self, *, changes_only: bool = False) -> list[Event]:
        """Every driver's events and the runner's notes, in time order; ``changes_only``: without the
        members' steady reports (``GroupDriver.change_events``)."""
        drivers = (d.change_events() if changes_only else d.events() for _, d, _ in self._drivers)
        return sorted([*(e for events in drivers for e in events), *self._notes], key=lambda e: e.t)

    def wait_for(
        self,
        predicate: Callable[[list[Event]], list[str]],
        timeout: float,
        what: str,
        *,
        changes_only: bool = False,
    ) -> list[Event]:
        """Poll until ``predicate`` (returning problems) returns none; TimeoutError with the last problems.
        ``changes_only``: the predicate needs no steady reports (see :meth:`events`)."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events(changes_only=changes_only)
            problems = predicate(events)
            if not problems:
                return events
            failed = self.failed()
            if failed:
                raise RuntimeError(f"{what}: member(s) exited on their own: {failed}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f}s: " + "; ".join(problems[:10]))
            time.sleep(0.1)

    def wait_settled(
        self, partitions: Mapping[str, Sequence[TopicPartition]], timeout: float, stable_for: float = 0.5
    ) -> float:
        """Wait until the group is settled continuously for ``stable_for`` seconds; returns when it settled."""
        since: list[float] = []

        def problems(events: list[Event]) -> list[str]:
            found = settle_problems(events, self.live(), partitions)
            if found:
                since.clear()
                return found
            if not since:
                since.append(time.time())
            return [] if time.time() - since[0] >= stable_for else ["not yet stable"]

        self.wait_for(problems, timeout, "group settled", changes_only=True)
        return since[0]

    def kill_all(self) -> None:
        """SIGKILL every current member (a stalled group's members hang in JoinGroup and cannot leave)."""
        for name in sorted(self.current):
            _, driver = self.current.pop(name)
            if name in driver.live_members():
                driver.crash_member(name)

    def close(self) -> None:
        for _, driver, _ in self._drivers:
            driver.close()
