"""``group.protocol="streams"`` on a secured cluster: the streams group member (our own client,
``rust/group``) authenticates with SASL on the SASL_PLAINTEXT and SASL_SSL listeners and
connects with TLS on the SSL listener and, with a client certificate, on the mutual-TLS one, as
librdkafka does for the app's other clients.

The module's broker (``secure_broker``) enables PLAIN and SCRAM-SHA-256/512 on its SASL
listeners; SCRAM users are created here through the PLAINTEXT listener, which the test itself
also produces and checks through. Each listener and mechanism runs the same app: it joins, is
assigned all four tasks, counts every record exactly and commits every input offset. A wrong
password fails ``start()`` and the member at once with a ``SaslAuthenticationError`` naming the
mechanism and the broker's message; an untrusted broker certificate or a missing client
certificate with an ``SslAuthenticationError`` naming the broker.
"""

from __future__ import annotations

import collections
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from tests.apps import wait_until
from tests.integration.test_streams_protocol import (
    _produce,
    _store_counts,
    _tasks,
)
from tests.secure_support import client_certificate_settings, sasl_settings, tls_settings
from tests.standby_support import count_topology

from streamstate import StreamsApp
from streamstate.app.streams_group import (
    StreamsGroupMember,
    StreamsGroupTopology,
    Subtopology,
)
from streamstate.errors import (
    SaslAuthenticationError,
    SslAuthenticationError,
)
from streamstate.kafka_local import KafkaTestCluster, LocalKafka

_SCRAM = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


def _credentials(cluster: KafkaTestCluster, mechanism: str) -> tuple[str, str]:
    """A user of ``mechanism``: the broker's PLAIN user, or a new SCRAM user."""
    if mechanism == "PLAIN":
        return LocalKafka.SASL_USER, LocalKafka.SASL_PASSWORD
    user, password = f"scram-{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(_SCRAM[mechanism], 8192), password.encode()
    )
    for future in cluster.admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    return user, password


def _member(servers: str, settings: dict[str, Any], prefix: str) -> StreamsGroupMember:
    """A streams group member of a new group with connection ``settings`` (nothing sent yet)."""
    return StreamsGroupMember.from_config(
        {
            "bootstrap.servers": servers,
            "application.id": f"{prefix}-{uuid.uuid4().hex[:8]}",
            **settings,
        },
        StreamsGroupTopology((Subtopology("0", ("t",)),)),
        process_id=str(uuid.uuid4()),
    )


