"""process_next: Kafka Streams' StoreChangelogReader.processNext batch step, as docs/api.md
states it.

Scenarios follow StoreChangelogReaderTest (restore to the end, restore to a limit, null keys
ignored, compaction gaps) re-expressed on one step; a hypothesis property compares random record
lists against a plain-Python model over a dict.
"""

from __future__ import annotations

import logging
import pickle
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import confluent_kafka
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamstate import (
    ConsumerRecord,
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    ProcessorStateError,
    RestoredBatch,
    process_next,
    stores,
)

TOPIC = "app-store-changelog"
Store = Any


def rec(offset: int, key: bytes | None, value: bytes | None, partition: int = 3) -> ConsumerRecord:
    return ConsumerRecord(TOPIC, partition, offset, 1_000 + offset, key, value)


def msg(offset: int, key: bytes | None, value: bytes | None) -> confluent_kafka.Message:
    return confluent_kafka.Message(
        topic=TOPIC, partition=3, offset=offset, key=key, value=value, timestamp=(1, 1)
    )


def records(n: int, start: int = 0) -> list[ConsumerRecord]:
    return [rec(i, b"k%d" % i, b"v%d" % i) for i in range(start, start + n)]


@pytest.fixture(params=["memory", "persistent"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store
    if request.param == "memory":
        s = InMemoryKeyValueStore("s")
    else:
        s = PersistentKeyValueStore("s", tmp_path / "s")
    yield s
    s.close()


# --- RestoredBatch ----------------------------------------------------------------------------


def test_restored_batch_is_a_frozen_value() -> None:
    b = RestoredBatch(10, 9, 10)
    assert (b.next_offset, b.last_restored_offset, b.num_restored) == (10, 9, 10)
    assert b == RestoredBatch(10, 9, 10)
    assert b != RestoredBatch(10, 9, 9)
    assert b != (10, 9, 10)
    assert hash(b) == hash(RestoredBatch(10, 9, 10))
    assert repr(b) == "RestoredBatch(next_offset=10, last_restored_offset=9, num_restored=10)"
    assert pickle.loads(pickle.dumps(b)) == b
    with pytest.raises(AttributeError):
        b.next_offset = 3  # type: ignore[misc]


# --- Kafka's scenarios ------------------------------------------------------------------------


def test_restores_all_records_below_the_end(store: Store) -> None:
    # shouldRestoreAllMessagesFromBeginningWhenCheckpointNull: 10 records, end 10.
    assert process_next(store, records(10), 10) == RestoredBatch(10, 9, 10)
    assert store.approximate_num_entries() == 10
    assert store.get(b"k9") == b"v9"


def test_records_at_or_past_the_end_are_not_applied(store: Store) -> None:
    # shouldRestoreToLimitWhenSupplied: the batch is cut at the first record >= end.
    assert process_next(store, records(10), 3) == RestoredBatch(3, 2, 3)
    assert [k for k, _ in store.all()] == [b"k0", b"k1", b"k2"]


def test_a_checkpointed_start_restores_the_rest(store: Store) -> None:
    # shouldRestoreMessagesFromCheckpoint: polling from offset 5 of 10.
    assert process_next(store, records(5, start=5), 10) == RestoredBatch(10, 9, 5)


def test_a_batch_wholly_past_the_end_applies_nothing(store: Store) -> None:
    assert process_next(store, records(3, start=10), 10) == RestoredBatch(10, -1, 0)
    assert store.approximate_num_entries() == 0


def test_end_offset_zero_applies_nothing(store: Store) -> None:
    # shouldCompleteImmediatelyWhenEndOffsetIs0
    assert process_next(store, records(3), 0) == RestoredBatch(0, -1, 0)


def test_a_gap_before_the_end_stops_at_the_next_record(store: Store) -> None:
    # Source-topic limits (e): records 0..4 and 6..10 (5 compacted away), end 6 -> 5 applied.
    recs = records(5) + records(5, start=6)
    assert process_next(store, recs, 6) == RestoredBatch(6, 4, 5)
    assert store.get(b"k6") is None


def test_next_offset_skips_gaps_within_the_batch(store: Store) -> None:
    # Compaction gaps and transaction markers: next_offset follows the last record read.
    recs = [rec(0, b"a", b"1"), rec(4, b"b", b"2"), rec(9, b"c", b"3")]
    assert process_next(store, recs, 100) == RestoredBatch(10, 9, 3)


def test_null_keys_are_consumed_skipped_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # shouldIgnoreNullKeysWhenRestoring: 0 (key k), 1 (null key), 2 (key k).
    recs = [rec(0, b"k", b"v"), rec(1, None, b"v"), rec(2, b"k", b"w")]
    with caplog.at_level(logging.WARNING, logger="streamstate.changelog"):
        batch = process_next(store, recs, 10)
    assert batch == RestoredBatch(3, 2, 2)
    assert list(store.all()) == [(b"k", b"w")]
    warnings = [r for r in caplog.records if r.name == "streamstate.changelog"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    text = warnings[0].getMessage()
    assert f"{TOPIC}-3" in text and "offset 1" in text and "null key" in text


def test_only_null_keys_apply_nothing_but_advance(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="streamstate.changelog"):
        assert process_next(store, [rec(7, None, b"x"), rec(8, None, None)], 100) == (
            RestoredBatch(9, -1, 0)
        )
    assert len([r for r in caplog.records if r.name == "streamstate.changelog"]) == 2


def test_a_none_value_deletes(store: Store) -> None:
    store.put(b"k", b"old")
    batch = process_next(store, [rec(0, b"k", None), rec(1, b"j", b"1")], 10)
    assert batch == RestoredBatch(2, 1, 2)  # a delete counts as restored
    assert store.get(b"k") is None
    assert store.get(b"j") == b"1"


def test_a_key_written_then_deleted_in_one_batch_is_gone(store: Store) -> None:
    recs = [rec(0, b"k", b"1"), rec(1, b"k", None), rec(2, b"j", b"1"), rec(3, b"j", b"2")]
    process_next(store, recs, 10)
    assert list(store.all()) == [(b"j", b"2")]


def test_no_records_give_next_offset_minus_one(store: Store) -> None:
    # Nothing read: the caller keeps the consumer's position (Kafka asks position()).
    assert process_next(store, [], 10) == RestoredBatch(-1, -1, 0)


def test_confluent_kafka_messages_work(store: Store) -> None:
    msgs = [msg(0, b"a", b"1"), msg(1, None, b"x"), msg(2, b"b", None), msg(3, b"c", b"3")]
    store.put(b"b", b"old")
    assert process_next(store, msgs, 3) == RestoredBatch(3, 2, 2)
    assert list(store.all()) == [(b"a", b"1")]


def test_real_consumer_messages_work(store: Store, mock_kafka: Any) -> None:
    msgs = mock_kafka.messages([(0, b"k%d" % i, b"v%d" % i, 1_000 + i) for i in range(20)])
    assert process_next(store, msgs, 15) == RestoredBatch(15, 14, 15)
    assert store.approximate_num_entries() == 15


def test_any_object_with_offset_key_and_value_works(store: Store) -> None:
    class Rec(NamedTuple):
        offset: int
        key: bytes | None
        value: bytes | None

    assert process_next(store, [Rec(0, b"a", b"1"), Rec(1, b"b", b"2")], 5) == RestoredBatch(
        2, 1, 2
    )
    assert process_next(store, (Rec(i, b"x", b"y") for i in range(2, 4)), 5) == RestoredBatch(
        4, 3, 2
    )


def test_offsets_must_increase_and_nothing_is_applied_otherwise(store: Store) -> None:
    recs = [rec(0, b"a", b"1"), rec(2, b"b", b"2"), rec(1, b"c", b"3")]
    with pytest.raises(ValueError, match="increasing offset order"):
        process_next(store, recs, 10)
    assert store.approximate_num_entries() == 0


def test_a_non_bytes_key_or_value_is_a_type_error_and_nothing_is_applied(store: Store) -> None:
    with pytest.raises(TypeError, match="offset 1"):
        process_next(store, [rec(0, b"a", b"1"), rec(1, "text", b"2")], 10)
    with pytest.raises(TypeError, match="value of the changelog record at offset 1"):
        process_next(store, [rec(0, b"a", b"1"), rec(1, b"b", 42)], 10)
    assert store.approximate_num_entries() == 0
    # Past the end offset nothing is read, so a bad record there does not matter.
    assert process_next(store, [rec(0, b"a", b"1"), rec(1, "text", 42)], 1) == RestoredBatch(
        1, 0, 1
    )


def test_a_message_carrying_an_error_is_a_value_error(store: Store) -> None:
    err = confluent_kafka.Message(
        topic=TOPIC,
        partition=3,
        offset=0,
        error=confluent_kafka.KafkaError(confluent_kafka.KafkaError._PARTITION_EOF),
    )
    with pytest.raises(ValueError, match="error"):
        process_next(store, [err], 10)


def test_a_closed_store_is_a_processor_state_error_naming_everything(store: Store) -> None:
    store.close()
    with pytest.raises(ProcessorStateError) as info:
        process_next(store, records(3, start=5), 10)
    e = info.value
    assert (e.store_name, e.topic, e.partition, e.offset) == ("s", TOPIC, 3, 5)
    assert "closed" in str(e) and "offsets 5 to 7" in str(e)


def test_the_store_must_be_one_of_ours() -> None:
    with pytest.raises(TypeError, match="InMemoryKeyValueStore"):
        process_next({}, records(1), 10)


def test_process_next_is_importable_from_the_stores_module() -> None:
    assert stores.process_next is process_next
    assert stores.RestoredBatch is RestoredBatch


# --- Arrow input (Spark's Kafka source schema) ---------------------------------------------


def arrow_batch(
    recs: list[Record], key_type: pa.DataType | None = None, partition: int = 3
) -> pa.RecordBatch:
    """Records in Spark's Kafka source schema (the columns ``process_next`` reads, plus two)."""
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for _, k, _ in recs], type=key_type or pa.binary()),
            "value": pa.array([v for _, _, v in recs], type=pa.binary()),
            "topic": pa.array([TOPIC] * len(recs), type=pa.string()),
            "partition": pa.array([partition] * len(recs), type=pa.int32()),
            "offset": pa.array([o for o, _, _ in recs], type=pa.int64()),
        }
    )


