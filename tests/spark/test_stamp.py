"""``streamstate.spark.stamp`` on a real local Spark session.

(a) Spark's Kafka source reading a real broker, compared record by record with
``streamstate.RecordQueue`` fed the same records through a confluent-kafka consumer.
(b) An in-memory DataFrame in the Kafka source schema (negative record timestamps, two
partitions interleaved and shuffled), through each strategy.
"""

from __future__ import annotations

import json
import struct
from datetime import datetime, timezone
from typing import Any, Literal

import pytest
from pyspark.sql import Observation
from tests.spark._queues import record_queues, stamped_rows

from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import BytesDeserializer, JsonDeserializer, LongDeserializer
from streamstate.spark import kafka_source_schema, stamp
from streamstate.timestamps import (
    JsonFieldTimestampExtractor,
    UsePartitionTimeOnInvalidTimestamp,
)

VALUE_DDL = "id bigint, meta struct<ts: bigint, source: string>, tags array<string>"


def _value(i: int) -> bytes | None:
    if i % 11 == 5:
        return b"{malformed"
    if i % 13 == 7:
        return json.dumps({"id": i, "meta": {}}).encode()  # missing ts
    if i % 17 == 3:
        return json.dumps({"id": i, "meta": {"ts": -40}}).encode()  # negative ts
    ts = 1_700_000_000_000 + (i * 37 % 50) * 1000  # out of order within a partition
    return json.dumps({"id": i, "meta": {"ts": ts, "source": f"s{i % 3}"}, "tags": ["a"]}).encode()


def test_stamp_over_the_kafka_source_matches_record_queue(
    kafka: KafkaTestCluster, spark: Any
) -> None:
    topic = kafka.create_topic(partitions=2)
    n = 200
    kafka.produce(
        topic,
        [{"key": struct.pack(">q", i), "value": _value(i), "partition": i % 2} for i in range(n)],
    )
    extractor = JsonFieldTimestampExtractor("meta.ts", on_invalid="skip")
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    strategies: tuple[Literal["as_is", "sort", "group"], ...] = ("as_is", "sort", "group")
    results = {}
    for strategy in strategies:
        observation = Observation(f"dropped_{strategy}")
        rows = stamp(
            raw,
            key_deserializer=LongDeserializer(),
            value_deserializer=JsonDeserializer(),
            timestamp_extractor=extractor,
            deserialization_exception_handler="continue",
            value_schema=VALUE_DDL,
            strategy=strategy,
            observe=observation,
        ).collect()
        results[strategy] = (stamped_rows(rows), observation.get)

    expected, dropped = record_queues(
        kafka,
        topic,
        extractor,
        lambda value: {
            "id": value.get("id"),
            "meta": {"ts": value["meta"].get("ts"), "source": value["meta"].get("source")},
            "tags": value.get("tags"),
        },
    )
    assert 100 < len(expected) < n  # some dropped: malformed, missing and negative timestamps
    assert dropped["deserialization_error"] > 0 and dropped["negative_timestamp"] > 0
    for strategy, (got, observed) in results.items():
        assert got == expected, strategy
        # The observe metrics of a batch query: the drops by reason, as the queues count them.
        assert observed == {**dropped, "total": sum(dropped.values())}, strategy


def _kafka_frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, kafka_source_schema())


def test_stamp_of_an_in_memory_frame_through_every_strategy(spark: Any) -> None:
    def ts(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)

    # (partition, offset, record timestamp ms); the negative ones take the partition time.
    spec = [
        (0, 0, 1000),
        (1, 0, 5000),
        (0, 1, -1),
        (1, 1, 4000),
        (0, 2, 3000),
        (1, 2, -7),
        (0, 3, 2000),
        (1, 3, 6000),
    ]
    rows = [
        (struct.pack(">q", o), f"v{p}-{o}".encode(), "events", p, o, ts(t))
        for p, o, t in reversed(spec)  # shuffled: offsets arrive in reverse
    ]
    df = _kafka_frame(spark, rows).repartition(3)
    expected = [
        (0, 0, 1000, 1000),
        (0, 1, 1000, 1000),
        (0, 2, 3000, 3000),
        (0, 3, 2000, 3000),
        (1, 0, 5000, 5000),
        (1, 1, 4000, 5000),
        (1, 2, 5000, 5000),
        (1, 3, 6000, 6000),
    ]
    strategies: tuple[Literal["sort", "group"], ...] = ("sort", "group")
    for strategy in strategies:
        out = stamp(
            df,
            key_deserializer=LongDeserializer(),
            value_deserializer=BytesDeserializer(),
            timestamp_extractor=UsePartitionTimeOnInvalidTimestamp(),
            strategy=strategy,
        )
        assert out.schema.simpleString() == (
            "struct<topic:string,partition:int,offset:bigint,timestamp:bigint,key:bigint,"
            "value:binary,partition_time:bigint>"
        )
        got = sorted((r.partition, r.offset, r.timestamp, r.partition_time) for r in out.collect())
        assert got == expected, strategy


def test_custom_python_serdes_are_refused_clearly(spark: Any) -> None:
    class Mine:
        def deserialize(self, topic: str | None, data: bytes | None) -> Any:
            return data

    df = _kafka_frame(spark, [])
    with pytest.raises(TypeError, match="built-in deserializers"):
        stamp(df, value_deserializer=Mine())  # type: ignore[arg-type]
