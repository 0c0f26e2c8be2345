"""``stamp`` over Spark's streaming Kafka source, on the real broker and a real local Spark.

The streaming result must equal one ``RecordQueue`` per partition reading every record from the
start — across micro-batches (``maxOffsetsPerTrigger`` makes several) and across a restart of
the query from its checkpoint with more records produced meanwhile (the first run with
``Trigger.AvailableNow``, the second with a processing-time trigger) — including the records
whose timestamp comes from the partition time carried in Spark's state store, and the drop
counts reported through ``observe``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from tests.spark._queues import arrow_batches_of, record_queues, stamped_rows

from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.spark import stamp
from streamstate.timestamps import JsonFieldTimestampExtractor

VALUE_DDL = "id bigint, meta struct<ts: bigint>"
PARTITIONS = 3
EXTRACTOR = JsonFieldTimestampExtractor("meta.ts", on_invalid="partition_time")


def _value(i: int, carried: bool) -> bytes:
    """Out-of-order timestamps, some missing and some negative (both take the partition time),
    some malformed (dropped under "continue"). With ``carried`` the record has no timestamp: as
    the first of a partition after the restart, it needs the partition time the first run left
    in the state store."""
    if carried or (i % 5 == 2 and i >= PARTITIONS):
        return json.dumps({"id": i, "meta": {}}).encode()
    if i % 11 == 4:
        return b"{malformed"
    if i % 13 == 6:
        return json.dumps({"id": i, "meta": {"ts": -30}}).encode()
    return json.dumps({"id": i, "meta": {"ts": 1_000_000 + (i * 37 % 101) * 1000}}).encode()


def _produce_round(kafka: KafkaTestCluster, topic: str, start: int, count: int) -> None:
    records = []
    for i in range(start, start + count):
        carried = start > 0 and i < start + PARTITIONS
        records.append(
            {"key": struct.pack(">q", i), "value": _value(i, carried), "partition": i % PARTITIONS}
        )
    kafka.produce(topic, records)


def _run(
    spark: Any,
    kafka: KafkaTestCluster,
    topic: str,
    checkpoint: Path,
    out: Path,
    *,
    processing_time: bool = False,
) -> Any:
    """Stamps ``topic`` to parquet files in ``out`` until it has read every record: with
    ``Trigger.AvailableNow``, or a processing-time trigger stopped once all is processed."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 25)
        .load()
    )
    stamped = stamp(
        raw,
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=EXTRACTOR,
        deserialization_exception_handler="continue",
        value_schema=VALUE_DDL,
    )
    writer = (
        stamped.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
    )
    if processing_time:
        query = writer.trigger(processingTime="1 second").start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    else:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return query


def _expected(kafka: KafkaTestCluster, topic: str) -> tuple[dict[Any, Any], dict[str, int]]:
    return record_queues(
        kafka,
        topic,
        EXTRACTOR,
        lambda value: {"id": value["id"], "meta": {"ts": value["meta"].get("ts")}},
    )


def _observed(queries: list[Any]) -> tuple[dict[str, int], int]:
    """The dropped-record metrics summed over every micro-batch, and how many micro-batches
    read records."""
    totals = {"deserialization_error": 0, "negative_timestamp": 0, "total": 0}
    batches = 0
    for query in queries:
        for progress in query.recentProgress:
            if progress.numInputRows:
                batches += 1
            metrics = progress.observedMetrics.get("dropped_records")
            if metrics is not None:
                for name in totals:
                    totals[name] += metrics[name]
    return totals, batches


def test_streaming_stamp_across_micro_batches_and_a_restart_equals_record_queues(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    topic = kafka.create_topic(partitions=PARTITIONS)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    _produce_round(kafka, topic, 0, 60)
    # Seven records per Arrow batch in the first run: each partition of a micro-batch reaches
    # the stateful operator as several chunks, which must be read back in offset order (and
    # PySpark 4.0's reader must cope with several rows per group: _pyspark_compat).
    with arrow_batches_of(spark, 7):
        first = _run(spark, kafka, topic, checkpoint, out)
    _produce_round(kafka, topic, 60, 45)
    second = _run(spark, kafka, topic, checkpoint, out, processing_time=True)

    rows = spark.read.parquet(str(out)).collect()
    got = stamped_rows(rows)
    expected, dropped = _expected(kafka, topic)
    assert got == expected
    assert all(r.topic == topic for r in rows)
    # The first record of each partition after the restart has no timestamp of its own: it
    # took the partition time carried over in Spark's state store.
    for partition in range(PARTITIONS):
        before = [v[3] for (p, offset), v in got.items() if p == partition and offset < 20]
        assert got[(partition, 20)][0] == max(before) > 0  # 20 records of it before the restart
    observed, batches = _observed([first, second])
    assert batches >= 3
    assert observed == {**dropped, "total": sum(dropped.values())}
    # Malformed values were dropped; negative timestamps took the partition time instead.
    assert dropped == {"deserialization_error": 8, "negative_timestamp": 0}
