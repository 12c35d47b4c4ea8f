"""Random churn on a live consumer group (issue 9), by concern: a seeded generator of churn
sequences (:mod:`.generator`), a runner that plays one against a real broker under steady keyed
load (:mod:`.runner`), and the judge of the recorded timeline (:mod:`.judge`). Faults (issue 16):
coordinator failover, zombies and slow revokers are played by :mod:`.faults` and judged by
:mod:`.fault_checks`.

Replay one sequence: ``python -m benchmarks.churn_soak --seed N [--profile small]``.
"""

from integration.churn.fault_checks import FaultReport, zombie_windows
from integration.churn.generator import (
    ACTIONS,
    FAULT_ACTIONS,
    FAULT_KINDS,
    PROFILES,
    SUBSCRIPTIONS,
    ChurnProfile,
    ChurnSequence,
    ChurnStep,
    MemberSpec,
    fault_sequence,
    generate_sequence,
)
from integration.churn.judge import (
    ChurnFailure,
    ChurnResult,
    analyse,
    check,
    churn_problems,
    excused_partitions,
    hung_closes,
    settle_problems,
    unowned_partition_seconds,
)
from integration.churn.runner import run_sequence

__all__ = [
    "ACTIONS",
    "FAULT_ACTIONS",
    "FAULT_KINDS",
    "fault_sequence",
    "FaultReport",
    "zombie_windows",
    "SUBSCRIPTIONS",
    "ChurnProfile",
    "PROFILES",
    "MemberSpec",
    "ChurnStep",
    "ChurnSequence",
    "generate_sequence",
    "ChurnResult",
    "ChurnFailure",
    "run_sequence",
    "analyse",
    "check",
    "churn_problems",
    "settle_problems",
    "excused_partitions",
    "hung_closes",
    "unowned_partition_seconds",
]
