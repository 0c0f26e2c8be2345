"""RecordQueue: Kafka's RecordQueueTest scenarios, in the eager form of docs/api.md.

As in Kafka's tests, keys and values are 4-byte ints (key 1, value 10), a "bad" key or value is
an 8-byte long, and most queues use a MockTimestampExtractor (timestamp = offset). Kafka 2.6+
advances partition time when a record is *polled*; streamstate stamps records when they are
*added*, so partition time is the highest timestamp admitted so far and the extractor sees the
records before it in the same batch.
"""

from __future__ import annotations

import datetime as dt
import logging
import pickle
import struct

import pyarrow as pa
import pytest
from confluent_kafka import Message

from streamstate import (
    NOT_KNOWN,
    ConsumerRecord,
    DeserializationError,
    InvalidTimestampError,
    RecordQueue,
    StampedRecord,
    StreamsError,
    TimestampType,
)
from streamstate._native import runs_native
from streamstate.records import timestamp_type_from_confluent
from streamstate.serde import (
    AvroDeserializer,
    BytesDeserializer,
    IntegerDeserializer,
    LongDeserializer,
    StringDeserializer,
)
from streamstate.serde import StringDeserializer as StringDe
from streamstate.timestamps import (
    FailOnInvalidTimestamp,
    JsonFieldTimestampExtractor,
    LogAndSkipOnInvalidTimestamp,
    UsePartitionTimeOnInvalidTimestamp,
)

TOPIC, PARTITION = "topic", 1
KEY, VALUE = struct.pack(">i", 1), struct.pack(">i", 10)
BAD = struct.pack(">q", 1)  # 8 bytes: IntegerDeserializer rejects it


class MockTimestampExtractor:
    """Kafka's MockTimestampExtractor (timestamp = offset); remembers what it was given."""

    def __init__(self) -> None:
        self.partition_times: list[int] = []
        self.records: list[object] = []

    def extract(self, record, partition_time: int) -> int:
        self.partition_times.append(partition_time)
        self.records.append(record)
        return record.offset


def rec(
    offset: int,
    *,
    timestamp: int = -1,
    key: bytes | None = KEY,
    value: bytes | None = VALUE,
    topic: str = TOPIC,
    partition: int = PARTITION,
    headers=None,
) -> ConsumerRecord:
    """A raw record; like Kafka's 5-argument ConsumerRecord it has no timestamp by default."""
    timestamp_type = TimestampType.NO_TIMESTAMP_TYPE if timestamp < 0 else TimestampType.CREATE_TIME
    return ConsumerRecord(
        topic, partition, offset, timestamp, key, value, headers, timestamp_type=timestamp_type
    )


def recs(offsets: list[int]) -> list[ConsumerRecord]:
    return [rec(o) for o in offsets]


def queue(
    extractor=None,
    handler="fail",
    *,
    topic: str = TOPIC,
    partition: int = PARTITION,
    deserializer=None,
) -> RecordQueue:
    return RecordQueue(
        topic,
        partition,
        key_deserializer=deserializer or IntegerDeserializer(),
        value_deserializer=deserializer or IntegerDeserializer(),
        timestamp_extractor=MockTimestampExtractor() if extractor is None else extractor,
        deserialization_exception_handler=handler,
    )


def poll_offsets(q: RecordQueue) -> list[int]:
    out = []
    while (r := q.poll()) is not None:
        out.append(r.offset)
    return out


def assert_empty(q: RecordQueue) -> None:
    assert q.is_empty()
    assert q.size() == 0
    assert len(q) == 0
    assert q.head_record is None
    assert q.head_timestamp == NOT_KNOWN
    assert q.poll() is None


# --- time tracking ---------------------------------------------------------------------------


