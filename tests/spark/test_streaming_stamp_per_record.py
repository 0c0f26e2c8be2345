"""``stamp(..., partition_time=False)`` on Spark's streaming Kafka source: the stateless plan.

Without the ``partition_time`` column and with an extractor that never reads the partition
time, each record's output is a function of the record alone, so ``stamp`` runs as one
``mapInArrow`` with no state. The result must still equal one ``RecordQueue`` per partition
reading every record from the start (minus the partition time) — across micro-batches, across a
restart from the checkpoint, and with ``minPartitions`` splitting each Kafka partition over
several Spark tasks — and the drops must be reported through ``observe``. An extractor that may
return the partition time is refused.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from tests.spark._queues import record_queues

from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.spark import stamp
from streamstate.timestamps import (
    JsonFieldTimestampExtractor,
    UsePartitionTimeOnInvalidTimestamp,
)

VALUE_DDL = "id bigint, meta struct<ts: bigint>"
PARTITIONS = 3
EXTRACTOR = JsonFieldTimestampExtractor("meta.ts", on_invalid="skip")


def _value(i: int) -> bytes:
    """Out-of-order timestamps; some missing and some negative (skipped: dropped as negative
    timestamps), some malformed (dropped under "continue")."""
    if i % 11 == 4:
        return b"{malformed"
    if i % 13 == 6:
        return json.dumps({"id": i, "meta": {"ts": -30}}).encode()
    if i % 7 == 3:
        return json.dumps({"id": i, "meta": {}}).encode()
    return json.dumps({"id": i, "meta": {"ts": 1_000_000 + (i * 37 % 101) * 1000}}).encode()


def _produce_round(kafka: KafkaTestCluster, topic: str, start: int, count: int) -> None:
    kafka.produce(
        topic,
        [
            {"key": struct.pack(">q", i), "value": _value(i), "partition": i % PARTITIONS}
            for i in range(start, start + count)
        ],
    )


def _source(spark: Any, kafka: KafkaTestCluster, topic: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 25)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run(spark: Any, kafka: KafkaTestCluster, topic: str, checkpoint: Path, out: Path) -> Any:
    stamped = stamp(
        _source(spark, kafka, topic, minPartitions=2 * PARTITIONS),
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=EXTRACTOR,
        deserialization_exception_handler="continue",
        value_schema=VALUE_DDL,
        partition_time=False,
    )
    query = (
        stamped.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return query


def test_stateless_streaming_stamp_across_micro_batches_split_partitions_and_a_restart(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    topic = kafka.create_topic(partitions=PARTITIONS)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    _produce_round(kafka, topic, 0, 60)
    first = _run(spark, kafka, topic, checkpoint, out)
    _produce_round(kafka, topic, 60, 45)
    second = _run(spark, kafka, topic, checkpoint, out)

    rows = spark.read.parquet(str(out)).collect()
    assert "partition_time" not in spark.read.parquet(str(out)).columns
    got = {
        (r.partition, r.offset): (r.timestamp, r.key, r.value.asDict(recursive=True)) for r in rows
    }
    assert len(got) == len(rows)  # no record twice, also across the restart
    queues, dropped = record_queues(
        kafka,
        topic,
        EXTRACTOR,
        lambda value: {"id": value["id"], "meta": {"ts": value["meta"].get("ts")}},
    )
    assert got == {where: stamped[:3] for where, stamped in queues.items()}
    assert all(r.topic == topic for r in rows)
    totals = {"deserialization_error": 0, "negative_timestamp": 0, "total": 0}
    batches = 0
    for query in (first, second):
        for progress in query.recentProgress:
            batches += bool(progress.numInputRows)
            metrics = progress.observedMetrics.get("dropped_records")
            if metrics is not None:
                for name in totals:
                    totals[name] += metrics[name]
    assert batches >= 3
    assert totals == {**dropped, "total": sum(dropped.values())}
    assert dropped["deserialization_error"] > 0 and dropped["negative_timestamp"] > 0


@pytest.mark.parametrize(
    "extractor",
    [
        UsePartitionTimeOnInvalidTimestamp(),
        JsonFieldTimestampExtractor("meta.ts", on_invalid="partition_time"),
    ],
)
def test_stateless_streaming_stamp_refuses_extractors_that_read_the_partition_time(
    kafka: KafkaTestCluster, spark: Any, extractor: Any
) -> None:
    raw = _source(spark, kafka, "any-topic")
    with pytest.raises(ValueError, match="partition_time=False"):
        stamp(raw, timestamp_extractor=extractor, partition_time=False)
    assert "partition_time" in stamp(raw, timestamp_extractor=extractor).columns


def test_batch_stamp_without_partition_time_drops_the_column(
    kafka: KafkaTestCluster, spark: Any
) -> None:
    topic = kafka.create_topic(partitions=PARTITIONS)
    _produce_round(kafka, topic, 0, 30)
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    kwargs: dict[str, Any] = {
        "key_deserializer": LongDeserializer(),
        "value_deserializer": JsonDeserializer(),
        "timestamp_extractor": EXTRACTOR,
        "deserialization_exception_handler": "continue",
        "value_schema": VALUE_DDL,
    }
    without = stamp(raw, partition_time=False, **kwargs)
    with_pt = stamp(raw, **kwargs)
    assert without.columns == [c for c in with_pt.columns if c != "partition_time"]
    assert sorted(without.collect()) == sorted(with_pt.drop("partition_time").collect())
