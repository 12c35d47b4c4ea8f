"""``kassign demo``: eager vs cooperative rebalancing on a live group of aiokafka consumers.

Starts a local Apache Kafka (Tansu with ``--tansu``; or uses ``--bootstrap``), then runs the same plan three times, one
after the other, on a fresh topic and group each: with aiokafka's default (eager, round-robin), with
kassign's ``CooperativeConsumer`` as plain KIP-429 (``fast_follow_up=False``) and as shipped (its
default: the fast follow-up on). Ends with one summary table showing the three side by side and writes
the timeline PNG, the JSON-lines events of each run and a ``summary.json`` into ``--out``.

``--protocol consumer`` compares the group protocols instead: the eager baseline, kassign's classic
default and kassign on the consumer group protocol (KIP-848, the broker's uniform assignor; Apache
Kafka 4.0+, not Tansu). The broker owns that group's session timeout and heartbeat interval, so the
demo sets the group's own ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` to
the classic runs' values before the first run. A cluster whose bounds refuse them (Kafka's defaults
allow no less than 45 s and 5 s) stops the demo with one line naming the values and the broker
settings to lower: the values are not clamped, since the runs would then not compare like with like.

Ctrl-C stops cleanly: the running group's members and producer are closed, the broker the demo
started is stopped, what ran so far is written to ``--out`` (the interrupted run marked as such in
``summary.json``), one line says where, and the exit code is 130.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from kassign.cli_errors import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_RUNTIME, CLIError, handles_errors
from kassign.cli_options import ArgumentParser
from kassign.demo.runs import ALL_LABELS, PROTOCOLS, RunSpec, run_labels, run_specs
from kassign.timeline.events import write_events

log = logging.getLogger(__name__)


__all__ = ["main", "build_parser"]

#: The runs of ``--protocol classic``, in the order they go: labels name the output files and topics (so no ``+``).
RUN_LABELS = run_labels("classic")

#: Timeouts against a cluster we did not start: Kafka's default group.min.session.timeout.ms is 6 s.
_REMOTE_SESSION_MS, _REMOTE_HEARTBEAT_MS = 6000, 500


def build_parser() -> argparse.ArgumentParser:
    """The demo's command-line options."""
    ap = ArgumentParser(
        prog="kassign demo",
        description="Eager vs cooperative-sticky vs cooperative-sticky with the fast follow-up (or, with "
        "--protocol consumer, eager vs kassign on the classic protocol vs kassign on KIP-848), on a "
        "live group of aiokafka consumers: scale 3 -> 6 -> 3 and a rolling restart, then a summary "
        "with the three side by side, a PNG timeline and the events.",
    )
    ap.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or None,
        help="host:port[,...] of a Kafka cluster to use instead of a local one "
        "(default: $KAFKA_BOOTSTRAP_SERVERS, else a local Apache Kafka started from "
        "Maven Central's jars, else the embedded Tansu)",
    )
    ap.add_argument(
        "--tansu", action="store_true", help="run on the embedded Tansu broker (no Java needed) instead of Apache Kafka"
    )
    ap.add_argument(
        "--kafka-version",
        default=None,
        help="Apache Kafka version of the local broker (default: kassign broker's default)",
    )
    ap.add_argument("--out", default="kassign-demo-out", help="output directory (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="a short run: 6 partitions, 2 -> 4 -> 2 members, one restart")
    ap.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="classic",
        help="classic (default): eager vs kassign's cooperative-sticky without and with the fast "
        "follow-up; consumer: eager vs kassign's classic default vs kassign on the consumer "
        "group protocol (KIP-848, Apache Kafka 4.0+; needs confluent-kafka)",
    )
    ap.add_argument(
        "--only",
        choices=ALL_LABELS,
        default=None,
        metavar="LABEL",
        help="run one mode only: " + "; ".join(f"--protocol {p}: {', '.join(run_labels(p))}" for p in PROTOCOLS),
    )
    ap.add_argument("--rate", type=float, default=None, help="records per second (default 300, quick 200)")
    ap.add_argument(
        "--session-ms",
        type=int,
        default=None,
        help="consumer session timeout (default 1500 on a local broker, 6000 with --bootstrap)",
    )
    ap.add_argument(
        "--heartbeat-ms",
        type=int,
        default=None,
        help="consumer heartbeat interval (default 250 on a local broker, 500 with --bootstrap)",
    )
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    return ap


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed options, with ``specs`` (the runs to make, :func:`kassign.demo.runs.run_specs`) added.

    An ``--only`` label of the other protocol is a usage error; ``--protocol consumer`` on Tansu, or
    without confluent-kafka, a one-line :class:`CLIError` (before anything starts).
    """
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        args.specs = run_specs(args.protocol, args.only)
    except ValueError as exc:
        ap.error(str(exc))
    if args.protocol == "consumer":
        _check_consumer_protocol(args)
    return args


def _check_consumer_protocol(args: argparse.Namespace) -> None:
    """Refuse ``--protocol consumer`` where it cannot run, before a broker starts."""
    import importlib.util

    tansu = args.tansu or (not args.bootstrap and os.environ.get("KASSIGN_BROKER", "").strip().lower() == "tansu")
    if tansu:
        raise CLIError(
            "--protocol consumer needs Apache Kafka 4.0+: Tansu does not speak the consumer group protocol (KIP-848)",
            "leave --tansu (and KASSIGN_BROKER=tansu) out, or use --protocol classic",
            EXIT_INPUT,
        )
    if importlib.util.find_spec("confluent_kafka") is None:
        raise CLIError(
            "--protocol consumer needs confluent-kafka to set the KIP-848 group's session timeout and "
            "heartbeat interval",
            "pip install 'kassign[demo,confluent]'",
            EXIT_INPUT,
        )


def _configure_group(bootstrap: str, group_id: str, session_ms: int, heartbeat_ms: int) -> None:
    """Give the KIP-848 group the classic runs' timing (the broker owns it there); a refusal is one line."""
    from kassign.broker.group_config import GroupConfigError, GroupTimingRefused, set_consumer_group_timing

    try:
        set_consumer_group_timing(bootstrap, group_id, session_ms=session_ms, heartbeat_ms=heartbeat_ms, timeout=10.0)
    except GroupConfigError as exc:
        values = f"consumer.session.timeout.ms={session_ms} and consumer.heartbeat.interval.ms={heartbeat_ms}"
        if not isinstance(exc, GroupTimingRefused):
            raise CLIError(
                f"setting {values} for the KIP-848 group at {bootstrap} failed ({exc.reason})",
                "check that the cluster answers; demo.log in --out has the details",
                EXIT_RUNTIME,
            ) from None
        if exc.out_of_bounds:
            raise CLIError(
                f"the cluster at {bootstrap} refused {values} for the KIP-848 group ({exc.reason})",
                "lower group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms on its "
                "brokers (Kafka's defaults: 45000 and 5000), or give every run timing within its bounds, e.g. "
                "--session-ms 45000 --heartbeat-ms 5000",
                EXIT_RUNTIME,
            ) from None
        raise CLIError(
            f"the cluster at {bootstrap} refused {values} for the KIP-848 group ({exc.reason})",
            "the consumer group protocol needs Apache Kafka 4.0+; or use --protocol classic",
            EXIT_RUNTIME,
        ) from None


