"""One demo run: a group on a fresh topic under a steady keyed stream, scaled ``base -> peak ->
base`` and then rolled (each of ``restarts`` members closed and started again, one at a time).

Each step waits (with a deadline) until the group has settled, then holds the steady state for a
moment so the timeline shows it; a step that misses its deadline is recorded as unsettled and the
run goes on. The run ends by stopping the producer and waiting until every
acknowledged record was processed, so "records lost" is measured, not assumed.

Cancelled (Ctrl-C: ``asyncio.run`` cancels the main task), a run still closes its members and
producer, then hands what it recorded so far, marked ``interrupted``, to ``on_interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from kassign.demo.group import ConsumerFactory, DemoGroup, GroupTiming, KeyedStream, RecordLedger, create_topic
from kassign.demo.view import LiveView
from kassign.timeline.events import Event

log = logging.getLogger(__name__)

__all__ = ["DemoPlan", "FULL_PLAN", "QUICK_PLAN", "RunResult", "demo_names", "run_protocol"]


@dataclass(frozen=True)
class DemoPlan:
    """The shape of a run: topic size, group sizes, how many members the rolling restart bounces,
    how long each steady state is held, the producer's rate and the per-step settle deadline."""

    partitions: int = 12
    base: int = 3
    peak: int = 6
    restarts: int = 3
    hold_s: float = 3.0
    rate: float = 300.0
    settle_timeout_s: float = 25.0
    drain_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not 0 < self.base < self.peak:
            raise ValueError(f"need 0 < base < peak members, got base={self.base} peak={self.peak}")
        if not 0 <= self.restarts <= self.base:
            raise ValueError(f"restarts must be between 0 and base={self.base}, got {self.restarts}")
        if self.partitions < self.peak:
            raise ValueError(f"need at least peak={self.peak} partitions, got {self.partitions}")


FULL_PLAN = DemoPlan()
QUICK_PLAN = DemoPlan(partitions=6, base=2, peak=4, restarts=1, hold_s=1.0, rate=200.0, settle_timeout_s=20.0)


@dataclass
class RunResult:
    """What one run recorded: its timeline, the marks ``name -> time`` of each step, the phases
    ``name -> (start, end)`` the metrics are computed over, and the record counts.

    An ``interrupted`` run stopped during step ``interrupted_during``; its records were not
    drained, so ``lost`` is None (not measured). ``group_protocol`` is the protocol the members
    spoke; ``broker_group_type`` the group's type as the broker described it after the run (None
    when not asked).
    """

    label: str
    title: str
    group_id: str
    topic: str
    events: list[Event]
    marks: dict[str, float] = field(default_factory=dict)
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)
    produced: int = 0
    lost: int | None = 0
    duplicates: int = 0
    duration_s: float = 0.0
    unsettled: list[str] = field(default_factory=list)
    interrupted: bool = False
    interrupted_during: str | None = None
    group_protocol: str = "classic"
    broker_group_type: str | None = None


def demo_names(label: str, suffix: str | None = None) -> tuple[str, str]:
    """(topic, group id) of a run: fresh ones per run (a random ``suffix`` unless given)."""
    name = f"kassign-demo-{label}-{suffix or uuid.uuid4().hex[:8]}"
    return name, name


def _phases(marks: dict[str, float], end: float) -> dict[str, tuple[float, float]]:
    # Each step runs from its mark to the next one; the last ends when draining starts, so the
    # members' final shutdown never counts as a rebalance.
    ordered = sorted(marks.items(), key=lambda item: item[1])
    return {name: (t, ordered[i + 1][1] if i + 1 < len(ordered) else end) for i, (name, t) in enumerate(ordered)}


