"""The sweep/analysis report without Spark: which panels are drawn, the computed summary, and the
page around them, on hand-made phase rows and aggregates."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the spark extra is not installed")

from kassign.spark.report import write_report  # noqa: E402
from kassign.spark.report_plots import FIGURES, figure_panels, strategy_label  # noqa: E402
from kassign.spark.report_summary import checks, findings, headline  # noqa: E402

BALANCE = next(f for f in FIGURES if f.metric == "balance")
GAP = next(f for f in FIGURES if f.metric == "unowned_ps")


def row(assignor: str, protocol: str, kind: str, **metrics: float) -> dict:
    base = {
        "broker": "kafka",
        "client": "java",
        "assignor": assignor,
        "protocol": protocol,
        "kind": kind,
        "unowned_ps": 1.0,
        "moved": 3,
        "settle_s": 0.5,
        "balance": 0,
        "double_owned_ps": 0.0,
    }
    return {**base, **metrics}


def aggregate(assignor: str, protocol: str, kind: str, **values: float) -> dict:
    base = {
        "broker": "kafka",
        "client": "java",
        "assignor": assignor,
        "protocol": protocol,
        "kind": kind,
        "n": 3,
        "unowned_ps_p50": 1.0,
        "moved_mean": 3.0,
        "settle_s_p50": 0.5,
        "double_owned_ps_max": 0.0,
        "unsettled": 0,
    }
    return {**base, **values}


def test_all_zero_and_missing_panels_are_left_out_and_named() -> None:
    rows = [
        row("range", "eager", "scale_in", balance=0),
        row("sticky", "eager", "scale_in", balance=0),
        row("range", "eager", "crash", balance=1),
        row("sticky", "eager", "crash", balance=0),
        row("range", "eager", "flap", balance=math.nan),
    ]
    figure = figure_panels(rows, BALANCE)
    assert [p.kind for p in figure.panels] == ["crash"]
    assert figure.all_zero == ["scale_in"] and figure.no_data == ["flap"]
    assert figure.note() == (
        "Not drawn: scale in (members leave): 0 in every run of every strategy; flapping member: no measured value."
    )
    assert figure.panels[0].series == {"range\n(eager)": [1.0], "sticky\n(eager)": [0.0]}


def test_strategy_label_names_the_client_only_when_clients_differ() -> None:
    rows = [row("range", "eager", "scale_out"), row("range", "eager", "scale_out", client="librdkafka")]
    figure = figure_panels(rows, GAP)
    assert sorted(figure.panels[0].series) == ["java\nrange\n(eager)", "librdkafka\nrange\n(eager)"]
    assert strategy_label(rows[0], ["assignor", "protocol"]) == "range (eager)"


def test_findings_name_the_best_strategy_ties_and_margin() -> None:
    aggs = [
        aggregate("range", "eager", "scale_out", unowned_ps_p50=0.5, moved_mean=15.0),
        aggregate("sticky", "eager", "scale_out", unowned_ps_p50=0.502, moved_mean=6.0),
        aggregate("cooperative-sticky", "cooperative", "scale_out", unowned_ps_p50=6.0, moved_mean=6.0),
        aggregate("cooperative-sticky", "cooperative", "crash", unowned_ps_p50=4.0),
        aggregate("range", "eager", "crash", unowned_ps_p50=5.0),
        aggregate("range", "eager", "error"),
    ]
    found = {(f.kind, f.metric): f for f in findings(aggs)}
    assert {k for k, _ in found} == {"scale_out", "crash"}  # failed scenarios are no phase kind
    gap = found[("scale_out", "unowned_ps_p50")]
    assert gap.best == ("range (eager)", "sticky (eager)")  # within 1 %: a tie
    assert gap.runner_up == "cooperative-sticky (cooperative)" and gap.margin == pytest.approx(1 - 0.5 / 6)
    assert gap.text() == ("range (eager), sticky (eager) tie: 0.5, 92% lower than cooperative-sticky (cooperative) (6)")
    assert (
        found[("crash", "unowned_ps_p50")].text() == "cooperative-sticky (cooperative): 4, 20% lower than range "
        "(eager) (5)"
    )
    assert found[("crash", "moved_mean")].text() == "all tie at 3"
    assert headline(list(found.values())) == (
        "Lowest ownership gap: cooperative-sticky (cooperative) in crash; range (eager) = sticky (eager) in scale out."
    )


def test_checks_report_double_ownership_unsettled_phases_and_failures() -> None:
    clean = [aggregate("range", "eager", "scale_out")]
    assert checks(clean, []) == ["No partition was owned by two members at once in any run."]
    bad = [aggregate("range", "eager", "scale_out", double_owned_ps_max=0.2, unsettled=2)]
    assert checks(bad, [{"kind": "error"}]) == [
        "Partitions owned by two members at once in: range (eager) scale out (members join).",
        "2 phase(s) did not settle before the run ended (see the 'unsettled' column).",
        "1 scenario(s) failed in the simulator and are left out (see the log).",
    ]


def test_page_has_summary_parameters_captions_and_no_empty_figure(tmp_path: Path) -> None:
    rows = [row("range", "eager", "scale_out", unowned_ps=0.5 + i / 10, moved=15 - i) for i in range(3)]
    rows += [row("cooperative-sticky", "cooperative", "scale_out", unowned_ps=6.0 + i, moved=6) for i in range(3)]
    aggs = [
        aggregate("range", "eager", "scale_out", unowned_ps_p50=0.6, moved_mean=14.0),
        aggregate("cooperative-sticky", "cooperative", "scale_out", unowned_ps_p50=7.0, moved_mean=6.0),
    ]
    (tmp_path / BALANCE.file).write_bytes(b"stale")  # an earlier run's PNG in the same directory
    page = write_report(
        tmp_path,
        [*rows, {**rows[0], "kind": "initial"}],
        aggs,
        title="t",
        summary={"wall time (s)": 1.5},
        parameters={"members": [3, 6], "config": {"a": 1}},
    )
    text = page.read_text()
    assert "Lowest ownership gap: range (eager) in scale out." in text
    assert "range (eager): 0.6, 91% lower than cooperative-sticky (cooperative) (7)" in text
    assert "cooperative-sticky (cooperative): 6, 57% lower than range (eager) (14)" in text
    assert '<td class="l">3, 6</td>' in text and "a=1" in text and "1.500" in text
    for spec in FIGURES:
        if spec.metric == "balance":  # 0 everywhere: no picture, only what it would have said
            assert not (tmp_path / spec.file).exists() and f'src="{spec.file}"' not in text
            assert "Balance after settling" in text and "0 in every run of every strategy" in text
        else:
            assert (tmp_path / spec.file).stat().st_size > 10_000 and html.escape(spec.caption) in text
            assert f'data-metric="{spec.metric}" data-panels="scale_out"' in text
