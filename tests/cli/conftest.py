"""Helpers for the command-line tests: run kassign in-process and split what it printed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kassign.cli import main


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


@pytest.fixture
def kassign(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """``kassign("assign", "x.json")`` -> Run(code, stdout, stderr); SystemExit becomes the code."""

    def run(*argv: str) -> Run:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run
