"""A real single-node Apache Kafka broker on this machine, for demos and tests.

The broker runs in KRaft mode with one JVM acting as both broker and controller. Its jars come
from Maven Central, resolved once by Maven into a cache directory; a second call reuses them. If
``KAFKA_HOME`` names an unpacked Kafka distribution, its ``libs/`` is used instead and nothing is
downloaded.

Each broker lives in an *instance directory* (default ``<cache>/instances/default``)::

    kafka.pid           pid of the broker JVM while it runs
    bootstrap.txt       the PLAINTEXT address clients connect to, e.g. ``127.0.0.1:40123``
    server.properties   the broker configuration written at start (see ``_broker_config``)
    log4j2.properties   where the broker logs (to broker.log, never to the console)
    broker.log          the broker's log4j output plus the JVM's stdout and stderr
    data/               the log directory (``log.dirs``), KRaft metadata included

The broker is detached: it keeps running after the Python process that started it exits, until
:meth:`LocalKafka.stop` (or ``streamstate kafka stop``). Topics are **not** created on demand
(``auto.create.topics.enable=false``): a typo in a topic name fails loudly instead of silently
creating a new topic, and tests create every topic explicitly with the partition count they need.

:class:`~streamstate.testing.KafkaTestCluster` wraps a broker with the client helpers tests use;
``streamstate kafka start|stop|status`` (:mod:`streamstate.cli.kafka`) drives this module.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamstate._maven import MavenError, cache_dir, file_lock, resolve_jars
from streamstate.testing._broker_config import (
    HOST,
    SecureListeners,
    listener_ports,
    log4j2_properties,
    pem_keystore,
    server_properties,
)
from streamstate.testing._tls import SecureAddresses, client_certificate

__all__ = [
    "KAFKA_VERSION",
    "LocalKafka",
    "LocalKafkaError",
    "cache_dir",
    "client_config",
    "resolve_kafka",
]

KAFKA_VERSION: str = "4.4.0"
"""The Apache Kafka release the local broker runs (``org.apache.kafka:kafka_2.13``)."""

_SCALA_VERSION = "2.13"
# Kafka 4.4 logs through SLF4J 1.7 and ships log4j2 (api + core) but no SLF4J binding: without one
# every SLF4J logger (most of the broker) would be dropped. log4j-slf4j-impl is the SLF4J 1.x ->
# log4j2 bridge, at the log4j2 version Kafka 4.4.0 itself depends on.
_LOG4J_VERSION = "2.25.3"
_LOG_TAIL_LINES = 40

# Named as before the module moved into streamstate.testing: logging is configured by this name.
_log = logging.getLogger("streamstate.kafka_local")
# librdkafka's own log lines (e.g. "connection refused" while the broker boots) go here rather
# than straight to stderr.
_client_log = logging.getLogger("streamstate.kafka_local.client")


class LocalKafkaError(RuntimeError):
    """The local broker could not be resolved, started, stopped or used.

    ``message`` is one line suitable for a CLI; ``detail`` (may be ``None``) holds supporting
    output such as the last lines of the broker log. ``str()`` gives both.
    """

    message: str
    detail: str | None

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        self.message = message
        self.detail = detail
        super().__init__(message if not detail else f"{message}\n{detail}")


# --------------------------------------------------------------------------------------------
# Resolving the broker jars
# --------------------------------------------------------------------------------------------


def _has_jars(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("*.jar"))


def _kafka_home_libs() -> Path | None:
    home = os.environ.get("KAFKA_HOME")
    if not home:
        return None
    libs = Path(home).expanduser() / "libs"
    if _has_jars(libs):
        return libs
    _log.warning("KAFKA_HOME=%s has no libs/*.jar; resolving Kafka from Maven instead", home)
    return None


def _libs_version(libs: Path) -> str | None:
    """The Kafka version of the ``kafka_<scala>-<version>.jar`` in ``libs``, if there is one."""
    for jar in sorted(libs.glob("kafka_*.jar")):
        stem = jar.name[: -len(".jar")]
        _, _, rest = stem.partition("-")
        if rest and rest[0].isdigit() and not rest.endswith(("-sources", "-javadoc", "-test")):
            return rest
    return None


def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _first_error(text: str, limit: int = 15) -> str | None:
    """The first ERROR or FATAL entry of a broker log with its exception and causes, without
    stack frames; ``None`` when there is none."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if " ERROR " in line or " FATAL " in line:
            entry = [line]
            for following in lines[i + 1 :]:
                if following.startswith("[") or len(entry) >= limit:
                    break
                if not following.lstrip().startswith(("at ", "...")):
                    entry.append(following)
            return "\n".join(entry)
    return None


