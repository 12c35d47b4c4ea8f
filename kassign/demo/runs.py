"""The demo's runs per ``--protocol``: which consumers each run's group is made of, in order.

``classic`` (the default): aiokafka's eager default, kassign's cooperative-sticky as plain KIP-429
and kassign as shipped (with the fast follow-up). ``consumer``: the eager baseline, kassign's classic
default, and kassign on the next-generation consumer group protocol (KIP-848), where the broker's
uniform assignor assigns and the broker owns the session timeout and heartbeat interval (the demo
sets them on that group, see :mod:`kassign.broker.group_config`).

Labels name the output files, topics and groups, so they hold no ``+``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PROTOCOLS", "RunSpec", "run_labels", "run_specs", "ALL_LABELS"]

#: The ``--protocol`` values: the group protocol the demo's kassign runs are compared on.
PROTOCOLS = ("classic", "consumer")

#: (label, title, consumer kind, group protocol) per ``--protocol``, in the order the runs go.
_PLANS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "classic": (
        ("eager", "eager (aiokafka default)", "eager", "classic"),
        ("cooperative", "cooperative-sticky (plain KIP-429)", "cooperative", "classic"),
        ("fast-follow-up", "kassign default (+ fast follow-up)", "fast-follow-up", "classic"),
    ),
    "consumer": (
        ("classic-eager", "eager (aiokafka default, classic)", "eager", "classic"),
        ("classic-fast-follow-up", "kassign classic (+ fast follow-up)", "fast-follow-up", "classic"),
        ("consumer-uniform", "kassign KIP-848 (consumer, uniform)", "kip848", "consumer"),
    ),
}

#: Every label of every protocol (``--only`` accepts these, then checks the protocol's own).
ALL_LABELS = tuple(dict.fromkeys(label for plan in _PLANS.values() for label, *_ in plan))

#: The broker-side assignor of the KIP-848 run, named so the run is the same on any cluster.
REMOTE_ASSIGNOR = "uniform"


@dataclass(frozen=True)
class RunSpec:
    """One run: ``label`` (files, topic, group), ``title`` (table, plot), how its members are built
    (``kind``) and the group protocol they speak."""

    label: str
    title: str
    kind: str
    group_protocol: str

    @property
    def broker_timing(self) -> bool:
        """True when the broker owns the session timeout and heartbeat interval (KIP-848): the demo
        sets them on the group instead of on the members."""
        return self.group_protocol == "consumer"

    def consumer_factory(self) -> Callable[..., Any]:
        """Builds a member's consumer from AIOKafkaConsumer's keyword arguments."""
        from aiokafka import AIOKafkaConsumer

        from kassign.adapters.aiokafka import CooperativeConsumer

        if self.kind == "eager":
            return AIOKafkaConsumer
        if self.kind == "cooperative":
            return functools.partial(CooperativeConsumer, fast_follow_up=False)
        if self.kind == "fast-follow-up":
            return CooperativeConsumer
        if self.kind == "kip848":
            return _kip848_consumer
        raise ValueError(f"unknown consumer kind {self.kind!r}")


def _kip848_consumer(**kwargs: Any) -> Any:
    """kassign's CooperativeConsumer on the consumer group protocol."""
    from kassign.adapters.aiokafka import CooperativeConsumer

    # The broker owns these on KIP-848 (the consumer refuses them): the group's config carries the run's values.
    kwargs.pop("session_timeout_ms", None)
    kwargs.pop("heartbeat_interval_ms", None)
    return CooperativeConsumer(group_protocol="consumer", group_remote_assignor=REMOTE_ASSIGNOR, **kwargs)


def run_labels(protocol: str) -> tuple[str, ...]:
    """The labels of ``protocol``'s runs, in order."""
    return tuple(spec.label for spec in run_specs(protocol))


def run_specs(protocol: str, only: str | None = None) -> list[RunSpec]:
    """``protocol``'s runs in order (just ``only`` when given). Raises ValueError for an unknown
    protocol, or an ``only`` that is not one of its labels."""
    if protocol not in _PLANS:
        raise ValueError(f"unknown protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
    specs = [RunSpec(*row) for row in _PLANS[protocol]]
    if only is not None and only not in {s.label for s in specs}:
        raise ValueError(
            f"--only {only!r} is not a run of --protocol {protocol}: choose from {', '.join(s.label for s in specs)}"
        )
    return [s for s in specs if only is None or s.label == only]
