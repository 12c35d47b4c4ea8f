"""``report.html`` from a real ``kassign sweep``, rendered by headless Chromium (Debian's ``chromium``
package; .ci/run installs it): the page must show its figures (not a blank or broken page),
carry every figure's caption, and draw no panel that has no data.

Without a Chromium or Chrome on the PATH the rendering test is skipped with a one-line reason, so the
README's test command passes on a fresh machine; with ``KASSIGN_REQUIRE_BROWSER=1`` (set by .ci/run,
which installs Chromium) a missing browser fails it instead."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

from kassign.spark.report_plots import FIGURES, PROTOCOL_COLOURS  # noqa: E402

WIDTH, HEIGHT = 1400, 3000
#: A grid whose balance is 0 in every rolling restart and scale-in (the report's empty-panel case).
GRID = """\
assignors: [range, cooperative-sticky]
protocols: [eager, cooperative]
members: [3, 6]
partitions: [24]
scenarios: [scale_out, scale_in, crash, rolling_restart]
seeds: 2
config: {session_timeout_ms: 10000, heartbeat_interval_ms: 1000}
"""
#: Where each figure's metric is summarised in aggregates.json (the largest value of a group).
MAX_COLUMN = {
    "unowned_ps": "unowned_ps_max",
    "moved": "moved_max",
    "settle_s": "settle_s_max",
    "balance": "balance_max",
}


#: Executable names of a Chromium or Chrome, in the order they are looked for.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    """The path of the first of :data:`BROWSERS` on the PATH, or None."""
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def require_browser() -> str:
    """A Chromium or Chrome to render with; skips the test without one (fails it with ``KASSIGN_REQUIRE_BROWSER=1``)."""
    path = find_browser()
    if path is None:
        message = f"no Chromium or Chrome installed ({', '.join(BROWSERS)} not on PATH): apt-get install -y chromium"
        if os.environ.get("KASSIGN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"KASSIGN_REQUIRE_BROWSER=1 but {message}", pytrace=False)
        pytest.skip(message)
    return path


def screenshot(browser: str, page: Path, png: Path, profile: Path) -> None:
    """Render ``page`` with headless ``browser`` into ``png`` (WIDTH x HEIGHT)."""
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--screenshot={png}",
        f"--window-size={WIDTH},{HEIGHT}",
        page.resolve().as_uri(),
    ]
    # Its own session, so a hung Chromium is killed with every helper process it started.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0 and png.is_file(), out.decode(errors="replace")[-2000:]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of ``kassign sweep`` over :data:`GRID`."""
    work = tmp_path_factory.mktemp("report")
    (work / "grid.yaml").write_text(GRID)
    out = work / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "kassign.cli",
            "sweep",
            str(work / "grid.yaml"),
            "--out",
            str(out),
            "--master",
            "local[1]",
            "--no-progress",
            "--no-events",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_every_figure_has_its_caption_and_only_panels_with_data(report: Path) -> None:
    text = (report / "report.html").read_text()
    aggregates = json.loads((report / "aggregates.json").read_text())
    for spec in FIGURES:
        assert spec.title in text and html.escape(spec.reading) in text
        match = re.search(f'data-metric="{spec.metric}" data-panels="([^"]*)"', text)
        assert match, spec.metric
        panels = [k for k in match.group(1).split(",") if k]
        largest = {}
        for a in aggregates:
            largest[a["kind"]] = max(largest.get(a["kind"], 0.0), a[MAX_COLUMN[spec.metric]])
        # Drawn: exactly the kinds where some run has a non-zero value.
        assert sorted(panels) == sorted(k for k, v in largest.items() if v > 0), spec.metric
        if panels:
            assert html.escape(spec.caption) in text and (report / spec.file).is_file()
        else:
            assert not (report / spec.file).exists()
    assert 'data-metric="balance" data-panels="crash,scale_out"' in text  # the empty-panel case, left out
    assert "Not drawn: rolling restart, scale in (members leave): 0 in every run of every strategy." in text
    assert "Lowest ownership gap:" in text and "Spark master" in text and "rolling_restart" in text


def test_report_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    browser = require_browser()
    import numpy as np
    from PIL import Image

    png = tmp_path / "report.png"
    screenshot(browser, report / "report.html", png, tmp_path / "chromium-profile")
    with Image.open(png) as image:
        assert image.size == (WIDTH, HEIGHT)
        pixels = np.asarray(image.convert("RGB"), dtype=np.int32)
    assert pixels.var() > 100  # not blank (a blank page's variance is 0)
    # The figures loaded (a broken image shows no colour): pixels of the protocol colours, drawn
    # at 80 % opacity over white, must cover a fair part of the page.
    for hexcolour in PROTOCOL_COLOURS.values():
        colour = np.array([round(0.8 * int(hexcolour[i : i + 2], 16) + 0.2 * 255) for i in (1, 3, 5)])
        share = (np.abs(pixels - colour).sum(axis=2) < 40).mean()
        assert share > 0.003, f"{hexcolour}: {share:.4f} of the page"
