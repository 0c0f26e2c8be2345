"""``restore_topic`` against a broker of its own that goes away, loses a topic, serves a damaged
record batch, or is reached through SASL/PLAIN and TLS listeners; on both read paths.

The module starts its own broker (``LocalKafka(secure_listeners=True)``), because tests here stop
and restart it and damage its log files.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from streamstate import (
    PersistentKeyValueStore,
    ProcessorStateError,
    SaslAuthenticationError,
    StateRestoreListener,
)
from streamstate.kafka_local import KafkaTestCluster, LocalKafka
from streamstate.records import TopicPartition
from streamstate.topic_restore import restore_topic, store_directory

LOGGER = "streamstate.changelog"


def _records(n: int, seed: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b"k%04d" % (i % 97), b"v%d-%d" % (seed, i)) for i in range(n)]


def _expected(records: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return dict(records)


def _contents(state_dir: Path, topic: str) -> dict[bytes, bytes]:
    with PersistentKeyValueStore(topic, store_directory(state_dir, topic, 0)) as store:
        return dict(store.all())


def _produce_batches(bootstrap: str, topic: str, batches: list[list[tuple[bytes, bytes]]]) -> None:
    """Each list becomes its own record batch on the broker (uncompressed): the records wait
    (a linger no load can outlast) until ``flush`` sends them together. With a linger of 100 ms
    a loaded CI machine once sent a batch's first record alone (batches at 0, 1, 50, 100)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 60_000, "acks": "all"})
    for batch in batches:
        for k, v in batch:
            producer.produce(topic, v, k, partition=0)
        assert producer.flush(30) == 0


# ---- security settings -----------------------------------------------------------------------


def test_sasl_plain_settings_reach_the_restore_consumer(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path, caplog: Any
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    records = _records(500)
    secure_cluster.produce(topic, records, partition=0)
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    config = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": LocalKafka.SASL_USER,
        "sasl.password": LocalKafka.SASL_PASSWORD,
    }
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = restore_topic(sasl, topic, tmp_path, consumer_config=config)
    assert [r.restored for r in results] == [500]
    assert _contents(tmp_path, topic) == _expected(records)
    assert not [r for r in caplog.records if "cannot honour" in r.getMessage()]


def test_a_wrong_sasl_password_is_a_clear_error(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    secure_cluster.produce(topic, _records(10), partition=0)
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    config = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": LocalKafka.SASL_USER,
        "sasl.password": "wrong",
    }
    with pytest.raises(SaslAuthenticationError) as caught:
        restore_topic(sasl, topic, tmp_path, consumer_config=config, stall_timeout_s=5)
    assert caught.value.topic == topic
    assert "sasl.mechanism=PLAIN" in str(caught.value)
    # The refusal itself, reported at once, not a metadata timeout 30 s later.
    assert "Authentication failed" in str(caught.value), str(caught.value)


