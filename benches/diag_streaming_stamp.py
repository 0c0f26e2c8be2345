"""Where streaming ``stamp``'s time goes: the steps of its plan, one by one, over one topic.

Not a benchmark (no pytest-benchmark, no comparison kept): a diagnostic script for
``docs/PERFORMANCE.md`` ("Spark Structured Streaming"). Each variant is a streaming query over
the same topic of ``bench_spark_streaming``'s JSON events (Kafka source, ``AvailableNow``, four
micro-batches, ``noop`` sink), timed end to end after one warm-up ``from_json`` query::

    .venv/bin/python -m benches.diag_streaming_stamp [records] [variant,variant,...] [rounds]

Variants: ``from_json``; ``stateless_stamp`` (the kernel alone in a ``mapInArrow``, no
observe); ``pack_unpack`` (records packed to Arrow IPC chunks and unpacked, nothing between);
``pack_shuffle_unpack`` (plus a shuffle by topic and partition); ``pack_op_unpack`` (plus
``applyInPandasWithState`` passing the chunks through); ``stamp`` (the stateful plan).
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from benches.bench_spark_streaming import PARTITIONS, VALUE_DDL, _event, _produce
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from streamstate._core import Stamper
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.spark import local_session, stamp
from streamstate.spark._chunks import CHUNK_DDL, spark_arrow_schema, to_chunks, unpack_chunks
from streamstate.spark._pyspark_compat import to_arrow_type
from streamstate.spark._stamp import _as_nullable, _parse_type
from streamstate.timestamps import JsonFieldTimestampExtractor

MICRO_BATCHES = 4
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
STAMP_ARGS: dict[str, Any] = {
    "key_deserializer": LongDeserializer(),
    "value_deserializer": JsonDeserializer(),
    "timestamp_extractor": JsonFieldTimestampExtractor("meta.ts"),
    "value_schema": VALUE_DDL,
}


def main(n: int, only: list[str] | None, rounds: int) -> None:
    """Produces ``n`` events, then times each variant ``rounds`` times."""
    kafka = KafkaTestCluster.from_env_or_start(Path(tempfile.mkdtemp()))
    spark = local_session(app_name="diag-streaming-stamp", shuffle_partitions=2)
    topic = kafka.create_topic(f"diag-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    _produce(kafka.bootstrap_servers, topic, (_event(i) for i in range(n)))

    def source() -> Any:
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", n // MICRO_BATCHES)
            .load()
        )

    def run(df: Any) -> int:
        out = df.observe("rows", F.count(F.lit(1)).alias("rows"))
        with tempfile.TemporaryDirectory() as checkpoint:
            query = (
                out.writeStream.format("noop")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            return sum(
                int(p.observedMetrics["rows"]["rows"])
                for p in query.recentProgress
                if "rows" in p.observedMetrics
            )

    def from_json() -> Any:
        return (
            source()
            .select(
                "topic",
                "partition",
                "offset",
                F.conv(F.hex("key"), 16, 10).cast("bigint").alias("key"),
                F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("value"),
            )
            .select("*", F.col("value.meta.ts").alias("timestamp"))
        )

    def stateless_stamp() -> Any:
        schema = stamp(spark.createDataFrame([], source().schema), **STAMP_ARGS).schema
        args = (
            STAMP_ARGS["key_deserializer"]._spec,
            STAMP_ARGS["value_deserializer"]._spec,
            STAMP_ARGS["timestamp_extractor"]._spec,
            "fail",
            to_arrow_type(_as_nullable(_parse_type(VALUE_DDL))),
        )

        def kernel(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            stamper = Stamper(*args)
            for batch in batches:
                out = stamper.stamp(batch)
                if out.num_rows:
                    yield out

        return source().select(*COLUMNS).mapInArrow(kernel, schema)

    def packed() -> tuple[Any, Any, Any]:
        raw = source().select(*COLUMNS)
        return raw, raw.schema, unpack_chunks(spark_arrow_schema(spark, raw.schema))

    def pack_unpack() -> Any:
        raw, schema, unpack = packed()
        return raw.mapInArrow(to_chunks, CHUNK_DDL).select("chunk").mapInArrow(unpack, schema)

    def pack_shuffle_unpack() -> Any:
        raw, schema, unpack = packed()
        chunks = raw.mapInArrow(to_chunks, CHUNK_DDL).repartition(2, "topic", "partition")
        return chunks.select("chunk").mapInArrow(unpack, schema)

    def pack_op_unpack() -> Any:
        raw, schema, unpack = packed()

        def through(key: Any, frames: Iterable[Any], state: Any) -> Iterator[Any]:
            for frame in frames:
                yield pd.DataFrame({"chunk": frame["chunk"]})
            state.update((1,))

        return (
            raw.mapInArrow(to_chunks, CHUNK_DDL)
            .groupBy("topic", "partition")
            .applyInPandasWithState(
                through, "chunk binary", "x bigint", "append", GroupStateTimeout.NoTimeout
            )
            .mapInArrow(unpack, schema)
        )

    def stamp_stream() -> Any:
        return stamp(source(), **STAMP_ARGS)

    variants = {
        "from_json": from_json,
        "stateless_stamp": stateless_stamp,
        "pack_unpack": pack_unpack,
        "pack_shuffle_unpack": pack_shuffle_unpack,
        "pack_op_unpack": pack_op_unpack,
        "stamp": stamp_stream,
    }
    try:
        run(from_json())  # warm-up: Kafka consumers, Python workers
        for _ in range(rounds):
            for name in only or list(variants):
                start = time.perf_counter()
                rows = run(variants[name]())
                print(f"{name}: {time.perf_counter() - start:.2f} s, {rows} rows", flush=True)
    finally:
        spark.stop()
        kafka.close()


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 200_000,
        [name for name in sys.argv[2].split(",") if name] or None if len(sys.argv) > 2 else None,
        int(sys.argv[3]) if len(sys.argv) > 3 else 1,
    )
