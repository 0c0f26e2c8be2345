"""Fixtures of the integration suites.

A broker with security listeners (``secure_broker``, ``secure_cluster``), for the modules that
stop, restart or damage their broker, or reach it through SASL and TLS.

The restore suites run on both read paths of the restore consumer.

``streamstate restore`` reads changelogs with librdkafka driven from Rust by default, and with a
confluent-kafka consumer when a setting forces it (``STREAMSTATE_RESTORE_FETCH`` chooses the
default; see ``streamstate.clients.restore_consumer.open_restore_consumer``). Every test of the
modules below runs once per path, with the same assertions; the variable reaches the
subprocesses the CLI and crash tests start.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamstate.kafka_local import KafkaTestCluster, LocalKafka

_BOTH_PATHS = frozenset(
    {
        "test_changelog_reader",
        "test_changelog_reader_ported",
        "test_topic_restore",
        "test_restore_crash",
        "test_restore_faults",
    }
)

# Tests that observe the confluent-kafka poll itself (they wrap ``Consumer.consume``, which the
# Rust path never calls); test_changelog_fetcher.py has their Rust counterparts, which wrap
# ``ChangelogFetcher.restore``.
_CONFLUENT_POLL = frozenset(
    {
        "test_a_partition_completes_while_others_still_restore",
        "test_restored_offsets_follow_each_batch_of_a_partial_restore",
        "test_polls_with_poll_ms_as_the_timeout_and_only_while_restoring",
    }
)

# Tests that fail before any restore consumer exists (the metadata request that lists the
# topic's partitions is the same on both paths): once, on the default path, saves 30 s.
_BEFORE_ANY_CONSUMER = frozenset({"test_a_wrong_sasl_password_is_a_clear_error"})


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrizes the tests of the restore modules by read path."""
    if metafunc.function.__name__ in _CONFLUENT_POLL:
        metafunc.parametrize("restore_fetch", ["confluent"], indirect=True)
    elif metafunc.function.__name__ in _BEFORE_ANY_CONSUMER:
        metafunc.parametrize("restore_fetch", ["rust"], indirect=True)
    elif metafunc.module.__name__.rpartition(".")[2] in _BOTH_PATHS:
        metafunc.parametrize("restore_fetch", ["rust", "confluent"], indirect=True)


@pytest.fixture(autouse=True)
def restore_fetch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The read path of this test (``rust`` or ``confluent``); the default elsewhere."""
    path = getattr(request, "param", None)
    if path is None:
        return "rust"
    monkeypatch.setenv("STREAMSTATE_RESTORE_FETCH", str(path))
    return str(path)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of the module's own, with SASL_PLAINTEXT, SSL, SASL_SSL and mutual-TLS
    listeners beside the PLAINTEXT one (``LocalKafka(secure_listeners=True)``); no other
    module shares it, so its tests may stop, kill and damage it."""
    kafka = LocalKafka(tmp_path_factory.mktemp("secure-kafka"), secure_listeners=True)
    kafka.start(fresh=True)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def secure_cluster(secure_broker: LocalKafka) -> Iterator[KafkaTestCluster]:
    """A client of ``secure_broker`` on its PLAINTEXT listener. The broker is started again if
    an earlier test stopped it (its addresses stay the same)."""
    address = secure_broker.start()
    with KafkaTestCluster(address) as c:
        yield c
