"""``stamp``: the Rust kernel vs plain Python, and ``stamp`` on Spark vs Spark's ``from_json``.

(c1) One 1M-row Kafka-source Arrow batch, Long key, JSON value decoded to a struct, timestamp
from a JSON field: ``_core.Stamper.stamp`` vs a row-wise Python function doing the same
(``json.loads`` + dicts → columns, with the record-queue admission rules).

(c2) On a local Spark session, the same records as an in-memory DataFrame: ``stamp`` vs
Spark's native ``from_json`` + column expressions (no admission rules: Spark has none), each
forced with a ``count``-like aggregate. The Spark pair runs only with benchmarks enabled
(``--benchmark-enable``); under ``--benchmark-disable`` a tiny correctness pass runs instead.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from benches._common import size

from streamstate import _core
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.spark import kafka_source_schema, local_session, stamp
from streamstate.timestamps import JsonFieldTimestampExtractor

N = size(1_000_000)
SPARK_N = size(1_000_000)

VALUE_TYPE = pa.struct(
    [
        ("id", pa.int64()),
        ("meta", pa.struct([("ts", pa.int64()), ("source", pa.string())])),
        ("tags", pa.list_(pa.field("element", pa.string()))),
        ("score", pa.float64()),
    ]
)
VALUE_DDL = "id bigint, meta struct<ts: bigint, source: string>, tags array<string>, score double"
KEY_SPEC = ("long",)
VALUE_SPEC = ("json",)
EXTRACTOR_SPEC = ("json_field", "meta.ts", "ms", "fail")


def make_rows(n: int, partitions: int = 1) -> dict[str, Any]:
    base = 1_700_000_000_000
    values = [
        json.dumps(
            {
                "id": i,
                "meta": {"ts": base + i * 10 - (500 if i % 7 == 0 else 0), "source": f"s{i % 13}"},
                "tags": ["a", f"t{i % 5}"],
                "score": i / 4,
            }
        ).encode()
        for i in range(n)
    ]
    return {
        "key": [struct.pack(">q", i) for i in range(n)],
        "value": values,
        "topic": ["events"] * n,
        "partition": [i % partitions for i in range(n)],
        "offset": [i // partitions for i in range(n)],
        "timestamp": [base * 1000 + i * 1000 for i in range(n)],
    }


def make_batch(n: int) -> pa.RecordBatch:
    rows = make_rows(n)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array(rows["key"], pa.binary()),
            "value": pa.array(rows["value"], pa.binary()),
            "topic": pa.array(rows["topic"]),
            "partition": pa.array(rows["partition"], pa.int32()),
            "offset": pa.array(rows["offset"], pa.int64()),
            "timestamp": pa.array(rows["timestamp"], pa.timestamp("us", "UTC")),
        }
    )


@pytest.fixture(scope="module")
def batch() -> pa.RecordBatch:
    return make_batch(N)


def rust_stamp(batch: pa.RecordBatch) -> pa.RecordBatch:
    stamper = _core.Stamper(KEY_SPEC, VALUE_SPEC, EXTRACTOR_SPEC, "fail", VALUE_TYPE)
    return stamper.stamp(batch)


def python_stamp(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The same semantics in plain Python, one record at a time (one partition, in order)."""
    unpack = struct.Struct(">q").unpack
    keys_in = batch.column("key").to_pylist()
    values_in = batch.column("value").to_pylist()
    offsets_in = batch.column("offset").to_pylist()
    partitions_in = batch.column("partition").to_pylist()
    topics_in = batch.column("topic").to_pylist()
    topic, partition, offset, timestamp, key, value, ptime = [], [], [], [], [], [], []
    partition_time = -1
    for i in range(len(values_in)):
        k = keys_in[i]
        raw = values_in[i]
        doc: dict[str, Any] = json.loads(raw)  # every record has a value here
        ts = doc["meta"]["ts"]
        if not isinstance(ts, int) or ts < 0:
            raise ValueError(f"invalid timestamp at offset {offsets_in[i]}")
        partition_time = max(partition_time, ts)
        meta = doc.get("meta")
        tags = doc.get("tags")
        score = doc.get("score")
        topic.append(topics_in[i])
        partition.append(partitions_in[i])
        offset.append(offsets_in[i])
        timestamp.append(ts)
        key.append(None if k is None else unpack(k)[0])
        value.append(
            {
                "id": doc.get("id"),
                "meta": None
                if meta is None
                else {"ts": meta.get("ts"), "source": meta.get("source")},
                "tags": tags,
                "score": float(score) if isinstance(score, int | float) else None,
            }
        )
        ptime.append(partition_time)
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(topic, pa.string()),
            "partition": pa.array(partition, pa.int32()),
            "offset": pa.array(offset, pa.int64()),
            "timestamp": pa.array(timestamp, pa.int64()),
            "key": pa.array(key, pa.int64()),
            "value": pa.array(value, VALUE_TYPE),
            "partition_time": pa.array(ptime, pa.int64()),
        }
    )


def check(out: pa.RecordBatch) -> None:
    assert out.num_rows == N
    last = out.slice(N - 1).to_pylist()[0]
    assert last["key"] == N - 1
    assert last["value"]["id"] == N - 1
    assert last["value"]["tags"] == ["a", f"t{(N - 1) % 5}"]
    assert last["partition_time"] >= last["timestamp"]


