"""The random churn soak of issue 9: many seeded churn sequences on one broker, with a summary.

Each sequence (see :mod:`integration.churn`) runs 2-8 kassign cooperative aiokafka members, sometimes
with one librdkafka and one Java member, through joins, clean leaves, SIGKILL crashes, restarts under
the same and new names and subscription changes, under steady keyed load, and checks its timeline:
no partition-second owned twice, every partition owned once settled, nothing lost, duplicates only
where an owner crashed, lost its partitions or failed to commit, and no kassign member's commit of a
partition it kept failed (issue 27). A sequence whose group stops
converging (*stalled*) ends early and counts as failed; its timeline is still checked for double
ownership and duplicates. Run it alone on the broker (Apache Kafka by default, see
:func:`kassign.broker.open_broker`)::

    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --sequences 100
    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --seed 17            # replay one
    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --seed 3 --profile small

``--profile faults`` (issue 16) adds faults and runs on a replicated 3-node Apache Kafka cluster
started for it (three KRaft controllers, internal and test topics replicated 3 times, min.insync 2):
the coordinating node SIGKILLed in the middle of a rebalance and restarted, members frozen past their
session timeout (SIGSTOP) and resumed (SIGCONT) whose late commits must be rejected, and slow
revokers whose ``on_partitions_revoked`` outlasts the rebalance timeout. Double ownership is then
counted outside the zombies' windows (inside them it is reported apart)::

    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --profile faults --sequences 60 --max-minutes 18

The exit status is 1 when any sequence broke an invariant or did not settle.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from integration.churn import PROFILES, ChurnFailure, churn_problems, generate_sequence, run_sequence  # noqa: E402
from kassign.broker import BrokerInfo, open_broker, replicated_settings, start_kafka  # noqa: E402

log = logging.getLogger(__name__)


def _cluster(faulty: bool) -> contextlib.AbstractContextManager[BrokerInfo]:
    """The run's broker: a replicated 3-node Apache Kafka cluster for faults, else the usual choice."""
    if faulty:
        return start_kafka(brokers=3, controllers=3, settings=replicated_settings(3))
    return open_broker()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=100, help="how many seeds to run (from --first-seed)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=None, help="run only this seed (a replay)")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="soak")
    ap.add_argument("--log-dir", default=None, help="keep each sequence's timeline and member logs here")
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no new sequence after this many minutes (the summary covers those run)",
    )
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    seeds = [args.seed] if args.seed is not None else list(range(args.first_seed, args.first_seed + args.sequences))
    totals = dict(
        sequences=0,
        failed=0,
        stalled=0,
        steps=0,
        generations=0,
        records=0,
        double_owned_ps=0.0,
        unowned_ps=0.0,
        duplicates=0,
        unexcused=0,
        lost=0,
        failovers=0,
        failovers_mid=0,
        zombies=0,
        late_rejected=0,
        slow=0,
        slow_rebalance=0,
        slow_expelled=0,
        zombie_ps=0.0,
        hung=0,
        kept_commit_failures=0,
    )
    faulty = PROFILES[args.profile].faulty
    began = time.monotonic()
    with _cluster(faulty) as broker:
        print(f"broker: {broker.describe()}; profile {args.profile}; seeds {seeds[0]}..{seeds[-1]}", flush=True)
        for seed in seeds:
            if args.max_minutes is not None and time.monotonic() - began > args.max_minutes * 60:
                print(f"time budget of {args.max_minutes:g} min spent: no sequence after seed {seed - 1}", flush=True)
                break
            sequence = generate_sequence(seed, args.profile)
            log_dir = Path(args.log_dir) / f"seed-{seed}" if args.log_dir else None
            totals["sequences"] += 1
            totals["steps"] += len(sequence.steps)
            try:
                result = run_sequence(sequence, broker.bootstrap, log_dir=log_dir, cluster=broker if faulty else None)
            except ChurnFailure as exc:
                totals["failed"] += 1
                print(f"FAIL seed {seed}: {exc}", flush=True)
                continue
            problems = churn_problems(result)
            totals["stalled"] += result.stalled is not None
            totals["generations"] += result.generations
            totals["records"] += result.records
            totals["double_owned_ps"] += result.double_owned_ps
            totals["unowned_ps"] += result.unowned_ps
            totals["duplicates"] += result.duplicates
            totals["unexcused"] += sum(result.unexcused_duplicates.values())
            totals["lost"] += sum(len(v) for v in result.lost.values())
            totals["kept_commit_failures"] += len(result.failed_kept_commits)
            f = result.faults
            for key, value in (
                ("failovers", f.failovers),
                ("failovers_mid", f.failovers_mid_rebalance),
                ("zombies", f.zombies),
                ("late_rejected", f.late_commits_rejected),
                ("slow", f.slow_revocations),
                ("slow_rebalance", f.slow_in_rebalance),
                ("slow_expelled", f.slow_revokers_expelled),
                ("zombie_ps", f.zombie_ps),
                ("hung", len(result.hung)),
            ):
                totals[key] += value
            if problems:
                totals["failed"] += 1
                print(
                    f"FAIL {result.summary()}\n"
                    + "\n".join(f"  - {p}" for p in problems)
                    + f"\n{sequence.describe()}\ntimeline: {result.timeline_path}",
                    flush=True,
                )
            else:
                print(f"ok   {result.summary()}", flush=True)
    print("\nchurn soak summary")
    print(
        f"  sequences            {totals['sequences']} ({totals['failed']} failed, {totals['stalled']} of them stalled)"
    )
    print(f"  steps                {totals['steps']}")
    print(f"  rebalances (gens)    {totals['generations']}")
    print(f"  records produced     {totals['records']}")
    outside = " (outside zombie windows)" if faulty else ""
    print(f"  double-owned p-s     {totals['double_owned_ps']:.3f}{outside}")
    print(f"  unowned p-s          {totals['unowned_ps']:.1f}")
    print(f"  duplicates           {totals['duplicates']} ({totals['unexcused']} unexcused)")
    print(f"  lost                 {totals['lost']} (not checked in stalled sequences)")
    print(f"  kept commits failed  {totals['kept_commit_failures']} (kassign members' commits of partitions they kept)")
    if faulty:
        print(
            f"  coordinator failovers {totals['failovers']} ({totals['failovers_mid']} killed while the broker "
            "reported the group rebalancing)"
        )
        print(f"  zombies              {totals['zombies']} ({totals['late_rejected']} late commits rejected)")
        print(
            f"  slow revocations     {totals['slow']} ({totals['slow_rebalance']} in a rebalance, the rest "
            f"on close; {totals['slow_expelled']} outlasted the round: member expelled)"
        )
        print(f"  closes that hung     {totals['hung']} (member killed by the driver after 20 s)")
        print(f"  double-owned p-s in zombie windows (excused) {totals['zombie_ps']:.3f}")
    print(f"  wall time            {(time.monotonic() - began) / 60:.1f} min")
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
