"""Records as they enter and leave the record path.

``ConsumerRecord`` is a raw record (``bytes`` key and value), ``StampedRecord`` a deserialized one
with its extracted timestamp; both are Rust objects, so a batch of them crosses into Rust without
per-attribute Python calls. ``TopicPartition`` is confluent-kafka's class.
"""

from __future__ import annotations

from enum import IntEnum

from confluent_kafka import TopicPartition

from streamstate._core import ConsumerRecord, StampedRecord, timestamp_type_id_from_confluent

__all__ = [
    "NOT_KNOWN",
    "ConsumerRecord",
    "StampedRecord",
    "TimestampType",
    "TopicPartition",
    "timestamp_type_from_confluent",
    "timestamp_type_from_spark",
]

NOT_KNOWN: int = -1
"""Unknown partition time or stream time (Kafka's ``RecordQueue.UNKNOWN``)."""


class TimestampType(IntEnum):
    """What a record's timestamp means, with Kafka's own ids (Java's ``TimestampType.id``)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def timestamp_type_from_confluent(kind: int) -> TimestampType:
    """confluent-kafka numbers the types 0 (none), 1 (create), 2 (log append); the mapping is
    the one the Rust record reader applies to every ``Message``."""
    return TimestampType(timestamp_type_id_from_confluent(kind))


def timestamp_type_from_spark(kind: int) -> TimestampType:
    """Spark's Kafka source uses Kafka's Java ids (-1, 0, 1) in ``timestampType``."""
    return TimestampType(kind)
