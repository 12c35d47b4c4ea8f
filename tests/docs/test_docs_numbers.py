"""The benchmark numbers the README and docs/benchmarks.md show are the results files' numbers.

Every cell of the "unowned partition-seconds" tables (the classic comparison, and the consumer group
protocol's) must equal the median the benchmark wrote into ``benchmarks/results/*.json`` for that
profile, scenario and mode; a table with a cell the results do not have fails too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: Column heading in the docs -> the benchmark's mode name.
MODES = {
    "aiokafka eager": "eager",
    "plain KIP-429": "cooperative",
    "kassign default": "cooperative+fast-follow-up",
    "kassign classic default": "cooperative+fast-follow-up",
    "+ static": "cooperative+static",
    "Java": "java-cooperative",
    "librdkafka": "librdkafka-cooperative",
    "kassign KIP-848": "consumer",
    "Java 4.4 KIP-848": "java-consumer",
    "librdkafka KIP-848": "librdkafka-consumer",
}
#: Row heading in the docs -> the benchmark's scenario name.
SCENARIOS = {
    "scale-out 3 → 6": "scale-out",
    "scale-in 6 → 3": "scale-in",
    "crash 1 of 6": "crash",
    "rolling restart of 6": "rolling-restart",
}
CLASSIC = (
    "profile",
    "scenario",
    "aiokafka eager",
    "plain KIP-429",
    "kassign default",
    "+ static",
    "Java",
    "librdkafka",
)
KIP848 = (
    "profile",
    "scenario",
    "aiokafka eager",
    "kassign classic default",
    "kassign KIP-848",
    "Java 4.4 KIP-848",
    "librdkafka KIP-848",
)
#: (file, results file, the table's heading row)
TABLES = [
    ("README.md", "rebalance-2026-11-25-kafka44.json", CLASSIC),
    ("docs/benchmarks.md", "rebalance-2026-11-25-kafka44.json", CLASSIC),
    ("docs/benchmarks.md", "rebalance-2026-11-25-kafka44-kip848.json", KIP848),
]


def _cells(line: str) -> list[str]:
    return [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")]


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of ``text``: its rows of cells (heading row first, the rule row left out)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|[-:| ]+\|", line.strip()):
                current.append(_cells(line))
        elif current:
            tables.append(current)
            current = []
    return tables


def medians(results_file: str) -> dict[tuple[str, str, str], float]:
    """(profile, scenario, mode) -> unowned partition-seconds, from the results file's own table."""
    table = json.loads((RESULTS / results_file).read_text())["table"]
    (rows,) = markdown_tables(table)
    head = rows[0]
    col = head.index("unowned ps")
    return {(r[0], r[1], r[2]): float(r[col]) for r in rows[1:]}


@pytest.mark.parametrize(("doc", "results_file", "heading"), TABLES)
def test_unowned_partition_seconds_are_the_results_files(doc: str, results_file: str, heading: tuple[str, ...]) -> None:
    expected = medians(results_file)
    tables = [t for t in markdown_tables((ROOT / doc).read_text(encoding="utf-8")) if tuple(t[0]) == heading]
    assert len(tables) == 1, f"{doc}: expected one table headed {heading}, found {len(tables)}"
    head, *rows = tables[0]
    assert len(rows) == 8, rows
    checked = 0
    for row in rows:
        profile, scenario = row[0], SCENARIOS[row[1]]
        for heading, cell in zip(head[2:], row[2:], strict=True):
            if cell in ("–", "-"):
                assert (profile, scenario, MODES[heading]) not in expected, (doc, row[:2], heading)
                continue
            key = (profile, scenario, MODES[heading])
            assert key in expected, f"{doc}: {key} is not in {results_file}"
            assert float(cell) == expected[key], f"{doc}: {key} shows {cell}, {results_file} has {expected[key]}"
            checked += 1
    assert checked >= 8 * 5
