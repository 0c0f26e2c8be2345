"""StoreChangelogReader against the real broker, with the real Rust stores and ``process_next``.

The first group ports Kafka Streams' ``StoreChangelogReaderTest`` scenarios that make sense with
a real broker (2.x numbering in the research notes, section 2.5). The second covers the edges a
real changelog has: transaction markers, aborted transactions, offset holes, truncation below a
checkpoint, an empty log whose end offset is not 0, a consumer position reported invalid, an end
offset that moves during the restore, and a stall.

Compaction gaps are emulated, not produced by the log cleaner (which runs on a 15 s back-off on
the shared broker): an aborted transaction read with ``isolation.level=read_committed`` leaves
the same observable effect, offsets the consumer never sees in the middle and at the end of the
log, and ``delete_records`` leaves the log start above 0.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, Producer

from streamstate import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    ProcessorStateError,
    StateRestoreListener,
    StateRestorer,
    StoreChangelogReader,
    StreamsError,
    TopicPartition,
)
from streamstate.clients.config import restore_consumer_config
from streamstate.clients.restore_consumer import open_restore_consumer
from streamstate.kafka_local import KafkaTestCluster

LOGGER = "streamstate.changelog"


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


class Recorder(StateRestoreListener):
    """Records every listener call as a tuple."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        self.events.append(("start", tp.topic, tp.partition, store_name, start_offset, end_offset))

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.events.append(
            ("batch", tp.topic, tp.partition, store_name, batch_end_offset, num_restored)
        )

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        self.events.append(("end", tp.topic, tp.partition, store_name, total_restored))

    def on_restore_suspended(
        self, tp: TopicPartition, store_name: str, total_restored: int
    ) -> None:
        self.events.append(("suspended", tp.topic, tp.partition, store_name, total_restored))

    def of(self, kind: str, store: str) -> list[tuple[Any, ...]]:
        return [e[4:] for e in self.events if e[0] == kind and e[3] == store]

    def batch_total(self, store: str) -> int:
        return sum(num for _, num in self.of("batch", store))

    def last_batch_end(self, store: str) -> int:
        return int(self.of("batch", store)[-1][0])


class Hooked(Recorder):
    """A recorder that runs ``hook`` once, on the first restore start."""

    def __init__(self, hook: Callable[[], None]) -> None:
        super().__init__()
        self._hook: Callable[[], None] | None = hook

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        super().on_restore_start(tp, store_name, start_offset, end_offset)
        hook, self._hook = self._hook, None
        if hook is not None:
            hook()


class Proxy:
    """Delegates to a real consumer; ``overrides`` replace single methods."""

    def __init__(self, consumer: Any, **overrides: Callable[..., Any]) -> None:
        self._consumer = consumer
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._consumer, name)


def restore_consumer(kafka: KafkaTestCluster, *, eos: bool = False, **overrides: Any) -> Any:
    """A restore consumer as the reader wants it, on the test's read path (``restore_fetch``
    in conftest: the Rust fetcher or a confluent-kafka consumer), closed when the test ends."""
    config = restore_consumer_config(kafka.bootstrap_servers, eos=eos, **overrides)
    return kafka.adopt(open_restore_consumer(config))


def kv(i: int, prefix: str = "k", value: str = "v") -> tuple[bytes, bytes]:
    return (f"{prefix}{i:04d}".encode(), f"{value}{i}".encode())


def produce(kafka: KafkaTestCluster, topic: str, records: Iterable[tuple[Any, Any]]) -> None:
    kafka.produce(topic, list(records), partition=0)


def contents(store: Any) -> dict[bytes, bytes]:
    return dict(store.all())


def restore_until(
    reader: StoreChangelogReader, expected: Iterable[TopicPartition], timeout: float = 30.0
) -> set[TopicPartition]:
    """Calls ``restore()`` until every expected partition is complete; returns the last answer."""
    want = set(expected)
    deadline = time.monotonic() + timeout
    while True:
        done = reader.restore()
        if want <= done:
            return done
        if time.monotonic() > deadline:
            pytest.fail(f"restoration of {want - done} did not complete in {timeout} s")


