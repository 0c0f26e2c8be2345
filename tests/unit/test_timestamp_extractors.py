"""Timestamp extractors: Kafka's *TimestampTest classes, plus the JSON-field extractor.

The metadata extractors are called directly with a ``ConsumerRecord``, as Kafka's tests do;
the JSON-field extractor is exercised through a ``RecordQueue`` with a ``JsonDeserializer``, the
way it is used.
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from streamstate import (
    NOT_KNOWN,
    ConsumerRecord,
    DeserializationError,
    InvalidTimestampError,
    RecordQueue,
    StreamsError,
)
from streamstate.serde import JsonDeserializer, StringDeserializer
from streamstate.timestamps import (
    FailOnInvalidTimestamp,
    JsonFieldTimestampExtractor,
    LogAndSkipOnInvalidTimestamp,
    UsePartitionTimeOnInvalidTimestamp,
    WallclockTimestampExtractor,
)

METADATA_EXTRACTORS = [
    FailOnInvalidTimestamp,
    LogAndSkipOnInvalidTimestamp,
    UsePartitionTimeOnInvalidTimestamp,
]


def record(timestamp: int, value: bytes | None = b"value", offset: int = 0) -> ConsumerRecord:
    return ConsumerRecord("topic", 0, offset, timestamp, b"key", value)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- Kafka's metadata extractors -------------------------------------------------------------


@pytest.mark.parametrize("extractor_class", METADATA_EXTRACTORS)
@pytest.mark.parametrize("partition_time", [NOT_KNOWN, 0, 42, 10**13])
def test_extract_metadata_timestamp(extractor_class, partition_time: int) -> None:
    assert extractor_class().extract(record(42), partition_time) == 42
    assert extractor_class().extract(record(0), partition_time) == 0


@pytest.mark.parametrize("timestamp", [-1, -42])
def test_fail_on_invalid_timestamp(timestamp: int) -> None:
    with pytest.raises(InvalidTimestampError) as e:
        FailOnInvalidTimestamp().extract(record(timestamp), 42)
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, StreamsError)
    assert "negative" in str(e.value).lower()


def test_log_and_skip_on_invalid_timestamp(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert LogAndSkipOnInvalidTimestamp().extract(record(-42), 42) == -42
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_use_partition_time_on_invalid_timestamp() -> None:
    assert UsePartitionTimeOnInvalidTimestamp().extract(record(-1), 42) == 42
    assert UsePartitionTimeOnInvalidTimestamp().extract(record(-42), 0) == 0


def test_use_partition_time_fails_when_partition_time_is_not_known() -> None:
    with pytest.raises(InvalidTimestampError, match=r"(?i)partition time"):
        UsePartitionTimeOnInvalidTimestamp().extract(record(-1), NOT_KNOWN)


def test_wallclock_timestamp_extractor() -> None:
    extractor = WallclockTimestampExtractor()
    before = now_ms()
    got = extractor.extract(record(-1), NOT_KNOWN)
    after = now_ms()
    assert before <= got <= after


def test_wallclock_through_a_queue_ignores_record_timestamps() -> None:
    q = RecordQueue("topic", 0, timestamp_extractor=WallclockTimestampExtractor())
    before = now_ms()
    q.add_raw_records([record(-1, offset=0), record(5, offset=1)])
    after = now_ms()
    stamps = [q.poll().timestamp, q.poll().timestamp]
    assert all(before <= t <= after for t in stamps), (before, stamps, after)
    assert stamps[0] <= stamps[1]
    assert before <= q.partition_time <= after
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 0}


# --- JsonFieldTimestampExtractor -------------------------------------------------------------


def json_queue(field: str, unit: str = "ms", on_invalid: str = "fail") -> RecordQueue:
    return RecordQueue(
        "events",
        3,
        key_deserializer=StringDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=JsonFieldTimestampExtractor(field, unit=unit, on_invalid=on_invalid),
    )


def json_record(value, offset: int, timestamp: int = 999) -> ConsumerRecord:
    data = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return ConsumerRecord("events", 3, offset, timestamp, b"k", data)


def valid_value(field: str, unit: str) -> tuple[dict, int]:
    """A value whose ``field`` holds 10 ms (10 s for unit "s"), and that timestamp in ms."""
    value: object = {"ms": 10, "s": 10, "iso8601": "1970-01-01T00:00:00.010Z"}[unit]
    for name in reversed(field.split(".")):
        value = {name: value}
    return value, 10_000 if unit == "s" else 10


@pytest.mark.parametrize(
    ("field", "unit", "value", "expected"),
    [
        ("ts", "ms", {"ts": 1_700_000_000_123}, 1_700_000_000_123),
        ("ts", "ms", {"ts": 0}, 0),
        ("ts", "s", {"ts": 1_700_000_000}, 1_700_000_000_000),
        ("ts", "s", {"ts": 1.5}, 1_500),
        ("ts", "iso8601", {"ts": "2024-01-01T00:00:00Z"}, 1_704_067_200_000),
        ("ts", "iso8601", {"ts": "2024-01-01T00:00:00.123Z"}, 1_704_067_200_123),
        ("ts", "iso8601", {"ts": "2024-01-01T01:30:00+01:30"}, 1_704_067_200_000),
        ("ts", "iso8601", {"ts": "2023-12-31T19:00:00-05:00"}, 1_704_067_200_000),
        ("meta.ts", "ms", {"meta": {"ts": 7}, "ts": 1}, 7),
        ("a.b.c", "s", {"a": {"b": {"c": 2}}}, 2_000),
        ("event.time", "iso8601", {"event": {"time": "1970-01-01T00:00:01Z"}}, 1_000),
    ],
)
def test_json_field_valid(field: str, unit: str, value, expected: int) -> None:
    q = json_queue(field, unit)
    assert q.add_raw_records([json_record(value, 0)]) == 1
    r = q.poll()
    assert r.timestamp == expected
    assert r.value == value
    assert q.partition_time == expected


INVALID_FIELDS = [
    pytest.param("ts", "ms", {"other": 5}, id="missing"),
    pytest.param("ts", "ms", {"ts": None}, id="null"),
    pytest.param("ts", "ms", {"ts": -5}, id="negative-ms"),
    pytest.param("ts", "s", {"ts": -1}, id="negative-s"),
    pytest.param("ts", "ms", {"ts": "soon"}, id="string-for-ms"),
    pytest.param("ts", "ms", {"ts": [1]}, id="list-for-ms"),
    pytest.param("ts", "ms", {"ts": {"ms": 1}}, id="object-for-ms"),
    pytest.param("ts", "iso8601", {"ts": "2024-01-01T00:00:00"}, id="iso-without-offset"),
    pytest.param("ts", "iso8601", {"ts": "not a date"}, id="iso-unparsable"),
    pytest.param("ts", "iso8601", {"ts": 1_700_000_000_000}, id="iso-number"),
    pytest.param("ts", "iso8601", {"ts": "1969-12-31T23:59:59Z"}, id="iso-before-1970"),
    pytest.param("meta.ts", "ms", {"meta": 5}, id="path-through-non-object"),
    pytest.param("meta.ts", "ms", {"meta": {}}, id="nested-missing"),
    pytest.param("ts", "ms", [1, 2], id="value-not-an-object"),
    pytest.param("ts", "ms", None, id="null-value"),
]


@pytest.mark.parametrize(("field", "unit", "value"), INVALID_FIELDS)
def test_json_field_invalid_fail(field: str, unit: str, value) -> None:
    q = json_queue(field, unit, on_invalid="fail")
    valid, _ = valid_value(field, unit)
    with pytest.raises(InvalidTimestampError) as e:
        q.add_raw_records([json_record(valid, 0), json_record(value, 1)])
    assert (e.value.topic, e.value.partition, e.value.offset) == ("events", 3, 1)
    assert field in str(e.value)
    assert q.size() == 1


@pytest.mark.parametrize(("field", "unit", "value"), INVALID_FIELDS)
def test_json_field_invalid_skip(field: str, unit: str, value) -> None:
    q = json_queue(field, unit, on_invalid="skip")
    valid, _ = valid_value(field, unit)
    added = q.add_raw_records([json_record(value, 0), json_record(valid, 1), json_record(value, 2)])
    assert added == 1
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 2}
    assert q.poll().offset == 1


@pytest.mark.parametrize(("field", "unit", "value"), INVALID_FIELDS)
def test_json_field_invalid_partition_time(field: str, unit: str, value) -> None:
    q = json_queue(field, unit, on_invalid="partition_time")
    valid, expected = valid_value(field, unit)
    q.add_raw_records([json_record(valid, 0), json_record(value, 1)])
    assert [(r.offset, r.timestamp) for r in (q.poll(), q.poll())] == [(0, expected), (1, expected)]

    fresh = json_queue(field, unit, on_invalid="partition_time")
    with pytest.raises(InvalidTimestampError) as e:
        fresh.add_raw_records([json_record(value, 5)])
    assert e.value.offset == 5


def test_json_field_ignores_the_record_timestamp() -> None:
    q = json_queue("ts")
    q.add_raw_records([json_record({"ts": 5}, 0, timestamp=-1)])
    assert q.poll().timestamp == 5


def test_json_field_partition_time_uses_earlier_records_of_the_same_batch() -> None:
    q = json_queue("ts", on_invalid="partition_time")
    q.add_raw_records([json_record({"ts": 30}, 0), json_record({"ts": 20}, 1), json_record({}, 2)])
    assert [q.poll().timestamp for _ in range(3)] == [30, 20, 30]


def test_json_field_malformed_json_is_a_deserialization_problem_not_a_timestamp_one() -> None:
    q = json_queue("ts", on_invalid="skip")
    with pytest.raises(DeserializationError):
        q.add_raw_records([json_record(b"{not json", 0)])
