"""The runner that plays a churn sequence (:mod:`integration.churn.generator`) against a real broker
under steady keyed load and has its recorded timeline judged (:mod:`integration.churn.judge`).

After each step the runner either waits for the group to settle (polling, with a deadline) or lets
a short seeded gap pass so the next step lands inside the running rebalance. After the last step it
waits for the settle, stops the load, waits until every acknowledged record was processed, closes
the group and measures the whole timeline (:func:`~integration.churn.judge.analyse`).

Fault steps (``failover``, ``zombie``) and slow revokers are played by :mod:`integration.churn.faults`;
they need the handle of a replicated 3-broker cluster (``cluster``).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from integration.churn import faults
from integration.churn.generator import FAULT_ACTIONS, ChurnSequence
from integration.churn.group_pool import GroupPool
from integration.churn.judge import ChurnFailure, ChurnResult, analyse, churn_problems
from integration.driver import GroupTiming, KeyedProducer
from integration.timeline_checks import missing_records
from integration.topics import create_topic
from kassign.model import TopicPartition
from kassign.timeline.events import write_events

if TYPE_CHECKING:
    from kassign.broker import BrokerInfo

log = logging.getLogger(__name__)

__all__ = ["run_sequence"]


def run_sequence(
    sequence: ChurnSequence,
    bootstrap: str,
    *,
    timing: GroupTiming | None = None,
    settle_timeout: float = 30.0,
    log_dir: str | Path | None = None,
    cluster: BrokerInfo | None = None,
) -> ChurnResult:
    """Play ``sequence`` on the broker at ``bootstrap`` and analyse its timeline (see :func:`churn_problems`).

    ``timing``: the members' timeouts (default: :class:`GroupTiming` with the profile's
    ``max_poll_ms``). ``cluster``: the handle of the replicated multi-broker cluster at
    ``bootstrap``, needed by fault sequences (its topics are then replicated across three nodes).
    Raises ChurnFailure (with the seed and the sequence) when a member dies on its own. A group that
    does not settle in time ends the sequence early with ``result.stalled`` set; invariant violations
    are left in the result for the caller to judge (:func:`check`, :func:`churn_problems`).
    """
    profile = sequence.profile
    timing = timing or GroupTiming(max_poll_ms=profile.max_poll_ms)
    kinds = sequence.fault_kinds()
    if kinds and (cluster is None or cluster.brokers < 3):
        raise ValueError(
            f"sequence {sequence.seed} injects {sorted(kinds)}: it needs a replicated cluster of "
            f"3 brokers (cluster=...), got {cluster.describe() if cluster else 'none'}"
        )
    replicas = 3 if kinds else 1
    tag = f"churn-{sequence.seed}-{uuid.uuid4().hex[:6]}"
    topics = {
        "a": create_topic(bootstrap, f"{tag}-a", profile.partitions_a, replication_factor=replicas),
        "b": create_topic(bootstrap, f"{tag}-b", profile.partitions_b, replication_factor=replicas),
    }
    # Without log_dir the logs go to a temporary directory: removed when the sequence passes or is
    # interrupted (Ctrl-C), kept (and named) when it fails.
    temporary = not log_dir
    log_root = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"kassign-{tag}-"))
    log_root.mkdir(parents=True, exist_ok=True)
    partitions = {
        topics["a"]: [TopicPartition(topics["a"], p) for p in range(profile.partitions_a)],
        topics["b"]: [TopicPartition(topics["b"], p) for p in range(profile.partitions_b)],
    }
    pool = GroupPool(bootstrap, tag, topics, timing, log_root, faults.slow_revoke_ms(sequence, timing))
    began, began_at = time.monotonic(), time.time()
    step_label = "start"
    producers: list[KeyedProducer] = []
    first_settle: float | None = None
    stalled: str | None = None
    produced: dict[TopicPartition, list[int]] = {}
    unread = 0
    try:
        producers = [pool.start_producer("a", profile.rate), pool.start_producer("b", profile.rate / 2)]
        for spec in sequence.initial:
            pool.start(spec)
        first_settle = pool.wait_settled(partitions, settle_timeout + 5 * len(sequence.initial))
        for number, step in enumerate(sequence.steps, 1):
            step_label = f"step {number} ({step})"
            log.info("seed %s %s", sequence.seed, step_label)
            if step.action == "failover":
                assert cluster is not None
                faults.run_failover(pool, step, cluster, partitions, settle_timeout)
            elif step.action == "zombie":
                faults.run_zombie(pool, step, timing, partitions, settle_timeout)
            elif step.action in ("leave", "resubscribe"):
                pool.stop(step.member)
            elif step.action in ("crash", "restart_same", "restart_new"):
                pool.crash(step.member)
            if step.start is not None and step.action not in FAULT_ACTIONS:
                pool.start(step.start)
            if step.settle:
                pool.wait_settled(partitions, settle_timeout)
            else:
                time.sleep(step.gap)  # the gap is part of the sequence: the next step hits the rebalance
        step_label = "final settle"
        final_settle = pool.wait_settled(partitions, settle_timeout)
        step_label = "draining"
        for producer in producers:
            producer.stop()
        # records of a topic nobody reads at the end wait for a future reader: not lost, not required
        read = {topic for topics in pool.live().values() for topic in topics}
        every = {tp: offs for p in producers for tp, offs in p.produced().items()}
        produced = {tp: offs for tp, offs in every.items() if tp.topic in read}
        unread = sum(len(offs) for tp, offs in every.items() if tp.topic not in read)
        pool.wait_for(
            lambda ev: (
                [f"{sum(map(len, missing_records(ev, produced).values()))} records unprocessed"]
                if missing_records(ev, produced)
                else []
            ),
            settle_timeout,
            "all produced records processed",
        )
    except TimeoutError as exc:
        # A stall: the group stopped converging. Its members cannot close cleanly (they wait in
        # JoinGroup), so they are killed; the timeline up to here is still checked for double
        # ownership and unexcused duplicates, but not for lost records (nobody could read them).
        stalled = f"{step_label}: {exc}"
        log.warning("seed %s stalled at %s", sequence.seed, stalled)
        for producer in producers:
            producer.stop()
        pool.kill_all()
        final_settle, produced = time.time(), {}
    except BaseException as exc:
        pool.kill_all()
        pool.close()
        path = log_root / "timeline.jsonl"
        write_events(path, pool.events())
        if isinstance(exc, RuntimeError):  # a member exited on its own
            raise ChurnFailure(f"{step_label}: {exc}\n{sequence.describe()}\ntimeline: {path}") from exc
        if temporary and isinstance(exc, KeyboardInterrupt):
            shutil.rmtree(log_root, ignore_errors=True)
        else:
            log.warning("seed %s: %s; timeline and member logs kept in %s", sequence.seed, type(exc).__name__, log_root)
        raise
    failed = pool.failed()
    pool.close()
    events = pool.events()
    path = log_root / "timeline.jsonl"
    write_events(path, events)
    result = ChurnResult(
        sequence,
        events,
        produced,
        [e for p in producers for e in p.errors],
        failed,
        (first_settle if first_settle is not None else began_at, final_settle),
        path,
        stalled=stalled,
        unread=unread,
        duration=time.monotonic() - began,
    )
    analyse(result, partitions, grace=timing.session_ms / 1000)
    if temporary and not churn_problems(result):
        shutil.rmtree(log_root, ignore_errors=True)
        result.timeline_path = None
    return result
