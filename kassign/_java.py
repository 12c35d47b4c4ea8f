"""Java and Apache kafka-clients from Maven Central, to compile and run small Java programs against.

Used by the conformance tests, the benchmarks and the integration driver's Java members; kassign's
library code never needs Java. The jars (``org.apache.kafka:kafka-clients`` and a silent slf4j
binding) are resolved once per version into kassign's cache (:mod:`kassign.broker.maven`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from pathlib import Path

from kassign.broker.errors import BrokerUnavailable
from kassign.broker.jvm import find_java
from kassign.broker.maven import resolve_jars

log = logging.getLogger(__name__)

__all__ = ["JavaUnavailable", "REFERENCE_KAFKA_CLIENTS", "kafka_classpath", "compile_java", "java_command"]

#: The kafka-clients version the oracles and the default Java members run (Java's reference behaviour).
REFERENCE_KAFKA_CLIENTS = "3.9.1"


class JavaUnavailable(BrokerUnavailable):
    """Java 17, Maven or the kafka-clients jars are not available on this machine."""


def kafka_classpath(version: str = REFERENCE_KAFKA_CLIENTS) -> list[str]:
    """The jars of kafka-clients ``version`` (with its dependencies and slf4j-nop), from the cache or Maven Central."""
    try:
        jars = resolve_jars(
            f"kafka-clients-{version}",
            [f"org.apache.kafka:kafka-clients:{version}", "org.slf4j:slf4j-nop:1.7.36"],
            label=f"kafka-clients {version}",
        )
    except BrokerUnavailable as exc:
        raise JavaUnavailable(str(exc)) from None
    return [str(j) for j in jars]


def _java_tool(name: str) -> str:
    try:
        runtime = find_java(17, purpose="kassign's Java programs")
    except BrokerUnavailable as exc:
        raise JavaUnavailable(str(exc)) from None
    tool = Path(runtime.executable).with_name(name)
    if not tool.exists():
        raise JavaUnavailable(f"{tool} not found: install a JDK (not only a JRE)")
    return str(tool)


def compile_java(
    *sources: str | os.PathLike[str],
    build_root: str | os.PathLike[str] | None = None,
    kafka_version: str = REFERENCE_KAFKA_CLIENTS,
) -> str:
    """Compile Java sources against kafka-clients ``kafka_version``; returns the class directory (cached by
    content and version)."""
    srcs = [Path(s) for s in sources]
    digest = hashlib.sha256(kafka_version.encode() + b"".join(s.read_bytes() for s in srcs)).hexdigest()[:16]
    root = Path(build_root or Path(__file__).resolve().parent.parent / ".java-build")
    out = root / digest
    if (out / ".ok").exists():
        return str(out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        _java_tool("javac"),
        "-nowarn",
        "-d",
        str(out),
        "-cp",
        os.pathsep.join(kafka_classpath(kafka_version)),
        *map(str, srcs),
    ]
    log.info("compiling %s against kafka-clients %s", " ".join(s.name for s in srcs), kafka_version)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"javac failed:\n{res.stderr}")
    (out / ".ok").write_text("ok")
    return str(out)


def java_command(
    class_dir: str, main_class: str, *args: str, heap: str = "2g", kafka_version: str = REFERENCE_KAFKA_CLIENTS
) -> list[str]:
    """The argv that runs ``main_class`` from ``class_dir`` with kafka-clients ``kafka_version`` on the classpath."""
    cp = os.pathsep.join([class_dir, *kafka_classpath(kafka_version)])
    return [_java_tool("java"), f"-Xmx{heap}", "-cp", cp, main_class, *args]