def test_time_tracking() -> None:
    q = queue()
    assert_empty(q)
    assert q.partition_time == NOT_KNOWN

    assert q.add_raw_records(recs([2, 1, 3])) == 3
    assert (q.size(), len(q), q.is_empty()) == (3, 3, False)
    assert (q.head_timestamp, q.partition_time) == (2, 3)

    r = q.poll()
    assert (r.offset, r.timestamp, r.key, r.value) == (2, 2, 1, 10)
    assert (q.size(), q.head_timestamp, q.partition_time) == (2, 1, 3)
    assert q.poll().timestamp == 1
    assert (q.size(), q.head_timestamp) == (1, 3)

    # the head is not replaced by an add, even by a record with a lower timestamp
    assert q.add_raw_records(recs([4, 1, 2])) == 4
    assert (q.head_timestamp, q.partition_time) == (3, 4)
    expected_heads = [4, 1, 2, NOT_KNOWN]
    for polled, head in zip([3, 4, 1, 2], expected_heads, strict=True):
        assert q.poll().timestamp == polled
        assert q.head_timestamp == head
    assert_empty(q)
    assert q.partition_time == 4  # polling never changes partition time

    assert q.add_raw_records(recs([4, 5, 6])) == 3
    assert q.head_timestamp == 4
    assert q.poll().timestamp == 4
    assert (q.size(), q.head_timestamp) == (2, 5)

    q.clear()
    assert_empty(q)
    assert q.partition_time == NOT_KNOWN

    assert q.add_raw_records(recs([4, 5, 6])) == 3
    assert (q.size(), q.head_timestamp, q.partition_time) == (3, 4, 6)


def test_head_record_is_the_next_polled_record() -> None:
    q = queue()
    q.add_raw_records(recs([7, 3]))
    head = q.head_record
    assert isinstance(head, StampedRecord)
    assert (head.topic, head.partition, head.offset, head.timestamp) == (TOPIC, PARTITION, 7, 7)
    polled = q.poll()
    assert (polled.offset, polled.timestamp, polled.key, polled.value) == (7, 7, 1, 10)
    assert q.head_record.offset == 3


def test_partition_time_is_the_max_admitted_timestamp() -> None:
    """Kafka 2.6+'s shouldTrackPartitionTimeAsMaxProcessedTimestamp, stamped on admission."""
    q = queue()
    q.add_raw_records(recs([2, 1, 3, 4]))
    assert q.partition_time == 4
    assert [q.poll().timestamp for _ in range(3)] == [2, 1, 3]
    assert q.partition_time == 4


def test_set_partition_time_respects_max_timestamp_policy() -> None:
    extractor = MockTimestampExtractor()
    q = queue(extractor)
    q.set_partition_time(150)
    assert q.partition_time == 150
    q.add_raw_records(recs([200, 100, 300, 400]))
    assert extractor.partition_times == [150, 200, 200, 300]
    assert q.partition_time == 400
    q.set_partition_time(500)
    assert q.partition_time == 500
    assert q.poll().timestamp == 200
    q.add_raw_records(recs([450]))  # lower than partition time: does not lower it
    assert extractor.partition_times[-1] == 500
    assert q.partition_time == 500
    q.set_partition_time(10)  # set is unconditional, backwards too
    assert q.partition_time == 10


def test_extractor_receives_partition_time_and_the_deserialized_record() -> None:
    extractor = MockTimestampExtractor()
    q = queue(extractor)
    q.add_raw_records(recs([2, 1, 3, 4]))
    assert extractor.partition_times == [-1, 2, 2, 3]
    q.add_raw_records(recs([5]))
    assert extractor.partition_times[-1] == 4
    seen = extractor.records[0]
    assert (seen.topic, seen.partition, seen.offset, seen.key, seen.value) == (
        TOPIC,
        PARTITION,
        2,
        1,
        10,
    )
    assert seen.timestamp == -1  # the record's own timestamp, not an extracted one


def test_stamped_record_is_read_only_and_keeps_headers() -> None:
    q = queue()
    q.add_raw_records([rec(3, headers=[("h", b"x"), ("h", b"y")])])
    r = q.poll()
    assert list(r.headers) == [("h", b"x"), ("h", b"y")]
    with pytest.raises(AttributeError):
        r.offset = 4


