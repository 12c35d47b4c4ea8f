"""The session check in tests/conftest.py: a ``kassign-*`` directory a test run leaves in the
temporary directory is named in the summary, and fails the run under ``KASSIGN_STRICT_TMP=1``.

Each case runs a small pytest session in a subprocess with the suite's conftest and its own
TMPDIR, so directories other processes make in /tmp cannot blur it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
TESTS = """
import os, tempfile

def test_leaks():
    tempfile.mkdtemp(prefix="kassign-leak-")

def test_cleans_up():
    os.rmdir(tempfile.mkdtemp(prefix="kassign-tidy-"))

def test_makes_the_broker_lock_file():
    open(os.path.join(tempfile.gettempdir(), "kassign-broker.lock"), "w").close()  # a file, not a leftover
"""


def _session(tmp_path: Path, *args: str, strict: bool) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    private = tmp_path / "tmp"
    private.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(private), "KASSIGN_STRICT_TMP": "1" if strict else "0"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_leftover_fails_a_strict_run_and_is_named(tmp_path: Path) -> None:
    run = _session(tmp_path, strict=True)
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout
    assert "3 passed" in run.stdout
    leaked = [p.name for p in (tmp_path / "tmp").glob("kassign-leak-*")]
    assert len(leaked) == 1
    assert (
        "1 new kassign-* temporary directory after the session (a failure under KASSIGN_STRICT_TMP=1)" in run.stdout
        and leaked[0] in run.stdout
    )


def test_a_leftover_is_only_reported_when_not_strict(tmp_path: Path) -> None:
    run = _session(tmp_path, strict=False)
    assert run.returncode == pytest.ExitCode.OK, run.stdout
    assert "1 new kassign-* temporary directory after the session: " in run.stdout


def test_a_tidy_strict_run_passes_without_a_word(tmp_path: Path) -> None:
    run = _session(tmp_path, "-k", "not leaks", strict=True)
    assert run.returncode == pytest.ExitCode.OK, run.stdout
    assert "temporary director" not in run.stdout
