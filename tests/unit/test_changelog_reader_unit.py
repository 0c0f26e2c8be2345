"""StoreChangelogReader's argument checks and a smoke test on librdkafka's in-process mock
cluster (no JVM); the broker scenarios live in ``tests/integration/test_changelog_reader.py``."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from streamstate import (
    InMemoryKeyValueStore,
    StateRestoreListener,
    StateRestorer,
    StoreChangelogReader,
    TopicPartition,
)
from streamstate.changelog import restore_consumer_config


def test_restore_consumer_config_defaults() -> None:
    config = restore_consumer_config("host:1")
    assert config["bootstrap.servers"] == "host:1"
    assert config["auto.offset.reset"] == "error"
    assert config["isolation.level"] == "read_uncommitted"
    assert config["enable.auto.commit"] is False
    assert config["enable.partition.eof"] is True
    assert config["group.id"] != restore_consumer_config("host:1")["group.id"]


def test_restore_consumer_config_eos_and_overrides() -> None:
    config = restore_consumer_config("host:1", eos=True, **{"fetch.max.bytes": 1024})
    assert config["isolation.level"] == "read_committed"
    assert config["fetch.max.bytes"] == 1024


@pytest.mark.parametrize(
    ("checkpoint", "error"),
    [(-1, ValueError), (True, TypeError), (1.5, TypeError), ("3", TypeError)],
)
def test_state_restorer_rejects_bad_checkpoints(checkpoint: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        StateRestorer(TopicPartition("t", 0), InMemoryKeyValueStore("s"), checkpoint=checkpoint)


def test_state_restorer_keeps_its_arguments() -> None:
    store = InMemoryKeyValueStore("s")
    restorer = StateRestorer(TopicPartition("t", 2, 99), store, checkpoint=7)
    assert restorer.partition == TopicPartition("t", 2)
    assert restorer.partition.offset == confluent_kafka.OFFSET_INVALID
    assert restorer.store is store
    assert restorer.store_name == "s"
    assert restorer.checkpoint == 7
    assert restorer.persistent is False
    assert repr(restorer) == "StateRestorer(t-2, store='s', checkpoint=7)"


def test_listener_base_class_does_nothing() -> None:
    listener = StateRestoreListener()
    tp = TopicPartition("t", 0)
    assert listener.on_restore_start(tp, "s", 0, 10) is None
    assert listener.on_batch_restored(tp, "s", 9, 10) is None
    assert listener.on_restore_end(tp, "s", 10) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"poll_ms": -1},
        {"stall_timeout_s": 0},
        {"progress_interval_s": 0},
        {"request_timeout_s": -1.0},
    ],
)
def test_reader_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        StoreChangelogReader(object(), **kwargs)  # type: ignore[arg-type]


def test_nothing_registered_restores_nothing() -> None:
    reader = StoreChangelogReader(object())  # type: ignore[arg-type]
    assert reader.is_empty()
    assert reader.restore() == set()
    assert reader.restored_offsets() == {}
    reader.remove([TopicPartition("t", 0)])
    reader.clear()


def test_restores_from_the_mock_cluster(mock_kafka: Any) -> None:
    topic = f"changelog-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": mock_kafka.bootstrap_servers, "log_level": 3}
    )
    for i in range(50):
        producer.produce(topic, key=b"k%d" % (i % 20), value=b"v%d" % i, partition=0)
    producer.produce(topic, key=b"k0", value=None, partition=0)  # a tombstone
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        restore_consumer_config(mock_kafka.bootstrap_servers, log_level=3)
    )
    try:
        reader = StoreChangelogReader(consumer)
        full, empty = TopicPartition(topic, 0), TopicPartition(topic, 1)
        store = InMemoryKeyValueStore("s")
        reader.register(StateRestorer(full, store))
        reader.register(StateRestorer(empty, InMemoryKeyValueStore("e")))
        deadline = time.monotonic() + 10
        while (done := reader.restore()) != {full, empty}:
            assert time.monotonic() < deadline, f"only {done} completed"
        expected = {b"k%d" % (i % 20): b"v%d" % i for i in range(50)}
        del expected[b"k0"]
        assert dict(store.all()) == expected
    finally:
        consumer.close()