def test_an_arrow_batch_restores_like_the_same_records(store: Store) -> None:
    recs: list[Record] = [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"a", None), (4, b"c", b"3")]
    got = process_next(store, arrow_batch(recs), 4)
    assert got == RestoredBatch(4, 2, 3)
    assert list(store.all()) == [(b"b", b"2")]


@pytest.mark.parametrize("key_type", [pa.large_binary(), pa.binary_view(), pa.string()])
def test_every_binary_layout_of_an_arrow_batch_works(store: Store, key_type: pa.DataType) -> None:
    keys = ["k0", "k1"] if key_type == pa.string() else [b"k0", b"k1"]
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(keys, type=key_type),
            "value": pa.array([b"v0", b"v1"], type=pa.large_binary()),
            "offset": pa.array([7, 8], type=pa.int64()),
        }
    )
    assert process_next(store, batch, 100) == RestoredBatch(9, 8, 2)
    assert dict(store.all()) == {b"k0": b"v0", b"k1": b"v1"}


def test_an_arrow_batch_without_an_offset_column_is_a_value_error(store: Store) -> None:
    batch = arrow_batch([(0, b"a", b"1")]).drop_columns(["offset"])
    with pytest.raises(ValueError, match="no 'offset' column"):
        process_next(store, batch, 10)
    assert list(store.all()) == []


