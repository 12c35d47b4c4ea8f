"""The wheel a user installs, in a fresh virtualenv outside the source tree: it imports every public
module and runs ``kassign broker start|status|stop``, ``kassign demo --quick``, ``kassign simulate``
and ``kassign assign`` (on the repository's example scenarios) on its own (nothing
from ``integration/``, ``tests/`` or the checkout is on its path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.broker, pytest.mark.packaging, pytest.mark.timeout(900)]

PUBLIC_MODULES = (
    "kassign",
    "kassign.protocol",
    "kassign.assignors",
    "kassign.adapters.aiokafka",
    "kassign.placement",
    "kassign.broker",
    "kassign.sim",
    "kassign.telemetry",
    "kassign.demo",
    "kassign.timeline.metrics",
    "kassign.timeline.events",
)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, (
        f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    )
    return res


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    work = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(ROOT)],
        work,
        dict(os.environ),
    )
    wheel = next((work / "dist").glob("kassign-*.whl"))
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    bin_dir = work / "venv" / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "KAFKA_BOOTSTRAP_SERVERS")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["KASSIGN_RUN_DIR"] = str(work / "run")
    _run([str(bin_dir / "pip"), "install", "-q", f"{wheel}[demo]"], work, env)
    return bin_dir, env, work


def test_the_wheel_imports_every_public_module_from_site_packages(installed):
    bin_dir, env, work = installed
    code = (
        "import importlib, kassign; mods = "
        + repr(PUBLIC_MODULES)
        + "; [importlib.import_module(m) for m in mods]; print(kassign.__file__)"
    )
    out = _run([str(bin_dir / "python"), "-c", code], work, env).stdout.strip()
    assert "site-packages" in out and str(ROOT) not in out, out
    res = subprocess.run(
        [str(bin_dir / "python"), "-c", "import integration"], cwd=work, env=env, capture_output=True, text=True
    )
    assert res.returncode != 0, "the wheel must not need (or ship) the repository's integration package"


def test_the_wheel_starts_and_stops_apache_kafka(installed):
    bin_dir, env, work = installed
    started = _run([str(bin_dir / "kassign"), "broker", "start"], work, env)
    try:
        assert "Apache Kafka" in started.stdout and "kassign broker stop" in started.stdout, started.stdout
        status = _run([str(bin_dir / "kassign"), "broker", "status"], work, env)
        assert ": answering" in status.stdout, status.stdout
    finally:
        stopped = _run([str(bin_dir / "kassign"), "broker", "stop"], work, env)
    assert "stopped the broker" in stopped.stdout


def test_the_wheel_runs_the_quick_demo(installed):
    bin_dir, env, work = installed
    res = _run([str(bin_dir / "kassign"), "demo", "--quick", "--out", str(work / "demo")], work, env, timeout=600)
    assert "broker Apache Kafka" in res.stdout, res.stdout[-2000:]
    assert (work / "demo" / "summary.json").exists() and (work / "demo" / "timeline.png").exists()


def test_the_wheel_simulates_and_assigns_the_example_scenarios(installed):
    bin_dir, env, work = installed
    sim = _run([str(bin_dir / "kassign"), "simulate", "--scenario", "scale_out", "--json"], work, env)
    assert json.loads(sim.stdout)["settled"] is True, sim.stdout[:500]
    scenarios = sorted((ROOT / "examples" / "scenarios").glob("*.json"))
    assert scenarios
    out = _run([str(bin_dir / "kassign"), "assign", *map(str, scenarios)], work, env)
    assert all(path.name in out.stdout or path.stem in out.stdout for path in scenarios), out.stdout[:1000]
