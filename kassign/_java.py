"""Locate Java and Apache kafka-clients (from the PyPI wheel ``shigawire-apache-flink-libraries``)
and compile/run small Java programs against it.

Used by the conformance tests, the benchmarks and the integration driver's Java members; kassign's
library code never needs Java.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["JavaUnavailable", "kafka_classpath", "compile_java", "java_command"]


class JavaUnavailable(RuntimeError):
    """Java 17 or the kafka-clients jar is not available on this machine."""


def kafka_classpath() -> list[str]:
    """The kafka-clients 3.9.1 and slf4j-api jars shipped inside the ``pyflink`` package."""
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        raise JavaUnavailable("package shigawire-apache-flink-libraries (pyflink/lib/kafka-clients.jar) is not installed")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    jars = [lib / "kafka-clients.jar", lib / "slf4j-api.jar"]
    missing = [str(j) for j in jars if not j.exists()]
    if missing:
        raise JavaUnavailable(f"missing jars: {missing}")
    return [str(j) for j in jars]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise JavaUnavailable(f"{name} not found on PATH")
    return path


def compile_java(*sources: str | os.PathLike[str], build_root: str | os.PathLike[str] | None = None) -> str:
    """Compile Java sources against kafka-clients; returns the class directory (cached by content)."""
    srcs = [Path(s) for s in sources]
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in srcs)).hexdigest()[:16]
    root = Path(build_root or Path(__file__).resolve().parent.parent / ".java-build")
    out = root / digest
    if (out / ".ok").exists():
        return str(out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [_tool("javac"), "-nowarn", "-d", str(out), "-cp", os.pathsep.join(kafka_classpath()), *map(str, srcs)]
    log.info("compiling %s", " ".join(s.name for s in srcs))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"javac failed:\n{res.stderr}")
    (out / ".ok").write_text("ok")
    return str(out)


def java_command(class_dir: str, main_class: str, *args: str, heap: str = "2g") -> list[str]:
    """The argv that runs ``main_class`` from ``class_dir`` with kafka-clients on the classpath."""
    cp = os.pathsep.join([class_dir, *kafka_classpath()])
    return [_tool("java"), f"-Xmx{heap}", "-cp", cp, main_class, *args]
