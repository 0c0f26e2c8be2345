"""What a Kafka error means to streamstate: the one classification every caller uses.

confluent-kafka reports failures as a ``KafkaError`` (on a polled message, or inside a
``KafkaException``) with librdkafka's code and two flags. :func:`classify` sorts it into the
kinds Kafka Streams tells apart, each handled the same way wherever it shows up:

* ``FATAL``: librdkafka's *fatal* flag; the client instance cannot be used any more.
* ``END_OF_PARTITION``: not a failure; the fetcher reached the end of a partition (consumers
  configured with ``enable.partition.eof=true``, as restore consumers are).
* ``INVALID_OFFSET``: the position is outside the partition's log (Java's
  ``InvalidOffsetException``): retention, compaction or ``delete_records`` removed records not
  read yet. librdkafka reports ``_AUTO_OFFSET_RESET`` when ``auto.offset.reset=error`` forbids a
  reset; a raw ``OFFSET_OUT_OF_RANGE`` counts too in case a client version surfaces that code.
* ``TASK_MIGRATED``: this member no longer owns its partitions (Java's ``CommitFailedException``
  and a fenced producer, which Kafka Streams turns into ``TaskMigratedException``).
* ``RETRIABLE``: worth trying again (librdkafka's *retriable* flag, or a code of
  :data:`RETRIABLE_CODES`, such as a partition not yet in the metadata).
* ``OTHER``: anything else.
"""

from __future__ import annotations

import enum

from confluent_kafka import KafkaError, KafkaException

__all__ = [
    "INVALID_OFFSET_CODES",
    "RETRIABLE_CODES",
    "TASK_MIGRATED_CODES",
    "ErrorKind",
    "classify",
    "error_text",
    "kafka_error",
]


class ErrorKind(enum.Enum):
    """The kinds of :func:`classify`, in the order it checks them."""

    FATAL = "fatal"
    END_OF_PARTITION = "end of partition"
    INVALID_OFFSET = "invalid offset"
    TASK_MIGRATED = "task migrated"
    RETRIABLE = "retriable"
    OTHER = "other"


INVALID_OFFSET_CODES = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
"""Codes meaning "the position is outside the partition's log"."""

TASK_MIGRATED_CODES = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)
"""Codes meaning "another member owns these partitions now"."""

RETRIABLE_CODES = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
    }
)
"""Codes worth retrying even when librdkafka does not flag them retriable: as in Kafka Streams,
a changelog partition that is not (yet) in the metadata is waited for, not failed at once."""


def classify(error: KafkaError) -> ErrorKind:
    """The :class:`ErrorKind` of ``error`` (see the module doc)."""
    if error.fatal():
        return ErrorKind.FATAL
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        return ErrorKind.END_OF_PARTITION
    if code in INVALID_OFFSET_CODES:
        return ErrorKind.INVALID_OFFSET
    if code in TASK_MIGRATED_CODES:
        return ErrorKind.TASK_MIGRATED
    if error.retriable() or code in RETRIABLE_CODES:
        return ErrorKind.RETRIABLE
    return ErrorKind.OTHER


def kafka_error(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries, if it carries one."""
    if exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def error_text(exc: KafkaException) -> str:
    """librdkafka's description of what ``exc`` carries, else ``str(exc)``."""
    error = kafka_error(exc)
    return error.str() if error is not None else str(exc)
