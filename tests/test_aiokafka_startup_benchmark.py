"""``benchmarks/aiokafka_startup.py``: how the simulator's aiokafka ``startup_ms`` is measured, and
that the preset is what the committed measurement says."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import statistics
from pathlib import Path

import pytest

from benchmarks.aiokafka_startup import JOIN_LOGGERS, _JoinTimes, main
from kassign.sim.config import KAFKA44_PRESETS

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def _record(logger: str, msg: str, created: float) -> logging.LogRecord:
    record = logging.LogRecord(logger, logging.INFO, __file__, 1, msg, ("g",), None)
    record.created = created
    return record


def test_only_the_join_line_is_timed() -> None:
    joins = _JoinTimes()
    joins.handle(_record(JOIN_LOGGERS["kassign"], "group %s: revoking []", 1.0))
    joins.handle(_record(JOIN_LOGGERS["kassign"], "(Re-)joining group %s (%s protocol, owning %d partitions)", 2.5))
    joins.handle(_record(JOIN_LOGGERS["kassign"], "Joined group %s (generation %s) as %s, protocol %s", 2.6))
    joins.handle(_record(JOIN_LOGGERS["aiokafka"], "(Re-)joining group %s", 3.0))
    assert joins.times == [2.5, 3.0]


@pytest.mark.parametrize("client", sorted(JOIN_LOGGERS))
def test_each_clients_coordinator_logs_the_join_line_it_is_timed_by(client: str) -> None:
    # The benchmark times the JoinGroup by this log line: a coordinator that stopped writing it (or
    # moved it to another logger) would leave the benchmark with nothing to time.
    module = importlib.import_module(JOIN_LOGGERS[client])
    assert '"(Re-)joining group %s' in inspect.getsource(module)
    assert module.log.name == JOIN_LOGGERS[client]


def test_the_aiokafka_preset_is_the_measured_median() -> None:
    samples = [
        ms
        for client in ("kassign", "aiokafka")
        for ms in json.loads((RESULTS / f"aiokafka-startup-2026-11-27-{client}.json").read_text())[
            "subscribe_to_join_ms"
        ]
    ]
    assert len(samples) == 120
    assert round(statistics.median(samples), 1) == KAFKA44_PRESETS["aiokafka"]["startup_ms"]


def test_too_few_trials_are_refused(capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(["--trials", "1"])
    assert "--trials must be at least 2, got 1" in capsys.readouterr().err
