"""The machine's and the broker's CPU, sampled every second beside a benchmark, and read per recorded run.

``python -m benchmarks.cpu_sampler record OUT.jsonl`` appends one line a second until interrupted: the
time, the machine's busy cores (``/proc/stat``) and the Apache Kafka broker JVM's (every process whose
command line names ``kafka.Kafka``). Run it at ``nice -n 19`` beside ``benchmarks/group_size.py``: it
reads two files a second. ``python -m benchmarks.cpu_sampler runs LOG DIR...`` then prints, per cell of
the recorded runs under each DIR, the broker's and the machine's mean cores from 3 s before each run's
trigger to 1 s after it settled (docs/scale.md, "The machine's load"). Linux only.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import gzip
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from integration.proc_usage import machine_busy_seconds, process_cpu_seconds  # noqa: E402

#: What marks the broker's JVM on its command line.
BROKER_MARK = b"kafka.Kafka"


def broker_pids() -> list[int]:
    """The processes whose command line names the broker's main class."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if BROKER_MARK in Path(f"/proc/{entry}/cmdline").read_bytes():
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def samples(interval_s: float = 1.0) -> Iterator[dict[str, float]]:
    """One sample every ``interval_s``: ``t`` (epoch seconds), ``busy`` and ``broker`` (cores used
    since the previous sample). Looks for new broker processes every ten samples."""
    busy_before = machine_busy_seconds() or 0.0
    seen: dict[int, float] = {}  # broker pid -> its CPU seconds at the previous sample

    def look_for_brokers() -> None:
        for pid in broker_pids():
            if pid not in seen and (cpu := process_cpu_seconds(pid)) is not None:
                seen[pid] = cpu

    look_for_brokers()
    count = 0
    while True:
        started = time.monotonic()
        time.sleep(interval_s)
        count += 1
        if count % 10 == 0:
            look_for_brokers()
        span = time.monotonic() - started
        busy = machine_busy_seconds() or 0.0
        broker = 0.0
        for pid, before in list(seen.items()):
            now = process_cpu_seconds(pid)
            if now is None:
                del seen[pid]
                continue
            broker += now - before
            seen[pid] = now
        yield {
            "t": round(time.time(), 2),
            "busy": round((busy - busy_before) / span, 3),
            "broker": round(broker / span, 3),
        }
        busy_before = busy


def _read_log(path: Path) -> list[dict[str, float]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def per_cell(
    log: Sequence[dict[str, float]], dirs: Sequence[Path]
) -> dict[tuple[int, str, str, str], list[tuple[float, float]]]:
    """(members, profile, scenario, mode) -> per run (broker cores, machine cores), means over the
    samples from 3 s before the run's first trigger to 1 s after it settled; runs with fewer than two
    samples there are left out."""
    samples_in_time = sorted(log, key=lambda s: s["t"])
    times = [s["t"] for s in samples_in_time]
    cells: dict[tuple[int, str, str, str], list[tuple[float, float]]] = collections.defaultdict(list)
    for root in dirs:
        for run in sorted(p for p in root.iterdir() if (p / "meta.json").is_file()):
            meta = json.loads((run / "meta.json").read_text())
            start = float(meta["triggers"][0])
            end = start + max(float(meta["result"]["settle_s"]), 1.0) + 1
            window = samples_in_time[bisect.bisect_left(times, start - 3) : bisect.bisect_right(times, end)]
            if len(window) < 2:
                continue
            key = (int(meta["members"]), str(meta["profile"]), str(meta["scenario"]), str(meta["mode"]))
            cells[key].append(
                (statistics.mean(s["broker"] for s in window), statistics.mean(s["busy"] for s in window))
            )
    return cells


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cpu_sampler", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="append a sample a second to OUT until interrupted")
    rec.add_argument("out", type=Path)
    runs = sub.add_parser("runs", help="the broker's and the machine's cores per cell of recorded runs")
    runs.add_argument("log", type=Path, help="a record command's output (.jsonl or .jsonl.gz)")
    runs.add_argument("dirs", type=Path, nargs="+", help="recording directories (benchmarks/group_size.py --record)")
    args = ap.parse_args(argv)
    if args.command == "record":
        if machine_busy_seconds() is None:
            ap.error("no /proc/stat here: the sampler reads Linux's /proc")
        try:
            with args.out.open("a") as out:
                for sample in samples():
                    out.write(json.dumps(sample) + "\n")
                    out.flush()
        except KeyboardInterrupt:
            return 0
    missing = [str(p) for p in [args.log, *args.dirs] if not p.exists()]
    if missing:
        ap.error(f"not found: {', '.join(missing)}")
    print("| members | profile | scenario | mode | runs | broker cores, median (range) | machine cores, median |")
    print("|---:|---|---|---|---:|---|---:|")
    for (members, profile, scenario, mode), values in sorted(per_cell(_read_log(args.log), args.dirs).items()):
        broker = [b for b, _ in values]
        print(
            f"| {members} | {profile} | {scenario} | {mode} | {len(values)} | {statistics.median(broker):.2f} "
            f"({min(broker):.2f}–{max(broker):.2f}) | {statistics.median(m for _, m in values):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