def test_null_key_and_value_are_none() -> None:
    q = queue()
    q.add_raw_records([rec(1, key=None, value=None)])
    r = q.poll()
    assert (r.key, r.value) == (None, None)


# --- deserialization failures ----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["key", "value"])
def test_deserialization_failure_with_fail_handler(bad: str) -> None:
    bad_record = rec(3, **{bad: BAD})
    q = queue(handler="fail")
    with pytest.raises(DeserializationError) as e:
        q.add_raw_records([rec(1), rec(2), bad_record, rec(4)])
    err = e.value
    assert isinstance(err, ValueError)
    assert isinstance(err, StreamsError)
    assert (err.topic, err.partition, err.offset) == (TOPIC, PARTITION, 3)
    for part in (TOPIC, f"{PARTITION}", "3"):
        assert part in str(err)
    # the records before the bad one stay queued and are pollable; the ones after were not added
    assert q.size() == 2
    assert q.partition_time == 2
    assert poll_offsets(q) == [1, 2]
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 0}


def test_default_handler_is_fail() -> None:
    q = RecordQueue(TOPIC, PARTITION, key_deserializer=IntegerDeserializer())
    with pytest.raises(DeserializationError):
        q.add_raw_records([rec(1, timestamp=5, key=BAD)])


@pytest.mark.parametrize("bad", ["key", "value"])
def test_deserialization_failure_with_continue_handler(
    bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    q = queue(handler="continue", topic="orders", partition=7)
    raws = [
        rec(41, topic="orders", partition=7),
        rec(42, topic="orders", partition=7, **{bad: BAD}),
        rec(43, topic="orders", partition=7),
    ]
    with caplog.at_level(logging.WARNING):
        assert q.add_raw_records(raws) == 2
    assert q.dropped_records == {"deserialization_error": 1, "negative_timestamp": 0}
    assert poll_offsets(q) == [41, 43]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("orders" in m and "7" in m and "42" in m for m in warnings), warnings


def test_only_bad_records_leave_the_queue_empty() -> None:
    q = queue(handler="continue")
    assert q.add_raw_records([rec(1, key=BAD), rec(2, value=BAD)]) == 0
    assert_empty(q)
    assert q.partition_time == NOT_KNOWN
    assert q.dropped_records["deserialization_error"] == 2


def test_callable_handler_decides() -> None:
    calls = []

    def handler(record, error):
        calls.append((record.offset, record.key, error))
        return "continue" if record.offset < 10 else "fail"

    q = queue(handler=handler)
    assert q.add_raw_records([rec(1), rec(2, key=BAD), rec(3)]) == 2
    assert [(offset, key) for offset, key, _ in calls] == [(2, BAD)]
    assert isinstance(calls[0][2], Exception)
    assert q.dropped_records["deserialization_error"] == 1

    with pytest.raises(DeserializationError) as e:
        q.add_raw_records([rec(11, value=BAD), rec(12)])
    assert e.value.offset == 11
    assert poll_offsets(q) == [1, 3]


def test_handler_returning_something_else_is_a_clear_error() -> None:
    q = queue(handler=lambda record, error: "ignore")
    with pytest.raises((StreamsError, TypeError, ValueError), match="ignore"):
        q.add_raw_records([rec(1), rec(2, key=BAD)])
    assert poll_offsets(q) == [1]


def test_handler_raising_is_not_swallowed() -> None:
    boom = RuntimeError("handler blew up")

    def handler(record, error):
        raise boom

    q = queue(handler=handler)
    with pytest.raises(Exception) as e:
        q.add_raw_records([rec(1), rec(2, key=BAD)])
    assert e.value is boom or e.value.__cause__ is boom
    assert poll_offsets(q) == [1]


def test_unknown_handler_name_is_rejected() -> None:
    with pytest.raises((ValueError, TypeError), match="sometimes"):
        queue(handler="sometimes")


def test_custom_python_deserializer_is_used_and_its_errors_are_handled() -> None:
    class Upper:
        def deserialize(self, topic: str, data: bytes | None):
            if data == b"bad":
                raise ValueError("no bad values here")
            return None if data is None else (topic, data.decode().upper())

    q = queue(deserializer=Upper(), handler="fail")
    q.add_raw_records([rec(1, key=b"k", value=b"v")])
    r = q.poll()
    assert (r.key, r.value) == ((TOPIC, "K"), (TOPIC, "V"))
    with pytest.raises(DeserializationError) as e:
        q.add_raw_records([rec(2, key=b"k", value=b"bad")])
    assert e.value.offset == 2

    q = queue(deserializer=Upper(), handler="continue")
    assert q.add_raw_records([rec(1, key=b"k", value=b"bad"), rec(2, key=b"a", value=b"b")]) == 1
    assert q.dropped_records["deserialization_error"] == 1


# --- negative timestamps ---------------------------------------------------------------------


def test_throws_on_negative_timestamp() -> None:
    """Kafka's shouldThrowOnNegativeTimestamp: the handler only covers deserialization."""
    q = queue(FailOnInvalidTimestamp(), handler="continue")
    with pytest.raises(InvalidTimestampError) as e:
        q.add_raw_records([rec(0, timestamp=5), rec(1, timestamp=-1)])
    err = e.value
    assert isinstance(err, ValueError)
    assert (err.topic, err.partition, err.offset) == (TOPIC, PARTITION, 1)
    assert "negative" in str(err).lower()
    assert poll_offsets(q) == [0]


def test_default_extractor_fails_on_negative_timestamp() -> None:
    q = RecordQueue(TOPIC, PARTITION)
    with pytest.raises(InvalidTimestampError):
        q.add_raw_records([rec(1, timestamp=-1)])
    assert q.add_raw_records([rec(2, timestamp=0)]) == 1


def test_drops_on_negative_timestamp(caplog: pytest.LogCaptureFixture) -> None:
    q = queue(LogAndSkipOnInvalidTimestamp(), handler="fail", partition=3)
    with caplog.at_level(logging.WARNING):
        added = q.add_raw_records(
            [
                rec(1, timestamp=-1, partition=3),
                rec(2, timestamp=20, partition=3),
                rec(3, timestamp=-5, partition=3),
                rec(4, timestamp=10, partition=3),
            ]
        )
    assert added == 2
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 2}
    assert [(r.offset, r.timestamp) for r in (q.poll(), q.poll())] == [(2, 20), (4, 10)]
    assert q.partition_time == 20
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_single_negative_record_is_dropped() -> None:
    """Kafka's shouldDropOnNegativeTimestamp."""
    q = queue(LogAndSkipOnInvalidTimestamp())
    assert q.add_raw_records([rec(1, timestamp=-1)]) == 0
    assert_empty(q)
    assert q.partition_time == NOT_KNOWN


