"""aiokafka's private state is touched in one module, for the releases it names; the package's
``aiokafka`` extra allows exactly those, and the aiokafka installed (CI: the newest the extra
allows) is one of them."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import pytest

aiokafka = pytest.importorskip("aiokafka")

from kassign.adapters.aiokafka import internals  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_aiokafka_is_supported() -> None:
    assert internals.supported(aiokafka.__version__), aiokafka.__version__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert internals.check_version()


def test_an_unsupported_release_is_warned_about() -> None:
    assert not internals.supported("0.13.9") and not internals.supported("0.15.0") and internals.supported("0.14.7")
    with pytest.warns(RuntimeWarning, match="found 0.15.0"):
        assert not internals.check_version("0.15.0")


def test_the_aiokafka_extra_allows_exactly_the_supported_releases() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (spec,) = [s for s in extras["aiokafka"] if s.startswith("aiokafka")]
    low = re.search(r">=\s*(\d+)\.(\d+)", spec)
    high = re.search(r"<\s*(\d+)\.(\d+)", spec)
    assert low and high, spec
    assert ((int(low[1]), int(low[2])), (int(high[1]), int(high[2]))) == internals.SUPPORTED_AIOKAFKA


def test_only_the_internals_module_reaches_into_aiokafka_objects_it_does_not_subclass() -> None:
    # Private attributes of aiokafka objects other than the coordinator itself: the consumer's
    # settings, cluster metadata, fetch state, the client's metadata wait.
    pattern = re.compile(
        r"\b(?:cluster\._partitions|state\._assignment|_tp_state|_maybe_wait_metadata|"
        r"self\._fetch_min_bytes|_closing\.done)"
    )
    offenders = []
    for path in sorted((ROOT / "kassign").rglob("*.py")):
        if path.name == "internals.py":
            continue
        if pattern.search(path.read_text()):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