def wait_end(kafka: KafkaTestCluster, topic: str, expected: int, timeout: float = 30.0) -> None:
    """Waits until the partition's end offset (as a read-committed client sees it) is
    ``expected``: transaction markers are written after ``commit_transaction`` returns."""
    deadline = time.monotonic() + timeout
    while (end := kafka.end_offsets(topic)[0]) != expected:
        if time.monotonic() > deadline:
            pytest.fail(f"end offset of {topic} stayed {end}, expected {expected}")
        time.sleep(0.05)


def txn_producer(kafka: KafkaTestCluster) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "transactional.id": f"test-txn-{uuid.uuid4().hex[:12]}",
            "logger": logging.getLogger("test.txn"),
        }
    )
    producer.init_transactions(30)
    return producer


def transaction(
    producer: Producer, topic: str, records: Iterable[tuple[Any, Any]], *, commit: bool = True
) -> None:
    """Produces ``records`` to partition 0 in one transaction, committed or aborted."""
    producer.begin_transaction()
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        # Aborted records must reach the log first, to leave holes in it.
        assert producer.flush(30) == 0
        producer.abort_transaction(30)


@pytest.fixture
def topic(kafka: KafkaTestCluster) -> str:
    return kafka.create_topic()


@pytest.fixture
def tp(topic: str) -> TopicPartition:
    return TopicPartition(topic, 0)


# ------------------------------------------------------------------------------------------------
# Kafka's StoreChangelogReaderTest scenarios
# ------------------------------------------------------------------------------------------------


def test_restores_everything_from_the_beginning_without_checkpoint(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    consumer = restore_consumer(kafka)
    reader = StoreChangelogReader(consumer, restore_listener=listener)
    reader.register(StateRestorer(tp, store))

    assert restore_until(reader, [tp]) == {tp}

    assert contents(store) == dict(kv(i) for i in range(100))
    assert listener.of("start", "s") == [(0, 100)]
    assert listener.batch_total("s") == 100
    assert listener.last_batch_end("s") == 99
    assert listener.of("end", "s") == [(100,)]
    # Kafka pauses a completed changelog instead of unassigning it.
    assert tp in consumer.assignment()


def test_restores_from_the_checkpoint(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=49))

    restore_until(reader, [tp])

    # The checkpoint is the last record applied: restoration resumes one past it.
    assert contents(store) == dict(kv(i) for i in range(50, 100))
    assert listener.of("start", "s") == [(50, 100)]
    assert listener.of("end", "s") == [(50,)]


def test_nothing_to_restore_when_the_checkpoint_is_at_the_end(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    store = PersistentKeyValueStore("s", tmp_path / "s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=9))

    assert reader.restore() == {tp}

    assert contents(store) == {}
    # Kafka 2.6+ announces every changelog: start at the end, then end with 0 records.
    assert listener.events == [("start", tp.topic, 0, "s", 10, 10), ("end", tp.topic, 0, "s", 0)]
    assert reader.restored_offsets() == {tp: 9}
    store.close()


def test_a_checkpoint_beyond_the_end_wipes_the_store_and_restores_it_from_the_beginning(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The changelog was deleted and re-created with fewer records than the store had restored:
    # the position after the checkpoint is out of range, and what the store holds is stale.
    produce(kafka, topic, (kv(i) for i in range(10)))
    store = InMemoryKeyValueStore("s")
    store.put(b"stale", b"from the old changelog")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=500))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        restore_until(reader, [tp])

    assert contents(store) == dict(kv(i) for i in range(10))
    assert listener.events[0] == ("start", topic, 0, "s", 0, 10)
    assert listener.events[-1] == ("end", topic, 0, "s", 10)
    assert any(
        "beyond the end offset 10" in r.getMessage() and topic in r.getMessage()
        for r in caplog.records
    )


def test_an_empty_partition_completes_immediately(
    kafka: KafkaTestCluster, tp: TopicPartition
) -> None:
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))

    assert reader.restore() == {tp}
    assert listener.events == [("start", tp.topic, 0, "s", 0, 0), ("end", tp.topic, 0, "s", 0)]


