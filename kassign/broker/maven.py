"""Jars from Maven Central, resolved once with ``mvn`` into kassign's cache and used offline afterwards.

A set of artifacts (with their runtime dependencies) lands in ``<cache>/jars/<name>/``; a ``.complete``
marker written last makes a half-finished download count as missing. The first resolution shows a
progress line with the bytes Maven has downloaded; later ones touch neither Maven nor the network.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from kassign.broker.cache import cache_root
from kassign.broker.errors import BrokerUnavailable

log = logging.getLogger(__name__)

__all__ = ["resolve_jars", "cached_jars", "jar_dir"]

_COMPLETE = ".complete"
# "Downloaded from central: https://.../x.jar (1.2 MB at 3.4 MB/s)"
_DOWNLOADED = re.compile(r"Downloaded from [^:]+: (\S+) \(([\d.]+) (B|kB|MB|GB)")
_UNITS = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}
_OFFLINE_HINTS = (
    "Could not transfer",
    "Unknown host",
    "Network is unreachable",
    "Connection refused",
    "Could not resolve dependencies",
    "Connect to",
)


def jar_dir(name: str) -> Path:
    """Where the jar set ``name`` lives (whether or not it has been resolved)."""
    return cache_root() / "jars" / name


def cached_jars(name: str) -> list[Path] | None:
    """The jars of ``name`` when a previous resolution completed, else None."""
    directory = jar_dir(name)
    if not (directory / _COMPLETE).exists():
        return None
    return sorted(directory.glob("*.jar"))


def _pom(coordinates: Sequence[str]) -> str:
    deps = []
    for coordinate in coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kassign.cache</groupId><artifactId>jars</artifactId><version>1</version>"
        "<packaging>pom</packaging><dependencies>" + "".join(deps) + "</dependencies></project>\n"
    )


class _Progress:
    """A one-line download counter on a terminal; a log line per artifact otherwise."""

    def __init__(self, label: str) -> None:
        self.label, self.bytes, self.files = label, 0, 0
        self.tty = sys.stderr.isatty()

    def add(self, url: str, size: int) -> None:
        self.bytes += size
        self.files += 1
        if self.tty:
            sys.stderr.write(f"\r{self.label}: {self.files} files, {self.bytes / 1e6:.1f} MB downloaded ")
            sys.stderr.flush()
        else:
            log.debug("downloaded %s (%d bytes)", url, size)

    def close(self) -> None:
        if self.tty and self.files:
            sys.stderr.write("\n")
        if self.files:
            log.info("%s: %d files, %.1f MB downloaded from Maven Central", self.label, self.files, self.bytes / 1e6)


def resolve_jars(name: str, coordinates: Sequence[str], *, label: str | None = None) -> list[Path]:
    """The jars of ``coordinates`` (``group:artifact:version``) and their runtime dependencies.

    Served from the cache when a previous call completed; otherwise resolved with ``mvn`` (which
    must be on PATH and reach Maven Central). Raises :class:`BrokerUnavailable` with what to do when
    neither works.
    """
    cached = cached_jars(name)
    if cached:
        return cached
    label = label or name
    target = jar_dir(name)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerUnavailable(
            f"no cached jars for {label} in {target} and no `mvn` on PATH: install Maven (e.g. apt install maven) "
            f"so kassign can fetch them from Maven Central, or fill that directory with the jars and an empty "
            f"{_COMPLETE} file"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    progress = _Progress(f"{label}: fetching jars")
    with tempfile.TemporaryDirectory(prefix="kassign-mvn-", dir=target.parent) as work:
        work_path = Path(work)
        (work_path / "pom.xml").write_text(_pom(coordinates))
        out = work_path / "jars"
        cmd = [
            mvn,
            "-B",
            "-f",
            str(work_path / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={out}",
            "-DincludeScope=runtime",
        ]
        log.info("resolving %s from Maven Central: %s", label, " ".join(coordinates))
        tail: list[str] = []
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-40:]
            match = _DOWNLOADED.search(line)
            if match:
                progress.add(match.group(1), int(float(match.group(2)) * _UNITS[match.group(3)]))
        code = proc.wait()
        progress.close()
        if code != 0:
            errors = [t for t in tail if "[ERROR]" in t] or tail[-3:]
            first = errors[0].replace("[ERROR]", "").strip() if errors else f"mvn exited with {code}"
            if any(hint in "\n".join(tail) for hint in _OFFLINE_HINTS):
                raise BrokerUnavailable(
                    f"could not fetch {label} from Maven Central and nothing is cached in {target}: {first[:300]}"
                )
            raise BrokerUnavailable(f"mvn failed resolving {label}: {first[:300]}")
        (out / _COMPLETE).write_text(" ".join(coordinates) + "\n")
        if target.exists():  # a concurrent resolution finished first; theirs is as good as ours
            shutil.rmtree(out, ignore_errors=True)
        else:
            out.rename(target)
    jars = cached_jars(name)
    if not jars:
        raise BrokerUnavailable(f"mvn resolved {label} but {target} holds no jars")
    return jars