async def run_protocol(
    bootstrap: str,
    label: str,
    title: str,
    consumer_factory: ConsumerFactory,
    plan: DemoPlan,
    timing: GroupTiming,
    out: TextIO,
    *,
    tty: bool,
    on_interrupted: Callable[[RunResult], None] | None = None,
    names: tuple[str, str] | None = None,
    group_protocol: str = "classic",
) -> RunResult:
    """Run the plan with members built by ``consumer_factory`` on a fresh topic and group (``names``:
    the (topic, group id) of :func:`demo_names`, chosen before when the group is configured first).

    Cancelled, it closes the group and the producer, passes the partial result to
    ``on_interrupted`` and lets the cancellation go on.
    """
    topic, group_id = names if names is not None else demo_names(label)
    await create_topic(bootstrap, topic, plan.partitions)
    ledger = RecordLedger()
    group = DemoGroup(
        bootstrap, group_id, topic, plan.partitions, consumer_factory, protocol_name=label, timing=timing, ledger=ledger
    )
    stream = KeyedStream(bootstrap, topic, ledger, rate=plan.rate)
    view = LiveView(title, group, stream, out, tty=tty)
    marks: dict[str, float] = {}
    unsettled: list[str] = []
    started = time.monotonic()

    async def step(name: str, *, mark: bool = True) -> None:
        view.step = name
        if mark:
            marks[name] = time.time()
        view.draw(force=True)

    async def settle_and_hold() -> None:
        try:
            await group.wait_settled(plan.settle_timeout_s)
        except TimeoutError as exc:
            # Shown in the summary; the run goes on so the timeline records what the group did.
            log.warning("%s: %s", view.step, exc)
            unsettled.append(view.step)
        view.draw(force=True)
        await asyncio.sleep(plan.hold_s)

    member_names = [f"m{i}" for i in range(1, plan.peak + 1)]
    drain_start: float | None = None

    def result(interrupted_during: str | None = None) -> RunResult:
        interrupted = interrupted_during is not None
        return RunResult(
            label=label,
            title=title,
            group_id=group_id,
            topic=topic,
            events=sorted(group.timeline.events, key=lambda e: e.t),
            marks=dict(marks),
            phases=_phases(marks, drain_start if drain_start is not None else time.time()),
            produced=ledger.produced_count,
            lost=None if interrupted else ledger.lost(),
            duplicates=ledger.duplicates(),
            duration_s=time.monotonic() - started,
            unsettled=list(unsettled),
            interrupted=interrupted,
            interrupted_during=interrupted_during,
            group_protocol=group_protocol,
        )

    view_task = asyncio.create_task(view.run(), name="live-view")
    try:
        stream.start()
        await step(f"start {plan.base} members")
        for name in member_names[: plan.base]:
            group.start_member(name)
        await settle_and_hold()

        await step(f"scale out {plan.base}\u2192{plan.peak}")
        for name in member_names[plan.base :]:
            group.start_member(name)
        await settle_and_hold()

        await step(f"scale in {plan.peak}\u2192{plan.base}")
        await group.stop_members(member_names[plan.base :])
        await settle_and_hold()

        for name in member_names[: plan.restarts]:
            await step(f"restart {name}")
            await group.stop_members([name])
            group.start_member(name)
            await settle_and_hold()

        drain_start = time.time()
        await step("draining", mark=False)
        await stream.stop()
        # Records of partitions nobody owns cannot drain: then waiting is pointless.
        await group.wait_drained(plan.drain_timeout_s if not unsettled else plan.hold_s)
        await step("closing members", mark=False)
        await group.close()
    except asyncio.CancelledError:
        stopped_at, during = time.time(), view.step
        log.debug("%s: interrupted during %r; closing the group", label, during)
        await _close(view_task, stream, group)
        if drain_start is None:
            drain_start = stopped_at  # the last step ends at the interrupt, not after the members closed
        if on_interrupted is not None:
            on_interrupted(result(interrupted_during=during))
        raise
    finally:
        await _close(view_task, stream, group)
    view.step = "done"
    view.draw(force=True)
    return result()


async def _close(view_task: asyncio.Task[None], stream: KeyedStream, group: DemoGroup) -> None:
    """Stop the live view, the producer and every member (again is harmless: each step is idempotent)."""
    view_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await view_task
    await stream.stop()
    await group.close()