def test_custom_extractor_returning_negative_drops_the_record() -> None:
    class Negative:
        def extract(self, record, partition_time: int) -> int:
            return -record.offset

    q = queue(Negative())
    assert q.add_raw_records(recs([0, 1, 2])) == 1
    assert q.poll().offset == 0
    assert q.dropped_records["negative_timestamp"] == 2


def test_custom_extractor_error_is_not_swallowed() -> None:
    class Broken:
        def extract(self, record, partition_time: int) -> int:
            if record.offset == 2:
                raise RuntimeError("extractor blew up")
            return record.offset

    q = queue(Broken())
    with pytest.raises(Exception) as e:
        q.add_raw_records(recs([1, 2, 3]))
    assert "extractor blew up" in str(e.value) + str(e.value.__cause__)
    assert poll_offsets(q) == [1]


def test_use_partition_time_on_invalid_timestamp() -> None:
    q = queue(UsePartitionTimeOnInvalidTimestamp())
    q.add_raw_records(
        [rec(0, timestamp=5), rec(1, timestamp=-1), rec(2, timestamp=3), rec(3, timestamp=-7)]
    )
    assert [(r.offset, r.timestamp) for r in (q.poll() for _ in range(4))] == [
        (0, 5),
        (1, 5),
        (2, 3),
        (3, 5),
    ]
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 0}


