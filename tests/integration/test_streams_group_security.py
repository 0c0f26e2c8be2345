"""``group.protocol="streams"`` on a secured cluster: the streams group member (our own client,
``rust/group``) authenticates with SASL on the SASL_PLAINTEXT listener and connects with TLS on
the SSL listener, as librdkafka does for the app's other clients.

The module's broker (``secure_broker``) enables PLAIN and SCRAM-SHA-256/512 on its SASL
listener; SCRAM users are created here through the PLAINTEXT listener, which the test itself
also produces and checks through. Each mechanism runs the same app: it joins, is assigned all
four tasks, counts every record exactly and commits every input offset. A wrong password fails
``start()`` at once with the error naming the mechanism and the broker's message.
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
    _count_topology,
    _produce,
    _store_counts,
    _tasks,
)

from streamstate import StreamsApp
from streamstate.app.streams_group import (
    StreamsGroupMember,
    StreamsGroupTopology,
    Subtopology,
)
from streamstate.errors import StreamsError
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


def _secured(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


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
    source, sink = (
        secure_cluster.create_topic(partitions=4),
        secure_cluster.create_topic(partitions=4),
    )
    expected: collections.Counter[str] = collections.Counter()
    _produce(secure_cluster, source, 5, expected)
    app_id = f"sasl-streams-{uuid.uuid4().hex[:8]}"
    app = StreamsApp(
        _count_topology(source, sink),
        {
            "application.id": app_id,
            # Every client of the app, the streams group member included, uses the SASL
            # listener only.
            "bootstrap.servers": sasl,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 200,
            "group.protocol": "streams",
            **_secured(mechanism, user, password),
        },
    )
    apps.append(app)
    app.start()
    wait_until(
        lambda: _store_counts([app]) == dict(expected),
        f"every record counted over SASL/{mechanism}",
    )
    # The broker's streams assignor gave the one member all four tasks.
    assert sorted(task.partition for task in _tasks(app).values()) == [0, 1, 2, 3]
    assert app.close(30)
    # Every input offset was committed by the member (read back through PLAINTEXT).
    topology = StreamsGroupTopology((Subtopology("0", (source,)),))
    reader = StreamsGroupMember(secure_cluster.bootstrap_servers, app_id, topology)
    committed = reader._member.committed_offsets([(source, p) for p in range(4)])
    assert [code for *_, code in committed] == [0, 0, 0, 0]
    assert sum(offset for _, _, offset, _, _ in committed) == sum(expected.values()) == 200
    description = reader.describe()
    assert description.members == ()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_fails_the_member_at_once_naming_the_mechanism(
    mechanism: str, secure_broker: LocalKafka, secure_cluster: KafkaTestCluster
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    user, _ = _credentials(secure_cluster, mechanism)
    source = secure_cluster.create_topic(partitions=1)
    topology = StreamsGroupTopology((Subtopology("0", (source,)),))
    member = StreamsGroupMember.from_config(
        {
            "bootstrap.servers": sasl,
            "application.id": f"sasl-bad-{uuid.uuid4().hex[:8]}",
            **_secured(mechanism, user, "not-the-password"),
        },
        topology,
        process_id=str(uuid.uuid4()),
    )
    began = time.monotonic()
    with pytest.raises(StreamsError) as raised:
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
    ssl, ca = secure_broker.ssl_servers, secure_broker.ssl_ca_location
    assert ssl is not None and ca is not None
    source, sink = (
        secure_cluster.create_topic(partitions=4),
        secure_cluster.create_topic(partitions=4),
    )
    expected: collections.Counter[str] = collections.Counter()
    _produce(secure_cluster, source, 5, expected)
    app_id = f"ssl-streams-{uuid.uuid4().hex[:8]}"
    app = StreamsApp(
        _count_topology(source, sink),
        {
            "application.id": app_id,
            "bootstrap.servers": ssl,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 200,
            "group.protocol": "streams",
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca),
        },
    )
    apps.append(app)
    app.start()
    wait_until(lambda: _store_counts([app]) == dict(expected), "every record counted over TLS")
    assert sorted(task.partition for task in _tasks(app).values()) == [0, 1, 2, 3]
    assert app.close(30)
    topology = StreamsGroupTopology((Subtopology("0", (source,)),))
    reader = StreamsGroupMember(secure_cluster.bootstrap_servers, app_id, topology)
    committed = reader._member.committed_offsets([(source, p) for p in range(4)])
    assert sum(offset for _, _, offset, _, code in committed if code == 0) == 200


def test_an_untrusted_broker_certificate_fails_the_member_at_once(
    secure_broker: LocalKafka,
) -> None:
    ssl = secure_broker.ssl_servers
    assert ssl is not None
    # No ssl.ca.location: the system's CAs do not trust the broker's self-signed certificate.
    member = StreamsGroupMember.from_config(
        {
            "bootstrap.servers": ssl,
            "application.id": f"ssl-bad-{uuid.uuid4().hex[:8]}",
            "security.protocol": "SSL",
        },
        StreamsGroupTopology((Subtopology("0", ("t",)),)),
        process_id=str(uuid.uuid4()),
    )
    with pytest.raises(
        StreamsError, match=rf"TLS handshake with the broker at {ssl} failed.*verif"
    ):
        member.describe()


def test_a_wrong_scram_password_fails_start_with_a_clear_error(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    user, _ = _credentials(secure_cluster, "SCRAM-SHA-256")
    source, sink = (
        secure_cluster.create_topic(partitions=1),
        secure_cluster.create_topic(partitions=1),
    )
    app = StreamsApp(
        _count_topology(source, sink),
        {
            "application.id": f"sasl-bad-app-{uuid.uuid4().hex[:8]}",
            "bootstrap.servers": sasl,
            "state.dir": str(tmp_path),
            "group.protocol": "streams",
            **_secured("SCRAM-SHA-256", user, "not-the-password"),
        },
    )
    began = time.monotonic()
    # The app's admin client (librdkafka) logs in first; its failure is reported at once too.
    with pytest.raises(StreamsError, match=r"authentication .* failed.*SCRAM-SHA-256"):
        app.start()
    assert time.monotonic() - began < 15
    app.close(5)
