"""Resolving jars from Maven Central with Maven itself.

Maven honours the machine's own repository settings (mirrors, proxies, ``~/.m2``), which Spark's
Ivy-based ``spark.jars.packages`` does not; Ivy also fails on Spark's Kafka connector, whose
``spark-token-provider-kafka-0-10`` dependency is declared with a ``test-jar`` it cannot find.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["MavenError", "cache_dir", "file_lock", "resolve_jars"]

_DONE_MARKER = ".resolved"
_COORDINATES = ".coordinates"  # what was asked for: another list resolves again
# Pinned so the resolve does not depend on whatever plugin version Maven would pick by prefix
# (Maven 3.8 picks 2.8, which predates several fixes).
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

_log = logging.getLogger("streamstate.maven")


class MavenError(RuntimeError):
    """Maven could not resolve the requested artifacts; the message holds Maven's own output."""


def cache_dir() -> Path:
    """The download cache: ``$STREAMSTATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamstate``,
    else ``~/.cache/streamstate``."""
    explicit = os.environ.get("STREAMSTATE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "streamstate"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (two test runs resolving at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pom(coordinates: Sequence[str]) -> str:
    deps = []
    for coordinate in coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(
            "    <dependency>"
            f"<groupId>{escape(group)}</groupId>"
            f"<artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version>"
            "</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>streamstate.local</groupId><artifactId>jars</artifactId>"
        "<version>0</version>\n"
        "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
    )


def resolve_jars(
    coordinates: Sequence[str],
    dest: Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Copies ``group:artifact:version`` artifacts and their runtime dependencies into ``dest``.

    Idempotent and safe to call from several processes: a marker file records a completed
    resolution, and a lock serialises concurrent ones. ``progress`` hears a line before and
    after a download (the first one takes tens of seconds). Returns the jar paths.
    """
    if not _resolved(dest, coordinates):
        with file_lock(dest.with_name(dest.name + ".lock")):
            if not _resolved(dest, coordinates):  # another process may have finished meanwhile
                _download(coordinates, dest, progress)
    return sorted(dest.glob("*.jar"))


def _resolved(dest: Path, coordinates: Sequence[str]) -> bool:
    """Whether ``dest`` holds a completed resolution of exactly ``coordinates`` (a directory
    resolved for other artifacts, e.g. before one was added, is resolved again)."""
    wanted = dest / _COORDINATES
    return (
        (dest / _DONE_MARKER).exists()
        and wanted.exists()
        and (wanted.read_text() == _coordinates_text(coordinates))
    )


def _coordinates_text(coordinates: Sequence[str]) -> str:
    return "\n".join(coordinates) + "\n"


def _download(
    coordinates: Sequence[str], dest: Path, progress: Callable[[str], None] | None
) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError("Maven ('mvn') is not on PATH; it is needed to fetch jars")
    message = f"resolving {', '.join(coordinates)} from Maven into {dest} (first run only)"
    _log.info(message)
    if progress is not None:
        progress(message)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamstate-mvn-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_pom(coordinates))
        staging = Path(tmp) / "jars"
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            raise MavenError(f"could not run Maven: {exc}") from exc
        if proc.returncode != 0 or not any(staging.glob("*.jar")):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
            raise MavenError(
                f"mvn could not resolve {', '.join(coordinates)} (exit {proc.returncode}):\n{tail}"
            )
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(dest))
    jars = sorted(p.name for p in dest.glob("*.jar"))
    (dest / _COORDINATES).write_text(_coordinates_text(coordinates))
    (dest / _DONE_MARKER).write_text("\n".join(jars) + "\n")
    message = f"resolved {len(jars)} jars in {time.monotonic() - started:.1f} s"
    _log.info(message)
    if progress is not None:
        progress(message)
