"""The one error type of :mod:`kassign.broker`: something a user can fix, said in one line."""

from __future__ import annotations

__all__ = ["BrokerUnavailable"]


class BrokerUnavailable(RuntimeError):
    """No broker could be started or reached; the message says why and what to do about it."""