def _broker_group_type(bootstrap: str, group_id: str) -> str | None:
    """The group's type as the broker describes it (None, logged, when it cannot say)."""
    from kassign.broker.group_config import consumer_group_type

    try:
        return consumer_group_type(bootstrap, group_id, timeout=10.0)
    except Exception as exc:  # confluent-kafka raises KafkaException and timeouts alike; the run stands anyway
        log.warning("group %s: the broker did not describe it: %s", group_id, exc)
        return None


async def _run_all(bootstrap: str, args: argparse.Namespace, out: TextIO, tty: bool, results: list) -> None:
    """Run each mode in turn, appending its result to ``results`` (an interrupted run's partial one too)."""
    from kassign.demo.group import GroupTiming
    from kassign.demo.scenario import FULL_PLAN, QUICK_PLAN, demo_names, run_protocol

    plan = QUICK_PLAN if args.quick else FULL_PLAN
    if args.rate is not None:
        plan = dataclasses.replace(plan, rate=args.rate)
    remote = args.bootstrap is not None
    timing = GroupTiming(
        session_ms=args.session_ms or (_REMOTE_SESSION_MS if remote else GroupTiming.session_ms),
        heartbeat_ms=args.heartbeat_ms or (_REMOTE_HEARTBEAT_MS if remote else GroupTiming.heartbeat_ms),
    )
    specs: list[RunSpec] = args.specs
    names = {spec.label: demo_names(spec.label) for spec in specs}
    # Before the first run, so a cluster that refuses the timing costs no run.
    for spec in specs:
        if spec.broker_timing:
            await asyncio.to_thread(
                _configure_group, bootstrap, names[spec.label][1], timing.session_ms, timing.heartbeat_ms
            )
    for spec in specs:
        result = await run_protocol(
            bootstrap,
            spec.label,
            spec.title,
            spec.consumer_factory(),
            plan,
            timing,
            out,
            tty=tty,
            on_interrupted=results.append,
            names=names[spec.label],
            group_protocol=spec.group_protocol,
        )
        if args.protocol == "consumer":
            # The broker's word on which protocol the group used (its members have left; the group stays).
            result.broker_group_type = await asyncio.to_thread(_broker_group_type, bootstrap, result.group_id)
        results.append(result)


