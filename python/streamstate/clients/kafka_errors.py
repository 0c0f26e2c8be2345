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
* ``REBALANCE_IN_PROGRESS``: a commit met a rebalance (``REBALANCE_IN_PROGRESS``, or a stale
  generation: ``ILLEGAL_GENERATION``). librdkafka runs the group protocol on its own thread, so
  the generation can move between a poll and the commit after it; the member is still in the
  group and may keep its partitions (Java's ``RebalanceInProgressException``): the commit is
  retried once the rebalance completes. Should librdkafka find the member out of the group, it
  reports the assignment lost at the next poll.
* ``TASK_MIGRATED``: this member is out of the group and no longer owns its partitions (an
  unknown member id, a fenced static member, a fenced producer: Java's ``CommitFailedException``
  and ``ProducerFencedException``, which Kafka Streams turns into ``TaskMigratedException``).
* ``RETRIABLE``: worth trying again (librdkafka's *retriable* flag, or a code of
  :data:`RETRIABLE_CODES`, such as a partition not yet in the metadata).
* ``OTHER``: anything else.

Under exactly-once a transactional producer's failures have kinds of their own, which
:func:`classify_transaction` tells apart (:class:`TransactionErrorKind`): a *fenced* producer
(another producer took its ``transactional.id``, its epoch is stale, or any other fatal producer
error: the instance must be replaced), the group having moved on (the offsets could not join the
transaction), a rebalance met by the offsets (the transaction must be aborted, the member stays),
an *abortable* transaction, and a retriable failure.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

__all__ = [
    "FENCED_CODES",
    "INVALID_OFFSET_CODES",
    "REBALANCE_IN_PROGRESS_CODES",
    "RETRIABLE_CODES",
    "TASK_MIGRATED_CODES",
    "ErrorKind",
    "TransactionErrorKind",
    "classify",
    "classify_transaction",
    "error_text",
    "kafka_call",
    "kafka_error",
]

_T = TypeVar("_T")


class ErrorKind(enum.Enum):
    """The kinds of :func:`classify`, in the order it checks them."""

    FATAL = "fatal"
    END_OF_PARTITION = "end of partition"
    INVALID_OFFSET = "invalid offset"
    REBALANCE_IN_PROGRESS = "rebalance in progress"
    TASK_MIGRATED = "task migrated"
    RETRIABLE = "retriable"
    OTHER = "other"


INVALID_OFFSET_CODES = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
"""Codes meaning "the position is outside the partition's log"."""

REBALANCE_IN_PROGRESS_CODES = frozenset(
    {KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
)
"""Codes meaning "the group is rebalancing": the member is still in it (see the module doc)."""

TASK_MIGRATED_CODES = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)
"""Codes meaning "this member is out of the group: another member owns these partitions"."""

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


FENCED_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError._FATAL,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
)
"""Codes meaning "this transactional producer can write no more" (Kafka's
``ProducerFencedException`` and ``InvalidProducerEpochException``; librdkafka reports a fence
as the fatal ``_FENCED``, and later calls fail with ``_FATAL``)."""

_GROUP_MOVED_ON_CODES = frozenset({KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_INSTANCE_ID})


class TransactionErrorKind(enum.Enum):
    """The kinds of :func:`classify_transaction`, in the order it checks them."""

    PRODUCER_FENCED = "producer fenced"
    TASK_MIGRATED = "task migrated"
    REBALANCE_IN_PROGRESS = "rebalance in progress"
    ABORTABLE = "abortable"
    RETRIABLE = "retriable"
    OTHER = "other"


def classify_transaction(error: KafkaError) -> TransactionErrorKind:
    """What a transactional producer's ``error`` means (see the module doc): Kafka Streams
    handles ``PRODUCER_FENCED`` and ``TASK_MIGRATED`` as task migration (the first also replaces
    the producer), aborts a ``REBALANCE_IN_PROGRESS`` or ``ABORTABLE`` transaction and
    re-processes its records (the member stays in the group), and retries a ``RETRIABLE``
    call."""
    code = error.code()
    if error.fatal() or code in FENCED_CODES:
        return TransactionErrorKind.PRODUCER_FENCED
    if code in _GROUP_MOVED_ON_CODES:
        return TransactionErrorKind.TASK_MIGRATED
    if code in REBALANCE_IN_PROGRESS_CODES:
        return TransactionErrorKind.REBALANCE_IN_PROGRESS
    if error.txn_requires_abort():
        return TransactionErrorKind.ABORTABLE
    if error.retriable() or code in RETRIABLE_CODES:
        return TransactionErrorKind.RETRIABLE
    return TransactionErrorKind.OTHER


_KINDS_OF_CODES = (
    (frozenset({KafkaError._PARTITION_EOF}), ErrorKind.END_OF_PARTITION),
    (INVALID_OFFSET_CODES, ErrorKind.INVALID_OFFSET),
    (REBALANCE_IN_PROGRESS_CODES, ErrorKind.REBALANCE_IN_PROGRESS),
    (TASK_MIGRATED_CODES, ErrorKind.TASK_MIGRATED),
)


def classify(error: KafkaError) -> ErrorKind:
    """The :class:`ErrorKind` of ``error`` (see the module doc)."""
    if error.fatal():
        return ErrorKind.FATAL
    code = error.code()
    for codes, kind in _KINDS_OF_CODES:
        if code in codes:
            return kind
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


def kafka_call(call: Callable[..., _T], *args: Any) -> _T:
    """``call(*args)``, a confluent-kafka client method, with a stray ``KafkaError`` it raises
    turned into the ``KafkaException`` it should have been.

    confluent-kafka 2.16's ``Producer.flush`` raises the bare ``KafkaError`` object (not an
    exception) when the producer hit a fatal error and messages carry delivery callbacks: a
    transactional producer fenced while its partitions were being added to the transaction.
    Python lets C code raise it; no ``except`` clause naming a class catches it, so it would
    pass every handler and end the calling thread without a word.
    """
    try:
        return call(*args)
    except BaseException:
        raise
    except:  # the one clause that catches a raised object that is no exception
        stray: object = sys.exc_info()[1]
        if isinstance(stray, KafkaError):
            raise KafkaException(stray) from None
        raise
