"""Tests of the plain-Python oracle itself, so that comparisons against it can be trusted.

The scenarios are Kafka's (RecordQueueTest, PartitionGroupTest, *TimestampTest) in the eager
form ``docs/api.md`` documents; the expected values are written out by hand, not computed.
"""

from __future__ import annotations

import json
import struct
import uuid

import pytest
from tests.oracle import (
    NOT_KNOWN,
    JsonFieldTimestamp,
    OracleDeserializationError,
    OracleInvalidTimestampError,
    OraclePartitionGroup,
    OracleRecord,
    OracleRecordQueue,
    RecordTimestamp,
    deserialize_double,
    deserialize_integer,
    deserialize_json,
    deserialize_long,
    deserialize_short,
    deserialize_string,
    deserialize_uuid,
)


class OffsetAsTimestamp:
    """Kafka's MockTimestampExtractor: the timestamp is the offset."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def extract(self, record: OracleRecord, partition_time: int) -> int:
        self.seen.append(partition_time)
        return record.offset


def raw(offset: int, timestamp: int = -1, key: bytes | None = None, value=None) -> OracleRecord:
    key = struct.pack(">i", 1) if key is None else key
    value = struct.pack(">i", 10) if value is None else value
    return OracleRecord("topic", 1, offset, timestamp, key, value)


def int_queue(extractor=None, handler="fail") -> OracleRecordQueue:
    return OracleRecordQueue(
        "topic",
        1,
        deserialize_integer,
        deserialize_integer,
        extractor or OffsetAsTimestamp(),
        handler,
    )


def test_kafka_wire_formats() -> None:
    assert deserialize_long(b"\x00" * 7 + b"\x01") == 1
    assert deserialize_long(b"\xff" * 8) == -1
    assert deserialize_short(b"\xff\xfe") == -2
    assert deserialize_double(struct.pack(">d", 2.5)) == 2.5
    assert deserialize_string("é".encode()) == "é"
    u = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    assert deserialize_uuid(str(u).encode()) == u
    assert deserialize_json(b'{"a": [1, null]}') == {"a": [1, None]}
    assert deserialize_long(None) is None


@pytest.mark.parametrize(
    ("deserialize", "data"),
    [
        (deserialize_integer, struct.pack(">q", 1)),
        (deserialize_long, b"\x00" * 4),
        (deserialize_short, b""),
        (deserialize_string, b"\xff"),
        (deserialize_uuid, uuid.UUID(int=5).bytes),  # 16 raw bytes are not Kafka's text form
        (deserialize_uuid, uuid.UUID(int=5).hex.encode()),
        (deserialize_json, b"NaN"),
        (deserialize_json, b"{"),
    ],
)
def test_malformed_input_raises_value_error(deserialize, data: bytes) -> None:
    with pytest.raises(ValueError):
        deserialize(data)


def test_time_tracking_is_eager() -> None:
    q = int_queue()
    assert (q.size(), q.head_timestamp, q.partition_time, q.poll()) == (0, -1, -1, None)
    assert q.add_raw_records([raw(2), raw(1), raw(3)]) == 3
    assert (q.head_timestamp, q.partition_time) == (2, 3)
    assert q.poll() == ("topic", 1, 2, 2, 1, 10)
    assert [q.poll().offset, q.poll().offset] == [1, 3]
    assert q.add_raw_records([raw(4), raw(1), raw(2)]) == 3
    assert q.partition_time == 4
    q.clear()
    assert (q.size(), q.head_timestamp, q.partition_time) == (0, NOT_KNOWN, NOT_KNOWN)


def test_extractor_sees_partition_time_of_earlier_records_in_the_batch() -> None:
    extractor = OffsetAsTimestamp()
    q = int_queue(extractor)
    q.add_raw_records([raw(2), raw(1), raw(3), raw(4)])
    assert extractor.seen == [-1, 2, 2, 3]
    q.set_partition_time(500)
    q.add_raw_records([raw(7)])
    assert extractor.seen[-1] == 500
    assert q.partition_time == 500


def test_fail_keeps_earlier_records_and_continue_counts() -> None:
    bad = raw(3, key=struct.pack(">q", 1))
    q = int_queue()
    with pytest.raises(OracleDeserializationError, match="offset=3") as e:
        q.add_raw_records([raw(1), raw(2), bad, raw(4)])
    assert (e.value.topic, e.value.partition, e.value.offset) == ("topic", 1, 3)
    assert [q.poll().offset, q.poll().offset, q.poll()] == [1, 2, None]

    q = int_queue(handler="continue")
    assert q.add_raw_records([raw(1), bad, raw(4)]) == 2
    assert q.dropped_records == {"deserialization_error": 1, "negative_timestamp": 0}

    calls = []
    q = int_queue(handler=lambda record, error: calls.append(record.offset) or "continue")
    q.add_raw_records([bad])
    assert calls == [3]
    q = int_queue(handler=lambda record, error: "ignore")
    with pytest.raises(ValueError, match="ignore"):
        q.add_raw_records([bad])


def test_record_timestamp_policies() -> None:
    batch = [raw(0, 5), raw(1, -1), raw(2, 3), raw(3, -7)]

    q = int_queue(RecordTimestamp("fail"))
    with pytest.raises(OracleInvalidTimestampError, match="offset=1"):
        q.add_raw_records(batch)
    assert q.size() == 1

    q = int_queue(RecordTimestamp("skip"))
    assert q.add_raw_records(batch) == 2
    assert q.dropped_records == {"deserialization_error": 0, "negative_timestamp": 2}

    q = int_queue(RecordTimestamp("partition_time"))
    q.add_raw_records(batch)
    assert [q.poll().timestamp for _ in range(4)] == [5, 5, 3, 5]
    q = int_queue(RecordTimestamp("partition_time"))
    with pytest.raises(OracleInvalidTimestampError, match="unknown"):
        q.add_raw_records([raw(0, -1)])


@pytest.mark.parametrize(
    ("field", "unit", "value", "expected"),
    [
        ("ts", "ms", {"ts": 1_700_000_000_123}, 1_700_000_000_123),
        ("ts", "s", {"ts": 1_700_000_000}, 1_700_000_000_000),
        ("ts", "s", {"ts": 1.5}, 1500),
        ("a.b.ts", "ms", {"a": {"b": {"ts": 7}}}, 7),
        ("ts", "iso8601", {"ts": "2024-01-01T00:00:00Z"}, 1_704_067_200_000),
        ("ts", "iso8601", {"ts": "2024-01-01T01:00:00.250+01:00"}, 1_704_067_200_250),
        # invalid: "skip" returns the negative field itself, -1 for anything else
        ("ts", "ms", {"ts": -5}, -5),
        ("ts", "ms", {}, -1),
        ("ts", "ms", {"ts": None}, -1),
        ("ts", "ms", {"ts": "12"}, -1),
        ("ts", "ms", {"ts": True}, -1),
        ("a.ts", "ms", {"a": 3}, -1),
        ("ts", "ms", [1], -1),
        ("ts", "iso8601", {"ts": "2024-01-01T00:00:00"}, -1),
        ("ts", "iso8601", {"ts": "yesterday"}, -1),
        ("ts", "iso8601", {"ts": "1969-12-31T23:59:59Z"}, -1000),
    ],
)
def test_json_field_timestamp(field: str, unit: str, value, expected: int) -> None:
    record = OracleRecord("t", 0, 0, -1, None, value)
    assert JsonFieldTimestamp(field, unit, "skip").extract(record, 99) == expected
    fallback = JsonFieldTimestamp(field, unit, "partition_time")
    if expected < 0:
        assert fallback.extract(record, 99) == 99
        with pytest.raises(OracleInvalidTimestampError):
            fallback.extract(record, NOT_KNOWN)
        with pytest.raises(OracleInvalidTimestampError, match=field):
            JsonFieldTimestamp(field, unit, "fail").extract(record, 99)
    else:
        assert fallback.extract(record, NOT_KNOWN) == expected


def test_json_queue_end_to_end() -> None:
    q = OracleRecordQueue(
        "t", 0, deserialize_string, deserialize_json, JsonFieldTimestamp("ts", "ms", "skip")
    )
    values = [json.dumps({"ts": 4}).encode(), b"{}", json.dumps({"ts": 2}).encode()]
    q.add_raw_records([OracleRecord("t", 0, i, -1, b"k", v) for i, v in enumerate(values)])
    assert [q.poll(), q.poll()] == [("t", 0, 0, 4, "k", {"ts": 4}), ("t", 0, 2, 2, "k", {"ts": 2})]
    assert q.dropped_records["negative_timestamp"] == 1


def group_of_two() -> tuple[OraclePartitionGroup, OracleRecordQueue, OracleRecordQueue]:
    q1, q2 = int_queue(), int_queue()
    return OraclePartitionGroup({"p1": q1, "p2": q2}), q1, q2


def test_partition_group_time_tracking() -> None:
    group, q1, q2 = group_of_two()
    group.add_raw_records("p1", [raw(1), raw(3), raw(5)])
    group.add_raw_records("p2", [raw(2), raw(4), raw(6)])
    assert group.num_buffered() == 6
    assert (group.stream_time, group.all_partitions_buffered()) == (-1, True)
    order = []
    for _ in range(2):
        record, queue = group.next_record()
        order.append((record.offset, queue))
    group.add_raw_records("p1", [raw(2), raw(4)])
    while (item := group.next_record()) is not None:
        order.append((item[0].offset, item[1]))
        if item[0].offset == 2 and len(order) > 2:
            assert group.stream_time == 5
    assert order == [(1, q1), (2, q2), (3, q1), (4, q2), (5, q1), (2, q1), (4, q1), (6, q2)]
    assert (group.stream_time, group.num_buffered()) == (6, 0)
    assert not group.all_partitions_buffered()


def test_partition_group_orders_by_head_timestamp_and_breaks_ties_by_mapping_order() -> None:
    group, q1, q2 = group_of_two()
    group.add_raw_records("p1", [raw(1), raw(5), raw(3)])
    assert [group.next_record()[0].offset for _ in range(2)] == [1, 5]
    group.add_raw_records("p2", [raw(2), raw(4), raw(6)])
    assert [group.next_record()[0].offset for _ in range(2)] == [2, 3]

    group, q1, q2 = group_of_two()
    group.add_raw_records("p2", [raw(1), raw(2)])
    group.add_raw_records("p1", [raw(1), raw(2)])
    assert [group.next_record()[1] for _ in range(4)] == [q1, q2, q1, q2]


def test_partition_group_set_partition_time_unknown_partition_and_clear() -> None:
    group, _, _ = group_of_two()
    group.set_partition_time("p1", 100)
    group.set_partition_time("p2", 50)
    assert (group.partition_time("p1"), group.partition_time("p2"), group.stream_time) == (
        100,
        50,
        100,
    )
    with pytest.raises(KeyError, match="nowhere"):
        group.add_raw_records("nowhere", [])
    group.add_raw_records("p1", [raw(1)])
    group.clear()
    assert (group.num_buffered(), group.stream_time, group.next_record()) == (0, -1, None)
