"""The random churn soak of issue 9: many seeded churn sequences on one broker, with a summary.

Each sequence (see :mod:`integration.churn`) runs 2-8 kassign cooperative aiokafka members, sometimes
with one librdkafka and one Java member, through joins, clean leaves, SIGKILL crashes, restarts under
the same and new names and subscription changes, under steady keyed load, and checks its timeline:
no partition-second owned twice, every partition owned once settled, nothing lost, duplicates only
where an owner crashed, lost its partitions or failed to commit. A sequence whose group stops
converging (*stalled*) ends early and counts as failed; its timeline is still checked for double
ownership and duplicates. Run it alone on the broker (Apache Kafka by default, see
:func:`kassign.broker.open_broker`)::

    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --sequences 100
    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --seed 17            # replay one
    flock /tmp/kassign-broker.lock python -m benchmarks.churn_soak --seed 3 --profile small

The exit status is 1 when any sequence broke an invariant or did not settle.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from kassign.broker import open_broker  # noqa: E402
from integration.churn import PROFILES, ChurnFailure, churn_problems, generate_sequence, run_sequence  # noqa: E402

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sequences", type=int, default=100, help="how many seeds to run (from --first-seed)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=None, help="run only this seed (a replay)")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="soak")
    ap.add_argument("--log-dir", default=None, help="keep each sequence's timeline and member logs here")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seeds = [args.seed] if args.seed is not None else list(range(args.first_seed, args.first_seed + args.sequences))
    totals = dict(sequences=0, failed=0, stalled=0, steps=0, generations=0, records=0, double_owned_ps=0.0, unowned_ps=0.0,
                  duplicates=0, unexcused=0, lost=0)
    with open_broker() as broker:
        print(f"broker: {broker.describe()}; profile {args.profile}; seeds {seeds[0]}..{seeds[-1]}", flush=True)
        for seed in seeds:
            sequence = generate_sequence(seed, args.profile)
            log_dir = Path(args.log_dir) / f"seed-{seed}" if args.log_dir else None
            totals["sequences"] += 1
            totals["steps"] += len(sequence.steps)
            try:
                result = run_sequence(sequence, broker.bootstrap, log_dir=log_dir)
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
            if problems:
                totals["failed"] += 1
                print(f"FAIL {result.summary()}\n" + "\n".join(f"  - {p}" for p in problems)
                      + f"\n{sequence.describe()}\ntimeline: {result.timeline_path}", flush=True)
            else:
                print(f"ok   {result.summary()}", flush=True)
    print("\nchurn soak summary")
    print(f"  sequences            {totals['sequences']} ({totals['failed']} failed, {totals['stalled']} of them stalled)")
    print(f"  steps                {totals['steps']}")
    print(f"  rebalances (gens)    {totals['generations']}")
    print(f"  records produced     {totals['records']}")
    print(f"  double-owned p-s     {totals['double_owned_ps']:.3f}")
    print(f"  unowned p-s          {totals['unowned_ps']:.1f}")
    print(f"  duplicates           {totals['duplicates']} ({totals['unexcused']} unexcused)")
    print(f"  lost                 {totals['lost']} (not checked in stalled sequences)")
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
