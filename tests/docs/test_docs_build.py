"""The API reference builds offline from the docstrings (as CI builds it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sphinx_builds_api_reference(tmp_path: Path) -> None:
    out = tmp_path / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=240,
    )
    assert res.returncode == 0, res.stderr
    api = (out / "api.html").read_text(encoding="utf-8")
    # The public names of api.md are documented from their docstrings.
    for name in ("encode_subscription", "CooperativeStickyAssignor", "assign_replicas_to_brokers", "TopicPartition"):
        assert name in api, f"{name} missing from the generated API reference"
    assert "failed to import" not in res.stderr.lower(), res.stderr