def test_arrow_offsets_must_increase(store: Store) -> None:
    with pytest.raises(ValueError, match="offset 1 follows offset 2") as info:
        process_next(store, arrow_batch([(2, b"a", b"1"), (1, b"b", b"2")]), 10)
    assert list(store.all()) == []
    assert f"topic '{TOPIC}', partition 3" in str(info.value)


def test_arrow_null_keys_are_logged_with_topic_and_partition(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="streamstate.changelog"):
        got = process_next(store, arrow_batch([(5, None, b"x"), (6, b"k", b"v")], partition=9), 10)
    assert got == RestoredBatch(7, 6, 1)
    assert any(f"{TOPIC}-9" in r.getMessage() and "5" in r.getMessage() for r in caplog.records)


# --- property: process_next == a plain-Python model over a dict -------------------------------

Record = tuple[int, bytes | None, bytes | None]


def model(
    state: dict[bytes, bytes], recs: list[Record], end: int
) -> tuple[dict[bytes, bytes], RestoredBatch]:
    """processNext in plain Python, as docs/api.md states it."""
    state = dict(state)
    next_offset, last, n = -1, -1, 0
    for offset, key, value in recs:
        if offset >= end:
            next_offset = offset
            break
        next_offset = offset + 1
        if key is None:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
        last, n = offset, n + 1
    return state, RestoredBatch(next_offset, last, n)


