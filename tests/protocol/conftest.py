"""A kafka-clients process (java/ProtocolOracle.java) shared by one test module, answering batches."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class JavaProtocolOracle:
    """Sends request lines to a running ProtocolOracle and returns its answer lines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    def ask(self, requests: Sequence[str]) -> list[str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("".join(r + "\n" for r in requests))
        self._proc.stdin.flush()
        return [self._proc.stdout.readline().rstrip("\n") for _ in requests]


@pytest.fixture(scope="module")
def java_oracle() -> Iterator[JavaProtocolOracle]:
    from kassign._java import JavaUnavailable, compile_java, java_command

    try:
        classes = compile_java(ROOT / "java" / "ProtocolOracle.java")
        cmd = java_command(classes, "ProtocolOracle", heap="256m")
    except JavaUnavailable as exc:
        pytest.fail(f"Java conformance tests need Java 17 and kafka-clients: {exc}")
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8"
    )
    try:
        yield JavaProtocolOracle(proc)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