def test_restores_and_notifies_multiple_stores(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    sizes = {"a": 100, "b": 50, "c": 30}
    topics = {name: kafka.create_topic() for name in sizes}
    for name, size in sizes.items():
        produce(kafka, topics[name], (kv(i, prefix=name) for i in range(size)))
    stores = {
        "a": InMemoryKeyValueStore("a"),
        "b": PersistentKeyValueStore("b", tmp_path / "b"),
        "c": InMemoryKeyValueStore("c"),
    }
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    tps = [TopicPartition(topics[name], 0) for name in sizes]
    for tp, name in zip(tps, sizes, strict=True):
        reader.register(StateRestorer(tp, stores[name]))

    assert restore_until(reader, tps) == set(tps)

    for tp, (name, size) in zip(tps, sizes.items(), strict=True):
        assert contents(stores[name]) == dict(kv(i, prefix=name) for i in range(size))
        starts = [e for e in listener.events if e[0] == "start" and e[3] == name]
        assert starts == [("start", tp.topic, 0, name, 0, size)]
        assert listener.last_batch_end(name) == size - 1
        assert listener.batch_total(name) == size
        assert listener.of("end", name) == [(size,)]
    stores["b"].close()


def test_null_keys_are_skipped(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(kafka, topic, [(b"k", b"v1"), (None, b"orphan"), (b"k2", b"v2")])
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        restore_until(reader, [tp])

    assert contents(store) == {b"k": b"v1", b"k2": b"v2"}
    assert listener.of("end", "s") == [(2,)]
    assert listener.last_batch_end("s") == 2
    assert any("null key" in r.getMessage().lower() for r in caplog.records)


def test_tombstones_delete_keys(kafka: KafkaTestCluster, topic: str, tp: TopicPartition) -> None:
    produce(kafka, topic, [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3"), (b"b", b"4")])
    store = InMemoryKeyValueStore("s")
    reader = StoreChangelogReader(restore_consumer(kafka))
    reader.register(StateRestorer(tp, store))

    restore_until(reader, [tp])

    assert contents(store) == {b"b": b"4", b"c": b"3"}


def test_restored_offsets_only_for_persistent_stores(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    persistent_topic, memory_topic, untouched_topic = (kafka.create_topic() for _ in range(3))
    for t in (persistent_topic, memory_topic, untouched_topic):
        produce(kafka, t, (kv(i) for i in range(10)))
    persistent = PersistentKeyValueStore("p", tmp_path / "p")
    untouched = PersistentKeyValueStore("u", tmp_path / "u")
    reader = StoreChangelogReader(restore_consumer(kafka))
    reader.register(StateRestorer(TopicPartition(persistent_topic, 0), persistent))
    reader.register(StateRestorer(TopicPartition(memory_topic, 0), InMemoryKeyValueStore("m")))
    reader.register(StateRestorer(TopicPartition(untouched_topic, 0), untouched, checkpoint=9))

    restore_until(
        reader,
        [TopicPartition(t, 0) for t in (persistent_topic, memory_topic, untouched_topic)],
    )

    # The offset of the last record applied (what a .checkpoint file holds), or the checkpoint
    # itself when nothing new was restored; never an in-memory store.
    assert reader.restored_offsets() == {
        TopicPartition(persistent_topic, 0): 9,
        TopicPartition(untouched_topic, 0): 9,
    }
    persistent.close()
    untouched.close()


def test_restores_partitions_registered_after_initialization(
    kafka: KafkaTestCluster,
) -> None:
    first, second = kafka.create_topic(), kafka.create_topic()
    produce(kafka, first, (kv(i) for i in range(100)))
    produce(kafka, second, (kv(i) for i in range(30)))
    tp1, tp2 = TopicPartition(first, 0), TopicPartition(second, 0)
    store1, store2 = InMemoryKeyValueStore("one"), InMemoryKeyValueStore("two")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp1, store1))
    reader.restore()  # initializes the first partition (and maybe completes it)

    reader.register(StateRestorer(tp2, store2))
    assert restore_until(reader, [tp1, tp2]) == {tp1, tp2}

    assert listener.of("end", "one") == [(100,)]
    assert listener.of("end", "two") == [(30,)]
    assert len(contents(store1)) == 100
    assert len(contents(store2)) == 30


def test_registering_again_reinitializes_and_keeps_the_first_restorer(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(20)))
    first = InMemoryKeyValueStore("first")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, first))
    restore_until(reader, [tp])

    reader.register(StateRestorer(tp, InMemoryKeyValueStore("second"), checkpoint=5))
    assert tp not in reader.completed()
    restore_until(reader, [tp])

    # The first restorer (store and checkpoint None) was kept and restored again from offset 0.
    assert listener.of("start", "first") == [(0, 20), (0, 20)]
    assert listener.of("end", "first") == [(20,), (20,)]
    assert listener.of("start", "second") == []
    assert len(contents(first)) == 20