def resolve_kafka(
    version: str = KAFKA_VERSION, *, progress: Callable[[str], None] | None = None
) -> Path:
    """Return a directory holding every jar a Kafka broker needs, downloading them if needed.

    If ``KAFKA_HOME`` points at a Kafka installation with jars in ``libs/``, that directory is
    returned as is (``version`` is then not checked). Otherwise the jars of
    ``org.apache.kafka:kafka_2.13:<version>`` plus a log4j2 binding are copied by Maven
    (``mvn dependency:copy-dependencies``, local repository ``~/.m2``) into
    ``<cache_dir()>/kafka-<version>/libs``. A marker file makes later calls free, and a file lock
    makes concurrent callers (several test processes, say) wait for one download.

    ``progress``, if given, receives a few human-readable status lines (the first resolve takes
    tens of seconds).

    Raises:
        LocalKafkaError: Maven is missing or the resolve failed.
    """
    home_libs = _kafka_home_libs()
    if home_libs is not None:
        _log.info("using Kafka jars from KAFKA_HOME: %s", home_libs)
        return home_libs

    libs = cache_dir() / f"kafka-{version}" / "libs"
    try:
        jars = resolve_jars(
            [
                f"org.apache.kafka:kafka_{_SCALA_VERSION}:{version}",
                f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J_VERSION}",
            ],
            libs,
            progress=progress,
        )
    except MavenError as exc:
        raise LocalKafkaError(
            f"could not fetch Kafka {version} with Maven; install Maven or point KAFKA_HOME "
            "at an unpacked Kafka distribution",
            detail=str(exc),
        ) from exc
    if not any(j.name == f"kafka_{_SCALA_VERSION}-{version}.jar" for j in jars):
        raise LocalKafkaError(f"Maven resolved no broker jar for Kafka {version} into {libs}")
    return libs


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def _process_args(pid: int) -> list[str] | None:
    """The command line of a live, non-zombie process, or ``None`` if there is no such process.

    A killed broker whose parent does not reap it (its parent is init, and some container inits
    never reap) stays a zombie: it holds no ports or files, so it counts as gone.
    """
    if pid <= 0:
        return None
    if Path("/proc/self").exists():
        return _procfs_args(pid)
    return _ps_args(pid)


