"""Where kassign keeps what it downloads and the state of the brokers it started (per user)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "run_dir"]


def cache_root() -> Path:
    """``$KASSIGN_CACHE_DIR``, else ``$XDG_CACHE_HOME/kassign``, else ``~/.cache/kassign``."""
    explicit = os.environ.get("KASSIGN_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "kassign"


def run_dir() -> Path:
    """The directory holding one state file per broker started by ``kassign broker start``
    (``$KASSIGN_RUN_DIR``, else ``run/`` in the cache)."""
    explicit = os.environ.get("KASSIGN_RUN_DIR")
    path = Path(explicit).expanduser() if explicit else cache_root() / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path
