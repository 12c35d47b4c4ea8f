"""Rebalance telemetry for confluent-kafka consumers: recording ``on_assign``/``on_revoke``/``on_lost``.

confluent-kafka's ``Consumer`` is a C type whose methods cannot be patched, so the recorder hooks
in through the callbacks given to ``subscribe``::

    consumer.subscribe(topics, **recorder.confluent_callbacks(on_assign=my_assign))

Behaviour is unchanged: the user's callbacks run with the same arguments, their exceptions
propagate (confluent-kafka re-raises them from ``poll``), and when a callback does not call
``assign``/``unassign`` the library still does it afterwards. Without a user ``on_lost`` the
user's ``on_revoke`` receives lost partitions, as confluent-kafka itself does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kassign.telemetry.hooks import RecorderHooks

__all__ = ["recording_callbacks", "close"]

Callback = Callable[[Any, list[Any]], Any]


def _timed(recorder: RecorderHooks, kind: str, user: Callback | None) -> Callback:
    clock = recorder.clock

    def callback(consumer: Any, partitions: list[Any]) -> None:
        start = clock()
        try:
            if user is not None:
                user(consumer, partitions)
        except BaseException as exc:
            recorder.record_callback(kind, partitions, start, clock(), error=exc)
            raise
        recorder.record_callback(kind, partitions, start, clock())

    callback.__name__ = f"recorded_{kind}"
    return callback


def recording_callbacks(
    recorder: RecorderHooks,
    *,
    on_assign: Callback | None = None,
    on_revoke: Callback | None = None,
    on_lost: Callback | None = None,
) -> dict[str, Callback]:
    """The ``on_assign``/``on_revoke``/``on_lost`` keyword arguments for ``Consumer.subscribe``."""
    for name, cb in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
        if cb is not None and not callable(cb):
            raise TypeError(f"{name} must be callable, got {cb!r}")
    return {
        "on_assign": _timed(recorder, "cb_assigned", on_assign),
        "on_revoke": _timed(recorder, "cb_revoked", on_revoke),
        "on_lost": _timed(recorder, "cb_lost", on_lost if on_lost is not None else on_revoke),
    }


def close(recorder: RecorderHooks, consumer: Any) -> None:
    """``consumer.close()`` between the recorder's ``closing`` and ``closed`` events."""
    recorder.closing()
    try:
        consumer.close()
    finally:
        recorder.closed()
