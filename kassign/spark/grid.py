"""Sweep grids: a YAML file naming lists of values, expanded into one scenario spec per combination.

::

    assignors: [range, sticky, cooperative-sticky]
    protocols: [eager, cooperative]   # pairs an assignor does not support are left out
    brokers: [kafka]                  # kafka and/or tansu
    clients: [java]                   # java and/or librdkafka
    members: [3, 6]
    partitions: [12, 48]
    scenarios: [scale_out, scale_in, crash]
    seeds: 3                          # an int n means seeds 0..n-1; or a list
    config:                           # any other SimConfig setting, for every scenario
      session_timeout_ms: 10000
      heartbeat_interval_ms: 1000

A spec is a plain dict (picklable, a Parquet row's labels): it names its scenario and the
settings of its :class:`~kassign.sim.SimConfig`. Only the standard library and PyYAML are used,
so specs can be built and run without Spark.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kassign.model import RebalanceProtocol
from kassign.sim import SCENARIO_KINDS, SimConfig, make_assignor_factory

__all__ = ["load_grid", "expand_grid", "grid_axes", "GRID_AXES"]

#: Grid key -> the spec field it fills; every axis takes a list (or one value).
GRID_AXES = {
    "assignors": "assignor",
    "protocols": "protocol",
    "brokers": "broker",
    "clients": "client",
    "members": "members",
    "partitions": "partitions",
    "scenarios": "scenario",
    "seeds": "seed",
}
DEFAULTS: dict[str, list[Any]] = {
    "assignors": ["cooperative-sticky"],
    "protocols": ["eager", "cooperative"],
    "brokers": ["kafka"],
    "clients": ["java"],
    "members": [3],
    "partitions": [12],
    "scenarios": ["scale_out"],
    "seeds": [0],
}


def load_grid(path: str | Path) -> dict[str, Any]:
    """Read a grid YAML file; raises ValueError naming the file on a malformed one."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: a grid must be a mapping of axis -> values, got {type(data).__name__}")
    return dict(data)


def _axis(grid: Mapping[str, Any], key: str) -> list[Any]:
    value = grid.get(key, DEFAULTS[key])
    if key == "seeds" and isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"grid 'seeds' must be >= 1 or a list, got {value}")
        return list(range(value))
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"grid axis {key!r} is empty")
    return values


def grid_axes(grid: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Every axis's values as the sweep runs them (defaults filled in, ``seeds: n`` expanded)."""
    return {key: _axis(grid, key) for key in GRID_AXES}


def expand_grid(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the grid's axes as a spec dict, skipping assignor/protocol pairs the
    assignor does not support. Specs are numbered (``scenario_id``) in a stable order."""
    unknown = sorted(set(grid) - set(GRID_AXES) - {"config"})
    if unknown:
        raise ValueError(f"unknown grid key(s) {unknown}; known: {sorted(GRID_AXES)} and 'config'")
    config = dict(grid.get("config") or {})
    clash = sorted(set(config) & {"assignor", "protocol", "broker", "client"})
    if clash:
        raise ValueError(f"grid 'config' sets {clash}; use the grid axes for those")
    SimConfig.from_dict(config)  # fail early, on the driver, on a bad setting
    axes = grid_axes(grid)
    for kind in axes["scenarios"]:
        if kind not in SCENARIO_KINDS:
            raise ValueError(f"unknown scenario kind {kind!r} in grid; expected one of {SCENARIO_KINDS}")
    supported = {a: _protocols_of(a) for a in axes["assignors"]}
    specs: list[dict[str, Any]] = []
    for combo in itertools.product(*axes.values()):
        spec = dict(zip(GRID_AXES.values(), combo))
        protocol = str(spec["protocol"]).lower()
        if protocol not in supported[spec["assignor"]]:
            continue
        spec["protocol"] = protocol
        spec["config"] = config
        spec["scenario_id"] = len(specs)
        specs.append(spec)
    return specs


def _protocols_of(assignor: str) -> set[str]:
    probe = make_assignor_factory(SimConfig(assignor=assignor), lambda: 0.0)("probe")
    return {p.name.lower() for p in probe.supported_protocols if isinstance(p, RebalanceProtocol)}
