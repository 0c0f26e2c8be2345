"""The peers outside Python, run side by side with streamstate: Kafka Streams itself and kcat.

* **Kafka Streams** (the JVM library streamstate follows): the project's own small programs in
  ``benches/kstreams/`` — ``RestoreBench`` (restores a persistent store from its pre-filled
  changelog and reports its ``StateRestoreListener``'s time) and ``WordCount`` (the canonical word
  count through a repartition topic), ``FailoverInstance`` (one instance of the failover
  benchmark's count under ``group.protocol=streams``, run as :class:`FailoverInstance`) — and
  ``DescribeDsl``, the oracle of :func:`describe_dsl_programs` (Kafka Streams'
  ``Topology.describe()`` text of fixed DSL programs, built without a broker). Their jars, Kafka
  Streams at the local broker's version (:data:`KSTREAMS_VERSION`) and its dependencies, are
  fetched from Maven Central by Maven into ``<cache>/kafka-streams-<version>/libs`` (the resolver
  the local broker uses); the sources are compiled with ``javac`` into
  ``<cache>/kstreams-bench/<digest>/``, again only when they change. Each program prints one JSON
  line, parsed here into a report.
* **kcat** (librdkafka in C, Debian's ``kcat`` package, installed by ``make kstreams``): reads a
  changelog from beginning to end, the ceiling of any librdkafka-based reader.

``python -m benches._kstreams prepare`` fetches, compiles and checks kcat (``make kstreams`` runs
it). Every run starts from a fresh state directory; :func:`delete_application` removes what an
application left on the broker (its internal topics and consumer group).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE
from typing import IO, Any

from streamstate._maven import MavenError, file_lock, resolve_jars
from streamstate.kafka_local import KAFKA_VERSION, cache_dir

__all__ = [
    "JVM_OPTIONS",
    "KSTREAMS_VERSION",
    "FailoverInstance",
    "KcatReport",
    "PeerError",
    "RestoreReport",
    "WordCountReport",
    "classpath",
    "delete_application",
    "describe_dsl_programs",
    "failover_instances",
    "kcat_consume",
    "prepare",
    "run_restore_bench",
    "run_word_count",
]

KSTREAMS_VERSION = KAFKA_VERSION
"""The Kafka Streams release the Java peers run: the local broker's."""

# Kafka Streams 4.4 logs through SLF4J 1.7 and ships no binding; slf4j-simple at WARN sends its
# warnings and errors to stderr, which a failing run then shows.
_SLF4J_VERSION = "1.7.36"
_SOURCES = Path(__file__).resolve().parent / "kstreams"

JVM_OPTIONS: tuple[str, ...] = (
    # A fixed 1 GiB heap (RocksDB's memory is off-heap) and G1, the JVM 17 default, stated so a
    # different machine's ergonomics do not change the comparison.
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
)
"""The JVM settings of every Java peer run."""

_KCAT_INSTALL = "make kstreams (apt-get install -y kcat)"


class PeerError(RuntimeError):
    """A peer program could not be prepared, or failed; the message holds its output's end."""


