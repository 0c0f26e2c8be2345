"""``TransactionBuffer`` (exactly-once's per-store write buffer) over both store kinds, the
transactional error classification, and the persisted process id."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from streamstate.app.state_directory import PROCESS_FILE, process_id
from streamstate.clients.kafka_errors import TransactionErrorKind, classify_transaction
from streamstate.state.transaction_buffer import TransactionBuffer


@pytest.fixture
def store(make_store: Callable[[str], Any]) -> Any:
    return make_store("s")


def test_reads_see_uncommitted_writes_and_the_store_does_not(store: Any) -> None:
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    buffer = TransactionBuffer(store)
    buffer.put(b"b", b"20")
    assert buffer.delete(b"c") == b"3"
    buffer.put(b"d", b"4")
    assert (buffer.get(b"a"), buffer.get(b"b"), buffer.get(b"c"), buffer.get(b"d")) == (
        b"1",
        b"20",
        None,
        b"4",
    )
    assert list(buffer.all()) == [(b"a", b"1"), (b"b", b"20"), (b"d", b"4")]
    assert list(buffer.range(b"b", b"c")) == [(b"b", b"20")]
    # The store underneath (what interactive queries read) holds the committed data only.
    assert list(store.all()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert buffer.commit() == 3
    assert list(store.all()) == [(b"a", b"1"), (b"b", b"20"), (b"d", b"4")]
    assert len(buffer) == 0 and buffer.uncommitted_bytes == 0


def test_a_dropped_range_waits_for_the_commit_and_an_abort_keeps_it(store: Any) -> None:
    store.put_all([(b"a1", b"1"), (b"b1", b"2"), (b"b2", b"3"), (b"c1", b"4")])
    buffer = TransactionBuffer(store)
    buffer.put(b"b3", b"5")  # written in the range before the drop: dropped with it
    buffer.put(b"c2", b"6")
    bytes_before = buffer.uncommitted_bytes
    buffer.drop_range(b"b", b"c")
    assert buffer.uncommitted_bytes == bytes_before - len(b"b3") - len(b"5")
    assert buffer.get(b"b1") is None and buffer.get(b"b3") is None
    assert list(buffer.all()) == [(b"a1", b"1"), (b"c1", b"4"), (b"c2", b"6")]
    assert list(buffer.range(b"a", b"c1")) == [(b"a1", b"1"), (b"c1", b"4")]
    buffer.put(b"b9", b"7")  # written after the drop: kept
    assert buffer.get(b"b9") == b"7"
    # Until the commit the store keeps the range (an abort must find it again).
    assert store.get(b"b1") == b"2"
    buffer.abort()
    assert list(buffer.all()) == [(b"a1", b"1"), (b"b1", b"2"), (b"b2", b"3"), (b"c1", b"4")]
    buffer.drop_range(b"b", b"c")
    buffer.put(b"b9", b"7")
    assert buffer.commit() == 1
    assert list(store.all()) == [(b"a1", b"1"), (b"b9", b"7"), (b"c1", b"4")]
    # A drop alone is committed too.
    buffer.drop_range(b"a", b"b")
    assert buffer.commit() == 0
    assert store.get(b"a1") is None


def test_uncommitted_is_what_the_commit_applies_and_leaves_the_buffer_as_it_is(
    store: Any,
) -> None:
    buffer = TransactionBuffer(store)
    buffer.put(b"a", b"1")
    buffer.put(b"b", b"2")
    buffer.drop_range(b"b", b"c")  # discards the write of b
    buffer.put(b"a", b"3")
    buffer.delete(b"d")
    drops, writes = buffer.uncommitted()
    assert drops == [(b"b", b"c")]
    assert writes == {b"a": b"3", b"d": None}
    writes[b"e"] = b"4"  # a copy: the buffer is not changed through it
    assert buffer.get(b"e") is None and len(buffer) == 2
    assert buffer.commit() == 2
    assert buffer.uncommitted() == ([], {})
    assert list(store.all()) == [(b"a", b"3")]


def test_abort_discards_every_uncommitted_write(store: Any) -> None:
    store.put(b"a", b"1")
    buffer = TransactionBuffer(store)
    buffer.put(b"a", b"2")
    buffer.delete(b"a")
    buffer.put(b"z", b"9")
    buffer.abort()
    assert buffer.get(b"a") == b"1" and buffer.get(b"z") is None
    assert list(buffer.all()) == [(b"a", b"1")]
    assert buffer.commit() == 0
    assert list(store.all()) == [(b"a", b"1")]


@pytest.mark.parametrize(
    ("stored", "buffered", "low", "high"),
    [
        # buffered keys before, between and after the stored ones, at both bounds
        ([b"b", b"d"], {b"a": b"x", b"c": b"x", b"e": b"x"}, b"a", b"e"),
        # every stored key deleted
        ([b"b", b"d"], {b"b": None, b"d": None}, b"", b"\xff"),
        # a delete of a key the store lacks, an empty store
        ([], {b"q": None, b"p": b"x"}, b"", b"\xff"),
        # the range bounds exclude buffered keys just outside them
        ([b"b", b"c", b"d"], {b"a": b"x", b"c": b"y", b"e": b"x"}, b"b", b"d"),
        # an inverted range is empty
        ([b"b"], {b"c": b"x"}, b"d", b"a"),
        # bytes order: a prefix sorts before its extensions, 0xff after everything
        ([b"a", b"a\x00"], {b"a\x00\x00": b"x", b"\xff": b"y", b"": b"e"}, b"", b"\xff"),
    ],
)
def test_range_merges_the_buffer_into_the_store_in_key_order(
    store: Any, stored: list[bytes], buffered: dict[bytes, bytes | None], low: bytes, high: bytes
) -> None:
    store.put_all([(k, b"s" + k) for k in stored])
    buffer = TransactionBuffer(store)
    for key, value in buffered.items():
        buffer.put(key, value)
    model = {k: b"s" + k for k in stored}
    for key, value in buffered.items():
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value
    expected = sorted((k, v) for k, v in model.items() if low <= k <= high)
    assert list(buffer.range(low, high)) == expected
    assert list(buffer.all()) == sorted(model.items())


def test_range_matches_a_model_over_random_writes(store: Any) -> None:
    rng = random.Random(7)
    model: dict[bytes, bytes] = {}
    keys = [bytes([rng.randrange(8), rng.randrange(8)]) for _ in range(200)]
    initial = [(k, b"v%d" % i) for i, k in enumerate(keys[:60])]
    store.put_all(initial)
    model.update(initial)
    buffer = TransactionBuffer(store)
    for i in range(300):
        key = rng.choice(keys)
        if rng.random() < 0.3:
            buffer.delete(key)
            model.pop(key, None)
        else:
            buffer.put(key, b"w%d" % i)
            model[key] = b"w%d" % i
        if i % 50 == 0:
            low, high = sorted(rng.sample(keys, 2))
            assert list(buffer.range(low, high)) == sorted(
                (k, v) for k, v in model.items() if low <= k <= high
            )
    assert list(buffer.all()) == sorted(model.items())
    buffer.commit()
    assert list(store.all()) == sorted(model.items())


def test_scans_are_lazy_over_the_store(store: Any) -> None:
    store.put_all([(b"k%06d" % i, b"v") for i in range(5_000)])
    buffer = TransactionBuffer(store)
    buffer.put(b"k000001x", b"new")
    scan = buffer.all()
    assert [next(scan) for _ in range(3)] == [
        (b"k000000", b"v"),
        (b"k000001", b"v"),
        (b"k000001x", b"new"),
    ]


def test_uncommitted_bytes_count_keys_and_latest_values(store: Any) -> None:
    buffer = TransactionBuffer(store)
    buffer.put(b"key", b"12345")
    assert buffer.uncommitted_bytes == 8
    buffer.put(b"key", b"1")
    assert buffer.uncommitted_bytes == 4
    buffer.delete(b"key")
    buffer.put(b"k2", b"xx")
    assert buffer.uncommitted_bytes == 3 + 4
    with pytest.raises(TypeError):
        buffer.put("str", b"x")  # type: ignore[arg-type]


def test_approximate_num_entries_counts_buffered_puts_and_deletes(store: Any) -> None:
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    buffer = TransactionBuffer(store)
    buffer.put(b"c", b"3")
    buffer.delete(b"a")
    assert buffer.approximate_num_entries() == 2
    buffer.commit()
    assert buffer.approximate_num_entries() == 2


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (KafkaError(KafkaError._FENCED, fatal=True), TransactionErrorKind.PRODUCER_FENCED),
        (KafkaError(KafkaError.PRODUCER_FENCED), TransactionErrorKind.PRODUCER_FENCED),
        (KafkaError(KafkaError.INVALID_PRODUCER_EPOCH), TransactionErrorKind.PRODUCER_FENCED),
        (KafkaError(KafkaError._FATAL), TransactionErrorKind.PRODUCER_FENCED),
        (
            KafkaError(KafkaError.UNKNOWN_MEMBER_ID, txn_requires_abort=True),
            TransactionErrorKind.TASK_MIGRATED,
        ),
        (KafkaError(KafkaError.ILLEGAL_GENERATION), TransactionErrorKind.REBALANCE_IN_PROGRESS),
        (KafkaError(KafkaError.REBALANCE_IN_PROGRESS), TransactionErrorKind.REBALANCE_IN_PROGRESS),
        (KafkaError(KafkaError.FENCED_INSTANCE_ID), TransactionErrorKind.TASK_MIGRATED),
        (
            KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, txn_requires_abort=True),
            TransactionErrorKind.ABORTABLE,
        ),
        (KafkaError(KafkaError._TIMED_OUT, retriable=True), TransactionErrorKind.RETRIABLE),
        (
            KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, retriable=True),
            TransactionErrorKind.RETRIABLE,
        ),
        (KafkaError(KafkaError.INVALID_CONFIG), TransactionErrorKind.OTHER),
    ],
)
def test_transactional_errors_are_classified_as_kafka_streams_handles_them(
    error: KafkaError, kind: TransactionErrorKind
) -> None:
    assert classify_transaction(error) is kind


def test_the_process_id_is_made_once_and_read_back(tmp_path: Path) -> None:
    first = process_id(tmp_path / "app")
    assert process_id(tmp_path / "app") == first
    assert process_id(tmp_path / "other") != first
    (tmp_path / "app" / PROCESS_FILE).write_text("{not json")
    replaced = process_id(tmp_path / "app")
    assert replaced != first and process_id(tmp_path / "app") == replaced
