"""A changelog topic for the restore benchmarks: 100-byte values over 100k distinct keys, and
the bare confluent-kafka loop that reads it."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from streamstate.changelog import restore_consumer_config

DISTINCT_KEYS = 100_000
# Hex text of random bytes: values that compress about 2:1, like typical JSON or Avro state.
# (Values that compress 20:1 make librdkafka's lz4 decompression, not the restore, the limit.)
_rng = random.Random(100)
_TEXT = [_rng.randbytes(42).hex().encode() for _ in range(4096)]


def value(i: int) -> bytes:
    """The 100-byte value of record ``i``: its number in hex, then random hex text."""
    return b"%016x" % i + _TEXT[i % len(_TEXT)]


def key(i: int, distinct: int = DISTINCT_KEYS) -> bytes:
    """The key of record ``i``: ``distinct`` keys, each overwritten about every ``distinct``
    records, as in a changelog before compaction."""
    return b"key-%08d" % ((i * 7919) % distinct)


def produce_changelog(bootstrap_servers: str, topic: str, n: int, partitions: int) -> None:
    """Produces ``n`` records round-robin over ``partitions`` (the topic must exist)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value(i), key(i), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records to {topic!r} were not delivered")


def consume_changelog(
    bootstrap: str,
    topic: str,
    on_batch: Callable[[list[Any]], None],
    config: Mapping[str, Any] | None = None,
) -> int:
    """Reads every partition of ``topic`` from offset 0 to its end offset with ``consume(10000)``
    and the restore consumer's settings (``config`` overrides some); returns the number of
    records read."""
    consumer = Consumer(restore_consumer_config(bootstrap, **dict(config or {})))
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        end = 0
        assignment = []
        for partition in sorted(metadata.partitions):
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
            end += high
            assignment.append(TopicPartition(topic, partition, 0))
        consumer.assign(assignment)
        read = 0
        while read < end:
            batch = [m for m in consumer.consume(10_000, 1.0) if m.error() is None]
            on_batch(batch)
            read += len(batch)
        return read
    finally:
        consumer.close()