# --------------------------------------------------------------------------------------------
# Preparing: jars, classes, kcat
# --------------------------------------------------------------------------------------------


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run(
    what: str, command: Sequence[str], timeout_s: float, *, stdout: IO[bytes] | int = PIPE
) -> subprocess.CompletedProcess[str]:
    """Runs ``command`` to its end; a timeout or a non-zero exit raises :class:`PeerError` with
    the end of its output."""
    try:
        result = subprocess.run(
            command,
            stdout=stdout,
            stderr=PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerError(f"{what} did not finish within {timeout_s} s") from exc
    if result.returncode != 0:
        output = result.stderr + (result.stdout or "")
        raise PeerError(f"{what} failed (exit {result.returncode}):\n{_tail(output)}")
    return result


def _java_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise PeerError(f"{name!r} is not on PATH and JAVA_HOME is not set (a JDK 17+ is needed)")
    return found


def _jars() -> Path:
    libs = cache_dir() / f"kafka-streams-{KSTREAMS_VERSION}" / "libs"
    try:
        jars = resolve_jars(
            [
                f"org.apache.kafka:kafka-streams:{KSTREAMS_VERSION}",
                # Kafka's TopologyTestDriver: the oracle of the DSL's TopologyTestDriver tests.
                f"org.apache.kafka:kafka-streams-test-utils:{KSTREAMS_VERSION}",
                f"org.slf4j:slf4j-simple:{_SLF4J_VERSION}",
            ],
            libs,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except MavenError as exc:
        raise PeerError(f"could not fetch Kafka Streams {KSTREAMS_VERSION}: {exc}") from exc
    if not any(j.name == f"kafka-streams-{KSTREAMS_VERSION}.jar" for j in jars):
        raise PeerError(f"Maven resolved no kafka-streams-{KSTREAMS_VERSION}.jar into {libs}")
    return libs


def _classes(libs: Path) -> Path:
    """The compiled programs, in a directory named by a digest of the sources and the jars:
    compiled once per change, by one process at a time."""
    sources = sorted(_SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for jar in sorted(libs.glob("*.jar")):
        digest.update(jar.name.encode() + b"\0")
    classes = cache_dir() / "kstreams-bench" / digest.hexdigest()[:16]
    if (classes / "RestoreBench.class").is_file():
        return classes
    with file_lock(classes.with_name(classes.name + ".lock")):
        if (classes / "RestoreBench.class").is_file():
            return classes
        classes.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="classes-", dir=classes.parent))
        command = [
            _java_tool("javac"),
            "--release",
            "17",
            "-Xlint:all",
            "-Werror",
            "-cp",
            str(libs / "*"),
            "-d",
            str(staging),
            *map(str, sources),
        ]
        try:
            _run("javac", command, 300)
        except PeerError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        staging.rename(classes)
    return classes


def classpath() -> str:
    """The Java peers' class path (fetching the jars and compiling the sources when needed)."""
    libs = _jars()
    return os.pathsep.join([str(_classes(libs)), str(libs / "*")])


def _kcat() -> str:
    found = shutil.which("kcat")
    if found is None:
        raise PeerError(f"kcat is not installed; run {_KCAT_INSTALL}")
    return found


def prepare() -> None:
    """Fetches and compiles the Java peers and checks that kcat is installed."""
    classpath()
    _kcat()


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def _run_java(program: str, arguments: Sequence[str], timeout_s: float) -> dict[str, Any]:
    command = [_java_tool("java"), *JVM_OPTIONS, "-cp", classpath(), program, *arguments]
    result = _run(program, command, timeout_s)
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise PeerError(f"{program} printed no report:\n{_tail(result.stderr)}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def _config_arguments(config: Mapping[str, str] | None) -> list[str]:
    arguments: list[str] = []
    for key, value in (config or {}).items():
        arguments += ["--config", f"{key}={value}"]
    return arguments


@dataclass(frozen=True)
class RestoreReport:
    """What ``RestoreBench`` reported: see ``benches/kstreams/RestoreBench.java``."""

    restore_s: float
    restore_cpu_s: float
    start_to_running_s: float
    restored: int
    partitions_restored: int
    batches: int
    approximate_entries: int
    probes: dict[bytes, bytes | None]
    close_s: float
    kafka_streams_version: str
    wall_s: float
    # The JVM's peak RSS (VmHWM), heap and RocksDB's native memory included.
    peak_rss_mb: float = -1.0


def run_restore_bench(
    bootstrap_servers: str,
    application_id: str,
    store: str,
    state_dir: Path,
    *,
    input_topic: str | None = None,
    probe_keys: Sequence[bytes] = (),
    config: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> RestoreReport:
    """Runs ``RestoreBench``: Kafka Streams restores ``<application_id>-<store>-changelog``
    (pre-filled) into RocksDB under ``state_dir`` (must be empty or absent). The input topic
    (default ``<application_id>-input``) must exist with the changelog's partition count.
    The restored store's values of ``probe_keys`` are reported; ``config`` overrides Kafka
    Streams settings."""
    arguments = [
        "--bootstrap",
        bootstrap_servers,
        "--application-id",
        application_id,
        "--store",
        store,
        "--state-dir",
        str(state_dir),
        "--timeout-ms",
        str(int(timeout_s * 1000)),
        *_config_arguments(config),
    ]
    if input_topic is not None:
        arguments += ["--input-topic", input_topic]
    if probe_keys:
        arguments += ["--probe-keys", ",".join(k.hex() for k in probe_keys)]
    started = time.monotonic()
    report = _run_java("RestoreBench", arguments, timeout_s + 60)
    return RestoreReport(
        restore_s=float(report["restore_s"]),
        restore_cpu_s=float(report["restore_cpu_s"]),
        start_to_running_s=float(report["start_to_running_s"]),
        restored=int(report["restored"]),
        partitions_restored=int(report["partitions_restored"]),
        batches=int(report["batches"]),
        approximate_entries=int(report["approximate_entries"]),
        probes={
            bytes.fromhex(k): None if v is None else bytes.fromhex(v)
            for k, v in report["probes"].items()
        },
        close_s=float(report["close_s"]),
        kafka_streams_version=str(report["kafka_streams_version"]),
        wall_s=time.monotonic() - started,
        peak_rss_mb=float(report.get("peak_rss_mb", -1.0)),
    )


@dataclass(frozen=True)
class WordCountReport:
    """What ``WordCount`` reported: see ``benches/kstreams/WordCount.java``."""

    elapsed_s: float
    start_to_running_s: float
    processing_s: float
    close_s: float
    lines: int
    words: int
    distinct_words: int
    total_count: int
    kafka_streams_version: str
    wall_s: float


def run_word_count(
    bootstrap_servers: str,
    application_id: str,
    input_topic: str,
    sink_topic: str,
    *,
    lines: int,
    state_dir: Path,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> WordCountReport:
    """Runs ``WordCount`` over the first ``lines`` lines of ``input_topic`` (both topics must
    exist); its final count per word is the last record per key in ``sink_topic``. Kafka Streams
    creates ``<application_id>-words-repartition`` and ``<application_id>-counts-changelog``."""
    arguments = [
        "--bootstrap",
        bootstrap_servers,
        "--application-id",
        application_id,
        "--input-topic",
        input_topic,
        "--sink-topic",
        sink_topic,
        "--lines",
        str(lines),
        "--state-dir",
        str(state_dir),
        "--timeout-ms",
        str(int(timeout_s * 1000)),
        *_config_arguments(config),
    ]
    started = time.monotonic()
    report = _run_java("WordCount", arguments, timeout_s + 60)
    return WordCountReport(
        elapsed_s=float(report["elapsed_s"]),
        start_to_running_s=float(report["start_to_running_s"]),
        processing_s=float(report["processing_s"]),
        close_s=float(report["close_s"]),
        lines=int(report["lines"]),
        words=int(report["words"]),
        distinct_words=int(report["distinct_words"]),
        total_count=int(report["total_count"]),
        kafka_streams_version=str(report["kafka_streams_version"]),
        wall_s=time.monotonic() - started,
    )


class FailoverInstance:
    """One running ``FailoverInstance`` JVM (``benches/kstreams/FailoverInstance.java``): the
    failover benchmark's count under ``group.protocol=streams``, until :meth:`kill`. Its status
    lines (see the Java file) are read by a daemon thread into :attr:`statuses`."""

    def __init__(
        self,
        bootstrap_servers: str,
        application_id: str,
        input_topic: str,
        output_topic: str,
        *,
        state_dir: Path,
        standbys: int,
        keep_state: bool = False,
    ) -> None:
        """Starts the JVM; ``standbys`` is set as the group's ``streams.num.standby.replicas``;
        ``keep_state``: ``state_dir`` may hold a previous instance's state (a restart)."""
        command = [
            _java_tool("java"),
            *JVM_OPTIONS,
            "-cp",
            classpath(),
            "FailoverInstance",
            *("--bootstrap", bootstrap_servers, "--application-id", application_id),
            *("--input", input_topic, "--output", output_topic),
            *("--state-dir", str(state_dir), "--standbys", str(standbys)),
            *("--keep-state", "true" if keep_state else "false"),
        ]
        self.statuses: list[dict[str, Any]] = []
        self.stored: int | None = None
        self._changed = threading.Condition()
        # A file, not a pipe: nothing reads stderr while the JVM runs, and a full pipe would
        # block its logging threads.
        self._stderr = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            command, stdin=PIPE, stdout=PIPE, stderr=self._stderr, text=True, bufsize=1
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            report = json.loads(line)
            with self._changed:
                if "stored" in report:
                    self.stored = int(report["stored"])
                else:
                    report["active"] = set(json.loads(report["active"]))
                    report["standby"] = set(json.loads(report["standby"]))
                    self.statuses.append(report)
                self._changed.notify_all()
        self.process.stdout.close()
        with self._changed:
            self._changed.notify_all()

    def wait_for(
        self, condition: Callable[[dict[str, Any]], bool], what: str, timeout_s: float
    ) -> dict[str, Any]:
        """The first status (of those seen so far or to come) that meets ``condition``."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for status in self.statuses[seen:]:
                    if condition(status):
                        return status
                seen = len(self.statuses)
                if self.process.poll() is not None:
                    raise PeerError(self._failure(f"exited before {what}"))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerError(f"FailoverInstance: timed out after {timeout_s} s: {what}")
                self._changed.wait(min(left, 1.0))

    def latest(self) -> dict[str, Any]:
        """The last status line (the JVM prints one as soon as it runs)."""
        with self._changed:
            return self.statuses[-1] if self.statuses else {}

    def count_stored(self, timeout_s: float = 300.0) -> int:
        """The number of keys in this instance's active stores, iterated by the JVM."""
        assert self.process.stdin is not None
        with self._changed:
            self.stored = None
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.stored is None:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise PeerError(self._failure("did not count its store"))
                self._changed.wait(1.0)
            return self.stored

    def _failure(self, what: str) -> str:
        self._stderr.seek(0)
        return f"FailoverInstance {what}:\n{_tail(self._stderr.read())}"

    def terminate(self, timeout_s: float = 90.0) -> None:
        """SIGTERM: the JVM's shutdown hook closes Kafka Streams (a bounce); waits for the exit."""
        self.process.terminate()
        self.process.wait(timeout_s)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._stderr.close()

    def kill(self) -> None:
        """SIGKILL, as the benchmark's failure; waits for the process to be gone."""
        self.process.kill()
        self.process.wait(30)
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._stderr.close()


def failover_instances(
    bootstrap_servers: str,
    application_id: str,
    input_topic: str,
    output_topic: str,
    *,
    root: Path,
    standbys: int,
) -> Callable[[str, bool], FailoverInstance]:
    """A starter of :class:`FailoverInstance` JVMs of one application: ``start(name,
    keep_state)`` runs one whose state directory is ``root / name``."""

    def start(name: str, keep_state: bool = False) -> FailoverInstance:
        return FailoverInstance(
            bootstrap_servers,
            application_id,
            input_topic,
            output_topic,
            state_dir=root / name,
            standbys=standbys,
            keep_state=keep_state,
        )

    return start


def describe_dsl_programs(timeout_s: float = 120.0) -> dict[str, str]:
    """Runs ``DescribeDsl`` (no broker needed): Kafka Streams' ``Topology.describe()`` text of
    each DSL program in ``benches/kstreams/DescribeDsl.java``, by program name (a program whose
    build threw maps to ``"ERROR: <exception class>: <message>"``), plus ``"split_keys"``: the
    keys of the branch map of the program ``split``, comma-joined, in the order its branches
    were sent to ``out-0``, ``out-1``, ``out-2``."""
    report = _run_java("DescribeDsl", [], timeout_s)
    return {str(name): str(text) for name, text in report.items()}


def word_counts(lines: Sequence[str]) -> dict[str, int]:
    """The counts ``WordCount`` computes, in Python: each line lowercased, split on whitespace."""
    counts: dict[str, int] = {}
    for line in lines:
        for word in line.lower().split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class KcatReport:
    """A kcat read: how many records it printed, its wall time (process start to exit) and the
    CPU time (user + system) it used."""

    records: int
    seconds: float
    cpu_s: float


def kcat_consume(
    bootstrap_servers: str,
    topic: str,
    *,
    records: int | None = None,
    partition: int | None = None,
    fetch_bytes: int = 4 << 20,
    timeout_s: float = 600.0,
) -> KcatReport:
    """Reads ``topic`` (every partition, or only ``partition``) from the beginning with kcat,
    printing one byte per record to a file that is then measured: librdkafka's C consumer with
    nothing else to do. It stops at the end of every partition or, if ``records`` is given,
    as soon as it has read that many: the way a restore that knows its end offsets stops
    (librdkafka reports a partition's end only after one more fetch, which waits
    ``fetch.wait.max.ms``, 500 ms, on the empty log end). ``fetch_bytes`` is
    ``max.partition.fetch.bytes`` (4 MiB, as streamstate's restore consumer)."""
    with tempfile.TemporaryDirectory(prefix="kcat-") as tmp:
        out = Path(tmp) / "out"
        command = [
            _kcat(),
            "-C",
            "-b",
            bootstrap_servers,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            ".",
            "-X",
            f"max.partition.fetch.bytes={fetch_bytes}",
        ]
        if records is not None:
            command += ["-c", str(records)]
        if partition is not None:
            command += ["-p", str(partition)]
        cpu_before = _children_cpu_s()
        started = time.monotonic()
        with open(out, "wb") as sink:
            _run(f"kcat reading {topic!r}", command, timeout_s, stdout=sink)
        seconds = time.monotonic() - started
        cpu_s = _children_cpu_s() - cpu_before
        return KcatReport(records=out.stat().st_size, seconds=seconds, cpu_s=cpu_s)


def delete_application(admin: Any, application_id: str, *, timeout_s: float = 30.0) -> None:
    """Deletes the topics named ``<application_id>-*`` and the consumer group
    ``application_id`` that a Kafka Streams run (or a benchmark preparing one) left behind."""
    prefix = f"{application_id}-"
    topics = [t for t in admin.list_topics(timeout=timeout_s).topics if t.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=timeout_s).values():
            future.result(timeout=timeout_s)
    groups = admin.delete_consumer_groups([application_id], request_timeout=timeout_s)
    for future in groups.values():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                raise


# --------------------------------------------------------------------------------------------
# Running until done: DslCount, and any peer program speaking its protocol
# --------------------------------------------------------------------------------------------


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` (all its threads) has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class PeerRun:
    """A peer program run by :func:`run_until_done`. ``boot_s``: from its launch to its
    ``{"event": "started"}`` line (interpreter or JVM start, imports, building the topology);
    ``run_s``: from that line until ``done()`` first held; ``cpu_boot_s`` and ``cpu_run_s``: the
    process's CPU seconds (user + system, every thread) over those spans; ``cpu_s`` and
    ``wall_s``: from launch to exit (closing included); ``report``: its last JSON line."""

    boot_s: float
    run_s: float
    cpu_boot_s: float
    cpu_run_s: float
    cpu_s: float
    wall_s: float
    report: dict[str, Any]


def run_until_done(
    what: str,
    command: Sequence[str],
    done: Callable[[], bool],
    *,
    timeout_s: float = 600.0,
    poll_s: float = 0.05,
) -> PeerRun:
    """Runs ``command``, a program that prints ``{"event": "started"}`` when it starts its
    work, then works until its stdin ends, then prints one JSON report line and exits. Its
    stdin is closed once ``done()`` holds (polled every ``poll_s`` from the started line);
    raises :class:`PeerError` if it exits early or fails, or if ``done()`` does not hold
    within ``timeout_s``."""
    lines: list[str] = []
    started = threading.Event()
    marks: dict[str, float] = {}
    cpu_before = _children_cpu_s()
    launched = time.monotonic()
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(
            command, stdin=PIPE, stdout=PIPE, stderr=stderr, text=True, bufsize=1
        ) as process,
    ):

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if not started.is_set() and '"started"' in line:
                    marks["started"] = time.monotonic()
                    marks["cpu_started"] = process_cpu_s(process.pid)
                    started.set()
                lines.append(line)

        reader = threading.Thread(target=read, name=f"{what}-stdout", daemon=True)
        reader.start()

        def failed(why: str) -> PeerError:
            process.kill()
            process.wait()
            reader.join(30)
            stderr.seek(0)
            return PeerError(f"{what} {why}:\n{_tail(stderr.read() + ''.join(lines))}")

        deadline = launched + timeout_s
        try:
            while not (started.is_set() and done()):
                if process.poll() is not None:
                    raise failed(f"exited early (exit {process.returncode})")
                if time.monotonic() > deadline:
                    raise failed(f"was not done within {timeout_s} s")
                time.sleep(poll_s)
            done_at, cpu_done = time.monotonic(), process_cpu_s(process.pid)
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise failed("did not exit within 120 s of its stdin's end") from None
        except BaseException:
            if process.poll() is None:
                process.kill()
            raise
        reader.join(30)
        if process.returncode != 0 or len(lines) < 2:
            raise failed(f"failed (exit {process.returncode})")
    return PeerRun(
        boot_s=marks["started"] - launched,
        run_s=done_at - marks["started"],
        cpu_boot_s=marks["cpu_started"],
        cpu_run_s=cpu_done - marks["cpu_started"],
        cpu_s=_children_cpu_s() - cpu_before,
        wall_s=time.monotonic() - launched,
        report=json.loads(lines[-1]),
    )


def run_dsl_count(
    bootstrap_servers: str,
    application_id: str,
    input_topic: str,
    sink_topic: str,
    *,
    program: str,
    state_dir: Path,
    done: Callable[[], bool],
    config: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> PeerRun:
    """Runs ``DslCount`` (``program``: ``count`` or ``windowed``; see
    ``benches/kstreams/DslCount.java``) over ``input_topic`` into ``sink_topic`` (both must
    exist) until ``done()`` holds (the caller's test: its committed offsets at the end of the
    input), through :func:`run_until_done`. Its report: ``start_to_running_s``, ``run_s``,
    ``close_s``, ``dropped_records``, ``kafka_streams_version``."""
    options = {
        "bootstrap": bootstrap_servers,
        "application-id": application_id,
        "input-topic": input_topic,
        "sink-topic": sink_topic,
        "program": program,
        "state-dir": state_dir,
        "timeout-ms": int(timeout_s * 1000),
    }
    arguments = [part for name, value in options.items() for part in (f"--{name}", str(value))]
    arguments += _config_arguments(config)
    command = [_java_tool("java"), *JVM_OPTIONS, "-cp", classpath(), "DslCount", *arguments]
    return run_until_done(f"DslCount {program}", command, done, timeout_s=timeout_s)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benches._kstreams prepare``: fetch, compile and check kcat, printing the
    versions and the class path."""
    parser = argparse.ArgumentParser(prog="python -m benches._kstreams", description=__doc__)
    parser.add_argument("command", choices=["prepare"])
    parser.parse_args(argv)
    started = time.monotonic()
    try:
        prepare()
    except PeerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    kcat_version = _run("kcat -V", [_kcat(), "-V"], 30).stdout.splitlines()
    print(f"Kafka Streams {KSTREAMS_VERSION}: {classpath()}")
    print(next((line for line in kcat_version if line.startswith("Version")), "kcat: ?"))
    print(f"ready in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