def _procfs_args(pid: int) -> list[str] | None:
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text(encoding="utf-8", errors="replace")
        raw = (proc / "cmdline").read_bytes()
    except OSError:
        return None
    # The state letter follows the parenthesised command name, which may contain spaces.
    state = stat.rpartition(")")[2].split()[:1]
    if state in (["Z"], ["X"]) or not raw:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _ps_args(pid: int) -> list[str] | None:
    """No procfs (macOS): ask ps. Arguments containing spaces come back split; good enough."""
    try:
        result = subprocess.run(
            ["ps", "-o", "stat=,command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    status, _, command = result.stdout.strip().partition(" ")
    if result.returncode != 0 or not command or status.startswith("Z"):
        return None
    return command.split()


def _port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


# Starts of a broker whose listener found its port taken (see LocalKafka.start).
_BIND_ATTEMPTS = 3


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the JVM's server sockets do: connections of clients of the stopped broker left in
        # TIME_WAIT must not make a restarted broker change its port.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_ports(count: int, avoid: tuple[int, ...] = ()) -> list[int]:
    """``count`` distinct ports that are free on 127.0.0.1 right now, none of ``avoid``
    (ports chosen earlier and not bound yet: the kernel may hand one out again once its probe
    socket is closed)."""
    sockets: list[socket.socket] = []
    try:
        # All probes held at once, so the ports differ; as many extra as ports to avoid.
        for _ in range(count + len(avoid)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((HOST, 0))
        ports = [int(sock.getsockname()[1]) for sock in sockets]
        return [port for port in ports if port not in avoid][:count]
    finally:
        for sock in sockets:
            sock.close()


def _random_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding (as Kafka's Uuid)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not candidate.startswith("-"):  # Kafka avoids these: they look like CLI flags
            return candidate


def _java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise LocalKafkaError(
            "Java ('java') is not on PATH and JAVA_HOME is not set; Kafka 4 needs Java 17 or newer"
        )
    return found


def client_config(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    """A confluent-kafka client config for a test broker: librdkafka logs to the
    ``streamstate.kafka_local.client`` logger, not to stderr; ``overrides`` are added as is."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": _client_log}
    config.update(overrides)
    return config


# --------------------------------------------------------------------------------------------
# The broker
# --------------------------------------------------------------------------------------------


class LocalKafka(SecureAddresses):
    """One single-node KRaft Kafka broker living in an instance directory.

    ``LocalKafka`` objects are cheap handles: the state is in the instance directory (pid file,
    address), so a new object on the same directory, in this or another process, sees and can
    stop a broker started by an earlier one. Used as a context manager it starts a *fresh*
    broker on entry and stops it on exit::

        with LocalKafka(tmp_path / "kafka") as kafka:
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    """

    instance_dir: Path
    version: str
    heap_mb: int
    secure_listeners: bool

    SASL_USER = "streamstate"
    """The SASL/PLAIN user of the secure listeners."""
    SASL_PASSWORD = "streamstate-secret"
    """Its password."""

    def __init__(
        self,
        instance_dir: Path | str | None = None,
        *,
        version: str = KAFKA_VERSION,
        heap_mb: int = 1024,
        secure_listeners: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """Make a handle on the broker in ``instance_dir`` (default ``<cache>/instances/default``).

        ``version`` is the Kafka release to run, resolved into ``<cache>/kafka-<version>/libs``
        (the tests run :data:`KAFKA_VERSION` and ``"3.9.2"``, which has no streams groups);
        ``heap_mb`` is the JVM's maximum heap; ``properties`` are broker settings laid over the
        defaults (e.g. ``{"auto.create.topics.enable": "true"}`` for a broker that behaves as
        Kafka's default does). They only matter when this handle starts the broker.
        ``secure_listeners=True`` adds four listeners beside PLAINTEXT, for testing clients'
        security settings: ``SASL_PLAINTEXT`` with PLAIN (user ``SASL_USER``, password
        ``SASL_PASSWORD``) and SCRAM-SHA-256/512 (users made with the admin client), ``SSL``
        with a self-signed certificate for 127.0.0.1 (made with ``openssl`` into ``tls/``;
        clients trust it with ``ssl.ca.location`` = :attr:`ssl_ca_location`), ``SASL_SSL``
        (the same users over the same TLS) and ``MTLS``, an SSL listener that requires the
        client certificate :attr:`ssl_client_certificate_location` (key
        :attr:`ssl_client_key_location`). Their addresses are :attr:`sasl_plaintext_servers`,
        :attr:`ssl_servers`, :attr:`sasl_ssl_servers` and :attr:`mtls_servers`.
        """
        if heap_mb < 64:
            raise ValueError(f"heap_mb must be at least 64, got {heap_mb}")
        base = (
            Path(instance_dir)
            if instance_dir is not None
            else cache_dir() / "instances" / "default"
        )
        self.instance_dir = base.expanduser().resolve()
        self.version = version
        self.heap_mb = heap_mb
        self.secure_listeners = secure_listeners
        self.properties = dict(properties or {})

    def __repr__(self) -> str:
        return f"LocalKafka({str(self.instance_dir)!r}, version={self.version!r})"

    # -- paths --------------------------------------------------------------------------------

    @property
    def pid_file(self) -> Path:
        """``kafka.pid`` in the instance directory."""
        return self.instance_dir / "kafka.pid"

    @property
    def bootstrap_file(self) -> Path:
        """``bootstrap.txt`` in the instance directory."""
        return self.instance_dir / "bootstrap.txt"

    @property
    def data_dir(self) -> Path:
        """``data/``, the broker's ``log.dirs``."""
        return self.instance_dir / "data"

    @property
    def log_file(self) -> Path:
        """``broker.log``: the broker's log and the JVM's console output."""
        return self.instance_dir / "broker.log"

    # -- state ----------------------------------------------------------------------------------

    def _owns(self, args: list[str]) -> bool:
        return "kafka.Kafka" in args and str(self.properties_file) in args

    def _read_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def _live_pid(self) -> int | None:
        """The pid in the pid file if it is this instance's running broker JVM, else ``None``."""
        pid = self._read_pid()
        if pid is None:
            return None
        args = _process_args(pid)
        if args is None or not self._owns(args):
            return None
        return pid

    def _alive(self, pid: int) -> bool:
        args = _process_args(pid)
        return args is not None and self._owns(args)

    def _clear_runtime_files(self) -> None:
        for path in (self.pid_file, self.bootstrap_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _read_bootstrap(self) -> str | None:
        try:
            text = self.bootstrap_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return text or None

    @property
    def bootstrap_servers(self) -> str | None:
        """The broker's ``host:port`` if it is running, else ``None``."""
        if self._live_pid() is None:
            return None
        return self._read_bootstrap()

    def status(self) -> dict[str, object]:
        """Report on the broker: ``running``, ``pid``, ``bootstrap_servers``, ``instance_dir``,
        ``version``. ``pid`` and ``bootstrap_servers`` are ``None`` when it is not running."""
        pid = self._live_pid()
        return {
            "running": pid is not None,
            "pid": pid,
            "bootstrap_servers": self._read_bootstrap() if pid is not None else None,
            "instance_dir": str(self.instance_dir),
            "version": self.version,
        }

    # -- start ----------------------------------------------------------------------------------

    def _ports(self, fresh: bool) -> tuple[int, int]:
        """Broker and controller ports: the previous ones if still free, so a restarted broker
        keeps its address, else two new free ones."""
        if not fresh:
            ports = listener_ports(self.properties_file)
            if len(ports) >= 2 and all(_port_free(p) for p in ports[:2]):
                return ports[0], ports[1]
        broker, controller = _free_ports(2)
        return broker, controller

    def _secure(self, taken: tuple[int, ...]) -> SecureListeners:
        """Ports (none of ``taken``: the broker's and controller's), credentials and TLS files
        of the secure listeners."""
        sasl, ssl, sasl_ssl, mtls = _free_ports(4, avoid=taken)
        try:
            keystore = pem_keystore(self._tls_dir)
            clients = client_certificate(self._tls_dir)
        except (OSError, subprocess.SubprocessError) as exc:
            raise LocalKafkaError(
                f"could not make the TLS certificates with openssl: {exc}"
            ) from exc
        user, password = self.SASL_USER, self.SASL_PASSWORD
        return SecureListeners(sasl, ssl, user, password, keystore, sasl_ssl, mtls, clients)

    def _write_config(self, broker_port: int, controller_port: int) -> None:
        server = server_properties(
            data_dir=self.data_dir,
            broker_port=broker_port,
            controller_port=controller_port,
            secure=self._secure((broker_port, controller_port)) if self.secure_listeners else None,
            overrides=self.properties,
        )
        self.properties_file.write_text(server, encoding="utf-8")
        self._log4j_file.write_text(log4j2_properties(self.log_file), encoding="utf-8")

    @property
    def _log4j_file(self) -> Path:
        return self.instance_dir / "log4j2.properties"

    def _log_tail(self) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no broker log)"
        first_error = _first_error(text)
        tail = f"last lines of {self.log_file}:\n{_tail(text)}"
        # The first error explains a failed start; the shutdown that follows it can log hundreds
        # of lines (a whole config dump), pushing it out of the tail.
        return f"first error in the log:\n{first_error}\n{tail}" if first_error else tail

    def _format_storage(self, java: str, classpath: str) -> None:
        command = [
            java,
            # A short-lived tool: C1 only and the serial GC start it about a second sooner.
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-cp",
            classpath,
            f"-Dlog4j2.configurationFile={self._log4j_file}",
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            _random_cluster_id(),
            "--config",
            str(self.properties_file),
        ]
        _log.debug("formatting KRaft storage: %s", command)
        try:
            result = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LocalKafkaError(f"could not format the Kafka storage: {exc}") from exc
        if result.returncode != 0:
            raise LocalKafkaError(
                f"formatting the Kafka storage in {self.data_dir} failed "
                f"(exit code {result.returncode})",
                detail=_tail(result.stdout + result.stderr) or None,
            )
        _log.debug("format output: %s", result.stdout.strip())

    def _launch(self, java: str, classpath: str) -> int:
        heap = self.heap_mb
        # Small and steady for a 2-core machine. Not -XX:TieredStopAtLevel=1: it starts the
        # broker only about a second sooner (of ~4 s) but caps its throughput, and benchmarks
        # run against this broker.
        command = [
            java,
            f"-Xms{min(256, heap)}m",
            f"-Xmx{heap}m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._log4j_file}",
            f"-Dkafka.logs.dir={self.instance_dir}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(self.properties_file),
        ]
        _log.debug("starting broker: %s", command)
        # Detach through a short-lived shell: it backgrounds the JVM, prints the JVM's pid and
        # exits, so the JVM is nobody's child here (no zombie to reap, nothing tied to this
        # process's lifetime) and runs in its own session, away from this terminal's signals.
        script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
        try:
            result = subprocess.run(
                ["/bin/sh", "-c", script, "sh", str(self.log_file), *command],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=30,
                start_new_session=True,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LocalKafkaError(f"could not start the Kafka broker: {exc}") from exc
        pid_text = result.stdout.strip()
        if result.returncode != 0 or not pid_text.isdigit():
            raise LocalKafkaError(
                "could not start the Kafka broker",
                detail=(result.stdout + result.stderr).strip() or None,
            )
        return int(pid_text)

    def _bind_failed(self, log_start: int) -> bool:
        """Whether the broker's log since ``log_start`` says a listener could not bind."""
        try:
            with self.log_file.open("rb") as log:
                log.seek(log_start)
                return b"Address already in use" in log.read()
        except OSError:
            return False

    def _wait_ready(self, pid: int, address: str, port: int, deadline: float) -> None:
        admin: Any = None
        while True:
            if not self._alive(pid):
                raise LocalKafkaError(
                    f"the Kafka broker (pid {pid}) exited during startup; see {self.log_file}",
                    detail=self._log_tail(),
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LocalKafkaError(
                    f"the Kafka broker at {address} did not answer a metadata request in time; "
                    f"see {self.log_file}",
                    detail=self._log_tail(),
                )
            # Wait for the socket first: librdkafka would only log connection-refused noise.
            if _port_open(port):
                if admin is None:
                    admin = AdminClient(client_config(address))
                try:
                    metadata = admin.list_topics(timeout=max(0.5, min(2.0, remaining)))
                except KafkaException:
                    pass
                else:
                    if metadata.brokers:
                        return
            time.sleep(0.1)

    def start(self, *, fresh: bool = False, timeout: float = 90.0) -> str:
        """Start the broker unless it already runs; return its bootstrap address.

        Idempotent: if this instance's broker is already running, its address is returned and
        nothing else happens (``fresh`` is then ignored). Otherwise a stale pid file is cleared,
        the jars are resolved (see :func:`resolve_kafka`), ``server.properties`` is written, the
        storage is formatted if ``data/`` is new, and the JVM is started detached. ``fresh=True``
        first deletes ``data/`` (all topics and offsets) and the old log. The call returns once
        the broker answers a metadata request, or raises after ``timeout`` seconds.

        Raises:
            LocalKafkaError: resolving, formatting or starting failed, the JVM exited early
                (the message carries the end of ``broker.log``) or the deadline passed.
        """
        deadline = time.monotonic() + timeout
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        with file_lock(self.instance_dir / ".lock"):
            pid = self._live_pid()
            if pid is not None:
                address = self._read_bootstrap()
                if address is not None:
                    _log.info("Kafka already running at %s (pid %d)", address, pid)
                    return address
                # A broker whose address file vanished: restart it so the address is known.
                self._stop_pid(pid, 30.0)
            if self.pid_file.exists():
                _log.info("removing stale pid file %s", self.pid_file)
            self._clear_runtime_files()

            libs = resolve_kafka(self.version)
            java = _java_executable()
            classpath = str(libs / "*")
            if fresh:
                shutil.rmtree(self.data_dir, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    self.log_file.unlink()
            started = time.monotonic()
            for attempt in range(_BIND_ATTEMPTS):
                # A port found free can be taken before the JVM binds it (another broker, or
                # a client's outgoing connection in the same ephemeral range): new ones then.
                broker_port, controller_port = self._ports(fresh or attempt > 0)
                self._write_config(broker_port, controller_port)
                if not (self.data_dir / "meta.properties").is_file():
                    shutil.rmtree(self.data_dir, ignore_errors=True)
                    self._format_storage(java, classpath)
                address = f"{HOST}:{broker_port}"
                log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
                pid = self._launch(java, classpath)
                self.pid_file.write_text(f"{pid}\n", encoding="utf-8")
                try:
                    self._wait_ready(pid, address, broker_port, deadline)
                    break
                except BaseException as exc:
                    if self._alive(pid):
                        self._stop_pid(pid, 10.0)
                    self._clear_runtime_files()
                    retry = attempt + 1 < _BIND_ATTEMPTS and isinstance(exc, LocalKafkaError)
                    if not (retry and self._bind_failed(log_start)):
                        raise
                    _log.warning("a port of the broker was taken before it bound it; new ports")
            ready = f"{HOST}:{broker_port}"
            self.bootstrap_file.write_text(f"{ready}\n", encoding="utf-8")
            _log.info(
                "Kafka %s ready at %s (pid %d) after %.1f s",
                _libs_version(libs) or self.version,
                ready,
                pid,
                time.monotonic() - started,
            )
            return ready

    # -- stop -----------------------------------------------------------------------------------

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _stop_pid(self, pid: int, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if self._wait_gone(pid, timeout):
            return
        _log.warning("Kafka (pid %d) did not stop within %.0f s; killing it", pid, timeout)
        self._kill_pid(pid)

    def _kill_pid(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not self._wait_gone(pid, 10.0):
            raise LocalKafkaError(f"could not kill the Kafka broker (pid {pid})")

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the broker; return ``True`` if one was running, ``False`` if none was.

        Sends SIGTERM and waits up to ``timeout`` seconds for a clean shutdown (which keeps the
        data directory consistent for a restart), then SIGKILL. The pid and address files are
        removed either way; ``data/`` is kept.

        Raises:
            LocalKafkaError: the JVM survived SIGKILL.
        """
        return self._end("stopping", lambda pid: self._stop_pid(pid, timeout))

    def kill(self) -> bool:
        """Kill the broker with SIGKILL at once, as a crash would; return ``True`` if one was
        running.

        Unlike :meth:`stop`, the broker serves nothing more once this returns (a clean shutdown
        keeps answering fetches for seconds while it winds down). The next :meth:`start`
        recovers the data directory, as after any crash.

        Raises:
            LocalKafkaError: the JVM survived SIGKILL.
        """
        return self._end("killing", self._kill_pid)

    def _end(self, what: str, end_pid: Callable[[int], None]) -> bool:
        """Ends the running broker with ``end_pid`` under the instance lock and removes its
        runtime files; ``False`` when none was running."""
        if not self.instance_dir.is_dir():
            return False
        with file_lock(self.instance_dir / ".lock"):
            pid = self._live_pid()
            if pid is None:
                self._clear_runtime_files()
                return False
            _log.info("%s Kafka (pid %d)", what, pid)
            end_pid(pid)
            self._clear_runtime_files()
            return True

    # -- context manager ------------------------------------------------------------------------

    def __enter__(self) -> LocalKafka:
        self.start(fresh=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