def test_remove_and_clear(kafka: KafkaTestCluster) -> None:
    first, second = kafka.create_topic(), kafka.create_topic()
    produce(kafka, first, (kv(i) for i in range(50)))
    produce(kafka, second, (kv(i) for i in range(50)))
    tp1, tp2 = TopicPartition(first, 0), TopicPartition(second, 0)
    consumer = restore_consumer(kafka)
    listener = Recorder()
    reader = StoreChangelogReader(consumer, restore_listener=listener)
    reader.register(StateRestorer(tp1, InMemoryKeyValueStore("one")))
    reader.register(StateRestorer(tp2, InMemoryKeyValueStore("two")))
    restore_until(reader, [tp1, tp2])
    assert set(consumer.assignment()) == {tp1, tp2}

    reader.remove([tp1, TopicPartition("never-registered", 3)])
    assert set(consumer.assignment()) == {tp2}
    assert reader.restore() == {tp2}
    assert reader.restored_offsets() == {}

    reader.clear()
    assert consumer.assignment() == []
    assert reader.is_empty()
    assert reader.restore() == set()


def test_removing_a_restoring_partition_suspends_it(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(50)))
    consumer = restore_consumer(kafka)
    listener = Hooked(lambda: consumer.pause([tp]))  # keeps it restoring
    reader = StoreChangelogReader(consumer, restore_listener=listener)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))
    assert reader.restore() == set()

    reader.remove([tp])

    assert listener.of("suspended", "s") == [(0,)]
    assert listener.of("end", "s") == []
    assert consumer.assignment() == []
    assert reader.is_empty()


# ------------------------------------------------------------------------------------------------
# Real changelogs: transactions, gaps, truncation, moving ends, stalls
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eos", [False, True], ids=["read_uncommitted", "read_committed"])
def test_a_commit_marker_at_the_end_does_not_leave_it_waiting(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, eos: bool
) -> None:
    transaction(txn_producer(kafka), topic, (kv(i) for i in range(50)))
    wait_end(kafka, topic, 51)  # 50 records at 0..49, the commit marker at 50
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(
        restore_consumer(kafka, eos=eos), restore_listener=listener, eos=eos
    )
    reader.register(StateRestorer(tp, store))

    restore_until(reader, [tp], timeout=15)

    assert contents(store) == dict(kv(i) for i in range(50))
    assert listener.of("start", "s") == [(0, 51)]
    assert listener.of("end", "s") == [(50,)]
    assert listener.last_batch_end("s") == 49


