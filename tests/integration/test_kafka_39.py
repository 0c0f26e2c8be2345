"""A ``StreamsApp`` on a Kafka 3.9 broker, which users still run (issue 23).

The module starts one broker of its own, ``LocalKafka(version=KAFKA_39)`` (the session's
``kafka`` fixture runs 4.4), once for its two tests: a stateful count under the classic group
protocol and ``exactly_once_v2`` processes its input exactly, and the same app under
``group.protocol="streams"`` fails ``start()`` with a ``StreamsError`` saying that the broker
has no streams groups (KIP-1071 came with Kafka 4.2).
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.apps import wait_until
from tests.integration.test_streams_app import counting_topology, local_counts, new_app

from streamstate import StreamsApp
from streamstate.errors import StreamsError
from streamstate.testing import KafkaTestCluster, LocalKafka

KAFKA_39 = "3.9.2"
"""The newest 3.9 release on Maven Central (2026-11-25)."""

KEYS = [b"key-%02d" % i for i in range(20)]


@pytest.fixture(scope="module")
def kafka39(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """A Kafka 3.9 broker of this module's own, started once."""
    broker = LocalKafka(tmp_path_factory.mktemp("kafka-3.9"), version=KAFKA_39, heap_mb=512)
    cluster = KafkaTestCluster(broker.start(fresh=True), broker=broker)
    try:
        yield cluster
    finally:
        cluster.close()


def _produce(kafka: KafkaTestCluster, topic: str, rounds: int) -> collections.Counter[bytes]:
    records = [(key, b"x") for _ in range(rounds) for key in KEYS]
    kafka.produce(topic, records)
    return collections.Counter(key for key, _ in records)


def _read_all(kafka: KafkaTestCluster, topic: str, count: int) -> list[tuple[bytes, bytes]]:
    """The committed records of ``topic`` once it holds ``count`` of them (or after 60 s)."""
    consumer = kafka.consumer(isolation_level="read_committed")
    consumer.subscribe([topic])
    records: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(records) < count and time.monotonic() < deadline:
        for message in consumer.consume(500, timeout=0.5):
            if message.error() is None:
                records.append((message.key(), message.value()))
    # A moment more, so that a duplicate after the last expected record shows too.
    for message in consumer.consume(500, timeout=1.0):
        if message.error() is None:
            records.append((message.key(), message.value()))
    return records


def test_the_broker_is_kafka_3_9(kafka39: KafkaTestCluster) -> None:
    assert kafka39.broker is not None
    log = kafka39.broker.log_file.read_text(encoding="utf-8", errors="replace")
    assert f"Kafka version: {KAFKA_39}" in log


def test_a_count_under_the_classic_protocol_and_exactly_once_is_exact_on_kafka_3_9(
    kafka39: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka39.create_topic(partitions=2)
    sink = kafka39.create_topic(partitions=2)
    expected = _produce(kafka39, source, rounds=5)
    app = new_app(
        apps,
        kafka39,
        counting_topology(source, sink),
        tmp_path / "state",
        f"count-39-{uuid.uuid4().hex[:8]}",
        **{"processing.guarantee": "exactly_once_v2"},
    )
    app.start()
    wait_until(
        lambda: local_counts(app) == {k: n for k, n in expected.items()}, "the counts on 3.9"
    )
    # Every input record gave exactly one output record: each key's counts 1..n, in order.
    output = _read_all(kafka39, sink, sum(expected.values()))
    by_key: dict[bytes, list[int]] = collections.defaultdict(list)
    for key, value in output:
        by_key[key].append(int(value))
    assert by_key == {key: list(range(1, n + 1)) for key, n in expected.items()}


def test_the_streams_protocol_fails_start_with_a_clear_error_on_kafka_3_9(
    kafka39: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka39.create_topic(partitions=1)
    app = new_app(
        apps,
        kafka39,
        counting_topology(source),
        tmp_path / "state",
        f"streams-39-{uuid.uuid4().hex[:8]}",
        **{"group.protocol": "streams"},
    )
    with pytest.raises(
        StreamsError, match="does not support the streams rebalance protocol"
    ) as exc:
        app.start()
    message = str(exc.value)
    assert kafka39.bootstrap_servers in message
    assert "group.protocol=classic" in message
