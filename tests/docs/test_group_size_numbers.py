"""docs/scale.md's and the README's group-size numbers are the recordings' (issue 28): the page's table
is what ``python -m benchmarks.group_size --from-json`` prints for the committed results, and every
mean and 90th percentile in the README's size table is recomputed from them."""

from __future__ import annotations

from pathlib import Path

from benchmarks.group_size import format_tables, load_current, load_runs, summary
from tests.docs.test_docs_numbers import markdown_tables

ROOT = Path(__file__).resolve().parents[2]
#: The runs of one timing (session 10 s, heartbeat 1 s) that docs/scale.md's main table shows: each cell
#: from the newest date that measured it (cells measured again after the 2026-11-28 fixes replace theirs).
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("group-size-2026-11-2[789]*-kafka44-*.json"))
#: README column heading -> the benchmark's mode.
MODES = {"aiokafka eager": "eager", "kassign default": "cooperative+fast-follow-up", "kassign KIP-848": "consumer"}


def test_the_results_are_there() -> None:
    assert len(RESULTS) >= 2, RESULTS
    sizes = {key[0] for key in load_current(RESULTS)}
    assert sizes == {6, 24, 96}


def test_the_pages_table_is_what_the_benchmark_prints_for_the_results() -> None:
    page = (ROOT / "docs" / "scale.md").read_text()
    table = format_tables(load_current(RESULTS), {})
    assert table in page, "docs/scale.md's table differs from benchmarks.group_size --from-json's output"


def test_the_readmes_size_table_is_the_recordings() -> None:
    cells = load_current(RESULTS)
    readme = (ROOT / "README.md").read_text()
    (table,) = [t for t in markdown_tables(readme) if t[0][:2] == ["members (partitions)", "scenario"]]
    head, rows = table[0], table[1:]
    assert len(rows) == 12
    for row in rows:
        members = int(row[0].split()[0])
        for title, mode in MODES.items():
            runs = cells[(members, "instant", row[1], mode)]
            u = summary([r.unowned_ps for r in runs])
            shown = row[head.index(f"{title} mean / p90")].replace("*", "")
            assert shown == f"{u['mean']:.1f} / {u['p90']:.1f}", (members, row[1], title)


def test_the_heartbeat_table_is_what_the_benchmark_prints_for_its_results() -> None:
    """The KIP-848 section's runs at a 250 ms heartbeat are kept apart: another timing."""
    (hb250,) = (ROOT / "benchmarks" / "results").glob("group-size-2026-11-27-kafka44hb250-*.json")
    assert hb250 not in RESULTS
    assert format_tables(load_runs([hb250]), {}) in (ROOT / "docs" / "scale.md").read_text()


def test_the_shared_processes_table_is_what_the_benchmark_prints_for_its_results() -> None:
    """The runs with eight members to a process are kept apart too: another setup, not the main table's."""
    (shared,) = (ROOT / "benchmarks" / "results").glob("group-size-shared-processes-*-kafka44-n96-scale-out.json")
    assert shared not in RESULTS
    runs = load_runs([shared])
    assert {key[3] for key in runs} == {"eager", "cooperative+fast-follow-up"}
    assert format_tables(runs, {}) in (ROOT / "docs" / "scale.md").read_text()
