"""One thread through every part: real Kafka broker → Spark's Kafka source → Rust in mapInArrow.

This is the test that fails when any part is missing: no broker (the ``kafka`` fixture cannot
start), no connector (Spark cannot find the ``kafka`` source), or no extension (the Python
workers cannot import ``streamstate._core``).
"""

from __future__ import annotations

import struct

import pytest

from streamstate.cli.demo import run_end_to_end
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import decode_kafka_columns


def test_records_produced_to_kafka_come_back_decoded_by_rust_through_spark(
    kafka: KafkaTestCluster, spark
) -> None:
    result = run_end_to_end(kafka, spark, count=5_000, partitions=3)
    assert result.mismatches == []
    assert result.produced == result.read_by_spark == 5_000
    assert result.ok


def test_a_malformed_value_fails_the_spark_job_naming_the_record(
    kafka: KafkaTestCluster, spark
) -> None:
    topic = kafka.create_topic(partitions=1)
    kafka.produce(
        topic,
        [(struct.pack(">q", 1), struct.pack(">q", 10)), (struct.pack(">q", 2), b"\x01\x02")],
    )
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    with pytest.raises(Exception) as info:
        decode_kafka_columns(raw, key="long", value="long").collect()
    text = str(info.value)
    # Spark re-raises the worker's exception as text; the class, topic and offset survive.
    assert "DeserializationError" in text
    assert topic in text
    assert "offset 1" in text