def test_use_partition_time_when_not_known_fails() -> None:
    q = queue(UsePartitionTimeOnInvalidTimestamp())
    with pytest.raises(InvalidTimestampError) as e:
        q.add_raw_records([rec(4, timestamp=-1)])
    assert e.value.offset == 4
    q.set_partition_time(100)
    q.add_raw_records([rec(5, timestamp=-1)])
    assert q.poll().timestamp == 100


# --- the three input forms -------------------------------------------------------------------

# (key, value, timestamp ms) in offset order 0, 1, 2, 3
ROWS = [
    (struct.pack(">q", 7), b"first", 1_000),
    (None, "ünï".encode(), 3_000),
    (struct.pack(">q", -1), None, 2_000),
    (struct.pack(">q", 2**40), b"", 2_500),
]
EXPECTED = [(0, 1_000, 7, "first"), (1, 3_000, None, "ünï"), (2, 2_000, -1, None)]


def arrow_batch(topic: str, partition: int, rows, *, timestamp: str) -> pa.RecordBatch:
    """A batch in Spark's Kafka source schema (with its ``timestampType`` column too)."""
    ms = [t for _, _, t in rows]
    if timestamp == "int64 ms":
        ts = pa.array(ms, pa.int64())
    else:
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        ts = pa.array([epoch + dt.timedelta(milliseconds=t) for t in ms], pa.timestamp("us", "UTC"))
    n = len(rows)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, _, _ in rows], pa.binary()),
            "value": pa.array([v for _, v, _ in rows], pa.binary()),
            "topic": pa.array([topic] * n, pa.string()),
            "partition": pa.array([partition] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": ts,
            "timestampType": pa.array([0] * n, pa.int32()),
        }
    )


FORMS = ["consumer_records", "messages", "arrow_timestamp_us", "arrow_int64_ms", "arrow_table"]


def raw_in_form(form: str, rows, mock_kafka, topic: str = "forms", partition: int = 0):
    """``rows`` at offsets 0.. of (topic, partition) as the given raw-record form, and the topic."""
    if form == "messages":
        messages = mock_kafka.messages([(partition, k, v, t) for k, v, t in rows])
        return messages, messages[0].topic()
    if form == "consumer_records":
        return [
            ConsumerRecord(topic, partition, i, t, k, v) for i, (k, v, t) in enumerate(rows)
        ], topic
    if form == "arrow_int64_ms":
        return arrow_batch(topic, partition, rows, timestamp="int64 ms"), topic
    batch = arrow_batch(topic, partition, rows, timestamp="timestamp us")
    return (pa.Table.from_batches([batch]) if form == "arrow_table" else batch), topic


@pytest.mark.parametrize("form", FORMS)
def test_every_raw_form_gives_the_same_records(form: str, mock_kafka) -> None:
    raw, topic = raw_in_form(form, ROWS[:3], mock_kafka)
    q = RecordQueue(
        topic,
        0,
        key_deserializer=LongDeserializer(),
        value_deserializer=StringDeserializer(),
        timestamp_extractor=FailOnInvalidTimestamp(),
    )
    assert q.add_raw_records(raw) == 3
    assert q.partition_time == 3_000
    got = [(r.offset, r.timestamp, r.key, r.value) for r in (q.poll() for _ in range(3))]
    assert got == EXPECTED
    assert q.poll() is None


@pytest.mark.parametrize("form", FORMS)
def test_every_raw_form_reports_failures_with_coordinates(form: str, mock_kafka) -> None:
    rows = [*ROWS[:2], (b"\x00\x01", b"v", 4_000), ROWS[3]]  # offset 2: a 2-byte "long"
    raw, topic = raw_in_form(form, rows, mock_kafka, partition=2)
    q = RecordQueue(
        topic,
        2,
        key_deserializer=LongDeserializer(),
        value_deserializer=StringDeserializer(),
    )
    with pytest.raises(DeserializationError) as e:
        q.add_raw_records(raw)
    assert (e.value.topic, e.value.partition, e.value.offset) == (topic, 2, 2)
    assert [(r.offset, r.key) for r in (q.poll(), q.poll())] == [(0, 7), (1, None)]
    assert q.poll() is None


