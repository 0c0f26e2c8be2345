"""The Rust read path itself: ``streamstate._core.ChangelogFetcher`` on the real broker.

Its librdkafka is a copy linked into the extension, beside confluent-kafka's own in the same
process; the first tests show that both work at once and that the extension exports none of
librdkafka's symbols (which could otherwise bind confluent-kafka's calls to the wrong copy, or the
reverse). The others cover the fallback to confluent-kafka, parallel partitions, and the
consumer-shaped calls the restore reader makes.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, cast

import confluent_kafka
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaException

from streamstate import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    ProcessorStateError,
    StateRestoreListener,
    StateRestorer,
    StoreChangelogReader,
    _core,
)
from streamstate._core import ChangelogFetcher
from streamstate.clients.config import restore_consumer_config
from streamstate.clients.restore_consumer import open_restore_consumer
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.topic_restore import restore_topic, store_directory

LOGGER = "streamstate.changelog"


def _records(n: int, seed: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b"k%05d" % (i % 1000), b"v%d-%d" % (seed, i)) for i in range(n)]


def _contents(state_dir: Path, name: str, partition: int) -> dict[bytes, bytes]:
    with PersistentKeyValueStore(name, store_directory(state_dir, name, partition)) as store:
        return dict(store.all())


def test_the_extension_exports_none_of_librdkafkas_symbols() -> None:
    # Only the module's init function may be visible to the dynamic linker: a visible rd_kafka_*
    # (or lz4/zstd/tinycthread) symbol could interpose on confluent-kafka's librdkafka.
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", _core.__file__], check=True, capture_output=True, text=True
    )
    exported = [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]
    assert "PyInit__core" in exported
    suspicious = [
        name
        for name in exported
        if name.startswith(("rd_", "LZ4", "ZSTD", "XXH", "cnd_", "mtx_", "thrd_", "tss_"))
    ]
    assert suspicious == []
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", _core.__file__],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # Nor does it expect librdkafka from elsewhere: its own copy is linked in, and its calls to
    # it are bound inside the extension (no dynamic relocation the loader could redirect).
    assert " rd_kafka_" not in undefined
    relocations = subprocess.run(
        ["readelf", "-rW", _core.__file__], check=True, capture_output=True, text=True
    ).stdout
    assert "rd_kafka_" not in relocations


def test_runs_beside_a_confluent_consumer_in_one_process(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """A confluent-kafka consumer and the Rust fetcher read at the same time, each with its own
    librdkafka, and both get every record."""
    ours, theirs = ChangelogFetcher.librdkafka_version(), confluent_kafka.libversion()[0]
    assert ours and theirs  # e.g. 2.12.1 and 2.16.0: two copies, one process
    a = kafka.create_topic(partitions=1)
    b = kafka.create_topic(partitions=2)
    kafka.produce(a, _records(20_000, seed=1), partition=0)
    for p in range(2):
        kafka.produce(b, _records(20_000, seed=2 + p), partition=p)

    read: list[int] = []
    failures: list[BaseException] = []

    def confluent_reader() -> None:
        try:
            consumer = kafka.consumer()
            consumer.assign([confluent_kafka.TopicPartition(a, 0, OFFSET_BEGINNING)])
            n = 0
            while n < 20_000:
                n += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
            read.append(n)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=confluent_reader)
    thread.start()
    results = restore_topic(kafka.bootstrap_servers, b, tmp_path, fetch="rust", parallelism=2)
    thread.join(timeout=120)
    assert not failures
    assert read == [20_000]
    assert [r.restored for r in results] == [20_000, 20_000]
    for p in range(2):
        assert _contents(tmp_path, b, p) == dict(_records(20_000, seed=2 + p))


def test_a_python_callback_falls_back_to_confluent_kafka_with_a_warning(
    kafka: KafkaTestCluster, tmp_path: Path, caplog: Any
) -> None:
    topic = kafka.create_topic(partitions=1)
    records = _records(100)
    kafka.produce(topic, records, partition=0)
    errors: list[Any] = []
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = restore_topic(
            kafka.bootstrap_servers,
            topic,
            tmp_path,
            fetch="rust",
            consumer_config={"error_cb": errors.append},
        )
    assert [r.restored for r in results] == [100]
    assert _contents(tmp_path, topic, 0) == dict(records)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'error_cb'" in m and "confluent-kafka" in m for m in messages), messages


@pytest.mark.parametrize(
    ("setting", "value"),
    [("no.such.property", "1"), ("fetch.max.bytes", "lots"), ("sasl.mechanisms", "GSSAPI")],
)
def test_settings_librdkafka_refuses_are_named(
    kafka: KafkaTestCluster, setting: str, value: str
) -> None:
    config = restore_consumer_config(kafka.bootstrap_servers, **{setting: value})
    if setting == "sasl.mechanisms":
        config["security.protocol"] = "SASL_PLAINTEXT"
    rejected = ChangelogFetcher.rejected_setting(config)
    assert rejected is not None
    assert rejected[0] == setting, rejected
    with pytest.raises(ValueError, match=setting.replace(".", r"\.")):
        ChangelogFetcher(config)


def test_open_restore_consumer_chooses_the_path(kafka: KafkaTestCluster) -> None:
    config = restore_consumer_config(kafka.bootstrap_servers)
    rust = open_restore_consumer(config, fetch="rust", parallelism=3)
    assert isinstance(rust, ChangelogFetcher)
    assert rust.parallelism == 3
    rust.close()
    confluent = open_restore_consumer(config, fetch="confluent")
    assert isinstance(confluent, confluent_kafka.Consumer)
    confluent.close()
    with pytest.raises(ValueError, match="fetch must be one of"):
        open_restore_consumer(config, fetch="java")
    with pytest.raises(ValueError, match="parallelism"):
        ChangelogFetcher(config, 0)


def test_consumer_shaped_calls(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(partitions=2)
    kafka.produce(topic, _records(10), partition=1)
    fetcher = ChangelogFetcher(restore_consumer_config(kafka.bootstrap_servers))
    tp = TopicPartition(topic, 1)
    assert fetcher.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 10)
    assert fetcher.memberid() is None
    fetcher.incremental_assign([TopicPartition(topic, 1, OFFSET_BEGINNING)])
    fetcher.incremental_assign([TopicPartition(topic, 0, 0)])
    assert fetcher.assignment() == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    store = InMemoryKeyValueStore("s")
    done = fetcher.restore([(topic, 1, store, 10, 0)], 10.0)
    assert len(done) == 1
    r = done[0]
    assert (r.topic, r.partition, r.num_restored, r.last_restored_offset) == (topic, 1, 10, 9)
    assert r.position == 10 and r.invalid_offset is None and r.error is None
    assert dict(store.all()) == dict(_records(10))
    [position] = fetcher.position([tp])
    assert position.offset == 10
    fetcher.pause([tp])
    fetcher.resume([tp])
    fetcher.incremental_unassign([tp])
    assert fetcher.assignment() == [TopicPartition(topic, 0)]
    with pytest.raises(KafkaException) as caught:
        fetcher.get_watermark_offsets(TopicPartition("no-such-topic-here", 0), timeout=2)
    assert caught.value.args[0].code() in (
        confluent_kafka.KafkaError._UNKNOWN_PARTITION,
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
        confluent_kafka.KafkaError._UNKNOWN_TOPIC,
        confluent_kafka.KafkaError._TIMED_OUT,
    )
    fetcher.close()
    fetcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        fetcher.assignment()


def test_a_store_that_fails_raises_naming_topic_partition_and_store(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=1)
    kafka.produce(topic, _records(10), partition=0)
    fetcher = ChangelogFetcher(restore_consumer_config(kafka.bootstrap_servers))
    fetcher.incremental_assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    store = InMemoryKeyValueStore("closed-store")
    store.close()

    with pytest.raises(ProcessorStateError) as caught:
        for _ in range(100):
            fetcher.restore([(topic, 0, store, 10, 0)], 0.2)
    assert (caught.value.topic, caught.value.partition) == (topic, 0)
    assert caught.value.store_name == "closed-store"
    fetcher.close()


# The reader tests run on both read paths (conftest); three of them observe the confluent-kafka
# poll itself (they wrap ``consume``), which the Rust path never calls. These are their Rust
# counterparts: they wrap ``ChangelogFetcher.restore`` instead.


class _Watched:
    """Delegates to a fetcher; records each ``restore`` call's targets and timeout, and caps the
    records one call may take at ``max_records``."""

    def __init__(self, fetcher: ChangelogFetcher, max_records: int = 1_000_000) -> None:
        self._fetcher = fetcher
        self._max_records = max_records
        self.calls: list[tuple[list[tuple[str, int]], float]] = []

    def restore(self, targets: list[Any], timeout: float, max_records: int) -> list[Any]:
        self.calls.append(([(t[0], t[1]) for t in targets], timeout))
        return self._fetcher.restore(targets, timeout, min(max_records, self._max_records))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fetcher, name)


def _fetcher(kafka: KafkaTestCluster) -> ChangelogFetcher:
    return kafka.adopt(ChangelogFetcher(restore_consumer_config(kafka.bootstrap_servers), 2))


def _restore_until(reader: StoreChangelogReader, want: set[TopicPartition]) -> None:
    deadline = time.monotonic() + 30
    while not want <= reader.restore():
        assert time.monotonic() < deadline, f"{want - reader.completed()} did not complete"


def test_fetches_with_poll_ms_as_the_timeout_and_only_while_restoring(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic()
    kafka.produce(topic, _records(20), partition=0)
    watched = _Watched(_fetcher(kafka))
    reader = StoreChangelogReader(cast(ChangelogFetcher, watched), poll_ms=37)
    assert reader.restore() == set()
    assert watched.calls == []  # nothing registered: no fetch
    tp = TopicPartition(topic, 0)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))
    _restore_until(reader, {tp})
    assert watched.calls and all(t == pytest.approx(0.037) for _, t in watched.calls)
    calls = len(watched.calls)
    for _ in range(3):
        assert reader.restore() == {tp}
    assert len(watched.calls) == calls  # every changelog completed: no fetch


def test_restored_offsets_follow_each_call_of_a_partial_restore(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    topic = kafka.create_topic()
    kafka.produce(topic, _records(100), partition=0)
    tp = TopicPartition(topic, 0)
    watched = _Watched(_fetcher(kafka), max_records=10)
    batches: list[tuple[int, int]] = []

    class Batches(StateRestoreListener):
        def on_batch_restored(
            self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
        ) -> None:
            batches.append((batch_end_offset, num_restored))

    store = PersistentKeyValueStore("s", tmp_path / "s")
    reader = StoreChangelogReader(
        cast(ChangelogFetcher, watched), restore_listener=Batches(), poll_ms=50
    )
    reader.register(StateRestorer(tp, store, checkpoint=19))
    partial = []
    while tp not in reader.restore():
        last = batches[-1][0] if batches else 19
        assert reader.restored_offsets() == {tp: last}
        position = reader.position(tp)
        assert position is not None and position >= last + 1
        if batches:
            partial.append(last)
    assert partial and all(19 < offset < 99 for offset in partial)
    previous = 19
    for batch_end, num in batches:
        assert num == batch_end - previous and 1 <= num <= 10
        previous = batch_end
    assert previous == 99
    assert reader.restored_offsets() == {tp: 99}
    assert dict(store.all()) == dict(_records(100)[20:])
    store.close()


def test_a_completed_partition_is_not_read_while_others_restore(kafka: KafkaTestCluster) -> None:
    small_topic, big_topic = kafka.create_topic(), kafka.create_topic()
    kafka.produce(small_topic, _records(10), partition=0)
    kafka.produce(big_topic, _records(50), partition=0)
    small, big = TopicPartition(small_topic, 0), TopicPartition(big_topic, 0)
    small_store, big_store = InMemoryKeyValueStore("small"), InMemoryKeyValueStore("big")
    watched = _Watched(_fetcher(kafka))

    class PauseBig(StateRestoreListener):
        """ "big" waits until the test resumes it."""

        def on_restore_start(
            self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
        ) -> None:
            if store_name == "big":
                watched.pause([tp])

    reader = StoreChangelogReader(
        cast(ChangelogFetcher, watched), restore_listener=PauseBig(), poll_ms=50
    )
    reader.register(StateRestorer(small, small_store))
    reader.register(StateRestorer(big, big_store))
    _restore_until(reader, {small})
    kafka.produce(small_topic, [(b"late", b"x")] * 5, partition=0)
    keep_polling = time.monotonic() + 1.0
    calls = len(watched.calls)
    while time.monotonic() < keep_polling:
        assert reader.restore() == {small}
    # Once complete, the small changelog is no target of any fetch, and nothing late reaches it.
    assert all((small_topic, 0) not in targets for targets, _ in watched.calls[calls:])
    watched.resume([big])
    _restore_until(reader, {small, big})
    assert dict(small_store.all()) == dict(_records(10))
    assert dict(big_store.all()) == dict(_records(50))
