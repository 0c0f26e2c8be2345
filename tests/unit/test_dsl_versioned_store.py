"""Versioned key-value stores (KIP-889) and versioned tables (KIP-914).

Ports of Kafka's ``RocksDBVersionedStoreTest`` (the semantic cases: put, get, get as of,
tombstones, out-of-order puts, repeated timestamps, delete, retention, restoration; segments
are not modelled, so the segment-named cases check the same versions without segments), of the
versioned cases of ``KTableAggregateTest`` and ``KTableFilterTest``, and a program whose
expected outputs are Java's ``TopologyTestDriver`` 4.4 on the same programs
(``benches/kstreams/VersionedTablesOracle.java``, compared live by
``tests/integration/test_dsl_versioned_oracle.py``: out-of-order updates reach ``to_stream``,
not ``group_by``; expired puts are dropped).
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import pytest
from tests.dsl_support import Capture, capture, dropped

from streamstate.dsl import Materialized, StreamsBuilder
from streamstate.dsl.stores import StoreSerdes, ValueAndTimestamp
from streamstate.dsl.versioned_store import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedKeyValueStore,
    VersionedRecord,
    VersionedStoreOpener,
)
from streamstate.errors import TopologyError
from streamstate.serde import BytesDeserializer, Serdes, StringDeserializer, StringSerializer
from streamstate.state.stores import InMemoryKeyValueStore, process_next
from streamstate.testing import TopologyTestDriver

HISTORY_RETENTION = 300_000
GRACE_PERIOD = HISTORY_RETENTION  # history retention doubles as grace period
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
BASE = 10
UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED
NOT_PUT = PUT_RETURN_CODE_NOT_PUT
SI = SEGMENT_INTERVAL
TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
RAW = BytesDeserializer()
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}


class LoggedBytes:
    """An in-memory byte store that records what a changelog would carry."""

    def __init__(self) -> None:
        self.inner = InMemoryKeyValueStore("versioned")
        self.changelog: list[tuple[bytes, bytes | None]] = []

    def get(self, key: bytes) -> bytes | None:
        value = self.inner.get(key)
        return None if value is None else bytes(value)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.inner.put(key, value)
        self.changelog.append((key, value))

    def range(self, low: bytes, high: bytes) -> Any:
        return self.inner.range(low, high)

    def approximate_num_entries(self) -> int:
        return int(self.inner.approximate_num_entries())


def make(retention: int = HISTORY_RETENTION, inner: Any = None) -> VersionedKeyValueStore:
    serdes = StoreSerdes("versioned", Serdes.String(), Serdes.String())
    return VersionedKeyValueStore(inner if inner is not None else LoggedBytes(), serdes, retention)


@pytest.fixture
def store() -> VersionedKeyValueStore:
    return make()


def put(store: VersionedKeyValueStore, key: str, value: str | None, ts: int, code: int) -> None:
    """Kafka's ``putToStore``: the put and its return code (the new version's valid-to)."""
    assert store.put(key, value, ts) == code, (key, value, ts)


def latest(store: VersionedKeyValueStore, key: str, value: str, ts: int) -> None:
    """``verifyGetValueFromStore``."""
    assert store.get(key) == VersionedRecord(value, ts)


def latest_none(store: VersionedKeyValueStore, key: str) -> None:
    """``verifyGetNullFromStore``."""
    assert store.get(key) is None


def as_of(  # noqa: PLR0917 - Kafka's verifyTimestampedGetValueFromStore, positional
    store: VersionedKeyValueStore, key: str, at: int, value: str, ts: int, to: int
) -> None:
    """``verifyTimestampedGetValueFromStore`` (``to`` -1: the latest version, no valid-to)."""
    assert store.get(key, at) == VersionedRecord(value, ts, None if to == UNDEFINED else to)


def as_of_none(store: VersionedKeyValueStore, key: str, at: int) -> None:
    """``verifyTimestampedGetNullFromStore``."""
    assert store.get(key, at) is None, at


# -- RocksDBVersionedStoreTest ---------------------------------------------------------------


def test_should_put_latest(store: VersionedKeyValueStore) -> None:
    put(store, "k", "v", BASE, UNDEFINED)
    put(store, "k", "v2", BASE + 1, UNDEFINED)
    latest(store, "k", "v2", BASE + 1)
    as_of(store, "k", BASE, "v", BASE, BASE + 1)
    as_of(store, "k", BASE + 1, "v2", BASE + 1, UNDEFINED)
    as_of(store, "k", BASE + 2, "v2", BASE + 1, UNDEFINED)


def test_should_put_null_as_latest(store: VersionedKeyValueStore) -> None:
    put(store, "k", None, BASE, UNDEFINED)
    put(store, "k", None, BASE + 1, UNDEFINED)
    latest_none(store, "k")
    for at in (BASE, BASE + 1, BASE + 2):
        as_of_none(store, "k", at)


@pytest.mark.parametrize("first", ["v", None], ids=["non-null-latest", "null-latest"])
def test_should_put_older_with_latest(store: VersionedKeyValueStore, first: str | None) -> None:
    """``shouldPutOlderWithNonNullLatest`` and ``shouldPutOlderWithNullLatest``."""
    put(store, "k", first, BASE, UNDEFINED)
    put(store, "k", "v2", BASE - 2, BASE)
    put(store, "k", "v1", BASE - 1, BASE)
    put(store, "k", "v4", BASE - 4, BASE - 2)
    if first is None:
        latest_none(store, "k")
        as_of_none(store, "k", BASE)
    else:
        latest(store, "k", "v", BASE)
        as_of(store, "k", BASE, "v", BASE, UNDEFINED)
    as_of(store, "k", BASE - 1, "v1", BASE - 1, BASE)
    as_of(store, "k", BASE - 2, "v2", BASE - 2, BASE - 1)
    as_of(store, "k", BASE - 3, "v4", BASE - 4, BASE - 2)


def test_should_put_older_null_with_non_null_latest(store: VersionedKeyValueStore) -> None:
    put(store, "k", "v", BASE, UNDEFINED)
    put(store, "k", None, BASE - 2, BASE)
    put(store, "k", None, BASE - 1, BASE)
    put(store, "k", None, BASE - 4, BASE - 2)
    put(store, "k", "v5", BASE - 5, BASE - 4)
    put(store, "k", "v3", BASE - 3, BASE - 2)
    put(store, "k", None, BASE - 6, BASE - 5)
    latest(store, "k", "v", BASE)
    as_of(store, "k", BASE, "v", BASE, UNDEFINED)
    as_of_none(store, "k", BASE - 1)
    as_of_none(store, "k", BASE - 2)
    as_of(store, "k", BASE - 3, "v3", BASE - 3, BASE - 2)
    as_of_none(store, "k", BASE - 4)
    as_of(store, "k", BASE - 5, "v5", BASE - 5, BASE - 4)
    as_of_none(store, "k", BASE - 6)


def test_should_put_older_null_with_null_latest(store: VersionedKeyValueStore) -> None:
    put(store, "k", None, BASE, UNDEFINED)
    put(store, "k", None, BASE - 2, BASE)
    put(store, "k", None, BASE - 1, BASE)
    put(store, "k", None, BASE - 4, BASE - 2)
    put(store, "k", "v3", BASE - 3, BASE - 2)
    put(store, "k", "v5", BASE - 5, BASE - 4)
    put(store, "k", None, BASE - 6, BASE - 5)
    latest_none(store, "k")
    for at in (BASE, BASE - 1, BASE - 2, BASE - 4, BASE - 6):
        as_of_none(store, "k", at)
    as_of(store, "k", BASE - 3, "v3", BASE - 3, BASE - 2)
    as_of(store, "k", BASE - 5, "v5", BASE - 5, BASE - 4)


def test_should_put_repeat_timestamp_as_latest(store: VersionedKeyValueStore) -> None:
    put(store, "k", "to_be_replaced", BASE, UNDEFINED)
    put(store, "k", "b", BASE, UNDEFINED)
    latest(store, "k", "b", BASE)
    as_of(store, "k", BASE, "b", BASE, UNDEFINED)
    as_of_none(store, "k", BASE - 1)
    for _ in range(2):
        put(store, "k", None, BASE, UNDEFINED)
        latest_none(store, "k")
        as_of_none(store, "k", BASE)
        as_of_none(store, "k", BASE - 1)
    put(store, "k", "b", BASE, UNDEFINED)
    latest(store, "k", "b", BASE)
    as_of(store, "k", BASE, "b", BASE, UNDEFINED)
    as_of_none(store, "k", BASE - 1)


# The puts of shouldPutRepeatTimestamps (and, as changelog records, of
# shouldRestoreWithNullsAndRepeatTimestamps), with the return codes Kafka asserts.
REPEAT_TIMESTAMPS = [
    ("to_be_replaced", SI + 20, UNDEFINED),
    (None, SI - 10, SI + 20),
    ("to_be_replaced", SI - 10, SI + 20),
    (None, SI - 10, SI + 20),
    ("to_be_replaced", SI - 1, SI + 20),
    ("to_be_replaced", SI + 1, SI + 20),
    (None, SI - 1, SI + 1),
    (None, SI + 1, SI + 20),
    (None, SI + 10, SI + 20),
    (None, SI + 5, SI + 10),
    ("vp5", SI + 5, SI + 10),
    ("to_be_replaced", SI - 5, SI - 1),
    ("vn5", SI - 5, SI - 1),
    (None, SI + 20, UNDEFINED),
    (None, SI + 20, UNDEFINED),
    ("vn6", SI - 6, SI - 5),
]


def check_repeat_timestamps(store: VersionedKeyValueStore) -> None:
    latest_none(store, "k")
    for at in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        as_of_none(store, "k", at)
    as_of(store, "k", SI + 6, "vp5", SI + 5, SI + 10)
    as_of(store, "k", SI - 5, "vn5", SI - 5, SI - 1)
    as_of(store, "k", SI - 6, "vn6", SI - 6, SI - 5)


def test_should_put_repeat_timestamps(store: VersionedKeyValueStore) -> None:
    for value, ts, code in REPEAT_TIMESTAMPS:
        put(store, "k", value, ts, code)
    check_repeat_timestamps(store)


MULTIPLE_SEGMENTS = [
    (None, SI - 20),
    ("vn10", SI - 10),
    (None, SI - 1),
    (None, SI + 1),
    ("vp10", SI + 10),
    (None, SI + 20),
]


def check_multiple_segments(store: VersionedKeyValueStore) -> None:
    latest_none(store, "k")
    for at in (SI + 30, SI + 5, SI + 2, SI, SI - 1, SI - 15):
        as_of_none(store, "k", at)
    as_of(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    as_of(store, "k", SI - 5, "vn10", SI - 10, SI - 1)


def test_should_put_into_multiple_segments(store: VersionedKeyValueStore) -> None:
    for value, ts in MULTIPLE_SEGMENTS:
        put(store, "k", value, ts, UNDEFINED)
    check_multiple_segments(store)


MOVE_TO_OLDER = [
    ("vp20", SI + 20, UNDEFINED),
    ("vp10", SI + 10, SI + 20),
    ("vn10", SI - 10, SI + 10),
    ("vn2", SI - 2, SI + 10),
    ("vn1", SI - 1, SI + 10),
    ("vp1", SI + 1, SI + 10),
]


def check_move_to_older(store: VersionedKeyValueStore) -> None:
    latest(store, "k", "vp20", SI + 20)
    as_of(store, "k", SI + 30, "vp20", SI + 20, UNDEFINED)
    as_of(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    as_of(store, "k", SI + 5, "vp1", SI + 1, SI + 10)
    as_of(store, "k", SI, "vn1", SI - 1, SI + 1)
    as_of(store, "k", SI - 1, "vn1", SI - 1, SI + 1)
    as_of(store, "k", SI - 2, "vn2", SI - 2, SI - 1)
    as_of(store, "k", SI - 5, "vn10", SI - 10, SI - 2)


def test_should_move_record_to_older_segment_during_put(store: VersionedKeyValueStore) -> None:
    for value, ts, code in MOVE_TO_OLDER:
        put(store, "k", value, ts, code)
    check_move_to_older(store)


WITH_NULLS = [
    (None, SI + 20, UNDEFINED),
    (None, SI - 1, SI + 20),
    (None, SI + 1, SI + 20),
    (None, SI - 10, SI - 1),
    (None, SI + 10, SI + 20),
    ("vp5", SI + 5, SI + 10),
    ("vn5", SI - 5, SI - 1),
    ("vn6", SI - 6, SI - 5),
]


def test_should_move_record_to_older_segment_with_nulls_during_put(
    store: VersionedKeyValueStore,
) -> None:
    for value, ts, code in WITH_NULLS:
        put(store, "k", value, ts, code)
    check_repeat_timestamps(store)  # the same versions as shouldPutRepeatTimestamps


def test_should_fall_through_to_existing_older_segment_as_latest_during_put(
    store: VersionedKeyValueStore,
) -> None:
    put(store, "k", None, SI - 5, UNDEFINED)
    put(store, "k", "vn6", SI - 6, SI - 5)
    put(store, "k", "vp20", SI + 20, UNDEFINED)
    put(store, "k", None, SI + 10, SI + 20)
    put(store, "k", None, SI - 1, SI + 10)
    put(store, "k", "vn2", SI - 2, SI - 1)
    latest(store, "k", "vp20", SI + 20)
    as_of(store, "k", SI + 30, "vp20", SI + 20, UNDEFINED)
    for at in (SI + 12, SI, SI - 1, SI - 5):
        as_of_none(store, "k", at)
    as_of(store, "k", SI - 2, "vn2", SI - 2, SI - 1)
    as_of(store, "k", SI - 6, "vn6", SI - 6, SI - 5)


def test_should_put_non_latest_tombstone_into_new_segment_with_valid_to(
    store: VersionedKeyValueStore,
) -> None:
    put(store, "k", "vp30", SI + 30, UNDEFINED)
    put(store, "k", None, SI - 10, SI + 30)
    put(store, "k", "vn5", SI - 5, SI + 30)
    put(store, "k", "vn1", SI - 1, SI + 30)
    put(store, "k", None, SI - 2, SI - 1)
    latest(store, "k", "vp30", SI + 30)
    as_of(store, "k", SI + 10, "vn1", SI - 1, SI + 30)
    as_of(store, "k", SI - 1, "vn1", SI - 1, SI + 30)
    as_of_none(store, "k", SI - 2)
    as_of(store, "k", SI - 5, "vn5", SI - 5, SI - 2)
    as_of_none(store, "k", SI - 10)


def test_should_delete(store: VersionedKeyValueStore) -> None:
    for value, ts, code in MOVE_TO_OLDER[:4]:
        put(store, "k", value, ts, code)
    assert store.delete("k", SI - 5) == VersionedRecord("vn10", SI - 10, SI - 2)
    assert store.delete("k", SI + 10) == VersionedRecord("vp10", SI + 10, SI + 20)
    assert store.delete("k", SI + 10) is None
    assert store.delete("k", SI + 25) == VersionedRecord("vp20", SI + 20)
    latest_none(store, "k")


def test_should_not_put_expired(store: VersionedKeyValueStore) -> None:
    put(store, "k", "v", HISTORY_RETENTION + 10, UNDEFINED)
    put(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD, UNDEFINED)
    latest(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    put(store, "k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, NOT_PUT)
    latest_none(store, "k2")


def test_should_not_delete_expired(store: VersionedKeyValueStore) -> None:
    put(store, "k1", "v1", 1, UNDEFINED)
    put(store, "k2", "v2", 1, UNDEFINED)
    put(store, "kother", "vother", HISTORY_RETENTION + 10, UNDEFINED)
    assert store.delete("k1", HISTORY_RETENTION + 10 - GRACE_PERIOD) == VersionedRecord("v1", 1)
    latest_none(store, "k1")
    assert store.delete("k2", HISTORY_RETENTION + 9 - GRACE_PERIOD) is None
    latest(store, "k2", "v2", 1)


def test_should_get_from_older_segments(store: VersionedKeyValueStore) -> None:
    for n in (1, 2, 3):
        put(store, "ko", None, n * SI - 10, UNDEFINED)
    as_of_none(store, "k", SI - 20)
    put(store, "k", "v", SI - 20, UNDEFINED)
    put(store, "k", None, SI - 10, UNDEFINED)
    for later_segment in (False, True):
        if later_segment:
            # A non-empty later "segment" does not change what the earlier one answers.
            put(store, "k", "v2", 3 * SI - 20, UNDEFINED)
            put(store, "k", None, 3 * SI - 10, UNDEFINED)
        as_of_none(store, "k", SI - 30)
        as_of(store, "k", SI - 15, "v", SI - 20, SI - 10)
        as_of_none(store, "k", SI - 5)


def test_should_not_get_expired(store: VersionedKeyValueStore) -> None:
    put(store, "k", "v_old", 0, UNDEFINED)
    put(store, "k", "v", SI - 10, UNDEFINED)
    as_of(store, "k", SI - 11, "v_old", 0, SI - 10)
    put(store, "ko", "vo", HISTORY_RETENTION + SI - 11, UNDEFINED)
    as_of(store, "k", SI - 11, "v_old", 0, SI - 10)
    put(store, "ko", "vo2", HISTORY_RETENTION + SI - 10, UNDEFINED)
    as_of_none(store, "k", SI - 11)


def test_should_get_expired_if_latest_value(store: VersionedKeyValueStore) -> None:
    put(store, "k", "v", 1, UNDEFINED)
    put(store, "ko", "vo_old", 1, UNDEFINED)
    put(store, "ko", "vo_new", HISTORY_RETENTION + 12, UNDEFINED)
    as_of(store, "k", 10, "v", 1, UNDEFINED)
    as_of_none(store, "ko", 10)


def test_should_distinguish_empty_and_null(store: VersionedKeyValueStore) -> None:
    for value, ts, code in WITH_NULLS:
        put(store, "k", "" if value is not None else None, ts, code)
    latest_none(store, "k")
    for at in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        as_of_none(store, "k", at)
    as_of(store, "k", SI + 6, "", SI + 5, SI + 10)
    as_of(store, "k", SI - 5, "", SI - 5, SI - 1)
    as_of(store, "k", SI - 6, "", SI - 6, SI - 5)


def test_should_allow_zero_history_retention() -> None:
    store = make(retention=0)
    put(store, "k", "v", BASE, UNDEFINED)
    latest(store, "k", "v", BASE)
    as_of(store, "k", BASE, "v", BASE, UNDEFINED)
    as_of(store, "k", BASE + 1, "v", BASE, UNDEFINED)
    put(store, "k", "updated", BASE, UNDEFINED)
    latest(store, "k", "updated", BASE)
    as_of(store, "k", BASE, "updated", BASE, UNDEFINED)
    put(store, "k", "v2", BASE + 2, UNDEFINED)
    latest(store, "k", "v2", BASE + 2)
    as_of(store, "k", BASE + 2, "v2", BASE + 2, UNDEFINED)
    as_of_none(store, "k", BASE + 1)
    store.delete("k", BASE + 3)
    latest_none(store, "k")
    put(store, "k2", "v", BASE + 2, NOT_PUT)
    latest_none(store, "k2")


def test_expired_history_is_dropped_when_its_key_is_written() -> None:
    # Not Kafka's (it drops whole segments): a key's versions no allowed read can reach are
    # removed from its entry at its next write; the latest version stays.
    inner = LoggedBytes()
    store = make(retention=100, inner=inner)
    for n in range(10):
        put(store, "k", f"v{n}", n * 100, UNDEFINED)
    # Left: v8 (valid until 900, the horizon is 800) and v9; 8 bytes + 2 x (12 + 2).
    assert len(inner.get(b"\x00k") or b"") == 8 + 2 * (12 + 2)
    as_of(store, "k", 800, "v8", 800, 900)
    as_of_none(store, "k", 799)
    put(store, "gone", None, 900, UNDEFINED)
    put(store, "other", "x", 1100, UNDEFINED)
    put(store, "gone", "back", 1000, UNDEFINED)
    latest(store, "gone", "back", 1000)
    # The tombstone at 900 (before the horizon, 1000) went with that write.
    assert len(inner.get(b"\x00gone") or b"") == 8 + 12 + 4


# -- restoration ------------------------------------------------------------------------------


class ChangelogRecord(NamedTuple):
    offset: int
    key: bytes
    value: bytes | None


def restored(changelog: list[tuple[bytes, bytes | None]], compacted: bool) -> Any:
    """A fresh store rebuilt from ``changelog`` by the restoration step (``process_next``),
    from every record or from the last record per key (a compacted changelog)."""
    if compacted:
        last = dict(changelog)
        changelog = [(key, value) for key, value in changelog if last[key] is value]
    store = InMemoryKeyValueStore("restored")
    replay = [ChangelogRecord(i, key, value) for i, (key, value) in enumerate(changelog)]
    process_next(store, replay, len(replay))
    return make(inner=store)


@pytest.mark.parametrize("compacted", [False, True], ids=["full", "compacted"])
@pytest.mark.parametrize(
    ("puts", "check"),
    [
        ([(v, t) for v, t, _ in MOVE_TO_OLDER], check_move_to_older),
        ([(v, t) for v, t, _ in WITH_NULLS], check_repeat_timestamps),
        ([(v, t) for v, t, _ in REPEAT_TIMESTAMPS], check_repeat_timestamps),
        (MULTIPLE_SEGMENTS, check_multiple_segments),
    ],
    ids=["restore", "with-nulls", "with-nulls-and-repeat-timestamps", "multiple-batches"],
)
def test_should_restore(puts: list[Any], check: Any, compacted: bool) -> None:
    """``shouldRestore``, ``shouldRestoreWithNulls``, ``shouldRestoreWithNullsAndRepeat
    Timestamps``, ``shouldRestoreMultipleBatches``: the store the changelog of these puts
    restores answers as the store that was written."""
    inner = LoggedBytes()
    written = make(inner=inner)
    for value, ts in puts:
        written.put("k", value, ts)
    check(written)
    check(restored(inner.changelog, compacted))


def test_should_not_restore_expired() -> None:
    # An expired put writes nothing, so its changelog has nothing to restore; the restored
    # store knows the observed stream time and refuses it too.
    inner = LoggedBytes()
    store = make(inner=inner)
    put(store, "k", "v", HISTORY_RETENTION + 10, UNDEFINED)
    put(store, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD, UNDEFINED)
    put(store, "k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, NOT_PUT)
    again = restored(inner.changelog, compacted=True)
    latest(again, "k", "v", HISTORY_RETENTION + 10)
    latest(again, "k1", "v1", HISTORY_RETENTION + 10 - GRACE_PERIOD)
    latest_none(again, "k2")
    assert again.observed_stream_time == HISTORY_RETENTION + 10
    put(again, "k2", "v2", HISTORY_RETENTION + 9 - GRACE_PERIOD, NOT_PUT)


# -- versioned tables on the TopologyTestDriver -----------------------------------------------


ORACLE_INPUT = [
    ("k", "a", 100), ("k", "b", 50), ("k", "c", 200), ("k", None, 150), ("k", "d", 300),
    ("k", "e", 150), ("k", "f", 250), ("j", None, 300), ("j", "x", 280), ("k", "old", 190),
    ("k", "no", 400), ("k", None, 500), ("k", "g", 450),
]  # fmt: skip


def oracle_program(to_table: bool) -> StreamsBuilder:
    builder = StreamsBuilder()
    mat = Materialized("vs", versioned_retention=100)
    if to_table:
        table = builder.stream("in").to_table(materialized=mat)
    else:
        table = builder.table("in", materialized=mat)
    table.to_stream().to("out")
    table.filter(lambda k, v: v != "no").to_stream().to("filtered")
    table.map_values(lambda v: v + "!").to_stream().to("mapped")
    (
        table.group_by(lambda k, v: (v, v))
        .count(materialized=Materialized("cnt", caching=False))
        .to_stream()
        .map_values(str)
        .to("counts")
    )
    return builder


def read(driver: TopologyTestDriver, topic: str) -> str:
    out = driver.create_output_topic(topic, READ_TEXT, READ_TEXT).read_records_to_list()
    return " ".join(f"{r.key}={r.value}@{r.timestamp}" for r in out)


@pytest.mark.parametrize("to_table", [False, True], ids=["table", "to_table"])
def test_a_versioned_table_as_javas_topology_test_driver_runs_it(to_table: bool) -> None:
    # Java's TopologyTestDriver 4.4 on the same program (VersionedTablesOracle.java, builder.table
    # with Stores.persistentVersionedKeyValueStore("vs", 100 ms)): out-of-order updates reach
    # to_stream, filter and map_values (KIP-914 forwards them with isLatest=false) but not the
    # count (group_by skips them); puts older than the retention (e@150, old@190 once stream
    # time is 300) are neither stored nor forwarded.
    with TopologyTestDriver(oracle_program(to_table).build(), STRINGS) as driver:
        topic = driver.create_input_topic("in", TEXT, TEXT)
        for key, value, ts in ORACLE_INPUT:
            topic.pipe_input(key, value, ts)
        assert read(driver, "out") == (
            "k=a@100 k=b@50 k=c@200 k=None@150 k=d@300 k=f@250 j=None@300 j=x@280 k=no@400 "
            "k=None@500 k=g@450"
        )
        assert read(driver, "filtered") == (
            "k=a@100 k=b@50 k=c@200 k=None@150 k=d@300 k=f@250 j=None@300 j=x@280 "
            "k=None@400 k=None@500 k=g@450"
        )
        assert read(driver, "mapped") == (
            "k=a!@100 k=b!@50 k=c!@200 k=None@150 k=d!@300 k=f!@250 j=None@300 j=x!@280 "
            "k=no!@400 k=None@500 k=g!@450"
        )
        assert read(driver, "counts") == (
            "a=1@100 a=0@200 c=1@200 c=0@300 d=1@300 d=0@400 no=1@400 no=0@500"
        )
        store = driver.get_versioned_key_value_store("vs")
        assert store.get("k") is None
        assert store.get("j") is None
        answers = {at: store.get("k", at) for at in (0, 300, 399, 400, 449, 450, 499, 500, 600)}
        assert answers == {
            0: None,
            300: None,
            399: None,
            400: VersionedRecord("no", 400, 450),
            449: VersionedRecord("no", 400, 450),
            450: VersionedRecord("g", 450, 500),
            499: VersionedRecord("g", 450, 500),
            500: None,
            600: None,
        }
        assert [store.get("j", at) for at in (279, 280, 299, 300, 500)] == [None] * 5
        assert dropped(driver) == 2
        assert driver.get_key_value_store("vs").get("k", 450) == VersionedRecord("g", 450, 500)


def test_a_versioned_table_logs_each_out_of_order_update(caplog: Any) -> None:
    builder = StreamsBuilder()
    builder.table("in", materialized=Materialized("vs", versioned_retention=100))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("in", TEXT, TEXT)
        with caplog.at_level(logging.WARNING):
            topic.pipe_input("k", "a", 100)
            topic.pipe_input("k", "b", 50)
            topic.pipe_input("k", "c", 300)
            topic.pipe_input("k", "d", 100)
        messages = [r.getMessage() for r in caplog.records]
        assert (
            "Detected out-of-order KTable update for vs, old timestamp=[100] new timestamp=[50]."
            in messages
        )
        assert any(m.startswith("Skipping record for expired put") for m in messages)
        assert driver.get_versioned_key_value_store("vs").get("k", 99) is None  # expired


def test_ktable_aggregate_test_agg_of_versioned_store() -> None:
    """``KTableAggregateTest.testAggOfVersionedStore``."""

    def selector(key: str, value: str) -> Any:
        if key == "null":
            return (None, value)
        if key == "NULL":
            return None
        return (value, value)

    builder = StreamsBuilder()
    table2 = (
        builder.table(
            "topic1",
            key_serde=Serdes.String(),
            value_serde=Serdes.String(),
            materialized=Materialized("versioned", versioned_retention=300_000),
        )
        .group_by(selector, key_serde=Serdes.String(), value_serde=Serdes.String())
        .aggregate(
            lambda: "0",
            lambda _k, v, agg: f"{agg}+{v}",
            lambda _k, v, agg: f"{agg}-{v}",
            materialized=Materialized("topic1-Canonized", value_serde=Serdes.String()),
        )
    )
    out = capture(table2.to_stream())
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
            ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        ("1", "0+1", 10),
        ("1", "0+1-1", 15),
        ("2", "0+2", 20),
        ("2", "0+2-2", 23),
        ("4", "0+4", 23),
    ]


def test_ktable_aggregate_test_count_of_versioned_store() -> None:
    """``KTableAggregateTest.testCountOfVersionedStore``."""
    builder = StreamsBuilder()
    table = (
        builder.table(
            "count-test-input",
            key_serde=Serdes.String(),
            value_serde=Serdes.String(),
            materialized=Materialized("versioned", versioned_retention=300_000),
        )
        .group_by(lambda k, v: (v, v), key_serde=Serdes.String(), value_serde=Serdes.String())
        .count()
    )
    out = capture(table.to_stream())
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("count-test-input", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("A", "blue", 11),
            ("C", "yellow", 15), ("D", "green", 11),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        ("green", 1, 10),
        ("green", 2, 10),
        ("green", 1, 12),
        ("blue", 1, 12),
        ("yellow", 1, 15),
        ("green", 2, 12),
    ]


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned-upstream", "not-versioned"])
def test_ktable_filter_test_should_not_skip_null_if_versioned_upstream(versioned: bool) -> None:
    """``KTableFilterTest.shouldNotSkipNullIfVersionedUpstream`` (and, not versioned,
    ``shouldSkipNullToRepartitionWithoutMaterialization``): a group_by below a filter asks for
    old values; a filter over a versioned table still forwards every rejected row."""
    builder = StreamsBuilder()
    mat = Materialized("versioned", versioned_retention=300_000) if versioned else None
    table1 = builder.table(
        "topic1", key_serde=Serdes.String(), value_serde=Serdes.String(), materialized=mat
    )
    table2 = table1.filter(lambda k, v: v.lower() == "accept")
    table2.group_by(lambda k, v: (k, v)).reduce(lambda a, v: a + v, lambda a, v: a)
    source_changes: list[Any] = []
    filter_changes: list[Any] = []
    builder.topology.add_processor("proc1", lambda: Capture(source_changes), table1.name)
    builder.topology.add_processor("proc2", lambda: Capture(filter_changes), table2.name)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, ts in (("A", 5), ("B", 10), ("C", 20)):
            topic.pipe_input(key, "reject", ts)
    assert source_changes == [
        ("A", ("reject", None), 5),
        ("B", ("reject", None), 10),
        ("C", ("reject", None), 20),
    ]
    if versioned:
        assert filter_changes == [
            ("A", (None, None), 5),
            ("B", (None, None), 10),
            ("C", (None, None), 20),
        ]
    else:
        assert filter_changes == []


def test_ktable_filter_test_should_skip_null_if_versioned_downstream() -> None:
    """``KTableFilterTest.shouldSkipNullIfVersionedDownstream``: a filter materialized in a
    versioned store over a non-versioned table still skips rows that never passed."""
    builder = StreamsBuilder()
    table1 = builder.table(
        "topic1",
        key_serde=Serdes.String(),
        value_serde=Serdes.String(),
        materialized=Materialized("store"),
    )
    table2 = table1.filter(
        lambda k, v: v.lower() == "accept",
        materialized=Materialized("versioned", versioned_retention=300_000),
    )
    table2.group_by(lambda k, v: (k, v)).reduce(lambda a, v: a + v, lambda a, v: a)
    filter_changes: list[Any] = []
    builder.topology.add_processor("proc2", lambda: Capture(filter_changes), table2.name)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, ts in (("A", 5), ("B", 10), ("C", 20)):
            topic.pipe_input(key, "reject", ts)
    assert filter_changes == []


def derived_program() -> StreamsBuilder:
    """A non-versioned table filtered and mapped into versioned stores (100 ms), the filter
    counted by value (``derived`` in ``benches/kstreams/VersionedTablesOracle.java``)."""
    builder = StreamsBuilder()
    table = builder.table("in", materialized=Materialized("plain", caching=False))
    filtered = table.filter(
        lambda k, v: not v.startswith("x"),
        materialized=Materialized("vf", versioned_retention=100),
    )
    filtered.to_stream().to("filtered")
    table.map_values(
        lambda v: v + "!", materialized=Materialized("vm", versioned_retention=100)
    ).to_stream().to("mapped")
    (
        filtered.group_by(lambda k, v: (v, v))
        .count(materialized=Materialized("cnt", caching=False))
        .to_stream()
        .map_values(str)
        .to("counts")
    )
    return builder


DERIVED_INPUT = [
    ("k", "a", 100), ("k", "b", 50), ("k", "xc", 200), ("k", "d", 150), ("k", "e", 400),
    ("k", "f", 250), ("k", "g", 450),
]  # fmt: skip


def test_filter_and_map_values_materialized_in_versioned_stores_as_java_runs_them() -> None:
    # Java's TopologyTestDriver 4.4 on the same program (VersionedTablesOracle.java, checked
    # live by tests/integration/test_dsl_versioned_oracle.py): the filter's out-of-order
    # updates are forwarded but not counted; f@250 is past the filter store's retention (its
    # stream time is 400) and is neither stored nor forwarded, nor is it by the map's store.
    with TopologyTestDriver(derived_program().build(), STRINGS) as driver:
        topic = driver.create_input_topic("in", TEXT, TEXT)
        for key, value, ts in DERIVED_INPUT:
            topic.pipe_input(key, value, ts)
        assert read(driver, "filtered") == "k=a@100 k=b@50 k=None@200 k=d@150 k=e@400 k=g@450"
        assert read(driver, "mapped") == "k=a!@100 k=b!@50 k=xc!@200 k=d!@150 k=e!@400 k=g!@450"
        assert read(driver, "counts") == "a=1@100 a=0@200 e=1@400 e=0@450 g=1@450"
        store = driver.get_versioned_key_value_store("vf")
        answers = [store.get("k", at) for at in (49, 50, 100, 150, 199, 200, 300, 350, 400, 450)]
        assert answers == [None] * 8 + [
            VersionedRecord("e", 400, 450),
            VersionedRecord("g", 450),
        ]
        assert store.get("k") == VersionedRecord("g", 450)
        assert dropped(driver) == 2


# -- the store's changelog and its restoration on the driver ----------------------------------


def test_the_changelog_restores_the_tables_history() -> None:
    builder = StreamsBuilder()
    builder.table("in", materialized=Materialized("vs", versioned_retention=1_000))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("in", TEXT, TEXT)
        for key, value, ts in [("k", "a", 100), ("k", "c", 300), ("k", "b", 200), ("j", "x", 250)]:
            topic.pipe_input(key, value, ts)
        topic.pipe_input("k", None, 400)
        changelog = driver.create_output_topic(
            "topology-test-driver-vs-changelog", RAW, RAW
        ).read_records_to_list()
    # Each put writes its key's entry, stamped with the put's timestamp; stream-time advances
    # write the stream time.
    assert [r.timestamp for r in changelog if r.key.startswith(b"\x00")] == [
        100,
        300,
        200,
        250,
        400,
    ]
    store = restored([(r.key, r.value) for r in changelog], compacted=True)
    assert store.get("k") is None
    assert store.get("k", 399) == VersionedRecord("c", 300, 400)
    assert store.get("k", 250) == VersionedRecord("b", 200, 300)
    assert store.get("k", 150) == VersionedRecord("a", 100, 200)
    assert store.get("j", 400) == VersionedRecord("x", 250)
    assert store.observed_stream_time == 400


# -- building ----------------------------------------------------------------------------------


def test_caching_is_off_for_a_versioned_store_and_its_changelog_is_configured_as_kafkas() -> None:
    # Kafka logs "Not enabling caching for store 'vs' as versioned stores do not support
    # caching" and builds the store without a cache; its changelog is compacted with
    # min.compaction.lag.ms = history retention + 1 day (VersionedChangelogTopicConfig).
    builder = StreamsBuilder()
    builder.table("in", materialized=Materialized("vs", versioned_retention=60_000, caching=True))
    spec = builder.build().stores["vs"]
    assert spec.caching is False
    assert spec.changelog_config == {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": str(60_000 + 86_400_000),
    }


def test_an_unnamed_versioned_table_is_materialized_under_a_generated_name() -> None:
    builder = StreamsBuilder()
    table = builder.table("in", materialized=Materialized(versioned_retention=10))
    assert table.state.versioned and table.state.output_versioned()
    assert list(builder.build().stores) == ["in-STATE-STORE-0000000000"]
    assert table.filter(lambda k, v: True).state.output_versioned()
    assert not builder.table("other").state.output_versioned()


def test_versioned_retention_on_an_aggregation_and_negative_are_topology_errors() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    with pytest.raises(TopologyError, match="not for aggregations"):
        grouped.count(materialized=Materialized("c", versioned_retention=10))
    with pytest.raises(TopologyError, match="must not be negative"):
        builder.table("in2", materialized=Materialized("v", versioned_retention=-1))


def test_get_with_timestamp_and_get_as_of_read_as_a_timestamped_store(
    store: VersionedKeyValueStore,
) -> None:
    # What other DSL processors read (Kafka's KeyValueStoreWrapper): ValueAndTimestamp.
    put(store, "k", "a", 10, UNDEFINED)
    put(store, "k", "b", 20, UNDEFINED)
    assert store.get_with_timestamp("k") == ValueAndTimestamp("b", 20)
    assert store.get_as_of("k", 15) == ValueAndTimestamp("a", 10)
    assert store.get_as_of("k", 5) is None
    assert list(store.all()) == [("k", VersionedRecord("b", 20))]
    assert store.approximate_num_entries() == 1


class _TwoPartitions:
    """A query's byte facade over two local partitions (``StreamsApp.store``'s ``_call``)."""

    def __init__(self, *stores: Any) -> None:
        self.stores = list(stores)

    def _call(self, op: Any) -> Any:
        return op(self.stores)


def test_a_query_reads_each_partition_by_its_own_stream_time() -> None:
    # Partition 0's stream time (1000) puts 150 past its retention; partition 1's (200) does
    # not: an as-of query on a key of partition 1 must not use partition 0's time.
    p0, p1 = LoggedBytes(), LoggedBytes()
    put(make(retention=100, inner=p0), "a", "a1", 100, UNDEFINED)
    put(make(retention=100, inner=p0), "a", "a2", 200, UNDEFINED)
    put(make(retention=100, inner=p0), "z", "z", 1000, UNDEFINED)
    put(make(retention=100, inner=p1), "b", "b1", 100, UNDEFINED)
    put(make(retention=100, inner=p1), "b", "b2", 200, UNDEFINED)
    opener = VersionedStoreOpener("versioned", _Slot(Serdes.String()), _Slot(Serdes.String()), 100)
    query = opener(_TwoPartitions(p0, p1))
    assert query.get("a", 150) is None
    assert query.get("b", 150) == VersionedRecord("b1", 100, 200)
    assert query.get("a") == VersionedRecord("a2", 200)
    assert query.get("missing", 150) is None
    assert sorted(query.all()) == [
        ("a", VersionedRecord("a2", 200)),
        ("b", VersionedRecord("b2", 200)),
        ("z", VersionedRecord("z", 1000)),
    ]


class _Slot:
    """A serde slot already filled."""

    def __init__(self, serde: Any) -> None:
        self.serde = serde

    def use(self) -> None:
        pass

    def get(self) -> Any:
        return self.serde
