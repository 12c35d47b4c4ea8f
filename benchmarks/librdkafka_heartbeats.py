"""How far apart librdkafka's classic-protocol heartbeats really go, in the rebalance benchmark's member.

librdkafka has no heartbeat timer on the classic protocol: its main thread sends a heartbeat that is
due only when it wakes up for something else (an application call that queues an operation, such as
a commit; a timer: the 500 ms ``max.poll.interval.ms`` check, the 1 s generic one). So with
``heartbeat.interval.ms=250`` the gaps are 250-850 ms, and a survivor hears of a rebalance later than
the setting says. The simulator models this (``kassign.sim.member``, ``_librdkafka_wakeup``); this
script measures it: three confluent-kafka members with the benchmark's settings (24 partitions, 600
records/s, session 1500 ms, heartbeat 250 ms, progress and commit every 200 ms), each profile's
steady stretch, gaps between the ``Heartbeat for group`` lines of librdkafka's ``cgrp`` debug log::

    flock /tmp/kassign-broker.lock python benchmarks/librdkafka_heartbeats.py [--steady-s 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from integration.driver import GroupDriver, GroupTiming  # noqa: E402
from integration.members.reporting import GROUP_DEBUG_ENV  # noqa: E402
from integration.topics import create_topic  # noqa: E402
from kassign.broker import open_broker  # noqa: E402

PROFILES = {"instant": (0, 0), "process": (250, 750)}
#: Heartbeats at the start of each member's log (joining, the first rounds) left out.
SKIP = 5


def heartbeat_gaps_ms(log: Path) -> list[float]:
    """Gaps between the heartbeats a member's librdkafka debug log (``%7|<unix s.ms>|HEARTBEAT|...``) sent."""
    sent = [
        float(line.split("|")[1])
        for line in log.read_text(errors="replace").splitlines()
        if "Heartbeat for group" in line
    ]
    return [round((b - a) * 1000, 1) for a, b in zip(sent, sent[1:])][SKIP:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steady-s", type=float, default=15.0, help="how long each profile's group runs settled")
    args = ap.parse_args(argv)
    if args.steady_s <= 0:
        ap.error(f"--steady-s must be positive, got {args.steady_s}")
    os.environ[GROUP_DEBUG_ENV] = "1"  # the members' librdkafka logs its group traffic to stderr
    with open_broker() as broker, tempfile.TemporaryDirectory(prefix="kassign-heartbeats-") as tmp:
        print(f"broker: {broker.describe()}")
        for profile, process_ms in PROFILES.items():
            tag = f"heartbeats-{profile}-{uuid.uuid4().hex[:6]}"
            topic = create_topic(broker.bootstrap, tag, 24)
            timing = GroupTiming(session_ms=1500, heartbeat_ms=250, progress_ms=200, process_ms=process_ms, seed=1)
            log_dir = Path(tmp) / profile
            with GroupDriver(broker.bootstrap, tag, topic, timing=timing, log_dir=log_dir) as group:
                group.start_producer(rate=600)
                members = [group.start_member("confluent", "cooperative-sticky") for _ in range(3)]
                group.wait_settled(120, balanced=True)
                time.sleep(args.steady_s)
                group.stop_members(members)
            gaps = [g for m in members for g in heartbeat_gaps_ms(log_dir / f"{m}.stderr")]
            if not gaps:
                print(f"{profile}: no heartbeats in the members' logs", file=sys.stderr)
                return 1
            q = statistics.quantiles(gaps, n=10)
            print(
                f"{profile}: {len(gaps)} gaps, median {statistics.median(gaps):.0f} ms, mean "
                f"{statistics.fmean(gaps):.0f} ms, 10th-90th percentile {q[0]:.0f}-{q[-1]:.0f} ms, "
                f"min {min(gaps):.0f}, max {max(gaps):.0f} (heartbeat.interval.ms 250)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