GROUP_KERNEL = "stamp kernel, 1M rows (Long key, JSON value -> struct, ts from JSON field)"


@pytest.mark.benchmark(group=GROUP_KERNEL)
def bench_stamp_rust(benchmark: Any, batch: pa.RecordBatch) -> None:
    benchmark.extra_info.update(rows=N, implementation="rust Stamper.stamp")
    out = benchmark(rust_stamp, batch)
    check(out)


@pytest.mark.benchmark(group=GROUP_KERNEL)
def bench_stamp_python(benchmark: Any, batch: pa.RecordBatch) -> None:
    benchmark.extra_info.update(rows=N, implementation="plain python per row")
    out = benchmark.pedantic(python_stamp, args=(batch,), rounds=3, iterations=1)
    check(out)


def test_rust_and_python_agree() -> None:
    small = make_batch(2_000)
    assert rust_stamp(small).to_pylist() == python_stamp(small).to_pylist()


# ---------------------------------------------------------------------------------------
# On Spark
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark_session(request: pytest.FixtureRequest) -> Iterator[Any]:
    session = local_session(app_name="streamstate-bench-stamp", shuffle_partitions=2)
    yield session


def spark_frame(spark: Any, n: int, partitions: int) -> Any:
    rows = make_rows(n, partitions)
    table = pa.table(
        {
            "key": pa.array(rows["key"], pa.binary()),
            "value": pa.array(rows["value"], pa.binary()),
            "topic": pa.array(rows["topic"]),
            "partition": pa.array(rows["partition"], pa.int32()),
            "offset": pa.array(rows["offset"], pa.int64()),
            "timestamp": pa.array(rows["timestamp"], pa.timestamp("us", "UTC")),
        }
    )
    df = spark.createDataFrame(table.to_pandas(), kafka_source_schema())
    # One Spark partition per Kafka partition, in offset order, like the Kafka source; cached so
    # the timings compare the stamping, not the Python→JVM upload.
    df = df.repartition(partitions, "partition").sortWithinPartitions("offset").cache()
    df.count()
    return df


def spark_stamp(df: Any, strategy: str) -> int:
    from pyspark.sql import functions as F

    out = stamp(
        df,
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=JsonFieldTimestampExtractor("meta.ts"),
        value_schema=VALUE_DDL,
        strategy=strategy,  # type: ignore[arg-type]
    )
    row = out.agg(F.count("*"), F.sum("value.id"), F.max("partition_time")).collect()[0]
    return int(row[0])


def spark_from_json(df: Any) -> int:
    from pyspark.sql import functions as F

    parsed = df.select(
        F.conv(F.hex("key"), 16, 10).cast("bigint").alias("key"),
        F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("value"),
        "topic",
        "partition",
        "offset",
    ).select("*", F.col("value.meta.ts").alias("timestamp"))
    row = parsed.agg(F.count("*"), F.sum("value.id"), F.max("timestamp")).collect()[0]
    return int(row[0])


GROUP_SPARK = "stamp on Spark, in-memory DataFrame (2 Kafka partitions), local[2]"


def spark_rows(config: pytest.Config) -> int:
    """Full size when timing; a few hundred rows when benchmarks only run as checks."""
    timing = bool(config.getoption("benchmark_enable")) or not config.getoption("benchmark_disable")
    return SPARK_N if timing else 300


@pytest.mark.benchmark(group=GROUP_SPARK)
@pytest.mark.parametrize("strategy", ["as_is", "sort", "group"])
def bench_spark_stamp(benchmark: Any, request: pytest.FixtureRequest, strategy: str) -> None:
    n = spark_rows(request.config)
    spark = request.getfixturevalue("spark_session")
    df = spark_frame(spark, n, 2)
    benchmark.extra_info.update(rows=n, implementation=f"stamp(strategy={strategy!r})")
    count = benchmark.pedantic(spark_stamp, args=(df, strategy), rounds=3, iterations=1)
    assert count == n
    df.unpersist()


@pytest.mark.benchmark(group=GROUP_SPARK)
def bench_spark_from_json(benchmark: Any, request: pytest.FixtureRequest) -> None:
    n = spark_rows(request.config)
    spark = request.getfixturevalue("spark_session")
    df = spark_frame(spark, n, 2)
    benchmark.extra_info.update(rows=n, implementation="from_json + column expressions")
    count = benchmark.pedantic(spark_from_json, args=(df,), rounds=3, iterations=1)
    assert count == n
    df.unpersist()


def test_spark_stamp_agrees_with_from_json(request: pytest.FixtureRequest) -> None:
    """The Spark pair computes the same values (checked on a few hundred rows)."""
    from pyspark.sql import functions as F

    spark = request.getfixturevalue("spark_session")
    df = spark_frame(spark, 300, 2)
    ours = stamp(
        df,
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=JsonFieldTimestampExtractor("meta.ts"),
        value_schema=VALUE_DDL,
    ).select("partition", "offset", "value")
    theirs = df.select(
        "partition", "offset", F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("value")
    )
    assert sorted(ours.collect()) == sorted(theirs.collect())
    df.unpersist()
