"""What client glue calls on a rebalance recorder.

The aiokafka and confluent-kafka glue (:mod:`kassign.telemetry.aiokafka_glue`,
:mod:`kassign.telemetry.confluent_glue`) is typed against this protocol rather than against
:class:`~kassign.telemetry.recorder.RebalanceRecorder`, so the recorder can import its glue
without the glue importing it back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

__all__ = ["RecorderHooks"]


class RecorderHooks(Protocol):
    """The part of a rebalance recorder its client glue uses."""

    member: str
    group: str | None
    protocol: str
    protocol_given: bool
    clock: Callable[[], float]

    def subscribed(
        self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None
    ) -> None: ...

    def record_callback(
        self, kind: str, partitions: Iterable[Any], start: float, end: float, error: BaseException | None = None
    ) -> None: ...

    def rebalance_started(self, generation: int | None = None) -> None: ...

    def rebalance_completed(
        self, ok: bool = True, generation: int | None = None, error: str | BaseException | None = None
    ) -> None: ...

    def heartbeat_completed(
        self, latency_ms: float, error: str | BaseException | None = None, answered: bool = True
    ) -> None: ...

    def closing(self) -> None: ...

    def closed(self) -> None: ...