def _local_broker(stack: contextlib.ExitStack, args: argparse.Namespace):
    """Apache Kafka from Maven Central's jars (Tansu with ``--tansu``, or when Kafka cannot run here)."""
    from kassign.broker import open_broker

    env = {
        "KASSIGN_BROKER": "tansu" if args.tansu else os.environ.get("KASSIGN_BROKER", ""),
        "KASSIGN_KAFKA_VERSION": args.kafka_version or os.environ.get("KASSIGN_KAFKA_VERSION", ""),
    }
    info = stack.enter_context(open_broker(env=env))
    if args.protocol == "consumer" and not info.is_real_kafka:
        raise CLIError(
            f"--protocol consumer needs Apache Kafka 4.0+, but the local broker is {info.describe()} "
            f"(Apache Kafka could not start here; see {Path(args.out) / 'demo.log'})",
            "install Java 17+ so kassign can start Apache Kafka, give --bootstrap, or use --protocol classic",
            EXIT_RUNTIME,
        )
    return info


def _write_outputs(results: list, out_dir: Path, plot: bool) -> list[Path]:
    """Each run's events, ``summary.json`` and (with ``plot``) ``timeline.png``; returns the paths."""
    from kassign.demo.summary import summary_json

    written = []
    for r in results:
        path = out_dir / f"{r.label}.jsonl"
        write_events(path, r.events, single_topic=r.topic)
        written.append(path)
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary_json(results), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written.append(path)
    if plot:
        from kassign.timeline.plot import TimelinePanel, render_timelines

        panels = [
            TimelinePanel(
                r.events,
                marks=r.marks,
                title=f"{r.title}: {r.group_id}"
                + (f" (interrupted during {r.interrupted_during})" if r.interrupted else ""),
            )
            for r in results
        ]
        written.append(Path(render_timelines(panels, out_dir / "timeline.png")))
    return written


@contextlib.contextmanager
def _logs_to_file(path: Path, *, quiet_console: bool) -> Iterator[None]:
    """Copy log records to ``path``; with ``quiet_console``, keep them off the terminal meanwhile
    (the live view redraws the screen, so log lines there would only flicker)."""
    root = logging.getLogger()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    consoles = [h for h in root.handlers if type(h) is logging.StreamHandler] if quiet_console else []
    levels = [h.level for h in consoles]
    root.addHandler(handler)
    for h in consoles:
        h.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for h, level in zip(consoles, levels, strict=True):
            h.setLevel(level)
        root.removeHandler(handler)
        handler.close()


def _unreachable(exc: BaseException, bootstrap: str) -> CLIError | None:
    """A CLIError for a cluster the clients cannot reach (aiokafka's connection errors), else None."""
    if type(exc).__name__ in ("KafkaConnectionError", "NoBrokersAvailable") or isinstance(exc, ConnectionError):
        return CLIError(
            f"cannot reach the Kafka cluster at {bootstrap}: {exc}",
            "check --bootstrap and that the cluster is up, or leave --bootstrap out to start a local broker",
            EXIT_RUNTIME,
        )
    return None


