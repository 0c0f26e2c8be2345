"""The files a local broker runs on: ``server.properties`` and ``log4j2.properties``.

:class:`~streamstate.testing.broker.LocalKafka` chooses the ports and writes both files into its
instance directory at every start; this module renders them, makes the TLS listeners'
self-signed certificate, and reads back what an earlier start wrote (the listeners' addresses),
so that a handle in another process finds them. It knows nothing of processes or of Java.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CERTIFICATE",
    "HOST",
    "SecureListeners",
    "listener_address",
    "listener_ports",
    "log4j2_properties",
    "pem_keystore",
    "self_signed_certificate",
    "server_properties",
]

HOST = "127.0.0.1"
"""Every listener binds and advertises this address: the broker is for this machine only."""

CERTIFICATE = "broker.crt"
"""The SSL listener's self-signed certificate (PEM) in the ``tls/`` directory."""
_KEY = "broker.key"
_KEYSTORE = "broker-keystore.pem"


@dataclass(frozen=True)
class SecureListeners:
    """The SASL_PLAINTEXT, SSL, SASL_SSL and mutual-TLS (``MTLS``, protocol SSL) listeners
    beside PLAINTEXT."""

    sasl_port: int
    """The SASL_PLAINTEXT listener's port."""
    ssl_port: int
    """The SSL listener's port."""
    user: str
    """The one SASL/PLAIN user."""
    password: str
    """Its password."""
    keystore: Path
    """The TLS listeners' key and certificate in one PEM file (see :func:`pem_keystore`)."""
    sasl_ssl_port: int
    """The SASL_SSL listener's port: the SASL_PLAINTEXT listener's users over TLS."""
    mtls_port: int
    """The MTLS listener's port: TLS with ``ssl.client.auth=required``."""
    client_truststore: Path
    """The client certificate(s) the MTLS listener trusts (PEM)."""


def _read_properties(path: Path) -> dict[str, str]:
    """A minimal reader for the ``key=value`` files this module writes."""
    props: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return props
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")) or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        props[key.strip()] = value.strip()
    return props


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\")


def _listeners(properties_file: Path) -> list[str]:
    return [
        listener
        for listener in _read_properties(properties_file).get("listeners", "").split(",")
        if listener
    ]


def listener_address(properties_file: Path, name: str) -> str | None:
    """The ``host:port`` of listener ``name`` (``SSL``, say) in a written ``server.properties``,
    or ``None`` when it has none."""
    for listener in _listeners(properties_file):
        if listener.startswith(f"{name}://"):
            return listener.split("://", 1)[1]
    return None


def listener_ports(properties_file: Path) -> list[int]:
    """The ports of a written ``server.properties``'s listeners, broker then controller first
    (as :func:`server_properties` writes them); empty when there is no such file."""
    ports: list[int] = []
    for listener in _listeners(properties_file):
        _, _, port = listener.rpartition(":")
        if port.isdigit():
            ports.append(int(port))
    return ports


def self_signed_certificate(key: Path, cert: Path, subject: str, extensions: list[str]) -> None:
    """Makes ``key`` (RSA 2048, unencrypted) and a self-signed ``cert`` for ``subject`` with
    the X.509 ``extensions``, valid ten years, with ``openssl``; nothing when both exist.

    Raises:
        OSError: ``openssl`` is missing or a file cannot be written.
        subprocess.SubprocessError: ``openssl`` failed or took over a minute.
    """
    if key.is_file() and cert.is_file():
        return
    command = [
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
        "-keyout", str(key), "-out", str(cert), "-subj", subject,
        *(arg for extension in extensions for arg in ("-addext", extension)),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=60)


def pem_keystore(tls_dir: Path) -> Path:
    """A key and a self-signed certificate for :data:`HOST` in ``tls_dir`` (made once with
    ``openssl``; the certificate is :data:`CERTIFICATE`, for clients' ``ssl.ca.location``), and
    the PEM keystore holding both that the broker's SSL listener reads.

    Raises:
        OSError: ``openssl`` is missing or a file cannot be written.
        subprocess.SubprocessError: ``openssl`` failed or took over a minute.
    """
    tls_dir.mkdir(parents=True, exist_ok=True)
    key, cert = tls_dir / _KEY, tls_dir / CERTIFICATE
    self_signed_certificate(key, cert, f"/CN={HOST}", [f"subjectAltName=IP:{HOST}"])
    keystore = tls_dir / _KEYSTORE
    keystore.write_text(key.read_text() + cert.read_text(), encoding="utf-8")
    return keystore


