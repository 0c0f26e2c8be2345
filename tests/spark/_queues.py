"""What ``RecordQueue`` makes of a topic read with confluent-kafka: the reference the Spark
``stamp`` tests compare with, record by record; and small Arrow batches for a while, which
split each Kafka partition of a micro-batch into several chunks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamstate import RecordQueue
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import JsonDeserializer, LongDeserializer

Stamped = tuple[int, Any, Any, int]  # timestamp, key, value, partition time


def read_all(kafka: KafkaTestCluster, topic: str) -> list[Any]:
    """Every record of ``topic`` up to its current end, as confluent-kafka ``Message``s."""
    total = sum(kafka.end_offsets(topic).values())
    consumer = kafka.consumer()
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + 60
    while len(messages) < total:
        assert time.monotonic() < deadline, f"read {len(messages)} of {total} records"
        batch = consumer.consume(num_messages=1000, timeout=1.0)
        messages.extend(m for m in batch if m.error() is None)
    return messages


def record_queues(
    kafka: KafkaTestCluster,
    topic: str,
    extractor: Any,
    as_row: Callable[[Any], Any],
) -> tuple[dict[tuple[int, int], Stamped], dict[str, int]]:
    """``{(partition, offset): (timestamp, key, as_row(value), partition time)}`` of the records
    one RecordQueue per partition admits (Long keys, JSON values, handler "continue"), and the
    drops of all the queues by reason."""
    messages = read_all(kafka, topic)
    expected: dict[tuple[int, int], Stamped] = {}
    dropped = {"deserialization_error": 0, "negative_timestamp": 0}
    for partition in sorted({m.partition() for m in messages}):
        queue = RecordQueue(
            topic,
            partition,
            key_deserializer=LongDeserializer(),
            value_deserializer=JsonDeserializer(),
            timestamp_extractor=extractor,
            deserialization_exception_handler="continue",
        )
        mine = sorted((m for m in messages if m.partition() == partition), key=lambda m: m.offset())
        queue.add_raw_records(mine)
        partition_time = -1
        while (rec := queue.poll()) is not None:
            partition_time = max(partition_time, rec.timestamp)
            expected[(partition, rec.offset)] = (
                rec.timestamp,
                rec.key,
                as_row(rec.value),
                partition_time,
            )
        for reason, count in queue.dropped_records.items():
            dropped[reason] += count
    return expected, dropped


def stamped_rows(rows: list[Any]) -> dict[tuple[int, int], Stamped]:
    """``stamp``'s output rows in the shape of :func:`record_queues`."""
    return {
        (r.partition, r.offset): (
            r.timestamp,
            r.key,
            r.value.asDict(recursive=True),
            r.partition_time,
        )
        for r in rows
    }


_MAX_RECORDS = "spark.sql.execution.arrow.maxRecordsPerBatch"


@contextmanager
def arrow_batches_of(spark: Any, records: int) -> Iterator[None]:
    """Queries started inside send Python at most ``records`` rows per Arrow batch; the
    session's own setting comes back after."""
    before = spark.conf.get(_MAX_RECORDS)
    spark.conf.set(_MAX_RECORDS, str(records))
    try:
        yield
    finally:
        spark.conf.set(_MAX_RECORDS, before)