def _group_protocol_failure(exc: BaseException, bootstrap: str) -> CLIError | None:
    """A CLIError for a member stopped by a KIP-848 error (UNSUPPORTED_VERSION from an old broker, ...), else None."""
    failures = getattr(exc, "failures", None) or {}  # kassign.demo.group.MemberFailed
    for name, failure in failures.items():
        error = getattr(failure, "error", None)  # kassign's GroupProtocolError names Kafka's error
        if not isinstance(error, str) or not error:
            continue
        if error == "UNSUPPORTED_VERSION":
            return CLIError(
                f"the cluster at {bootstrap} does not support the consumer group protocol (KIP-848): {failure}",
                "use Apache Kafka 4.0+ with group.coordinator.rebalance.protocols "
                "including consumer, or --protocol classic",
                EXIT_RUNTIME,
            )
        return CLIError(
            f"member {name} of the KIP-848 group {getattr(exc, 'group_id', '')} failed with {error}: {failure}",
            "see demo.log in --out",
            EXIT_RUNTIME,
        )
    return None


def _interrupted(results: list, out_dir: Path, plot: bool) -> int:
    """After Ctrl-C (members closed, broker stopped): write what ran and say where, in one line."""
    if not results:
        print(
            f"kassign demo: interrupted before any run recorded a step; the log is {out_dir / 'demo.log'}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    _write_outputs(results, out_dir, plot=plot)
    last = results[-1]
    where = (
        f"during the {last.label} run's step {last.interrupted_during!r}"
        if last.interrupted
        else f"after the {last.label} run"
    )
    files = "summary.json, *.jsonl" + (", timeline.png" if plot else "")
    print(
        f"kassign demo: interrupted {where}; partial results of what ran so far in {out_dir} ({files})", file=sys.stderr
    )
    return EXIT_INTERRUPTED


@handles_errors("demo")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns 0 when every step settled and no record was lost, 1 otherwise, 130
    after Ctrl-C (with the partial results written)."""
    args = parse_args(list(argv) if argv is not None else None)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list = []
    try:
        _run(args, out_dir, results)
    except KeyboardInterrupt:
        # The ExitStack in _run has closed the groups' members and stopped the broker by now.
        return _interrupted(results, out_dir, plot=not args.no_plot)
    return _report(results, out_dir, plot=not args.no_plot)


def _run(args: argparse.Namespace, out_dir: Path, results: list) -> None:
    """Start (or reach) the broker and run every mode, appending to ``results``."""
    stream = sys.stdout
    tty = stream.isatty()
    # The clients' own INFO logs would drown the view: they go to demo.log (WARNING and up).
    for noisy in ("aiokafka", "kassign.adapters", "kassign.membership", "kassign.demo.group"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_logs_to_file(out_dir / "demo.log", quiet_console=tty))
        if args.bootstrap:
            bootstrap = args.bootstrap
            print(f"kassign demo: broker {bootstrap}", file=stream)
        else:
            info = _local_broker(stack, args)
            bootstrap = info.bootstrap
            print(f"kassign demo: broker {info.describe()}", file=stream)
        try:
            asyncio.run(_run_all(bootstrap, args, stream, tty, results))
        except Exception as exc:
            error = _unreachable(exc, bootstrap) or _group_protocol_failure(exc, bootstrap)
            if error is None:
                raise
            raise error from exc


def _report(results: list, out_dir: Path, plot: bool) -> int:
    """The finished demo's table and files; the exit code (1 when a record was lost or a step never settled)."""
    from kassign.demo.summary import format_table

    stream = sys.stdout
    print("\n" + format_table(results), file=stream)
    for path in _write_outputs(results, out_dir, plot=plot):
        print(f"wrote {path}", file=stream)
    lost = sum(r.lost or 0 for r in results)
    unsettled = [f"{r.label}: {step}" for r in results for step in r.unsettled]
    if lost:
        print(f"kassign demo: {lost} record(s) were never processed", file=sys.stderr)
    if unsettled:
        print(f"kassign demo: the group did not settle in time after {'; '.join(unsettled)}", file=sys.stderr)
    return 1 if lost or unsettled else 0
