"""The documentation site builds offline with warnings as errors (as CI builds it), has its pages,
and its API reference documents every public name.

The public API is the ``__all__`` of the modules in :data:`PUBLIC_MODULES`. A name counts as
documented when the reference has it under the module that exports it, or, for a class or function
re-exported from the module that defines it, under that module (``kassign.TopicPartition`` is
documented as ``kassign.model.TopicPartition``). Sphinx's inventory (``objects.inv``) is what is
read: it lists exactly the objects the reference describes.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The modules whose ``__all__`` is kassign's public API.
PUBLIC_MODULES = (
    "kassign",
    "kassign.model",
    "kassign.protocol",
    "kassign.assignors",
    "kassign.adapters.aiokafka",
    "kassign.membership",
    "kassign.placement",
    "kassign.timeline.events",
    "kassign.timeline.metrics",
    "kassign.sim",
    "kassign.telemetry",
    "kassign.telemetry.prometheus",
    "kassign.telemetry.otel",
    "kassign.telemetry.aiokafka_glue",
    "kassign.telemetry.confluent_glue",
    "kassign.broker",
)
#: Packages with an ``__all__`` that are not public API (implementation, or a command's entry point).
INTERNAL_PACKAGES = ("kassign.assignors.sticky", "kassign.demo")
#: The site's pages (docs/*.md), each in the table of contents.
PAGES = (
    "getting-started",
    "guide",
    "assignors",
    "simulator",
    "telemetry",
    "brokers",
    "benchmarks",
    "java",
    "limits",
    "api",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "html"
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", str(ROOT / "docs"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, f"the docs build failed or warned:\n{res.stderr[-5000:]}"
    assert "failed to import" not in res.stderr.lower(), res.stderr
    return out


def inventory(path: Path) -> set[str]:
    """The object names of a Sphinx v2 ``objects.inv``."""
    with path.open("rb") as fh:
        header = [fh.readline() for _ in range(4)]
        assert header[0].startswith(b"# Sphinx inventory version 2"), header[0]
        body = zlib.decompress(fh.read()).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines() if line and not line.startswith("#")}


def test_sphinx_builds_api_reference(site: Path) -> None:
    api = (site / "api.html").read_text(encoding="utf-8")
    for name in ("encode_subscription", "CooperativeStickyAssignor", "assign_replicas_to_brokers", "TopicPartition"):
        assert name in api, f"{name} missing from the generated API reference"


def test_every_page_is_built_and_in_the_table_of_contents(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
        assert f'href="{page}.html"' in index, f"{page} is not in the table of contents"


def test_the_public_modules_are_listed() -> None:
    """A new package with an ``__all__`` is either public (documented) or named internal here."""
    packages = {
        ".".join(p.relative_to(ROOT).parent.parts)
        for p in (ROOT / "kassign").rglob("__init__.py")
        if "__all__" in p.read_text(encoding="utf-8")
    }
    unlisted = packages - set(PUBLIC_MODULES) - set(INTERNAL_PACKAGES)
    assert not unlisted, f"packages with an __all__ neither public nor internal: {sorted(unlisted)}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_in_the_reference(site: Path, module_name: str) -> None:
    documented = inventory(site / "objects.inv")
    module = importlib.import_module(module_name)
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        places = {f"{module_name}.{name}"}
        if inspect.isclass(obj) or inspect.isfunction(obj):
            places.add(f"{obj.__module__}.{obj.__qualname__}")
        if not places & documented:
            missing.append(name)
    assert not missing, f"{module_name}.__all__ names missing from the API reference (docs/api.rst): {missing}"