def test_a_checkpoint_just_before_the_commit_marker(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    transaction(txn_producer(kafka), topic, (kv(i) for i in range(50)))
    wait_end(kafka, topic, 51)
    listener = Recorder()
    reader = StoreChangelogReader(
        restore_consumer(kafka, eos=True), restore_listener=listener, eos=True
    )
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s"), checkpoint=49))

    # Only the marker is left: nothing is applied, yet the position passes it and completes.
    restore_until(reader, [tp], timeout=15)

    assert listener.of("start", "s") == [(50, 51)]
    assert listener.of("batch", "s") == []
    assert listener.of("end", "s") == [(0,)]


def test_aborted_transactions_are_not_restored_under_eos(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    producer = txn_producer(kafka)
    transaction(producer, topic, (kv(i, value="committed") for i in range(20)))  # 0..19, 20
    transaction(producer, topic, (kv(i, value="aborted") for i in range(30)), commit=False)
    transaction(producer, topic, (kv(i, prefix="x") for i in range(10)))  # 52..61, 62
    wait_end(kafka, topic, 63)
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(
        restore_consumer(kafka, eos=True), restore_listener=listener, eos=True
    )
    reader.register(StateRestorer(tp, store))

    restore_until(reader, [tp], timeout=15)

    expected = dict(kv(i, value="committed") for i in range(20))
    expected.update(kv(i, prefix="x") for i in range(10))
    assert contents(store) == expected
    assert listener.of("end", "s") == [(30,)]
    assert listener.last_batch_end("s") == 61


def test_a_checkpoint_inside_an_offset_hole(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    # Emulates a compaction gap: offsets 10..40 (an aborted transaction and its marker) are
    # never delivered to a read-committed consumer, and the checkpoint points into them.
    producer = txn_producer(kafka)
    transaction(producer, topic, (kv(i) for i in range(9)))  # 0..8, marker 9
    transaction(producer, topic, (kv(i, value="aborted") for i in range(30)), commit=False)
    transaction(producer, topic, (kv(i, prefix="x") for i in range(5)))  # 41..45, marker 46
    wait_end(kafka, topic, 47)
    store = PersistentKeyValueStore("s", tmp_path / "s")
    listener = Recorder()
    reader = StoreChangelogReader(
        restore_consumer(kafka, eos=True), restore_listener=listener, eos=True
    )
    reader.register(StateRestorer(tp, store, checkpoint=20))

    restore_until(reader, [tp], timeout=15)

    assert contents(store) == dict(kv(i, prefix="x") for i in range(5))
    assert listener.of("start", "s") == [(21, 47)]
    assert listener.of("end", "s") == [(5,)]
    assert reader.restored_offsets() == {tp: 45}
    store.close()


def test_records_deleted_below_the_checkpoint_wipe_and_restore_from_the_log_start(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    store = PersistentKeyValueStore("s", tmp_path / "s")
    # What an earlier restore up to offset 19 left, plus a key the lost records had written.
    store.put_all([*(kv(i) for i in range(20)), (b"stale", b"x")])
    assert kafka.delete_records(topic, 0, 50) == 50
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=19))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        restore_until(reader, [tp])

    assert contents(store) == dict(kv(i) for i in range(50, 100))
    assert listener.of("start", "s") == [(50, 100)]
    assert listener.of("end", "s") == [(50,)]
    assert reader.restored_offsets() == {tp: 99}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(topic in w and "partition 0" in w and "Wiping" in w for w in warnings), warnings
    store.close()


def test_records_deleted_while_restoring_are_reported_and_recovered(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The log start moves right after the reader read it, before it assigns the partition: the
    # checkpoint looked valid, and librdkafka reports the out-of-range position
    # (auto.offset.reset=error) as a consume() error event.
    produce(kafka, topic, (kv(i) for i in range(100)))
    store = InMemoryKeyValueStore("s")
    store.put_all([*(kv(i) for i in range(20)), (b"stale", b"x")])
    consumer = restore_consumer(kafka)
    calls = []

    def watermarks(partition: TopicPartition, **kwargs: Any) -> tuple[int, int]:
        answer = consumer.get_watermark_offsets(partition, **kwargs)
        if not calls:
            calls.append(answer)
            assert kafka.delete_records(topic, 0, 60) == 60
        return answer

    listener = Recorder()
    reader = StoreChangelogReader(
        Proxy(consumer, get_watermark_offsets=watermarks), restore_listener=listener
    )
    reader.register(StateRestorer(tp, store, checkpoint=19))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        restore_until(reader, [tp])

    assert contents(store) == dict(kv(i) for i in range(60, 100))
    # Started at the checkpoint, then again from the new log start after the wipe.
    assert listener.of("start", "s") == [(20, 100), (60, 100)]
    assert listener.of("end", "s") == [(40,)]
    assert calls == [(0, 100)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(topic in w and "offset 20 is out of range" in w for w in warnings), warnings


def test_an_empty_log_whose_end_offset_is_not_zero(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(20)))
    assert kafka.delete_records(topic, 0, -1) == 20  # log start = end = 20, no records
    with_checkpoint_topic = kafka.create_topic()
    produce(kafka, with_checkpoint_topic, (kv(i) for i in range(20)))
    kafka.delete_records(with_checkpoint_topic, 0, -1)
    tp2 = TopicPartition(with_checkpoint_topic, 0)
    stale = InMemoryKeyValueStore("stale")
    stale.put(b"old", b"x")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))
    reader.register(StateRestorer(tp2, stale, checkpoint=5))

    # No record will ever arrive and the consumer position stays unknown: the reader's own
    # position (the log start) is already at the end.
    assert reader.restore() == {tp, tp2}

    assert listener.of("start", "s") == [(20, 20)]
    assert listener.of("end", "s") == [(0,)]
    assert listener.of("start", "stale") == [(20, 20)]
    assert contents(stale) == {}  # checkpoint 5 < log start 20: wiped


def test_a_consumer_position_reported_invalid(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    # librdkafka reports OFFSET_INVALID (-1001) until a record is consumed; a consumer that
    # never reports a position still completes, on the records applied and on the
    # end-of-partition event that follows the commit marker.
    transaction(txn_producer(kafka), topic, (kv(i) for i in range(30)))
    wait_end(kafka, topic, 31)
    consumer = restore_consumer(kafka, eos=True)

    def invalid_positions(partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, OFFSET_INVALID) for p in partitions]

    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(
        Proxy(consumer, position=invalid_positions), restore_listener=listener, eos=True
    )
    reader.register(StateRestorer(tp, store))

    restore_until(reader, [tp], timeout=15)

    assert len(contents(store)) == 30
    assert listener.of("end", "s") == [(30,)]


def test_a_consumer_position_reported_out_of_range(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(kafka, topic, (kv(i) for i in range(40)))
    consumer = restore_consumer(kafka)
    reported = []

    def position(partitions: list[TopicPartition]) -> list[Any]:
        if not reported:
            reported.append(True)
            error = KafkaError(KafkaError._AUTO_OFFSET_RESET, "test: offset out of range")
            return [
                SimpleNamespace(topic=p.topic, partition=p.partition, offset=-1001, error=error)
                for p in partitions
            ]
        return consumer.position(partitions)

    store = InMemoryKeyValueStore("s")
    store.put(b"stale", b"x")
    listener = Recorder()
    reader = StoreChangelogReader(Proxy(consumer, position=position), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=9))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        restore_until(reader, [tp])

    assert contents(store) == dict(kv(i) for i in range(40))
    assert listener.of("start", "s") == [(10, 40), (0, 40)]
    assert listener.of("end", "s") == [(40,)]
    assert any("out of range" in r.getMessage() for r in caplog.records)


def test_the_end_offset_is_taken_once_at_the_start(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(300)))
    # More records arrive after the reader read the end offset and before it fetched anything.
    listener = Hooked(lambda: produce(kafka, topic, (kv(i, prefix="late") for i in range(200))))
    store = InMemoryKeyValueStore("s")
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store))

    restore_until(reader, [tp])

    assert kafka.end_offsets(topic)[0] == 500
    assert contents(store) == dict(kv(i) for i in range(300))
    assert listener.of("start", "s") == [(0, 300)]
    assert listener.of("end", "s") == [(300,)]
    assert listener.last_batch_end("s") == 299


