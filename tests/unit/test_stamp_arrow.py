"""The ``stamp`` kernel (``_core.Stamper``) on in-memory pyarrow batches."""

from __future__ import annotations

import json
import struct
from typing import Any

import pyarrow as pa
import pytest

from streamstate import ConsumerRecord, RecordQueue, _core
from streamstate.errors import DeserializationError, InvalidTimestampError
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.timestamps import (
    FailOnInvalidTimestamp,
    JsonFieldTimestampExtractor,
    LogAndSkipOnInvalidTimestamp,
    UsePartitionTimeOnInvalidTimestamp,
)

LONG = LongDeserializer()._spec
JSON = JsonDeserializer()._spec
BYTES = ("bytes",)


def long(n: int) -> bytes:
    return struct.pack(">q", n)


def batch(
    rows: list[tuple[Any, ...]],
    *,
    binary: pa.DataType | None = None,
    ts_type: pa.DataType | None = None,
) -> pa.RecordBatch:
    """Rows of (partition, offset, timestamp_ms, key, value[, topic])."""
    binary = binary or pa.binary()
    ts_type = ts_type or pa.timestamp("us", "UTC")
    scale = 1000 if pa.types.is_timestamp(ts_type) else 1
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([r[3] for r in rows], binary),
            "value": pa.array([r[4] for r in rows], binary),
            "topic": pa.array([r[5] if len(r) > 5 else "t" for r in rows], pa.string()),
            "partition": pa.array([r[0] for r in rows], pa.int32()),
            "offset": pa.array([r[1] for r in rows], pa.int64()),
            "timestamp": pa.array([r[2] * scale for r in rows], pa.int64()).cast(ts_type),
        }
    )


def stamper(
    key: tuple[Any, ...] = BYTES,
    value: tuple[Any, ...] = BYTES,
    extractor: Any = None,
    handler: str = "fail",
    value_type: pa.DataType | None = None,
) -> Any:
    spec = (extractor or FailOnInvalidTimestamp())._spec
    return _core.Stamper(key, value, spec, handler, value_type)


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary(), pa.binary_view()])
@pytest.mark.parametrize("ts_type", [pa.timestamp("us", "UTC"), pa.int64()])
def test_every_binary_layout_and_timestamp_type(binary: pa.DataType, ts_type: pa.DataType) -> None:
    b = batch(
        [(0, 0, 100, long(1), b"a"), (0, 1, 50, long(2), None), (0, 2, 200, None, b"c")],
        binary=binary,
        ts_type=ts_type,
    )
    out = stamper(key=LONG).stamp(b)
    assert out.schema.field("key").type == pa.int64()
    assert out.schema.field("value").type == pa.binary()
    assert out.to_pydict() == {
        "topic": ["t", "t", "t"],
        "partition": [0, 0, 0],
        "offset": [0, 1, 2],
        "timestamp": [100, 50, 200],
        "key": [1, 2, None],
        "value": [b"a", None, b"c"],
        "partition_time": [100, 100, 200],
    }


def test_negative_record_timestamps_under_each_policy() -> None:
    rows = [(0, 0, -5, None, b"x"), (0, 1, 10, None, b"y"), (0, 2, -1, None, b"z")]
    with pytest.raises(InvalidTimestampError) as info:
        stamper().stamp(batch(rows))
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 0)

    skip = stamper(extractor=LogAndSkipOnInvalidTimestamp())
    out = skip.stamp(batch(rows))
    assert out.column("offset").to_pylist() == [1]
    assert skip.dropped_records() == {
        ("t", 0): {"deserialization_error": 0, "negative_timestamp": 2}
    }

    use_pt = stamper(extractor=UsePartitionTimeOnInvalidTimestamp())
    with pytest.raises(InvalidTimestampError):  # partition time still unknown at offset 0
        use_pt.stamp(batch(rows))
    use_pt = stamper(extractor=UsePartitionTimeOnInvalidTimestamp())
    out = use_pt.stamp(batch(rows[1:]))
    assert out.column("timestamp").to_pylist() == [10, 10]


VALUE_TYPE = pa.struct(
    [
        ("id", pa.int64()),
        ("meta", pa.struct([("ts", pa.int64()), ("source", pa.string())])),
        ("tags", pa.list_(pa.field("element", pa.string()))),
        ("attrs", pa.map_(pa.string(), pa.float64())),
    ]
)


def test_json_values_become_a_struct_with_nulls_for_missing_or_mistyped_fields() -> None:
    docs = [
        {"id": 1, "meta": {"ts": 10, "source": "a"}, "tags": ["x", "y"], "attrs": {"k": 1.5}},
        {"id": "two", "meta": {"ts": 20}, "extra": [1, 2]},
        {"meta": {"ts": 30, "source": {"nested": True}}, "tags": [1, None]},
    ]
    rows = [(0, i, 0, None, json.dumps(d).encode()) for i, d in enumerate(docs)]
    out = stamper(
        value=JSON, extractor=JsonFieldTimestampExtractor("meta.ts"), value_type=VALUE_TYPE
    ).stamp(batch(rows))
    assert out.schema.field("value").type == VALUE_TYPE
    values = out.column("value").to_pylist()
    assert values[0] == {
        "id": 1,
        "meta": {"ts": 10, "source": "a"},
        "tags": ["x", "y"],
        "attrs": [("k", 1.5)],
    }
    assert values[1] == {
        "id": None,
        "meta": {"ts": 20, "source": None},
        "tags": None,
        "attrs": None,
    }
    # A non-string JSON value in a string field comes out as its JSON text, as in from_json.
    assert values[2]["meta"]["source"] == '{"nested":true}'
    assert values[2]["tags"] == ["1", None]
    assert out.column("timestamp").to_pylist() == [10, 20, 30]


