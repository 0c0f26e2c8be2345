"""More of Kafka Streams' ``StoreChangelogReaderTest``, against the real broker.

``tests/integration/test_changelog_reader.py`` ports the core scenarios; this module ports the
rest that have an analogue here, re-expressed in this API (a :class:`StateRestorer` per store, a
checkpoint being the offset of the *last record applied*, the end offset read once when a
partition is initialized). Each Kafka test method and where it stands:

Kafka 2.4 / 2.5 (``register(StateRestorer)`` / ``restore`` / ``restoredOffsets``):

* shouldRequestTopicsAndHandleTimeoutException: ported as
  ``test_a_retriable_end_offset_error_is_retried_on_the_next_restore``.
* shouldThrowExceptionIfConsumerHasCurrentSubscription: covered by
  ``test_a_subscribed_consumer_is_rejected``.
* shouldRestoreAllMessagesFromBeginningWhenCheckpointNull: covered by
  ``test_restores_everything_from_the_beginning_without_checkpoint``.
* shouldRecoverFromInvalidOffsetExceptionAndFinishRestore: covered by
  ``test_records_deleted_while_restoring_are_reported_and_recovered`` and
  ``test_a_consumer_position_reported_out_of_range`` (here the reader recovers by itself).
* shouldRecoverFromOffsetOutOfRangeExceptionAndRestoreFromStart: ported as
  ``test_a_truncated_checkpoint_is_dropped_and_registering_again_restores_from_the_log_start``
  (its boundary: ``test_a_checkpoint_just_below_the_log_start_is_not_truncated``).
* shouldRestoreMessagesFromCheckpoint: covered by ``test_restores_from_the_checkpoint``.
* shouldClearAssignmentAtEndOfRestore: 2.6+ pauses instead of unassigning (checked by
  ``test_restores_everything_from_the_beginning_without_checkpoint``); the observable part, a
  completed partition takes no more records, is ported in
  ``test_a_partition_completes_while_others_still_restore``.
* shouldRestoreToLimitWhenSupplied, shouldRestoreUpToOffsetLimit,
  shouldOnlyReportTheLastRestoredOffset: the offset limit of a source-topic changelog (the
  input consumer group's committed offset) has no analogue; the bound this reader has, the end
  offset read at initialization, is ported with the same listener arguments as
  ``test_the_end_offset_bounds_the_restore``.
* shouldRestoreMultipleStores, shouldRestoreAndNotifyMultipleStores: covered by
  ``test_restores_and_notifies_multiple_stores``; extended to partitions of one topic in
  ``test_restores_several_partitions_of_one_topic_and_another_topic``.
* shouldNotRestoreAnythingWhenPartitionIsEmpty, shouldCompleteImmediatelyWhenEndOffsetIs0:
  covered by ``test_an_empty_partition_completes_immediately``.
* shouldNotRestoreAnythingWhenCheckpointAtEndOffset,
  shouldNotRestoreIfCheckpointIsEqualToOffsetLimit,
  shouldNotRestoreIfCheckpointIsGreaterThanOffsetLimit: covered by
  ``test_nothing_to_restore_when_the_checkpoint_is_at_the_end`` and
  ``test_a_checkpoint_beyond_the_end_wipes_the_store_and_restores_it_from_the_beginning`` (a
  deliberate difference: a checkpoint past the end means the changelog is not the one the store
  was restored from, so the store is rebuilt); the boundary one record
  before it is ``test_a_checkpoint_two_before_the_end_restores_exactly_the_last_record``.
* shouldReturnRestoredOffsetsForPersistentStores,
  shouldNotReturnRestoredOffsetsForNonPersistentStore: covered by
  ``test_restored_offsets_only_for_persistent_stores``; offsets between batches are ported as
  ``test_restored_offsets_follow_each_batch_of_a_partial_restore``.
* shouldIgnoreNullKeysWhenRestoring: covered by ``test_null_keys_are_skipped``; ported further
  as ``test_a_changelog_of_null_keys_only_restores_nothing`` and
  ``test_a_trailing_null_key_is_not_the_batch_end``.
* shouldRestorePartitionsRegisteredPostInitialization: covered by
  ``test_restores_partitions_registered_after_initialization``.
* shouldNotThrowTaskMigratedExceptionIfSourceTopicUpdatedDuringRestoreProcess: covered by
  ``test_the_end_offset_is_taken_once_at_the_start``.
* shouldNotThrowTaskMigratedExceptionDuringRestoreForChangelogTopicWhenEndOffsetNotExceeded
  EOSEnabled / EOSDisabled: covered by ``test_a_commit_marker_at_the_end_does_not_leave_it_waiting``
  (both isolation levels).
* shouldReinitializeStateStoresWhenNoCheckpointFoundAndEOSEnabled: covered by
  ``test_eos_without_checkpoint_wipes_the_store_first``.
* shouldNotThrowTaskMigratedExceptionIfEndOffset(Gets|Not)ExceededDuringRestoreForSourceTopic
  (and their EOSEnabled variants): the offset limit has no analogue; the changelog they build, a
  commit marker between two transactions, is ported as
  ``test_a_checkpoint_before_a_marker_between_two_transactions``.

Kafka 2.6+ / 3.x (``register(tp, stateManager)``, active and standby changelogs):

* shouldNotRegisterSameStoreMultipleTimes: this reader keeps 2.x's semantics, registering again
  re-initializes (``test_registering_again_reinitializes_and_keeps_the_first_restorer``).
* shouldNotRegisterStoreWithoutMetadata: not applicable, a StateRestorer always carries its store.
* shouldSupportUnregisterChangelogBeforeInitialization: ported as
  ``test_removing_a_partition_before_initialization``.
* shouldSupportUnregisterChangelogBeforeCompletion: covered by
  ``test_removing_a_restoring_partition_suspends_it``.
* shouldSupportUnregisterChangelogAfterCompletion: ported as
  ``test_removing_a_completed_partition_does_not_suspend_it``.
* shouldInitializeChangelogAndCheckForCompletion: covered by
  ``test_nothing_to_restore_when_the_checkpoint_is_at_the_end`` (as 2.6+, the listener hears
  start and end with 0 records when there is nothing to restore).
* shouldTriggerRestoreListenerWithOffsetZeroIfPositionThrowsTimeoutException,
  shouldRequestPositionAndHandleTimeoutException: not applicable, librdkafka's position() is a
  local lookup that cannot time out; an unknown position is covered by
  ``test_a_consumer_position_reported_invalid``.
* shouldPollWithRightTimeout (WithStateUpdater / WithoutStateUpdater / Default): ported as
  ``test_polls_with_poll_ms_as_the_timeout_and_only_while_restoring`` (the standby variants
  are not applicable).
* shouldRestoreFromPositionAndCheckForCompletion: ported as
  ``test_restores_from_the_checkpoint_skipping_null_keys_and_records_past_the_end``.
* shouldRestoreFromBeginningAndCheckCompletion: ported as
  ``test_restores_from_the_log_start_across_a_gap_at_the_end``.
* shouldCheckCompletionIfPositionLargerThanEndOffset: ported as
  ``test_a_checkpoint_past_an_empty_changelog_completes_at_once``.
* shouldThrowIfPositionFail: ported as ``test_a_failing_position_request_raises``.
* shouldRequestEndOffsetsAndHandleTimeoutException: ported as
  ``test_a_retriable_end_offset_error_is_retried_on_the_next_restore``.
* shouldThrowIfEndOffsetsFail: ported as ``test_a_failing_end_offset_request_raises``.
* shouldRequestCommittedOffsetsAndHandleTimeoutException, shouldThrowIfCommittedOffsetsFail:
  not applicable, committed offsets are only read for source-topic changelogs (offset limits).
* shouldThrowIfUnsubscribeFail: ported as ``test_clear_raises_when_the_consumer_cannot_unassign``.
* shouldOnlyRestoreStandbyChangelogInUpdateStandbyState,
  shouldNotUpdateLimitForNonSourceStandbyChangelog, shouldRestoreToLimitInStandbyState,
  shouldTransitState, shouldTransitStateBackToActiveRestoringAfterRemovingLastTask: not
  applicable, there are no standby tasks (nor the reader's active/standby states) here.
* shouldRestoreMultipleChangelogs: ported as
  ``test_remove_one_restoring_changelog_then_clear_and_register_again``.
* shouldThrowIfRestoreCallbackThrows: ``test_listener_errors_are_wrapped`` covers the start;
  ported in full as ``test_a_listener_that_always_raises_fails_start_batch_and_end``.
* shouldNotThrowOnUnknownRevokedPartition: ported as
  ``test_removing_an_unknown_partition_logs_at_debug``.

Also ported, from the same tests' parts: ``test_a_partition_completes_while_others_still_restore``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from tests.integration.test_changelog_reader import (
    Hooked,
    Proxy,
    Recorder,
    contents,
    kv,
    produce,
    restore_consumer,
    restore_until,
    transaction,
    txn_producer,
    wait_end,
)

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
from streamstate.kafka_local import KafkaTestCluster

LOGGER = "streamstate.changelog"


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def topic(kafka: KafkaTestCluster) -> str:
    return kafka.create_topic()


@pytest.fixture
def tp(topic: str) -> TopicPartition:
    return TopicPartition(topic, 0)


def proxied(consumer: Any, **overrides: Callable[..., Any]) -> Consumer:
    """``consumer`` with single methods replaced, typed as what the reader takes."""
    return cast(Consumer, Proxy(consumer, **overrides))


def kafka_exception(code: int, reason: str = "test: KABOOM") -> KafkaException:
    return KafkaException(KafkaError(code, reason))


class Pausing(Recorder):
    """A recorder that pauses each partition as its restoration starts, while ``active``, so it
    stays restoring until the test resumes it."""

    def __init__(self, consumer: Any, stores: set[str] | None = None) -> None:
        super().__init__()
        self.consumer = consumer
        self.stores = stores
        self.active = True

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        super().on_restore_start(tp, store_name, start_offset, end_offset)
        if self.active and (self.stores is None or store_name in self.stores):
            self.consumer.pause([TopicPartition(tp.topic, tp.partition)])


def events_of(listener: Recorder, store: str) -> list[tuple[Any, ...]]:
    """The listener calls for ``store``, in order, as ``(kind, *numbers)``."""
    return [(e[0], *e[4:]) for e in listener.events if e[3] == store]


def assigned(consumer: Any) -> set[tuple[str, int]]:
    return {(p.topic, p.partition) for p in consumer.assignment()}


# ------------------------------------------------------------------------------------------------
# End offsets, checkpoints and listener arguments
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoint", "start"), [(None, 0), (1, 2)], ids=["no-checkpoint", "checkpoint"]
)
def test_the_end_offset_bounds_the_restore(
    kafka: KafkaTestCluster,
    tp: TopicPartition,
    tmp_path: Path,
    checkpoint: int | None,
    start: int,
) -> None:
    # Kafka's offset limit 5 becomes the end offset 5 read at initialization: the records
    # produced right after it (offsets 5..9, fetched by the same polls) are never applied.
    topic = tp.topic
    produce(kafka, topic, (kv(i) for i in range(5)))
    listener = Hooked(lambda: produce(kafka, topic, (kv(i, prefix="late") for i in range(5))))
    store = PersistentKeyValueStore("s", tmp_path / "s")
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store, checkpoint=checkpoint))

    assert restore_until(reader, [tp]) == {tp}

    restored = 5 - start
    assert listener.events == [
        ("start", topic, 0, "s", start, 5),
        ("batch", topic, 0, "s", 4, restored),
        ("end", topic, 0, "s", restored),
    ]
    assert contents(store) == dict(kv(i) for i in range(start, 5))
    assert reader.end_offset(tp) == 5
    assert kafka.end_offsets(topic)[0] == 10
    assert reader.restored_offsets() == {tp: 4}
    store.close()


def test_a_checkpoint_two_before_the_end_restores_exactly_the_last_record(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store, checkpoint=8))

    restore_until(reader, [tp])

    assert events_of(listener, "s") == [("start", 9, 10), ("batch", 9, 1), ("end", 1)]
    assert contents(store) == dict([kv(9)])


def test_restores_from_the_checkpoint_skipping_null_keys_and_records_past_the_end(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(
        kafka,
        topic,
        [
            *(kv(i) for i in range(6)),  # 0..5, already in the store (checkpoint 5)
            (b"key", b"v6"),
            (b"key", b"v7"),
            (None, b"v8"),  # null key: skipped
            (b"key", b"v9"),
        ],
    )
    # Records past the end offset (10), arriving after it was read, are never applied.
    listener = Hooked(lambda: produce(kafka, topic, [(b"key", b"v10"), (b"key", b"v11")]))
    store = InMemoryKeyValueStore("s")
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store, checkpoint=5))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert restore_until(reader, [tp]) == {tp}
        # Further calls change nothing.
        for _ in range(3):
            assert reader.restore() == {tp}

    assert events_of(listener, "s") == [("start", 6, 10), ("batch", 9, 3), ("end", 3)]
    assert contents(store) == {b"key": b"v9"}
    assert reader.end_offset(tp) == 10
    position = reader.position(tp)
    assert position is not None and position >= 10
    null_key_lines = [r.getMessage() for r in caplog.records if "null key" in r.getMessage()]
    assert len(null_key_lines) == 1
    assert f"{topic}-0 at offset 8" in null_key_lines[0]


def test_restores_from_the_log_start_across_a_gap_at_the_end(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    # Log start 5 (records 0..4 deleted), end offset 10, and offset 9 a commit marker that no
    # consumer ever receives: the restore starts at the log start and completes past the gap.
    produce(kafka, topic, (kv(i) for i in range(5)))
    transaction(
        txn_producer(kafka),
        topic,
        [(b"key", b"v5"), (b"key", b"v6"), (None, b"v7"), (b"key", b"v8")],
    )
    wait_end(kafka, topic, 10)
    assert kafka.delete_records(topic, 0, 5) == 5
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store))

    assert restore_until(reader, [tp], timeout=15) == {tp}

    assert events_of(listener, "s") == [("start", 5, 10), ("batch", 8, 3), ("end", 3)]
    assert contents(store) == {b"key": b"v8"}
    assert reader.end_offset(tp) == 10


@pytest.mark.parametrize("eos", [False, True], ids=["read_uncommitted", "read_committed"])
def test_a_checkpoint_before_a_marker_between_two_transactions(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, eos: bool
) -> None:
    producer = txn_producer(kafka)
    transaction(producer, topic, (kv(i) for i in range(5)))  # 0..4, marker 5
    transaction(producer, topic, (kv(i, prefix="x") for i in range(5)))  # 6..10, marker 11
    wait_end(kafka, topic, 12)
    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(
        restore_consumer(kafka, eos=eos), restore_listener=listener, eos=eos, poll_ms=50
    )
    reader.register(StateRestorer(tp, store, checkpoint=4))

    restore_until(reader, [tp], timeout=15)

    assert events_of(listener, "s") == [("start", 5, 12), ("batch", 10, 5), ("end", 5)]
    assert contents(store) == dict(kv(i, prefix="x") for i in range(5))


def test_a_checkpoint_past_an_empty_changelog_wipes_the_store_and_completes(
    kafka: KafkaTestCluster,
    tp: TopicPartition,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryKeyValueStore("s")
    store.put(b"mine", b"x")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener)
    reader.register(StateRestorer(tp, store, checkpoint=5))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reader.restore() == {tp}

    assert reader.completed() == {tp}
    assert reader.end_offset(tp) == 0
    assert reader.position(tp) == 0
    # Nothing to restore once wiped: start at the empty log's end, then end with 0 (2.6+).
    assert listener.events == [("start", tp.topic, 0, "s", 0, 0), ("end", tp.topic, 0, "s", 0)]
    # The checkpoint claimed records the (re-created, empty) changelog never had.
    assert contents(store) == {}
    assert any("beyond the end offset 0" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------------
# Null keys
# ------------------------------------------------------------------------------------------------


def test_a_changelog_of_null_keys_only_restores_nothing(
    kafka: KafkaTestCluster,
    topic: str,
    tp: TopicPartition,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    produce(kafka, topic, [(None, f"v{i}".encode()) for i in range(5)])
    store = PersistentKeyValueStore("s", tmp_path / "s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store))

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert restore_until(reader, [tp]) == {tp}

    # Nothing applied: no batch callback, a total of 0, and no offset to checkpoint.
    assert events_of(listener, "s") == [("start", 0, 5), ("end", 0)]
    assert contents(store) == {}
    assert reader.restored_offsets() == {}
    lines = [r.getMessage() for r in caplog.records if "null key" in r.getMessage()]
    assert [line.split(" at offset ")[1].split(",")[0] for line in lines] == [
        str(i) for i in range(5)
    ]
    store.close()


def test_a_trailing_null_key_is_not_the_batch_end(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    produce(kafka, topic, [(b"a", b"1"), (b"b", b"2"), (None, b"3")])
    store = PersistentKeyValueStore("s", tmp_path / "s")
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store))

    assert restore_until(reader, [tp]) == {tp}

    # batch_end_offset is the last record applied (Kafka: the last buffered, keyed record).
    assert events_of(listener, "s") == [("start", 0, 3), ("batch", 1, 2), ("end", 2)]
    assert contents(store) == {b"a": b"1", b"b": b"2"}
    assert reader.restored_offsets() == {tp: 1}
    store.close()


# ------------------------------------------------------------------------------------------------
# Several partitions
# ------------------------------------------------------------------------------------------------


def test_restores_several_partitions_of_one_topic_and_another_topic(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    shared = kafka.create_topic(partitions=3)
    other = kafka.create_topic()
    # The same keys in every partition, with values naming the partition: any mix-up shows.
    sizes = {0: 30, 1: 0, 2: 12}
    for partition, size in sizes.items():
        if size:
            kafka.produce(
                shared, [kv(i, value=f"p{partition}-") for i in range(size)], partition=partition
            )
    produce(kafka, other, (kv(i, value="other-") for i in range(20)))
    tp0, tp1, tp2 = (TopicPartition(shared, p) for p in range(3))
    tp_other = TopicPartition(other, 0)
    stores: dict[str, InMemoryKeyValueStore | PersistentKeyValueStore] = {
        "p0": InMemoryKeyValueStore("p0"),
        "p1": PersistentKeyValueStore("p1", tmp_path / "p1"),
        "p2": PersistentKeyValueStore("p2", tmp_path / "p2"),
        "other": PersistentKeyValueStore("other", tmp_path / "other"),
    }
    listener = Recorder()
    consumer = restore_consumer(kafka)
    reader = StoreChangelogReader(consumer, restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp0, stores["p0"]))
    reader.register(StateRestorer(tp1, stores["p1"]))
    reader.register(StateRestorer(tp2, stores["p2"], checkpoint=4))
    reader.register(StateRestorer(tp_other, stores["other"]))

    assert restore_until(reader, [tp0, tp1, tp2, tp_other]) == {tp0, tp1, tp2, tp_other}

    assert contents(stores["p0"]) == dict(kv(i, value="p0-") for i in range(30))
    assert contents(stores["p1"]) == {}
    assert contents(stores["p2"]) == dict(kv(i, value="p2-") for i in range(5, 12))
    assert contents(stores["other"]) == dict(kv(i, value="other-") for i in range(20))
    for name, (start, end, total) in {
        "p0": (0, 30, 30),
        "p2": (5, 12, 7),
        "other": (0, 20, 20),
    }.items():
        assert listener.of("start", name) == [(start, end)]
        assert listener.batch_total(name) == total
        assert listener.last_batch_end(name) == end - 1
        assert listener.of("end", name) == [(total,)]
    # An empty changelog: start and end with nothing between (Kafka 2.6+).
    assert listener.of("start", "p1") == [(0, 0)] and listener.of("end", "p1") == [(0,)]
    assert listener.of("batch", "p1") == []
    # In-memory stores and a persistent store with nothing restored and no checkpoint are left
    # out.
    assert reader.restored_offsets() == {tp2: 11, tp_other: 19}
    for name in ("p1", "p2", "other"):
        store = stores[name]
        assert isinstance(store, PersistentKeyValueStore)
        store.close()


def test_a_partition_completes_while_others_still_restore(kafka: KafkaTestCluster) -> None:
    small_topic, big_topic = kafka.create_topic(), kafka.create_topic()
    produce(kafka, small_topic, (kv(i) for i in range(10)))
    produce(kafka, big_topic, (kv(i) for i in range(50)))
    small, big = TopicPartition(small_topic, 0), TopicPartition(big_topic, 0)
    small_store, big_store = InMemoryKeyValueStore("small"), InMemoryKeyValueStore("big")
    consumer = restore_consumer(kafka)
    delivered: list[tuple[str, int]] = []

    def consume(num_messages: int = 1, timeout: float = -1) -> list[Message[Any, Any]]:
        messages = consumer.consume(num_messages=num_messages, timeout=timeout)
        delivered.extend(
            (str(m.topic()), int(m.offset() or 0)) for m in messages if m.error() is None
        )
        return cast("list[Message[Any, Any]]", messages)

    listener = Pausing(consumer, stores={"big"})  # "big" waits until the test resumes it
    reader = StoreChangelogReader(
        proxied(consumer, consume=consume), restore_listener=listener, poll_ms=50
    )
    reader.register(StateRestorer(small, small_store))
    reader.register(StateRestorer(big, big_store))

    assert restore_until(reader, [small]) == {small}
    for _ in range(3):
        assert reader.restore() == {small}
    assert reader.completed() == {small}
    assert reader.position(big) == 0
    assert events_of(listener, "big") == [("start", 0, 50)]

    # Records appended to a completed changelog are not restored any more: Kafka pauses it, so
    # they are not even fetched while other changelogs still restore (and poll).
    produce(kafka, small_topic, (kv(i, prefix="late") for i in range(5)))
    keep_polling = time.monotonic() + 1.0
    while time.monotonic() < keep_polling:
        assert reader.restore() == {small}
    assert [offset for t, offset in delivered if t == small_topic] == list(range(10))
    consumer.resume([big])
    assert restore_until(reader, [small, big]) == {small, big}
    for _ in range(3):
        assert reader.restore() == {small, big}

    assert contents(small_store) == dict(kv(i) for i in range(10))
    assert contents(big_store) == dict(kv(i) for i in range(50))
    assert listener.batch_total("small") == 10
    assert listener.of("end", "small") == [(10,)]
    assert listener.of("end", "big") == [(50,)]
    ends = [e[3] for e in listener.events if e[0] == "end"]
    assert ends == ["small", "big"]
    assert reader.end_offset(small) == 10
    assert [offset for t, offset in delivered if t == small_topic] == list(range(10))


def test_restored_offsets_follow_each_batch_of_a_partial_restore(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    produce(kafka, topic, (kv(i) for i in range(100)))
    consumer = restore_consumer(kafka)

    def consume(num_messages: int = 1, timeout: float = -1) -> list[Message[Any, Any]]:
        # At most 10 records per restore() call, so the restore takes several calls.
        return cast(
            "list[Message[Any, Any]]",
            consumer.consume(num_messages=min(num_messages, 10), timeout=timeout),
        )

    store = PersistentKeyValueStore("s", tmp_path / "s")
    listener = Recorder()
    reader = StoreChangelogReader(
        proxied(consumer, consume=consume), restore_listener=listener, poll_ms=50
    )
    reader.register(StateRestorer(tp, store, checkpoint=19))
    assert reader.restored_offsets() == {tp: 19}
    assert reader.position(tp) is None

    partial: list[int] = []
    deadline = time.monotonic() + 30
    while tp not in reader.restore():
        assert time.monotonic() < deadline, "the restore did not complete"
        batches = listener.of("batch", "s")
        last = batches[-1][0] if batches else 19
        assert reader.restored_offsets() == {tp: last}
        position = reader.position(tp)
        assert position is not None and position >= last + 1
        assert len(contents(store)) == last - 19
        if batches:
            partial.append(last)

    batches = listener.of("batch", "s")
    assert partial, "never saw a partial restore"
    assert all(19 < offset < 99 for offset in partial)
    # Batches are contiguous: each one's end minus the previous end is its size.
    previous = 19
    for batch_end, num in batches:
        assert num == batch_end - previous
        assert 1 <= num <= 10
        previous = batch_end
    assert previous == 99
    assert len(batches) >= 8
    assert listener.of("start", "s") == [(20, 100)]
    assert listener.of("end", "s") == [(80,)]
    assert reader.restored_offsets() == {tp: 99}
    assert contents(store) == dict(kv(i) for i in range(20, 100))
    store.close()


# ------------------------------------------------------------------------------------------------
# Truncation and registering again
# ------------------------------------------------------------------------------------------------


def test_a_truncated_checkpoint_is_dropped_and_registering_again_restores_from_the_log_start(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(15)))
    assert kafka.delete_records(topic, 0, 5) == 5
    store = InMemoryKeyValueStore("s")
    store.put(b"stale", b"x")
    wipes: list[int | None] = []
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    restorer = StateRestorer(tp, store, checkpoint=1, before_wipe=lambda: wipes.append(len(wipes)))
    reader.register(restorer)

    restore_until(reader, [tp])

    # Kafka: the restorer's checkpoint is reset (NO_CHECKPOINT) and the store restored from the
    # log start.
    assert restorer.checkpoint is None
    assert wipes == [0]
    assert contents(store) == dict(kv(i) for i in range(5, 15))
    assert events_of(listener, "s") == [("start", 5, 15), ("batch", 14, 10), ("end", 10)]

    # Registered again, it restores from the log start, not from the expired checkpoint, and
    # without a second wipe.
    reader.register(restorer)
    assert reader.completed() == set()
    restore_until(reader, [tp])

    assert wipes == [0]
    assert contents(store) == dict(kv(i) for i in range(5, 15))
    assert events_of(listener, "s") == [
        ("start", 5, 15),
        ("batch", 14, 10),
        ("end", 10),
        ("start", 5, 15),
        ("batch", 14, 10),
        ("end", 10),
    ]


def test_a_checkpoint_just_below_the_log_start_is_not_truncated(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    # The boundary of the port above: checkpoint 4 with log start 5 resumes at 5, no wipe.
    produce(kafka, topic, (kv(i) for i in range(15)))
    assert kafka.delete_records(topic, 0, 5) == 5
    store = InMemoryKeyValueStore("s")
    store.put(b"mine", b"x")
    wipes: list[int] = []
    listener = Recorder()
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=listener, poll_ms=50)
    restorer = StateRestorer(tp, store, checkpoint=4, before_wipe=lambda: wipes.append(1))
    reader.register(restorer)

    restore_until(reader, [tp])

    assert wipes == []
    assert restorer.checkpoint == 4
    assert contents(store) == {b"mine": b"x", **dict(kv(i) for i in range(5, 15))}
    assert events_of(listener, "s") == [("start", 5, 15), ("batch", 14, 10), ("end", 10)]


# ------------------------------------------------------------------------------------------------
# Remove and clear
# ------------------------------------------------------------------------------------------------


def test_removing_a_partition_before_initialization(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    consumer = restore_consumer(kafka)
    listener = Recorder()
    store = InMemoryKeyValueStore("s")
    reader = StoreChangelogReader(consumer, restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store))
    assert not reader.is_empty()

    reader.remove([tp])

    assert reader.is_empty()
    assert reader.end_offset(tp) is None
    assert reader.restore() == set()
    assert consumer.assignment() == []
    assert listener.events == []  # neither start nor suspended
    assert contents(store) == {}


def test_removing_a_completed_partition_does_not_suspend_it(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition, tmp_path: Path
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    consumer = restore_consumer(kafka)
    listener = Recorder()
    store = PersistentKeyValueStore("s", tmp_path / "s")
    reader = StoreChangelogReader(consumer, restore_listener=listener, poll_ms=50)
    reader.register(StateRestorer(tp, store, checkpoint=5))
    restore_until(reader, [tp])
    assert assigned(consumer) == {(tp.topic, 0)}
    assert events_of(listener, "s") == [("start", 6, 10), ("batch", 9, 4), ("end", 4)]

    reader.remove([tp])

    assert events_of(listener, "s") == [("start", 6, 10), ("batch", 9, 4), ("end", 4)]
    assert consumer.assignment() == []
    assert reader.is_empty()
    assert reader.completed() == set()
    assert reader.restored_offsets() == {}
    assert reader.restore() == set()
    store.close()


def test_remove_one_restoring_changelog_then_clear_and_register_again(
    kafka: KafkaTestCluster,
) -> None:
    sizes = {"s0": 10, "s1": 5, "s2": 3}
    topics = {name: kafka.create_topic() for name in sizes}
    for name, size in sizes.items():
        produce(kafka, topics[name], (kv(i) for i in range(size)))
    tps = {name: TopicPartition(topics[name], 0) for name in sizes}
    consumer = restore_consumer(kafka)
    listener = Pausing(consumer)  # every changelog stays restoring
    reader = StoreChangelogReader(consumer, restore_listener=listener, poll_ms=50)
    for name in sizes:
        reader.register(StateRestorer(tps[name], InMemoryKeyValueStore(name)))

    assert reader.restore() == set()
    for name, size in sizes.items():
        assert reader.end_offset(tps[name]) == size
        assert reader.position(tps[name]) == 0
    assert assigned(consumer) == {(tps[name].topic, 0) for name in sizes}

    reader.remove([tps["s0"]])

    assert not reader.is_empty()
    assert reader.end_offset(tps["s0"]) is None
    assert reader.position(tps["s1"]) == 0 and reader.position(tps["s2"]) == 0
    assert assigned(consumer) == {(tps["s1"].topic, 0), (tps["s2"].topic, 0)}
    assert [e for e in listener.events if e[0] == "suspended"] == [
        ("suspended", tps["s0"].topic, 0, "s0", 0)
    ]

    reader.clear()

    assert reader.is_empty()
    assert reader.end_offset(tps["s1"]) is None and reader.end_offset(tps["s2"]) is None
    assert consumer.assignment() == []
    # As in Kafka, clear() does not report the restorations it drops as suspended.
    assert [e[3] for e in listener.events if e[0] == "suspended"] == ["s0"]
    assert reader.restore() == set()

    # A partition cleared while restoring (and paused) restores in full once registered again.
    listener.active = False
    again = InMemoryKeyValueStore("again")
    reader.register(StateRestorer(tps["s1"], again))
    assert restore_until(reader, [tps["s1"]]) == {tps["s1"]}
    assert contents(again) == dict(kv(i) for i in range(5))
    assert events_of(listener, "again") == [("start", 0, 5), ("batch", 4, 5), ("end", 5)]


def test_removing_an_unknown_partition_logs_at_debug(
    kafka: KafkaTestCluster, caplog: pytest.LogCaptureFixture
) -> None:
    reader = StoreChangelogReader(restore_consumer(kafka))

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        reader.remove([TopicPartition("unknown", 0)])

    assert reader.is_empty()
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any(
        "topic 'unknown' partition 0 could not be found" in m and "cleaned up" in m
        for m in messages
    ), messages


def test_clear_raises_when_the_consumer_cannot_unassign(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(5)))
    consumer = restore_consumer(kafka)
    kaboom = kafka_exception(KafkaError._STATE)
    failing = [False]

    def incremental_unassign(partitions: list[TopicPartition]) -> None:
        if failing[0]:
            raise kaboom
        consumer.incremental_unassign(partitions)

    reader = StoreChangelogReader(
        proxied(consumer, incremental_unassign=incremental_unassign), poll_ms=50
    )
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))
    restore_until(reader, [tp])
    failing[0] = True

    with pytest.raises(ProcessorStateError) as raised:
        reader.clear()

    assert raised.value.__cause__ is kaboom
    assert f"could not unassign changelog partitions {topic}-0" in str(raised.value)
    assert reader.is_empty()


# ------------------------------------------------------------------------------------------------
# Failing requests and polling
# ------------------------------------------------------------------------------------------------


def test_a_retriable_end_offset_error_is_retried_on_the_next_restore(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    consumer = restore_consumer(kafka)
    calls: list[bool] = []

    def watermarks(partition: TopicPartition, **kwargs: Any) -> tuple[int, int]:
        calls.append(True)
        if len(calls) == 1:
            raise kafka_exception(KafkaError._TIMED_OUT)
        return cast("tuple[int, int]", consumer.get_watermark_offsets(partition, **kwargs))

    store = InMemoryKeyValueStore("s")
    listener = Recorder()
    reader = StoreChangelogReader(
        proxied(consumer, get_watermark_offsets=watermarks), restore_listener=listener, poll_ms=50
    )
    reader.register(StateRestorer(tp, store, checkpoint=5))

    # The first call cannot initialize it: still registered, nothing assigned, no callback.
    assert reader.restore() == set()
    assert len(calls) == 1
    assert reader.end_offset(tp) is None
    assert reader.position(tp) is None
    assert consumer.assignment() == []
    assert listener.events == []

    # The next call initializes it.
    reader.restore()
    assert len(calls) == 2
    assert reader.end_offset(tp) == 10
    assert listener.of("start", "s") == [(6, 10)]

    restore_until(reader, [tp])
    assert events_of(listener, "s") == [("start", 6, 10), ("batch", 9, 4), ("end", 4)]
    assert contents(store) == dict(kv(i) for i in range(6, 10))
    assert len(calls) == 2  # the end offset is read once


def test_a_failing_end_offset_request_raises(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    consumer = restore_consumer(kafka)
    kaboom = kafka_exception(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    def watermarks(partition: TopicPartition, **kwargs: Any) -> tuple[int, int]:
        raise kaboom

    listener = Recorder()
    reader = StoreChangelogReader(
        proxied(consumer, get_watermark_offsets=watermarks), restore_listener=listener
    )
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))

    with pytest.raises(ProcessorStateError) as raised:
        reader.restore()

    assert raised.value.__cause__ is kaboom
    assert "could not read the end offset" in str(raised.value)
    assert raised.value.topic == topic and raised.value.partition == 0
    assert raised.value.store_name == "s"
    assert listener.events == []


def test_a_failing_position_request_raises(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))
    consumer = restore_consumer(kafka)
    kaboom = kafka_exception(KafkaError._STATE)

    def position(partitions: list[TopicPartition]) -> list[TopicPartition]:
        raise kaboom

    reader = StoreChangelogReader(proxied(consumer, position=position), poll_ms=50)
    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s"), checkpoint=5))

    with pytest.raises(ProcessorStateError) as raised:
        reader.restore()

    assert raised.value.__cause__ is kaboom
    assert "could not report its position" in str(raised.value)
    assert f"{topic}-0" in str(raised.value)


def test_polls_with_poll_ms_as_the_timeout_and_only_while_restoring(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(20)))
    consumer = restore_consumer(kafka)
    timeouts: list[float] = []

    def consume(num_messages: int = 1, timeout: float = -1) -> list[Message[Any, Any]]:
        timeouts.append(timeout)
        return cast(
            "list[Message[Any, Any]]",
            consumer.consume(num_messages=num_messages, timeout=timeout),
        )

    reader = StoreChangelogReader(proxied(consumer, consume=consume), poll_ms=37)
    assert reader.restore() == set()
    assert timeouts == []  # nothing registered: no poll

    reader.register(StateRestorer(tp, InMemoryKeyValueStore("s")))
    restore_until(reader, [tp])

    assert timeouts and all(t == pytest.approx(0.037) for t in timeouts)
    polls = len(timeouts)
    for _ in range(3):
        assert reader.restore() == {tp}
    assert len(timeouts) == polls  # every changelog completed: no poll


def test_a_listener_that_always_raises_fails_start_batch_and_end(
    kafka: KafkaTestCluster, topic: str, tp: TopicPartition
) -> None:
    produce(kafka, topic, (kv(i) for i in range(10)))

    class Raising(StateRestoreListener):
        def on_restore_start(self, *args: Any) -> None:
            raise RuntimeError("KABOOM start")

        def on_batch_restored(self, *args: Any) -> None:
            raise RuntimeError("KABOOM batch")

        def on_restore_end(self, *args: Any) -> None:
            raise RuntimeError("KABOOM end")

    store = InMemoryKeyValueStore("s")
    reader = StoreChangelogReader(restore_consumer(kafka), restore_listener=Raising(), poll_ms=50)
    reader.register(StateRestorer(tp, store, checkpoint=5))

    failures: list[StreamsError] = []
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, f"still failing after {failures}"
        try:
            done = reader.restore()
        except StreamsError as exc:
            failures.append(exc)
            continue
        if done == {tp}:
            break

    # Each callback fails once, in order; the reader carries on with the next step.
    assert [str(f.__cause__) for f in failures] == ["KABOOM start", "KABOOM batch", "KABOOM end"]
    assert "failed on restore start (on_restore_start)" in str(failures[0])
    assert "failed on batch restored (on_batch_restored)" in str(failures[1])
    assert "failed on restore end (on_restore_end)" in str(failures[2])
    assert all(isinstance(f.__cause__, RuntimeError) for f in failures)
    assert all(f.store_name == "s" and f.topic == topic for f in failures)
    assert contents(store) == dict(kv(i) for i in range(6, 10))
