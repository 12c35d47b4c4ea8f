"""kassign --version, the global options before or after the command, quiet default logging,
plain-text --help, several scenario files, and --json on sweep and analyze."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

import kassign
from kassign.cli import COMMANDS
from kassign.cli_options import GlobalOptions, configure_logging, restore_logging, split_global_options

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(kassign_run, flag):
    run = kassign_run(flag)
    assert (run.code, run.out, run.err) == (0, f"kassign {kassign.__version__}\n", "")


@pytest.fixture
def kassign_run(kassign):
    return kassign


@pytest.mark.parametrize(
    "argv",
    [
        ["-q", "assign", "{s}"],
        ["assign", "{s}", "-q"],
        ["assign", "-v", "{s}"],
        ["--verbose", "assign", "{s}"],
        ["assign", "{s}", "--log-level", "debug"],
        ["--log-level=WARNING", "assign", "{s}"],
        ["assign", "--quiet", "{s}"],
    ],
)
def test_global_options_anywhere(kassign_run, argv):
    run = kassign_run(*(a.format(s=SCENARIOS / "join.json") for a in argv))
    assert run.code == 0, run.err
    assert run.out.startswith("assignor: cooperative-sticky\n")


def test_bad_log_level_is_one_line(kassign_run):
    run = kassign_run("--log-level", "LOUD", "assign", "x")
    assert run.code == 2 and run.err_lines == [
        "kassign: unknown log level 'LOUD'; expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL (see kassign --help)"
    ]


def test_broker_start_keeps_its_own_version_option():
    opts, rest = split_global_options(["broker", "start", "--version", "4.0.0", "-v"], own_version=("broker",))
    assert rest == ["broker", "start", "--version", "4.0.0"] and opts.verbose and not opts.version
    opts, rest = split_global_options(["-V", "broker"], own_version=("broker",))
    assert opts.version and rest == ["broker"]
    opts, rest = split_global_options(["assign", "--", "-v"])
    assert rest == ["assign", "--", "-v"] and not opts.verbose


def _log_lines(opts: GlobalOptions, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    configure_logging(opts)
    try:
        logging.getLogger("aiokafka.consumer.group_coordinator").warning("Heartbeat failed for group g")
        logging.getLogger("matplotlib.font_manager").warning("Matplotlib is building the font cache")
        logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
        logging.getLogger("kassign.broker.maven").info("resolving kafka from Maven Central")
        logging.getLogger("kassign.sim").warning("scenario did not settle")
    finally:
        restore_logging()
    return capsys.readouterr().err.splitlines()


def test_default_logging_is_plain_and_keeps_other_libraries_out(capsys):
    assert _log_lines(GlobalOptions(), capsys) == [
        "kassign: resolving kafka from Maven Central",
        "kassign: warning: scenario did not settle",
    ]


def test_quiet_logging_keeps_errors_only(capsys):
    assert _log_lines(GlobalOptions(quiet=True), capsys) == []


def test_verbose_logging_shows_other_libraries_with_timestamps(capsys):
    lines = _log_lines(GlobalOptions(verbose=True), capsys)
    assert len(lines) == 5 and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", line) for line in lines)
    assert "WARNING aiokafka.consumer.group_coordinator: Heartbeat failed for group g" in lines[0]


@pytest.fixture
def detail_loggers_unset():
    """The detail loggers at NOTSET (an in-process ``kassign demo`` earlier in the session sets them to WARNING)."""
    from kassign.cli_options import DETAIL_LOGGERS

    loggers = [logging.getLogger(name) for name in DETAIL_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.NOTSET)
    yield
    for lg, level in zip(loggers, levels, strict=True):
        lg.setLevel(level)


def _detail_lines(opts: GlobalOptions, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    configure_logging(opts)
    try:
        logging.getLogger("kassign.membership.leader").info("assignor cooperative-sticky assigned {'m1': 3}")
        logging.getLogger("kassign.adapters.aiokafka.coordinator").info("group g generation 2: assigned [...]")
        logging.getLogger("kassign.membership.leader").warning("the leader's round failed")
    finally:
        restore_logging()
    return capsys.readouterr().err.splitlines()


def test_per_round_detail_only_when_asked_for(capsys, detail_loggers_unset):
    assert _detail_lines(GlobalOptions(), capsys) == ["kassign: warning: the leader's round failed"]
    assert len(_detail_lines(GlobalOptions(verbose=True), capsys)) == 3
    assert len(_detail_lines(GlobalOptions(log_level="INFO"), capsys)) == 3
    assert _detail_lines(GlobalOptions(quiet=True), capsys) == []


def test_simulate_prints_progress_and_the_result_and_each_round_at_verbose(kassign_run, detail_loggers_unset):
    run = kassign_run("simulate", "--scenario", "rolling_restart", "--members", "6", "--partitions", "12")
    assert run.code == 0, run.err
    assert run.err_lines == [
        "kassign: simulating rolling_restart: 6 members, 12 partitions on kafka (-v for every round)"
    ]
    assert run.out.startswith("rolling_restart: 6 members, 12 partitions") and "phase" in run.out
    verbose = kassign_run("simulate", "--scenario", "rolling_restart", "--members", "6", "--partitions", "12", "-v")
    assert verbose.code == 0 and verbose.out == run.out
    rounds = [line for line in verbose.err_lines if "assignor cooperative-sticky assigned {" in line]
    assert len(rounds) >= 6, verbose.err


def _help_texts(kassign_run) -> dict[str, str]:
    texts = {"kassign": kassign_run("--help").out}
    calls = (
        [[name] for name in COMMANDS] + [["broker", a] for a in ("start", "stop", "status")] + [["replicas", "plan"]]
    )
    for argv in calls:
        run = kassign_run(*argv, "--help")
        assert run.code == 0 and run.out.startswith("usage: kassign"), (argv, run.err)
        texts[" ".join(argv)] = run.out
    return texts


def test_help_texts_are_plain_text(kassign_run):
    for name, text in _help_texts(kassign_run).items():
        for markup in ("``", ":func:", ":class:", ":mod:", ":meth:", ":data:", "::\n"):
            assert markup not in text, f"kassign {name} --help shows {markup!r}"


def test_help_lists_the_global_options(kassign_run):
    for name, text in _help_texts(kassign_run).items():
        assert "--quiet" in text and "--verbose" in text and "--log-level" in text, name


def test_assign_takes_several_scenarios(kassign_run):
    paths = (
        [str(SCENARIOS / "join.json"), str(SCENARIOS / "leave.json")]
        if (SCENARIOS / "leave.json").exists()
        else [str(p) for p in sorted(SCENARIOS.glob("*.json"))[:2]]
    )
    run = kassign_run("assign", *paths, "--json")
    assert run.code == 0, run.err
    assert [r["scenario"] for r in json.loads(run.out)] == paths
    text = kassign_run("assign", *paths).out
    assert [line for line in text.splitlines() if line.startswith("== ")] == [f"== {p}" for p in paths]


def test_assign_checks_every_file_before_printing(kassign_run, tmp_path):
    run = kassign_run("assign", str(SCENARIOS / "join.json"), str(tmp_path / "nope.json"))
    assert run.code == 2 and run.out == ""


class _Result:
    scenarios, wall_s, task_s = 2, 1.5, 0.5
    phase_rows: list = []
    aggregates = [{"broker": "kafka", "kind": "scale_out", "n": 2}]


@pytest.fixture
def fake_spark(monkeypatch):
    pytest.importorskip("pyspark")
    import kassign.spark.pipeline as pipeline
    import kassign.spark.report as report

    class Session:
        def stop(self):
            pass

    monkeypatch.setattr(pipeline, "spark_session", lambda *a, **k: Session())
    monkeypatch.setattr(pipeline, "run_sweep", lambda *a, **k: _Result())
    monkeypatch.setattr(pipeline, "run_analysis", lambda *a, **k: _Result())
    monkeypatch.setattr(report, "write_report", lambda out, *a, **k: Path(out) / "report.html")


def test_sweep_json(kassign_run, fake_spark, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("assignors: [range]\nmembers: [2]\npartitions: [4]\nscenarios: [scale_out]\nseeds: 1\n")
    run = kassign_run("sweep", str(grid), "--out", str(tmp_path / "out"), "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["scenarios"] == 2 and doc["aggregates"] == _Result.aggregates
    assert doc["report"] == str(tmp_path / "out" / "report.html")


def test_analyze_json(kassign_run, fake_spark, tmp_path):
    timeline = tmp_path / "m.jsonl"
    timeline.write_text('{"id": "m1", "t": 1.0, "ev": "subscribed"}\n')
    run = kassign_run("analyze", str(timeline), "--out", str(tmp_path / "out"), "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["groups"] == 2 and doc["aggregates"] == _Result.aggregates