def test_json_without_a_schema_is_its_text() -> None:
    out = stamper(value=JSON).stamp(batch([(0, 0, 1, None, b'{"a": [1, 2]}')]))
    assert out.schema.field("value").type == pa.string()
    assert json.loads(out.column("value")[0].as_py()) == {"a": [1, 2]}


@pytest.mark.parametrize(
    ("unit", "field", "expected"),
    [
        ("ms", 1_700_000_000_123, 1_700_000_000_123),
        ("s", 1_700_000_000.5, 1_700_000_000_500),
        ("iso8601", "2023-11-14T22:13:20.123Z", 1_700_000_000_123),
    ],
)
def test_json_field_units(unit: str, field: Any, expected: int) -> None:
    value = json.dumps({"meta": {"ts": field}}).encode()
    for value_type in (None, VALUE_TYPE):
        extractor = JsonFieldTimestampExtractor("meta.ts", unit=unit)  # type: ignore[arg-type]
        out = stamper(value=JSON, extractor=extractor, value_type=value_type).stamp(
            batch([(0, 0, 1, None, value)])
        )
        assert out.column("timestamp").to_pylist() == [expected]


def test_bad_bytes_fail_naming_the_record_or_are_dropped_with_continue() -> None:
    rows = [
        (3, 7, 1, long(1), b'{"meta": {"ts": 5}}', "orders"),
        (3, 8, 1, b"\x01\x02", b'{"meta": {"ts": 6}}', "orders"),
        (3, 9, 1, long(3), b"{not json", "orders"),
        (3, 10, 1, long(4), b'{"meta": {"ts": 9}}', "orders"),
    ]
    with pytest.raises(DeserializationError) as info:
        stamper(key=LONG, value=JSON, value_type=VALUE_TYPE).stamp(batch(rows))
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("orders", 3, 8)
    assert "orders" in str(err) and "offset 8" in str(err)

    st = stamper(
        key=LONG,
        value=JSON,
        extractor=JsonFieldTimestampExtractor("meta.ts"),
        handler="continue",
        value_type=VALUE_TYPE,
    )
    out = st.stamp(batch(rows))
    assert out.column("offset").to_pylist() == [7, 10]
    assert out.column("key").to_pylist() == [1, 4]
    assert [v["meta"]["ts"] for v in out.column("value").to_pylist()] == [5, 9]
    assert st.dropped_records()[("orders", 3)]["deserialization_error"] == 2


def test_partition_time_carries_across_calls() -> None:
    st = stamper(extractor=LogAndSkipOnInvalidTimestamp())
    st.stamp(batch([(0, 0, 100, None, b"a"), (0, 1, 40, None, b"b")]))
    assert st.partition_time("t", 0) == 100
    out = st.stamp(batch([(0, 2, 70, None, b"c"), (0, 3, 150, None, b"d")]))
    assert out.column("partition_time").to_pylist() == [100, 150]
    assert st.partition_time("t", 1) == -1
    with pytest.raises(ValueError, match="increasing offset order"):
        st.stamp(batch([(0, 3, 1, None, b"again")]))


def test_two_partitions_interleaved_and_out_of_order() -> None:
    rows = [
        (1, 5, 300, None, b"p1-5"),
        (0, 1, 100, None, b"p0-1"),
        (1, 4, 200, None, b"p1-4"),
        (0, 0, 150, None, b"p0-0"),
        (1, 6, 250, None, b"p1-6"),
    ]
    out = stamper().stamp(batch(rows))
    assert out.column("partition").to_pylist() == [0, 0, 1, 1, 1]
    assert out.column("offset").to_pylist() == [0, 1, 4, 5, 6]
    assert out.column("timestamp").to_pylist() == [150, 100, 200, 300, 250]
    assert out.column("partition_time").to_pylist() == [150, 150, 200, 300, 300]


def test_matches_record_queue() -> None:
    """Same records, same answers as ``streamstate.RecordQueue``."""
    docs: list[bytes | None] = [
        b'{"meta": {"ts": 50}}',
        b'{"meta": {"ts": 20}}',
        b"garbage",
        b'{"meta": {}}',
        None,
        b'{"meta": {"ts": 70}}',
        b'{"meta": {"ts": -3}}',
    ]
    rows = [(0, i, 1, long(i), d) for i, d in enumerate(docs)]
    extractor = JsonFieldTimestampExtractor("meta.ts", on_invalid="partition_time")
    queue = RecordQueue(
        "t",
        0,
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=extractor,
        deserialization_exception_handler="continue",
    )
    queue.add_raw_records([ConsumerRecord("t", 0, r[1], r[2], r[3], r[4]) for r in rows])
    expected = []
    while (rec := queue.poll()) is not None:
        expected.append((rec.offset, rec.timestamp, rec.key, rec.value))
    st = stamper(
        LONG, JSON, extractor, "continue", pa.struct([("meta", pa.struct([("ts", pa.int64())]))])
    )
    out = st.stamp(batch(rows)).to_pylist()
    got = [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in out]
    assert [g[:3] for g in got] == [e[:3] for e in expected]
    assert [g[3] for g in got] == [
        None if e[3] is None else {"meta": {"ts": e[3]["meta"].get("ts")}} for e in expected
    ]
    assert st.dropped_records()[("t", 0)] == queue.dropped_records


def test_bad_configuration_is_reported_up_front() -> None:
    with pytest.raises(ValueError, match="not supported"):
        stamper(value=JSON, value_type=pa.struct([("d", pa.decimal128(10, 2))]))
    with pytest.raises(ValueError, match="'fail' or 'continue'"):
        stamper(handler="ignore")
    with pytest.raises(ValueError, match="Kafka source schema"):
        stamper().stamp(pa.RecordBatch.from_pydict({"key": pa.array([b"x"])}))
