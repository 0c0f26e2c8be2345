"""Decoding Kafka-source Arrow batches in Rust, against Python's own struct/str decoding."""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest

from streamstate import DeserializationError, _core

LAYOUTS = [pa.binary(), pa.large_binary(), pa.binary_view()]


def kafka_batch(keys: list[bytes | None], values: list[bytes | None], layout: pa.DataType):
    n = len(keys)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array(keys, layout),
            "value": pa.array(values, layout),
            "topic": ["t"] * n,
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * n, pa.timestamp("us", "UTC")
            ),
        }
    )


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_long_keys_and_string_values(layout: pa.DataType) -> None:
    keys = [struct.pack(">q", v) for v in (0, -1, 2**63 - 1)] + [None]
    values = [b"a", "ünïcode".encode(), b"", None]
    out = _core.decode_kafka_batch(kafka_batch(keys, values, layout), "long", "string")
    assert out.column("key").to_pylist() == [0, -1, 2**63 - 1, None]
    assert out.column("value").to_pylist() == ["a", "ünïcode", "", None]
    assert out.column("timestamp").to_pylist() == [1_704_067_200_000] * 4
    assert out.column("offset").to_pylist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("name", "fmt", "value"),
    [("short", ">h", -2), ("integer", ">i", 7), ("float", ">f", 1.5), ("double", ">d", -2.25)],
)
def test_kafka_number_formats(name: str, fmt: str, value: float) -> None:
    raw = pa.array([struct.pack(fmt, value)], pa.binary())
    assert _core.decode_column(raw, name).to_pylist() == [value]


def test_wrong_length_is_a_deserialization_error() -> None:
    with pytest.raises(DeserializationError, match="row 0"):
        _core.decode_column(pa.array([b"\x00\x01"], pa.binary()), "integer")


def test_missing_column_is_named() -> None:
    batch = pa.RecordBatch.from_pydict({"key": pa.array([b"x"])})
    with pytest.raises(ValueError, match="no 'partition' column"):
        _core.decode_kafka_batch(batch, "bytes", "bytes")
