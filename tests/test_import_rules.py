"""The import rules of the source tree, read with ``ast`` (nothing is imported or run):

* no module of ``kassign`` imports ``integration`` or ``benchmarks`` (the installed package has neither);
* the core (``kassign/assignors``, ``kassign/protocol``, ``kassign/membership``, ``kassign/timeline``,
  ``kassign/model.py``) imports none of ``kassign.adapters``, ``kassign.sim``, ``kassign.demo`` or
  ``integration``;
* no adapter (``kassign/adapters``) imports ``kassign.sim``: what both need (wire formats such as the
  follow-up mark) lives in ``kassign.protocol``;
* no adapter imports ``kassign.telemetry``: the recorder's client glue lives in the telemetry package
  and reaches down to the adapters, never the other way round (that made an import circle);
* telemetry reaches the aiokafka adapter only through its public names (``kassign.adapters.aiokafka``),
  never through the adapter's private-internals module ``kassign.adapters.aiokafka.internals``;
* nothing in ``kassign`` outside ``kassign/sim/calibration`` imports the calibration tooling: the
  simulator the wheel ships does not depend on what is left out of it.

A package's own modules may import each other: a rule never counts an import of the package the file is in.

Every import counts: ``import x``, ``from x import y`` (relative ones resolved), imports inside
functions, and ``importlib.import_module("x")`` / ``__import__("x")`` with a literal name.
A violation is reported as ``file:line imports module``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: (files or folders the rule covers, module prefixes they must not import, why)
RULES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("kassign",), ("integration", "benchmarks"), "kassign is installed without integration/ and benchmarks/"),
    (
        ("kassign/assignors", "kassign/protocol", "kassign/membership", "kassign/timeline", "kassign/model.py"),
        ("kassign.adapters", "kassign.sim", "kassign.demo", "integration"),
        "the core knows no client, simulator, demo or test tooling",
    ),
    (("kassign/adapters",), ("kassign.sim",), "an adapter does not lean on the simulator"),
    (("kassign/adapters",), ("kassign.telemetry",), "telemetry observes the adapters, not the other way round"),
    (
        ("kassign/telemetry",),
        ("kassign.adapters.aiokafka.internals",),
        "telemetry uses the adapter's public accessors, not its private internals",
    ),
    (("kassign",), ("kassign.sim.calibration",), "the calibration tooling is left out of the wheel"),
]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the file at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # `from kassign import sim` imports kassign.sim
                yield node.lineno, f"{module}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                yield node.lineno, node.args[0].value


def _sources(root: Path, covered: Sequence[str]) -> Iterator[Path]:
    for entry in covered:
        path = root / entry
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(root: Path = ROOT) -> list[str]:
    """Every import that breaks a rule, as ``file:line imports module (why)``, sorted and deduplicated."""
    found: dict[tuple[str, int, str], str] = {}
    for covered, forbidden, why in RULES:
        for path in _sources(root, covered):
            own = _module_name(path, root)
            for line, module in imports_of(path, root):
                for prefix in forbidden:
                    if _matches(own, prefix):
                        continue  # inside the package the rule keeps others out of
                    key = (str(path.relative_to(root)), line, why)
                    if _matches(module, prefix) and len(module) < len(found.get(key, module + ".")):
                        found[key] = module  # `from a.b import c` is reported as a.b, not a.b.c
    return sorted(f"{file}:{line} imports {module} ({why})" for (file, line, why), module in found.items())


def test_the_source_tree_keeps_its_import_rules():
    assert not violations(), "import rules broken:\n" + "\n".join(violations())


@pytest.mark.parametrize(
    ("where", "code", "expected"),
    [
        (
            "kassign/timeline/x.py",
            "from integration.churn import check\n",
            "kassign/timeline/x.py:1 imports integration.churn",
        ),
        ("kassign/telemetry/x.py", "def f():\n    import benchmarks.rebalance\n", "imports benchmarks.rebalance"),
        (
            "kassign/assignors/x.py",
            "from kassign.adapters.aiokafka import CooperativeConsumer\n",
            "kassign/assignors/x.py:1 imports kassign.adapters.aiokafka",
        ),
        ("kassign/protocol/x.py", "from ..sim import follow_up\n", "kassign/protocol/x.py:1 imports kassign.sim"),
        ("kassign/model.py", "from kassign import demo\n", "kassign/model.py:1 imports kassign.demo"),
        (
            "kassign/adapters/aiokafka/x.py",
            "import importlib\nimportlib.import_module('kassign.sim.member')\n",
            "kassign/adapters/aiokafka/x.py:2 imports kassign.sim.member",
        ),
        (
            "kassign/membership/x.py",
            "from kassign.adapters.aiokafka import internals\n",
            "kassign/membership/x.py:1 imports kassign.adapters.aiokafka",
        ),
        (
            "kassign/adapters/confluent.py",
            "from kassign.telemetry.recorder import RebalanceRecorder\n",
            "kassign/adapters/confluent.py:1 imports kassign.telemetry.recorder",
        ),
        ("kassign/adapters/x.py", "from kassign.simulation_free import y\n", None),  # a prefix of a name is no match
        ("kassign/sim/x.py", "from kassign.adapters.aiokafka import follow_up\n", None),  # allowed outside the core
        (
            "kassign/telemetry/x.py",
            "from kassign.adapters.aiokafka.internals import group_id_of\n",
            "kassign/telemetry/x.py:1 imports kassign.adapters.aiokafka.internals",
        ),
        ("kassign/telemetry/x.py", "from kassign.adapters.aiokafka import group_id_of\n", None),  # the public accessor
        (
            "kassign/sim/replay.py",
            "from kassign.sim.calibration.benchmark import report\n",
            "kassign/sim/replay.py:1 imports kassign.sim.calibration.benchmark",
        ),
        ("kassign/sim/calibration/fit.py", "from kassign.sim.calibration.benchmark import BenchRun\n", None),
    ],
)
def test_a_broken_rule_is_reported_by_file_line_and_import(tmp_path, where, code, expected):
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(tmp_path).parents:
        if str(parent) != ".":
            (tmp_path / parent / "__init__.py").touch()
    path.write_text(code)
    found = violations(tmp_path)
    if expected is None:
        assert found == []
    else:
        assert any(expected in v for v in found), found
