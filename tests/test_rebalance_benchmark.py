"""The eager/cooperative comparison benchmark (benchmarks/rebalance.py) without a broker: its row for a
hand-made timeline, its table, and its command line (under a second)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.rebalance import MODES, PROFILES, SCENARIOS, RunResult, format_table, measure
from kassign.model import TopicPartition
from kassign.timeline.events import Event

ROOT = Path(__file__).resolve().parent.parent
T = "bench"
P0, P1 = TopicPartition(T, 0), TopicPartition(T, 1)


def ev(member, t, kind, parts=None, **extra):
    return Event(member, t, kind, None if parts is None else [TopicPartition(T, p) for p in parts], extra)


def processed(member, t, **ranges):
    return Event(member, t, "processed", None, {"ranges": {f"{T}:{p[1:]}": spans for p, spans in ranges.items()}})


# m1 owns both partitions; m2 starts at 10; m1 revokes 1 at 11 (processed up to offset 3), m2 gets it at
# 12 and re-processes offset 3 (a duplicate). Partition 0 stays with m1 but has no records processed
# between 10.2 and 11.5. Offset 4 of partition 0 is never processed.
TIMELINE = [
    ev("m1", 1.0, "cb_assigned", [0, 1], gen=1),
    processed("m1", 9.0, p0=[[0, 0]], p1=[[0, 1]]),
    processed("m1", 9.5, p0=[[1, 1]], p1=[[2, 2]]),
    ev("m2", 10.0, "subscribed"),
    processed("m1", 10.2, p0=[[2, 2]]),
    ev("m1", 10.5, "cb_assigned", [], gen=2),
    ev("m1", 11.0, "cb_revoked", [1], gen=2),
    processed("m1", 11.0, p1=[[3, 3]]),
    processed("m1", 11.5, p0=[[3, 3]]),
    ev("m1", 12.0, "cb_assigned", [], gen=3),
    ev("m2", 12.0, "cb_assigned", [1], gen=3),
    processed("m2", 12.3, p1=[[3, 4]]),
]
PRODUCED = {P0: [0, 1, 2, 3, 4], P1: [0, 1, 2, 3, 4]}


def test_measure_reads_a_scale_out_timeline():
    row = measure(
        "scale-out", "cooperative", TIMELINE, [10.0], 13.0, partitions=[P0, P1], produced=PRODUCED, steady_s=2.0
    )
    assert row.unowned_ps == pytest.approx(1.0)  # partition 1 from 11 to 12
    assert row.settle_s == pytest.approx(2.0)
    assert (row.kept, row.moved) == (1, 1)
    assert row.kept_pause_s == pytest.approx(1.3)  # partition 0: 10.2 -> 11.5
    assert row.steady_pause_s == pytest.approx(1.0)  # 8 -> 9 before the first report
    assert row.rounds == 2  # generations 2 and 3
    assert (row.duplicates, row.lost) == (1, 1)
    assert row.double_ps == 0.0


def test_measure_counts_double_ownership_and_needs_change_times_before_the_end():
    doubled = TIMELINE + [ev("m3", 12.5, "cb_assigned", [1], gen=3), processed("m3", 13.0, p1=[[4, 4]])]
    row = measure("scale-out", "eager", doubled, [10.0], 13.0, partitions=[P0, P1], produced=PRODUCED, steady_s=2.0)
    assert row.double_ps == pytest.approx(0.5)  # m2 and m3 from 12.5 to the last event
    with pytest.raises(ValueError, match="change times"):
        measure("scale-out", "eager", TIMELINE, [], 13.0, partitions=[P0, P1], produced=PRODUCED, steady_s=2.0)


def _row(mode, unowned, settle):
    return RunResult("scale-out", mode, unowned, 0.1, 0.2, settle, 2, 12, 12, 0, 0, 0.0)


def test_table_shows_medians_failures_and_ratios_to_eager():
    cells = {
        ("process", "scale-out", "eager"): [_row("eager", u, 2.0) for u in (10.0, 30.0, 20.0)],
        ("process", "scale-out", "cooperative"): [_row("cooperative", 5.0, 4.0)],
    }
    failures = {("process", "scale-out", "cooperative+fast-follow-up"): 2}
    table = format_table(cells, failures, ["process"], ["scale-out"], list(MODES))
    assert "| process | scale-out | eager | 3 | 20.00 |" in table  # the median of 10, 30, 20
    assert "| process | scale-out | cooperative+fast-follow-up | 0 (+2 failed) |" in table
    assert "- process scale-out: coop/eager unowned ps 0.25, settle 2.00" in table


def test_command_line_lists_the_scenarios_and_modes_and_rejects_unknown_ones():
    run = [sys.executable, "benchmarks/rebalance.py"]
    helped = subprocess.run(run + ["--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--repeat" in helped.stdout
    text = " ".join(helped.stdout.split()).replace("- ", "-")  # argparse wraps at hyphens
    assert all(name in text for name in [*SCENARIOS, *MODES, *PROFILES])
    bad = subprocess.run(run + ["--scenarios", "scale-sideways"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "scale-sideways" in bad.stderr


def test_librdkafka_heartbeat_gaps_come_from_its_debug_log(tmp_path) -> None:  # noqa: ANN001
    from benchmarks.librdkafka_heartbeats import SKIP, heartbeat_gaps_ms

    sent = [100.0 + 0.3 * i for i in range(SKIP + 3)] + [103.0]
    lines = [
        f'%7|{t:.3f}|HEARTBEAT|m1#consumer-1| [thrd:main]: GroupCoordinator/1: Heartbeat for group "g" generation id 3'
        for t in sent
    ]
    lines.insert(2, '%7|100.450|HEARTBEAT|m1#consumer-1| [thrd:main]: Group "g" heartbeat error response ...')
    log = tmp_path / "m1.stderr"
    log.write_text("\n".join(lines) + "\n")
    gaps = heartbeat_gaps_ms(log)
    # The first SKIP gaps (joining) are left out; an error line is not a heartbeat sent.
    assert gaps == [300.0, 300.0, round((103.0 - sent[-2]) * 1000, 1)]


def test_librdkafka_heartbeats_refuses_a_bad_steady_stretch(capsys) -> None:  # noqa: ANN001
    from benchmarks.librdkafka_heartbeats import main

    with pytest.raises(SystemExit):
        main(["--steady-s", "0"])
    assert "--steady-s must be positive, got 0.0" in capsys.readouterr().err


def test_spread_reports_mean_p90_median_max_and_rounds():
    from benchmarks.rebalance import format_spread, percentile, spread

    runs = [
        RunResult("scale-out", "eager", u, 0, 0, 1, r, 12, 12, 0, 0, 0)
        for u, r in [(0.1, 2), (0.2, 2), (0.3, 2), (0.4, 4), (2.0, 5)]
    ]
    sp = spread(runs)
    assert (sp.runs, sp.median, sp.max, sp.rounds) == (5, 0.3, 2.0, {2: 3, 4: 1, 5: 1})
    assert abs(sp.mean - 0.6) < 1e-9 and abs(sp.p90 - 1.36) < 1e-9  # 0.4 + 0.6 * (2.0 - 0.4)
    assert percentile([3.0], 0.9) == 3.0
    table = format_spread({("instant", "scale-out", "eager"): runs}, ["instant"], ["scale-out"], ["eager"])
    assert "| instant | scale-out | eager | 5 | 0.60 | 1.36 | 0.30 | 2.00 | 2: 3, 4: 1, 5: 1 |" in table
