"""Decoding a Kafka-source Arrow batch: Rust (one call per batch) vs plain Python per row.

Both produce the same columns from the same 1M-row batch (Long key, UTF-8 string value,
Spark's microsecond timestamp → epoch ms); each benchmark checks its result before timing.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from benches._common import size

from streamstate import _core

N = size(1_000_000)


@pytest.fixture(scope="module")
def batch() -> pa.RecordBatch:
    keys = [struct.pack(">q", i) for i in range(N)]
    values = [f"value-{i:08d}".encode() for i in range(N)]
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["events"] * N),
            "partition": pa.array([0] * N, pa.int32()),
            "offset": pa.array(range(N), pa.int64()),
            "timestamp": pa.array(
                [1_700_000_000_000_000 + i * 1000 for i in range(N)], pa.timestamp("us", "UTC")
            ),
        }
    )


def python_decode(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The same semantics in plain Python: unpack every key, decode every value."""
    unpack = struct.Struct(">q").unpack
    keys = [None if k is None else unpack(k)[0] for k in batch.column("key").to_pylist()]
    values = [None if v is None else v.decode() for v in batch.column("value").to_pylist()]
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
    millis = [t // 1000 for t in ts]
    return pa.RecordBatch.from_pydict(
        {
            "topic": batch.column("topic"),
            "partition": batch.column("partition"),
            "offset": batch.column("offset"),
            "timestamp": pa.array(millis, pa.int64()),
            "key": pa.array(keys, pa.int64()),
            "value": pa.array(values, pa.string()),
        }
    )


def check(out: pa.RecordBatch) -> None:
    assert out.num_rows == N
    assert out.column("key")[N - 1].as_py() == N - 1
    assert out.column("value")[N - 1].as_py() == f"value-{N - 1:08d}"
    assert out.column("timestamp")[1].as_py() == 1_700_000_000_001


@pytest.mark.benchmark(group="decode kafka batch (Long key, String value)")
def bench_decode_rust(benchmark, batch: pa.RecordBatch) -> None:
    benchmark.extra_info.update(rows=N, implementation="rust decode_kafka_batch")
    out = benchmark(_core.decode_kafka_batch, batch, "long", "string")
    check(out)


@pytest.mark.benchmark(group="decode kafka batch (Long key, String value)")
def bench_decode_python(benchmark, batch: pa.RecordBatch) -> None:
    benchmark.extra_info.update(rows=N, implementation="plain python per row")
    out = benchmark(python_decode, batch)
    check(out)
