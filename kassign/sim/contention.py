"""CPU contention: a group's member processes and the broker sharing one machine's cores.

Off unless :attr:`SimConfig.cpu_cores <kassign.sim.config.SimConfig.cpu_cores>` is set; then what a
group of *N* members costs grows with *N*, by two effects of ``P = N + BROKER_PROCESSES`` processes
sharing ``C`` cores:

* **wake-up lateness** (``cpu_wait_ms``): a process woken by a timer (its heartbeat's) or by a
  broker's answer waits for a core behind the processes already runnable. The mean wait is
  ``cpu_wait_ms * max(0, P - C) / C`` (``cpu_wait_ms`` per process beyond the cores, shared over the
  cores), each wait drawn exponentially (a queue's waiting time) from the member's own seeded
  generator. A classic member's heartbeat timer restarts from when its heartbeat actually went
  (aiokafka's ``_heartbeat_routine`` sleeps the interval from its last send), so each heartbeat's
  lateness carries over: members whose timers started at one SyncGroup drift apart, further the
  larger the group, and hear of the next rebalance at different times.
* **reaction work** (``member_cpu_ms``): handling an answer that moves a rebalance on (a heartbeat's
  news of a rebalance, a JoinGroup answer, a SyncGroup answer and its callbacks) takes that much of
  one core. The cores serve these first come first served, so *N* members answered together (the
  broker answers every JoinGroup, then every SyncGroup, at once) are done ``N * member_cpu_ms / C``
  after the first, and the leader's SyncGroup, which the round waits for, may come late among them.

A third use is optional (``SimConfig.revocation_commit_ms``, :mod:`kassign.sim.member`): the
OffsetCommit a revocation callback makes is a round trip whose answer wakes the member like any
other, and whose core time queues on the same cores, so the commits of many members revoking at once
(a cooperative round's survivors, after one SyncGroup) go through one after another.

All are measured at the size the presets were fitted at (6 members):
:func:`kassign.sim.calibration.group_size.measured_contention`. Everything is deterministic: the
waits come from the members' seeded generators and the cores' queue from the order of events.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

__all__ = ["BROKER_PROCESSES", "CpuContention", "mean_wait"]

#: Processes on the machine besides the members': the broker.
BROKER_PROCESSES = 1


def mean_wait(wait_per_process: float, processes: int, cores: int) -> float:
    """The mean wake-up wait of ``processes`` processes on ``cores`` cores: ``wait_per_process`` for
    each process beyond the cores, shared over the cores (in the unit of ``wait_per_process``)."""
    return wait_per_process * max(0, processes - cores) / cores


class CpuContention:
    """``cores`` cores shared by the live members' processes and :data:`BROKER_PROCESSES`.

    ``processes()`` counts the processes now (live members plus the broker); ``wait_s`` is the mean
    wake-up wait per process beyond the cores and ``work_s`` the core time a member's reaction to a
    broker's answer takes (see the module docstring).
    """

    def __init__(self, cores: int, wait_s: float, work_s: float, processes: Callable[[], int]) -> None:
        if cores < 1:
            raise ValueError(f"cores must be at least 1, got {cores!r}")
        if wait_s < 0 or work_s < 0:
            raise ValueError(f"wait_s and work_s must be >= 0, got {wait_s!r} and {work_s!r}")
        self.cores = cores
        self.wait_s = wait_s
        self.work_s = work_s
        self.processes = processes
        self._free_at: list[float] = [0.0] * cores  # a heap: when each core is next free

    def mean_wait_s(self, processes: int | None = None) -> float:
        """The mean wake-up wait with ``processes`` processes (default: now)."""
        return mean_wait(self.wait_s, self.processes() if processes is None else processes, self.cores)

    def lateness_s(self, rng: random.Random) -> float:
        """One wake-up's wait for a core: exponential with :meth:`mean_wait_s`, drawn from ``rng``."""
        mean = self.mean_wait_s()
        return rng.expovariate(1.0 / mean) if mean > 0 else 0.0

    def reaction_s(self, now: float, rng: random.Random, work_s: float | None = None) -> float:
        """How long after ``now`` a member woken by a broker's answer has handled it: its wake-up
        wait, then ``work_s`` (default :attr:`work_s`) on the first core free (first come, first served)."""
        work = self.work_s if work_s is None else work_s
        woken = now + self.lateness_s(rng)
        if work <= 0:
            return woken - now
        start = max(woken, heapq.heappop(self._free_at))
        heapq.heappush(self._free_at, start + work)
        return start + work - now
