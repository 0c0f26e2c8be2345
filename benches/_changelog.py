"""A changelog topic for the restore benchmarks: 100-byte values over 100k distinct keys."""

from __future__ import annotations

import random

from confluent_kafka import Producer

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