def test_message_timestamps_and_headers_come_through(mock_kafka) -> None:
    messages = mock_kafka.messages([(1, b"k", b"v", 1_234)], headers=[("trace", b"abc")])
    q = RecordQueue(messages[0].topic(), 1, key_deserializer=BytesDeserializer())
    q.add_raw_records(messages)
    r = q.poll()
    assert (r.partition, r.offset, r.timestamp, r.key, r.value) == (1, 0, 1_234, b"k", b"v")
    assert list(r.headers) == [("trace", b"abc")]


def test_empty_inputs() -> None:
    q = queue()
    assert q.add_raw_records([]) == 0
    batch = arrow_batch(TOPIC, PARTITION, [], timestamp="int64 ms")
    assert q.add_raw_records(batch) == 0
    assert_empty(q)


def test_a_non_utf8_string_deserializer_decodes_in_its_own_encoding() -> None:
    q = RecordQueue("t", 0, value_deserializer=StringDe("latin-1"))
    q.add_raw_records([ConsumerRecord("t", 0, 0, 5, None, b"caf\xe9")])
    rec = q.poll()
    assert rec is not None and rec.value == "café"


def test_builtin_components_pickle_and_show_their_arguments() -> None:
    extractor = pickle.loads(pickle.dumps(JsonFieldTimestampExtractor("a.b", unit="s")))
    assert repr(extractor) == (
        "JsonFieldTimestampExtractor(field='a.b', unit='s', on_invalid='fail')"
    )
    assert repr(pickle.loads(pickle.dumps(StringDe("latin-1")))) == (
        "StringDeserializer(encoding='iso8859-1')"
    )
    avro = pickle.loads(pickle.dumps(AvroDeserializer('"long"', schema_id=3)))
    assert avro.deserialize("t", b"\x00\x00\x00\x00\x03\x02") == 1


@pytest.mark.parametrize(
    ("confluent", "expected"),
    [
        (0, TimestampType.NO_TIMESTAMP_TYPE),
        (1, TimestampType.CREATE_TIME),
        (2, TimestampType.LOG_APPEND_TIME),
    ],
)
def test_confluent_timestamp_types_map_to_kafkas_ids(
    confluent: int, expected: TimestampType
) -> None:
    """One mapping: ``timestamp_type_from_confluent`` and the Message reader agree on it."""
    assert timestamp_type_from_confluent(confluent) is expected
    seen: list[tuple[object, int]] = []

    class Remember:
        def extract(self, record, partition_time: int) -> int:
            seen.append((record.timestamp_type, record.timestamp))
            return 1

    message = Message(
        topic="t", partition=0, offset=0, key=b"k", value=b"v", timestamp=(confluent, 1_234)
    )
    q = RecordQueue("t", 0, timestamp_extractor=Remember())
    q.add_raw_records([message])
    assert seen == [(expected, NOT_KNOWN if confluent == 0 else 1_234)]


def test_a_marked_method_runs_the_rust_object_not_python() -> None:
    """A built-in's method carries the mark, so a queue runs the Rust object and never calls the
    method per record (an override, unmarked, is called: tests/integration/
    test_component_subclasses.py)."""
    calls: list[bytes | None] = []

    class Counting(LongDeserializer):
        @runs_native
        def deserialize(self, topic: str | None, data: bytes | None) -> object:
            calls.append(data)
            return super().deserialize(topic, data)

    q = RecordQueue("t", 0, key_deserializer=Counting())
    q.add_raw_records([ConsumerRecord("t", 0, 0, 10, struct.pack(">q", 5), b"v")])
    assert [r.key for r in q.poll_batch()] == [5]
    assert calls == []
