"""The demo's plan, phase split and summary table, on a hand-written run (no broker)."""

from __future__ import annotations

import pytest

pytest.importorskip("aiokafka")

import dataclasses  # noqa: E402

from kassign.demo.cli import RUN_LABELS, build_parser  # noqa: E402
from kassign.demo.scenario import DemoPlan, RunResult, _phases  # noqa: E402
from kassign.demo.summary import format_table, summarize, summary_json  # noqa: E402
from kassign.model import TopicPartition  # noqa: E402
from kassign.timeline.events import Event  # noqa: E402


def _tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"base": 3, "peak": 3}, "base < peak"),
        ({"restarts": 4}, "restarts"),
        ({"partitions": 4}, "partitions"),
    ],
)
def test_plan_rejects_bad_shapes(kwargs, word):
    with pytest.raises(ValueError, match=word):
        DemoPlan(**kwargs)


def test_phases_run_from_mark_to_mark_and_end_at_drain():
    phases = _phases({"b": 5.0, "a": 1.0, "c": 9.0}, end=12.0)
    assert phases == {"a": (1.0, 5.0), "b": (5.0, 9.0), "c": (9.0, 12.0)}


def _run() -> RunResult:
    # m1 owns 0,1; m2 joins at t=10: m1 revokes 1 (cooperative), m2 gets it at 11.5.
    events = [
        Event("m1", 0.0, "subscribed"),
        Event("m1", 1.0, "sync", extra={"gen": 1}),
        Event("m1", 1.0, "cb_assigned", [_tp(0), _tp(1)]),
        Event("m2", 10.0, "subscribed"),
        Event("m1", 11.0, "sync", extra={"gen": 2}),
        Event("m1", 11.0, "cb_assigned", []),
        Event("m1", 11.0, "cb_revoked", [_tp(1)]),
        Event("m1", 11.5, "sync", extra={"gen": 3}),
        Event("m2", 11.5, "sync", extra={"gen": 3}),
        Event("m2", 11.5, "cb_assigned", [_tp(1)]),
        Event("m1", 14.0, "progress", extra={"pos": {}}),
    ]
    marks = {"start 1 members": 0.0, "scale out 1\u21922": 10.0}
    return RunResult(
        "cooperative",
        "cooperative-sticky",
        "g",
        "t",
        events,
        marks,
        _phases(marks, 14.0),
        produced=100,
        lost=0,
        duplicates=2,
    )


def test_summary_rows_and_table():
    rows, per_phase = summarize(_run())
    by_step = {r.step: r for r in rows}
    assert set(by_step) == {"scale out", "total"}  # the start-up is not summarised
    out = by_step["scale out"]
    assert out.unowned_ps == pytest.approx(0.5)  # partition 1 had no owner from 11.0 to 11.5
    assert out.moved == 1 and out.rounds == 2
    assert per_phase["scale out 1\u21922"].gap_kept_s == 0.0
    table = format_table([_run()])
    assert "cooperative-sticky" in table and "100 produced, 0 lost, 2 processed twice" in table
    data = summary_json([_run()])["cooperative"]
    assert data["records"] == {"produced": 100, "lost": 0, "duplicates": 2}
    assert data["steps"]["scale out"]["moved"] == 1


def test_table_shows_the_runs_side_by_side_per_step():
    eager = dataclasses.replace(_run(), label="eager", title="eager (aiokafka default)", duplicates=7)
    fast = dataclasses.replace(
        _run(), label="fast-follow-up", title="cooperative + fast follow-up", unsettled=["scale out 1\u21922"]
    )
    lines = format_table([eager, _run(), fast]).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scale out"))
    block = lines[start : start + 3]
    # one row per run under the step, in run order, each with that run's numbers
    assert [row[17:].split("  ")[0] for row in block] == [
        "eager (aiokafka default)",
        "cooperative-sticky",
        "cooperative + fast follow-up",
    ]
    assert all(row.split()[-4:] == ["0.5", "1", "2", "1.5"] for row in block)
    assert lines[start + 3].startswith("total")
    text = "\n".join(lines)
    assert "eager (aiokafka default)     100 produced, 0 lost, 7 processed twice" in text
    assert "cooperative + fast follow-up DID NOT SETTLE within the deadline: scale out 1\u21922" in text


def test_only_accepts_every_mode():
    assert RUN_LABELS == ("eager", "cooperative", "fast-follow-up")
    for label in RUN_LABELS:
        assert build_parser().parse_args(["--only", label]).only == label


def test_an_interrupted_run_says_so_and_measures_no_loss():
    cut = dataclasses.replace(_run(), lost=None, interrupted=True, interrupted_during="scale out 1\u21922")
    text = format_table([cut])
    assert "INTERRUPTED during scale out 1\u21922: 100 produced, 2 processed twice, lost not measured" in text
    assert " lost," not in text
    data = summary_json([cut])["cooperative"]
    assert data["interrupted"] is True and data["interrupted_during"] == "scale out 1\u21922"
    assert data["records"]["lost"] is None
    assert summary_json([_run()])["cooperative"]["interrupted"] is False