def test_tls_settings_reach_the_restore_consumer(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    records = _records(300, seed=1)
    secure_cluster.produce(topic, records, partition=0)
    ssl = secure_broker.ssl_servers
    assert ssl is not None
    config = {"security.protocol": "SSL", "ssl.ca.location": str(secure_broker.ssl_ca_location)}
    results = restore_topic(ssl, topic, tmp_path, consumer_config=config)
    assert [r.restored for r in results] == [300]
    assert _contents(tmp_path, topic) == _expected(records)


# Small fetches and a small prefetch queue, so that records are still to be read when the broker
# goes away (librdkafka would otherwise have fetched the whole changelog ahead).
_SMALL_FETCHES = {
    "max.partition.fetch.bytes": 16384,
    "queued.max.messages.kbytes": 64,
    "queued.min.messages": 1000,
}
# And small polls: the listener hears of the first 1,000 records, not of all that one poll could
# read. The Rust fetch polls for up to 1,000,000 records by default and read the whole 100,000
# of a test below within its first 100 ms poll on a fast run: the broker then went away after
# the restore had already ended.
_SMALL_POLLS = 1000


# ---- a broker that goes away -----------------------------------------------------------------


class _StopOnFirstBatch(StateRestoreListener):
    """Stops the broker after the first batch, starts it again ``down_s`` later (never if
    ``None``). A broker that stays away is killed, not stopped: a clean shutdown goes on
    serving fetches while it winds down, long enough for a fast reader to finish the restore."""

    def __init__(self, broker: LocalKafka, down_s: float | None) -> None:
        self.broker = broker
        self.down_s = down_s
        self.thread: threading.Thread | None = None
        self.stopped_after: int | None = None  # the first batch's end offset

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        if self.thread is not None:
            return
        self.stopped_after = batch_end_offset
        if self.down_s is None:
            self.broker.kill()
        else:
            self.broker.stop()
        if self.down_s is not None:
            down_s = self.down_s

            def restart() -> None:
                time.sleep(down_s)
                self.broker.start()

            self.thread = threading.Thread(target=restart)
            self.thread.start()
        else:
            self.thread = threading.Thread(target=lambda: None)


def test_a_broker_that_comes_back_mid_restore_is_waited_for_with_warnings(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path, caplog: Any
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    records = _records(200_000, seed=2)
    secure_cluster.produce(topic, records, partition=0)
    listener = _StopOnFirstBatch(secure_broker, down_s=3.0)
    config = _SMALL_FETCHES
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = restore_topic(
            secure_cluster.bootstrap_servers,
            topic,
            tmp_path,
            consumer_config=config,
            restore_listener=listener,
            stall_timeout_s=120,
            max_poll_records=_SMALL_POLLS,
        )
    assert listener.thread is not None
    listener.thread.join()
    # The broker went away with records still to read.
    assert listener.stopped_after is not None and listener.stopped_after < 200_000 - 1
    assert results[0].end_offset == 200_000
    assert _contents(tmp_path, topic) == _expected(records)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"topic {topic!r} partition 0" in w for w in warnings), warnings


def test_a_broker_that_stays_away_fails_the_restore_naming_the_partition(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path, caplog: Any
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    secure_cluster.produce(topic, _records(100_000, seed=3), partition=0)
    listener = _StopOnFirstBatch(secure_broker, down_s=None)
    config = _SMALL_FETCHES
    try:
        with (
            caplog.at_level(logging.WARNING, logger=LOGGER),
            pytest.raises(ProcessorStateError, match="no progress") as caught,
        ):
            restore_topic(
                secure_cluster.bootstrap_servers,
                topic,
                tmp_path,
                consumer_config=config,
                restore_listener=listener,
                stall_timeout_s=4,
                max_poll_records=_SMALL_POLLS,
            )
    finally:
        secure_broker.start()
    assert caught.value.topic == topic
    assert caught.value.partition == 0
    # Applied records were checkpointed (flush first): a second run resumes and completes.
    results = restore_topic(secure_cluster.bootstrap_servers, topic, tmp_path)
    assert results[0].start_offset > 0


# ---- a partition that disappears -------------------------------------------------------------


class _DeleteTopicOnFirstBatch(StateRestoreListener):
    def __init__(self, cluster: KafkaTestCluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.deleted = False

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        if not self.deleted:
            self.deleted = True
            futures = self.cluster.admin.delete_topics([self.topic], operation_timeout=30)
            futures[self.topic].result(timeout=30)
            deadline = time.monotonic() + 30
            while self.topic in self.cluster.admin.list_topics(timeout=10).topics:
                assert time.monotonic() < deadline, "the topic was not deleted"
                time.sleep(0.1)


def test_a_changelog_deleted_mid_restore_is_a_clear_error(
    secure_cluster: KafkaTestCluster, tmp_path: Path
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    secure_cluster.produce(topic, _records(500_000, seed=4), partition=0)
    listener = _DeleteTopicOnFirstBatch(secure_cluster, topic)
    config = _SMALL_FETCHES
    with pytest.raises(ProcessorStateError) as caught:
        restore_topic(
            secure_cluster.bootstrap_servers,
            topic,
            tmp_path,
            consumer_config=config,
            restore_listener=listener,
            # A deleted partition is retried (UNKNOWN_TOPIC_OR_PART is retriable) until the stall
            # timeout: its length is only the test's wait, as in the broker-stays-away test.
            stall_timeout_s=5,
            max_poll_records=_SMALL_POLLS,
        )
    assert listener.deleted
    assert caught.value.topic == topic
    assert caught.value.partition == 0


# ---- a damaged record batch ------------------------------------------------------------------


def _batch_starts(segment: Path) -> list[tuple[int, int]]:
    """``(file position, base offset)`` of each record batch in a log segment."""
    data = segment.read_bytes()
    starts, pos = [], 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack(">qi", data[pos : pos + 12])
        if length <= 0:
            break
        starts.append((pos, base_offset))
        pos += 12 + length
    return starts


def test_a_corrupt_record_batch_is_an_error_naming_its_offset(
    secure_broker: LocalKafka, secure_cluster: KafkaTestCluster, tmp_path: Path, restore_fetch: str
) -> None:
    topic = secure_cluster.create_topic(partitions=1)
    first = [(b"a%d" % i, b"first-%d" % i) for i in range(50)]
    second = [(b"b%d" % i, b"second-%d" % i) for i in range(50)]
    third = [(b"c%d" % i, b"third-%d" % i) for i in range(50)]
    _produce_batches(secure_cluster.bootstrap_servers, topic, [first, second, third])
    secure_cluster.close()
    secure_broker.stop()  # a clean shutdown: the broker does not re-check the segment on start
    segment = secure_broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    starts = _batch_starts(segment)
    assert [offset for _, offset in starts] == [0, 50, 100]
    position, base = starts[1]
    data = bytearray(segment.read_bytes())
    data[position + 61 + 40] ^= 0xFF  # inside the second batch's records, under its CRC
    segment.write_bytes(bytes(data))
    secure_broker.start()

    with pytest.raises(ProcessorStateError) as caught:
        restore_topic(secure_broker.bootstrap_servers or "", topic, tmp_path, stall_timeout_s=20)
    error = caught.value
    assert (error.topic, error.partition, error.offset) == (topic, 0, base)
    assert "CRC" in str(error)
    # Nothing of the damaged batch (nor after it) was applied. The Rust path applies what it
    # read before the damaged batch; the confluent-kafka path raises before applying the poll.
    contents = _contents(tmp_path, topic)
    assert contents.items() <= dict(first).items()
    if restore_fetch == "rust":
        assert contents == dict(first)