def _secure_settings(secure: SecureListeners) -> tuple[list[str], list[str]]:
    """Listeners and settings of the SASL_PLAINTEXT, SSL, SASL_SSL and MTLS listeners."""
    user, password = secure.user, secure.password
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}" user_{user}="{password}";'
    )
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    listeners = [
        f"SASL_PLAINTEXT://{HOST}:{secure.sasl_port}",
        f"SSL://{HOST}:{secure.ssl_port}",
        f"SASL_SSL://{HOST}:{secure.sasl_ssl_port}",
        f"MTLS://{HOST}:{secure.mtls_port}",
    ]
    settings = [
        # SCRAM users have no password here: tests create them with AdminClient
        # (alter_user_scram_credentials) on the PLAINTEXT listener.
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        *(
            line
            for name in ("sasl_plaintext", "sasl_ssl")
            for line in (
                f"listener.name.{name}.plain.sasl.jaas.config={_escape(jaas)}",
                f"listener.name.{name}.scram-sha-256.sasl.jaas.config={_escape(scram)}",
                f"listener.name.{name}.scram-sha-512.sasl.jaas.config={_escape(scram)}",
            )
        ),
        # One self-signed certificate for every TLS listener; only MTLS asks the client for
        # one, and trusts exactly the certificates in its PEM truststore.
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={_escape(str(secure.keystore))}",
        "ssl.client.auth=none",
        "listener.name.mtls.ssl.client.auth=required",
        "listener.name.mtls.ssl.truststore.type=PEM",
        f"listener.name.mtls.ssl.truststore.location={_escape(str(secure.client_truststore))}",
    ]
    return listeners, settings


def server_properties(
    *,
    data_dir: Path,
    broker_port: int,
    controller_port: int,
    secure: SecureListeners | None = None,
    overrides: Mapping[str, str] | None = None,
) -> str:
    """The ``server.properties`` of a single-node KRaft broker+controller (``node.id=1``).

    A PLAINTEXT listener on ``broker_port`` (plus ``secure``'s, when given), the controller on
    ``controller_port``, its log in ``data_dir``, every internal topic with one replica and one
    partition, quick group timings for tests, and no topic created on demand. ``overrides``
    come last, so they win. The settings are Kafka 4.4's; an older release (3.9, say) ignores
    those it does not know (the streams group's).
    """
    extra_listeners, extra_settings = _secure_settings(secure) if secure else ([], [])
    listeners = [f"PLAINTEXT://{HOST}:{broker_port}", *extra_listeners]
    protocols = (
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,"
        "SASL_SSL:SASL_SSL,MTLS:SSL"
    )
    lines = [
        "# Generated by streamstate.kafka_local; rewritten on every start.",
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{HOST}:{controller_port}",
        # The broker's listener first and the controller's second: listener_ports reads them so.
        f"listeners={listeners[0]},CONTROLLER://{HOST}:{controller_port}"
        + "".join(f",{listener}" for listener in listeners[1:]),
        f"advertised.listeners={','.join(listeners)}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"listener.security.protocol.map={protocols}",
        *extra_settings,
        f"log.dirs={_escape(str(data_dir))}",
        "num.partitions=1",
        "default.replication.factor=1",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "transaction.state.log.num.partitions=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        # Streams groups (KIP-1071) as quick as a test needs: a 1 s first-assignment delay
        # (3 s by default), 1 s heartbeats and a 6 s session (45 s by default), so that a
        # killed member's tasks move within seconds.
        "group.streams.initial.rebalance.delay.ms=1000",
        "group.streams.min.heartbeat.interval.ms=500",
        "group.streams.heartbeat.interval.ms=1000",
        "group.streams.min.session.timeout.ms=6000",
        "group.streams.session.timeout.ms=6000",
        # Topics exist only when created explicitly; see the broker module's docstring.
        "auto.create.topics.enable=false",
        "num.network.threads=2",
        "num.io.threads=4",
        "num.recovery.threads.per.data.dir=1",
        "log.retention.hours=-1",
        "log.segment.bytes=67108864",
        # The caller's settings last: in a properties file the last value of a key wins.
        *(f"{k}={_escape(v)}" for k, v in (overrides or {}).items()),
        "",
    ]
    return "\n".join(lines)


def log4j2_properties(log_file: Path) -> str:
    """A log4j2 configuration that sends the broker's log to ``log_file`` only, at INFO, with
    the request, state-change and log-cleaner loggers at WARN."""
    lines = [
        "# Generated by streamstate.kafka_local: the broker logs to broker.log only.",
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = file",
        f"appender.file.fileName = {_escape(str(log_file))}",
        "appender.file.append = true",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = INFO",
        "rootLogger.appenderRef.file.ref = file",
        "logger.request.name = kafka.request.logger",
        "logger.request.level = WARN",
        "logger.state.name = state.change.logger",
        "logger.state.level = WARN",
        "logger.cleaner.name = kafka.log.LogCleaner",
        "logger.cleaner.level = WARN",
        "",
    ]
    return "\n".join(lines)
