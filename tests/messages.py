"""Records read back from the real broker, as the paths into a queue receive them."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
from confluent_kafka import TopicPartition

from streamstate.kafka_local import KafkaTestCluster


def read_back(kafka: KafkaTestCluster, topic: str, partition: int, count: int) -> list[Any]:
    """The first ``count`` ``confluent_kafka.Message``s of one partition (polling with a
    generous deadline)."""
    consumer = kafka.consumer()
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got.extend(m for m in consumer.consume(10, timeout=1.0) if m.error() is None)
    consumer.close()
    assert [m.offset() for m in got] == list(range(count))
    return got


def as_arrow(messages: list[Any]) -> pa.RecordBatch:
    """The messages as Spark's Kafka source hands them over."""
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([m.key() for m in messages], pa.binary()),
            "value": pa.array([m.value() for m in messages], pa.binary()),
            "topic": pa.array([m.topic() for m in messages], pa.string()),
            "partition": pa.array([m.partition() for m in messages], pa.int32()),
            "offset": pa.array([m.offset() for m in messages], pa.int64()),
            "timestamp": pa.array([m.timestamp()[1] * 1000 for m in messages], pa.int64()).cast(
                pa.timestamp("us", "UTC")
            ),
        }
    )
