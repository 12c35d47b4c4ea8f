"""Find a Java runtime and its major version (``$JAVA_HOME/bin/java``, else ``java`` on PATH)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kassign.broker.errors import BrokerUnavailable

__all__ = ["JavaRuntime", "find_java"]

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


@dataclass(frozen=True)
class JavaRuntime:
    """A ``java`` executable and the major version it reported (8, 11, 17, 21, ...)."""

    executable: str
    major: int


def _java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


def find_java(min_major: int = 17, *, purpose: str = "Apache Kafka") -> JavaRuntime:
    """The Java runtime to use; raises :class:`BrokerUnavailable` when none or too old a one is found."""
    executable = _java_executable()
    if executable is None:
        raise BrokerUnavailable(
            f"{purpose} needs Java {min_major} or newer and no `java` was found: install a JDK "
            f"(e.g. apt install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    try:
        out = subprocess.run([executable, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerUnavailable(f"could not run {executable} -version: {exc}") from None
    match = _VERSION.search(out.stderr + out.stdout)
    if match is None:
        raise BrokerUnavailable(f"could not read the Java version from {executable} -version")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < min_major:
        raise BrokerUnavailable(
            f"{purpose} needs Java {min_major} or newer; {executable} is Java {major}: "
            f"install a newer JDK or point JAVA_HOME at one"
        )
    return JavaRuntime(executable, major)
