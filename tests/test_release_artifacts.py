"""The release artifacts as PyPI shows them: ``python -m build`` builds the sdist and the wheel, ``twine
check --strict`` passes them, and the wheel's metadata states what a user decides on (the version,
the Python and client versions, the classifiers) and ships ``py.typed``. No broker; the build fetches
hatchling into its isolated environment, so it runs in CI's packaging tier (about 10 s)."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

import kassign

ROOT = Path(__file__).resolve().parent.parent

#: Classifiers a user filters PyPI by; the Python versions are checked against requires-python below.
REQUIRED_CLASSIFIERS = (
    "Framework :: AsyncIO",
    "License :: OSI Approved :: Apache Software License",
    "Topic :: System :: Distributed Computing",
    "Typing :: Typed",
)


def test_the_changelog_s_newest_section_is_this_version() -> None:
    first = re.search(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert first and first[1] == kassign.__version__, (first and first[1], kassign.__version__)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, f"python -m build failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("kassign-*.whl")
    return wheel


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(name).decode("utf-8"))


@pytest.mark.packaging
def test_twine_check_passes_the_sdist_and_the_wheel(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2, files
    res = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.packaging
def test_the_wheel_s_metadata_states_versions_and_classifiers(dist: Path) -> None:
    meta = _metadata(_wheel(dist))
    assert meta["Version"] == kassign.__version__
    assert meta["Requires-Python"] == ">=3.11"
    classifiers = meta.get_all("Classifier") or []
    missing = [c for c in REQUIRED_CLASSIFIERS if c not in classifiers]
    assert not missing, missing
    assert "Programming Language :: Python :: 3.11" in classifiers, classifiers
    requires = meta.get_all("Requires-Dist") or []
    for client in ("aiokafka", "confluent-kafka"):
        (spec,) = [r for r in requires if r.startswith(client) and f"extra == '{client.split('-')[0]}'" in r]
        assert ">=" in spec and "<" in spec.replace("<=", ""), f"{client} needs a lower and an upper bound: {spec}"
    assert meta["Description-Content-Type"] == "text/markdown"


@pytest.mark.packaging
def test_the_wheel_ships_py_typed_and_not_the_calibration(dist: Path) -> None:
    names = zipfile.ZipFile(_wheel(dist)).namelist()
    assert "kassign/py.typed" in names
    assert "kassign/sim/bench_meta.py" in names  # what kassign simulate --replay needs stays
    assert not [n for n in names if n.startswith("kassign/sim/calibration/")]
    assert not [n for n in names if n.split("/", 1)[0] in ("tests", "integration", "benchmarks", "data")]


@pytest.mark.packaging
def test_the_sdist_leaves_the_recordings_out(dist: Path) -> None:
    (sdist,) = dist.glob("kassign-*.tar.gz")
    with tarfile.open(sdist) as tf:
        top = {name.split("/")[1] for name in tf.getnames() if name.count("/") >= 1}
    assert {"kassign", "pyproject.toml", "README.md", "CHANGELOG.md"} <= top, top
    assert "data" not in top