def test_eos_without_checkpoint_wipes_the_store_first(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    at_least_once = InMemoryKeyValueStore("alo")
    at_least_once.put(b"local-only", b"x")
    exactly_once = PersistentKeyValueStore("eos", tmp_path / "eos")
    exactly_once.put(b"local-only", b"x")

    for store, eos in ((at_least_once, False), (exactly_once, True)):
        reader = StoreChangelogReader(restore_consumer(kafka, eos=eos), eos=eos)
        reader.register(StateRestorer(tp, store))
        restore_until(reader, [tp])

    assert contents(at_least_once) == {b"local-only": b"x", **dict(kv(i) for i in range(10))}
    assert contents(exactly_once) == dict(kv(i) for i in range(10))
    exactly_once.close()


def test_no_progress_raises_after_the_stall_timeout(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    consumer = restore_consumer(kafka)
    # The partition is paused behind the reader's back: nothing will ever arrive.
    listener = Hooked(lambda: consumer.pause([tp]))
    reader = StoreChangelogReader(
        consumer, restore_listener=listener, stall_timeout_s=1.0, poll_ms=50
    )
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s"), checkpoint=9))

    started = time.monotonic()
    with pytest.raises(ProcessorStateError) as raised:
        restore_until(reader, [tp], timeout=20)

    assert 1.0 <= time.monotonic() - started < 10
    message = str(raised.value)
    assert "no progress" in message
    assert "position 10" in message and "end offset 100" in message
    assert f"topic {topic!r}" in message and "partition 0" in message
    assert raised.value.topic == topic and raised.value.partition == 0
    assert raised.value.store_name == "s"


def test_a_missing_changelog_partition_raises_after_the_stall_timeout(
    kafka: KafkaTestCluster, topic: str
) -> None:
    missing = TopicPartition(topic, 7)  # the topic has one partition
    reader = StoreChangelogReader(restore_consumer(kafka), stall_timeout_s=0.5, poll_ms=50)
    reader.register(StateRestorer(missing, InMemoryKeyValueStore("s")))

    with pytest.raises(ProcessorStateError) as raised:
        restore_until(reader, [missing], timeout=20)

    message = str(raised.value)
    assert "end offset could not be read" in message and "Unknown partition" in message
    assert raised.value.topic == topic and raised.value.partition == 7


def test_progress_is_logged_periodically(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    consumer = restore_consumer(kafka)
    listener = Hooked(lambda: consumer.pause([tp]))
    reader = StoreChangelogReader(
        consumer, restore_listener=listener, progress_interval_s=0.1, poll_ms=50
    )
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))

    def progress() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "Restoration in progress" in r.getMessage()]

    # Calls until two lines are logged, not for a fixed time: on a loaded machine the first
    # call (the end offsets) alone can outlast any short window.
    calls = 0
    with caplog.at_level(logging.INFO, logger=LOGGER):
        deadline = time.monotonic() + 30
        while len(progress()) < 2 and time.monotonic() < deadline:
            assert reader.restore() == set()
            calls += 1

    lines = progress()
    assert len(lines) >= 2, f"{len(lines)} progress lines in {calls} calls over 30 s"
    # Periodic, not on every call (a call polls for 50 ms): logging's clock, not monotonic.
    assert lines[1].created - lines[0].created >= 0.1 - 0.01
    assert lines[0].getMessage() == (
        f"Restoration in progress for 1 partitions. {{{topic}-0: position=0, end=100, restored=0}}"
    )


def test_listener_errors_are_wrapped(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))

    class Failing(StateRestoreListener):
        def on_restore_start(self, *args: Any) -> None:
            raise RuntimeError("boom")

    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=Failing())
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))

    with pytest.raises(StreamsError) as raised:
        reader.restore()

    assert "state restore listener failed on restore start" in str(raised.value)
    assert "RuntimeError: boom" in str(raised.value)
    assert raised.value.store_name == "s" and raised.value.topic == topic
    assert raised.value.partition == 0
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_a_subscribed_consumer_is_rejected(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(5)))
    consumer = kafka.consumer()
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the consumer never joined its group"
    reader = StoreChangelogReader(consumer)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))

    with pytest.raises(ProcessorStateError, match="should not be subscribed"):
        reader.restore()
