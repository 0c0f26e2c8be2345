"""Fixtures of the unit tests: real ``confluent_kafka.Message`` objects from an in-process broker,
and byte stores of both kinds (``make_store``).

librdkafka ships a mock cluster (``test.mock.num.brokers``) that speaks the Kafka protocol on
a local port, inside the client process: no JVM, no network, about a millisecond per call. The
messages it hands back are the same objects a real consumer returns, so the tests that feed
them to ``RecordQueue.add_raw_records`` exercise the real conversion path.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from streamstate.state.stores import InMemoryKeyValueStore, PersistentKeyValueStore

# librdkafka logs at NOTICE that the mock cluster replaces bootstrap.servers; keep stderr quiet.
_QUIET = {"log_level": 3}
# Partitions of a topic the mock cluster creates on first use.
MOCK_TOPIC_PARTITIONS = 4


class MockKafka:
    """A librdkafka mock cluster with one broker, and a way to get real messages out of it."""

    def __init__(self) -> None:
        self._producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, **_QUIET})
        brokers = self._producer.list_topics(timeout=10).brokers
        broker = next(iter(brokers.values()))
        self.bootstrap_servers = f"{broker.host}:{broker.port}"

    def messages(
        self,
        records: Sequence[tuple[int, bytes | None, bytes | None, int]],
        *,
        headers: list[tuple[str, bytes]] | None = None,
        topic: str | None = None,
    ) -> list[confluent_kafka.Message]:
        """Produces ``(partition, key, value, timestamp_ms)`` records to a fresh topic and
        consumes them back; returns the messages in (partition, offset) order.

        Offsets start at 0 in each partition, in the order given. ``timestamp_ms`` must be > 0
        (librdkafka reads 0 as "now").
        """
        topic = topic or f"mock-{uuid.uuid4().hex[:12]}"
        for partition, key, value, timestamp in records:
            assert 0 <= partition < MOCK_TOPIC_PARTITIONS and timestamp > 0
            self._producer.produce(
                topic, value, key, partition=partition, timestamp=timestamp, headers=headers
            )
        assert self._producer.flush(10) == 0, "the mock cluster did not take every record"

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"unit-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                **_QUIET,
            }
        )
        try:
            partitions = sorted({r[0] for r in records})
            consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
            out: list[confluent_kafka.Message] = []
            deadline = time.monotonic() + 10
            while len(out) < len(records) and time.monotonic() < deadline:
                for message in consumer.consume(len(records) - len(out), 0.5):
                    if message.error() is not None:
                        raise RuntimeError(f"mock consumer error: {message.error()}")
                    out.append(message)
        finally:
            consumer.close()
        assert len(out) == len(records), f"consumed {len(out)} of {len(records)} records"
        return sorted(out, key=lambda m: (m.partition(), m.offset()))

    def close(self) -> None:
        self._producer.flush(5)


@pytest.fixture(scope="module")
def mock_kafka() -> Iterator[MockKafka]:
    """An in-process librdkafka mock cluster (one per test module)."""
    cluster = MockKafka()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(params=["memory", "persistent"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Any]]:
    """A factory of open byte stores of one kind (each kind a parameter); every store it made
    is closed afterwards."""
    made: list[Any] = []

    def make(name: str = "s") -> Any:
        store: Any
        if request.param == "memory":
            store = InMemoryKeyValueStore(name)
        else:
            store = PersistentKeyValueStore(name, tmp_path / name)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