def _counts_exactly(
    cluster: KafkaTestCluster,
    servers: str,
    settings: dict[str, Any],
    tmp_path: Path,
    apps: list[StreamsApp],
    *,
    what: str,
) -> None:
    """Runs the counting app with every client on ``servers`` with connection ``settings``:
    it joins the streams group, is given all four tasks, counts every record exactly and
    commits every input offset (read back through PLAINTEXT); then it leaves the group."""
    source, sink = cluster.create_topic(partitions=4), cluster.create_topic(partitions=4)
    expected: collections.Counter[str] = collections.Counter()
    _produce(cluster, source, 5, expected)
    app_id = f"secure-streams-{uuid.uuid4().hex[:8]}"
    app = StreamsApp(
        count_topology(source, sink),
        {
            "application.id": app_id,
            # Every client of the app, the streams group member included, uses this listener.
            "bootstrap.servers": servers,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 200,
            "group.protocol": "streams",
            **settings,
        },
    )
    apps.append(app)
    app.start()
    wait_until(lambda: _store_counts([app]) == dict(expected), f"every record counted {what}")
    # The broker's streams assignor gave the one member all four tasks.
    assert sorted(task.partition for task in _tasks(app).values()) == [0, 1, 2, 3]
    assert app.close(30)
    topology = StreamsGroupTopology((Subtopology("0", (source,)),))
    reader = StreamsGroupMember(cluster.bootstrap_servers, app_id, topology)
    committed = reader._member.committed_offsets([(source, p) for p in range(4)])
    assert [code for *_, code in committed] == [0, 0, 0, 0]
    assert sum(offset for _, _, offset, _, _ in committed) == sum(expected.values()) == 200
    assert reader.describe().members == ()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_streams_app_authenticates_joins_processes_and_commits(
    mechanism: str,
    secure_broker: LocalKafka,
    secure_cluster: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    user, password = _credentials(secure_cluster, mechanism)
    settings = sasl_settings(mechanism, user, password)
    _counts_exactly(secure_cluster, sasl, settings, tmp_path, apps, what=f"over SASL/{mechanism}")


def test_a_streams_app_over_sasl_ssl_joins_processes_and_commits(
    secure_broker: LocalKafka,
    secure_cluster: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
) -> None:
    servers = secure_broker.sasl_ssl_servers
    assert servers is not None
    user, password = _credentials(secure_cluster, "SCRAM-SHA-512")
    settings = sasl_settings("SCRAM-SHA-512", user, password, tls=secure_broker)
    _counts_exactly(secure_cluster, servers, settings, tmp_path, apps, what="over SASL_SSL")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_fails_the_member_at_once_naming_the_mechanism(
    mechanism: str, secure_broker: LocalKafka, secure_cluster: KafkaTestCluster
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    user, _ = _credentials(secure_cluster, mechanism)
    member = _member(sasl, sasl_settings(mechanism, user, "not-the-password"), "sasl-bad")
    began = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as raised:
        member.describe()
    message = str(raised.value)
    assert f"SASL authentication with {mechanism} to the broker at {sasl} failed" in message
    assert "SASL_AUTHENTICATION_FAILED (error code 58)" in message
    # The broker's own message comes through.
    assert "nvalid" in message or "uthentication failed" in message, message
    # One attempt, no retry loop (the request timeout is 30 s).
    assert time.monotonic() - began < 15


def test_a_streams_app_over_tls_joins_processes_and_commits(
    secure_broker: LocalKafka,
    secure_cluster: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
) -> None:
    ssl = secure_broker.ssl_servers
    assert ssl is not None
    settings = tls_settings(secure_broker)
    _counts_exactly(secure_cluster, ssl, settings, tmp_path, apps, what="over TLS")


def test_a_streams_app_over_mutual_tls_joins_processes_and_commits(
    secure_broker: LocalKafka,
    secure_cluster: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
) -> None:
    mtls = secure_broker.mtls_servers
    assert mtls is not None
    settings = {**tls_settings(secure_broker), **client_certificate_settings(secure_broker)}
    _counts_exactly(secure_cluster, mtls, settings, tmp_path, apps, what="over mutual TLS")


def test_an_untrusted_broker_certificate_fails_the_member_at_once(
    secure_broker: LocalKafka,
) -> None:
    ssl = secure_broker.ssl_servers
    assert ssl is not None
    # No ssl.ca.location: the system's CAs do not trust the broker's self-signed certificate.
    member = _member(ssl, {"security.protocol": "SSL"}, "ssl-bad")
    with pytest.raises(
        SslAuthenticationError, match=rf"TLS handshake with the broker at {ssl} failed.*verif"
    ):
        member.describe()


def _start_fails_at_once(  # noqa: PLR0917 - one failing start, described
    cluster: KafkaTestCluster,
    servers: str,
    settings: dict[str, Any],
    tmp_path: Path,
    error: type[Exception],
    match: str,
) -> None:
    """A streams-protocol app on ``servers`` with ``settings`` fails ``start()`` with
    ``error`` (message matching ``match``) within 15 s, not after librdkafka's timeouts."""
    source, sink = cluster.create_topic(partitions=1), cluster.create_topic(partitions=1)
    app = StreamsApp(
        count_topology(source, sink),
        {
            "application.id": f"secured-bad-app-{uuid.uuid4().hex[:8]}",
            "bootstrap.servers": servers,
            "state.dir": str(tmp_path),
            "group.protocol": "streams",
            **settings,
        },
    )
    began = time.monotonic()
    with pytest.raises(error, match=match):
        app.start()
    assert time.monotonic() - began < 15
    app.close(5)


def test_a_missing_client_certificate_fails_the_member_and_start_at_once(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    mtls = secure_broker.mtls_servers
    assert mtls is not None
    # The broker's certificate is trusted; the listener requires one of the client's too.
    settings = tls_settings(secure_broker)
    began = time.monotonic()
    # The member: under TLS 1.3 the broker's refusal arrives after the client's side of the
    # handshake; it is still the handshake's failure, not a connection to retry.
    with pytest.raises(
        SslAuthenticationError, match=rf"TLS handshake with the broker at {mtls} failed"
    ):
        _member(mtls, settings, "mtls-bad").describe()
    assert time.monotonic() - began < 15
    # start(): the app's admin client (librdkafka) connects first; its refusal is as quick.
    _start_fails_at_once(
        secure_cluster,
        mtls,
        settings,
        tmp_path,
        SslAuthenticationError,
        rf"TLS handshake with the broker at .*{mtls}.* failed",
    )


def test_a_wrong_password_over_sasl_ssl_fails_the_member_and_start_at_once(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    servers = secure_broker.sasl_ssl_servers
    assert servers is not None
    user, _ = _credentials(secure_cluster, "SCRAM-SHA-512")
    settings = sasl_settings("SCRAM-SHA-512", user, "not-the-password", tls=secure_broker)
    began = time.monotonic()
    with pytest.raises(
        SaslAuthenticationError,
        match=rf"SASL authentication with SCRAM-SHA-512 to the broker at {servers} failed",
    ):
        _member(servers, settings, "sasl-ssl-bad").describe()
    assert time.monotonic() - began < 15
    _start_fails_at_once(
        secure_cluster, servers, settings, tmp_path, SaslAuthenticationError, r"SCRAM-SHA-512"
    )


def test_a_wrong_scram_password_fails_start_with_a_clear_error(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    user, _ = _credentials(secure_cluster, "SCRAM-SHA-256")
    # The app's admin client (librdkafka) logs in first; its failure is reported at once too.
    _start_fails_at_once(
        secure_cluster,
        sasl,
        sasl_settings("SCRAM-SHA-256", user, "not-the-password"),
        tmp_path,
        SaslAuthenticationError,
        r"authentication .* failed.*SCRAM-SHA-256",
    )