keys = st.sampled_from([b"", b"a", b"b", b"ab", b"\x00", b"\xff"])
values = st.none() | st.binary(max_size=8)


@st.composite
def changelog(draw: st.DrawFn) -> tuple[list[Record], int, dict[bytes, bytes]]:
    gaps = draw(st.lists(st.integers(1, 3), max_size=30))
    start = draw(st.integers(0, 5))
    offsets = [start + sum(gaps[: i + 1]) for i in range(len(gaps))]
    recs = [(o, draw(st.none() | keys), draw(values)) for o in offsets]
    end = draw(st.integers(0, (offsets[-1] if offsets else 0) + 3))
    initial = draw(st.dictionaries(keys, st.binary(max_size=4), max_size=4))
    return recs, end, initial


def check_against_model(
    make: Callable[[], Store],
    recs: list[Record],
    end: int,
    initial: dict[bytes, bytes],
    arrow: bool = False,
) -> None:
    store = make()
    try:
        store.put_all(list(initial.items()))
        expected_state, expected = model(initial, recs, end)
        given: Any = arrow_batch(recs) if arrow else [rec(o, k, v) for o, k, v in recs]
        got = process_next(store, given, end)
        assert got == expected
        assert dict(store.all()) == expected_state
        assert list(store.all()) == sorted(expected_state.items())
    finally:
        store.close()


@settings(max_examples=300, deadline=None)
@given(changelog())
def test_in_memory_matches_the_model(case: tuple[list[Record], int, dict[bytes, bytes]]) -> None:
    logging.getLogger("streamstate.changelog").disabled = True
    try:
        check_against_model(lambda: InMemoryKeyValueStore("m"), *case)
    finally:
        logging.getLogger("streamstate.changelog").disabled = False


@settings(max_examples=300, deadline=None)
@given(changelog())
def test_arrow_input_matches_the_model(case: tuple[list[Record], int, dict[bytes, bytes]]) -> None:
    logging.getLogger("streamstate.changelog").disabled = True
    try:
        check_against_model(lambda: InMemoryKeyValueStore("m"), *case, arrow=True)
    finally:
        logging.getLogger("streamstate.changelog").disabled = False


@settings(max_examples=60, deadline=None)
@given(changelog())
def test_persistent_matches_the_model(case: tuple[list[Record], int, dict[bytes, bytes]]) -> None:
    logging.getLogger("streamstate.changelog").disabled = True
    with tempfile.TemporaryDirectory() as d:
        try:
            check_against_model(lambda: PersistentKeyValueStore("p", Path(d) / "p"), *case)
        finally:
            logging.getLogger("streamstate.changelog").disabled = False
