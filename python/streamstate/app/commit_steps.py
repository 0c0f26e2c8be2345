"""Two steps of a stream thread's commit, kept out of :mod:`streamstate.app.stream_thread`.

* :func:`flush_for_commit`: the tasks' caches and dead letters, then the producer, before any
  offset is committed (their records must be acknowledged first);
* :func:`commit_with_consumer`: the at-least-once commit of a classic group member with its
  consumer, each failure sorted as Kafka Streams sorts it (a rebalance puts the commit off,
  a member out of the group is *task migrated*, a retriable error waits for the next commit).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.thread_producer import transaction_failure
from streamstate.clients.kafka_errors import (
    ErrorKind,
    classify,
    error_text,
    kafka_call,
    kafka_error,
)
from streamstate.errors import StreamsError, TaskMigratedError

if TYPE_CHECKING:
    from streamstate.app.task import StreamTask

__all__ = ["commit_with_consumer", "flush_for_commit"]

_log = logging.getLogger("streamstate.app")


def flush_for_commit(tasks: list[StreamTask], producer: Producer, *, eos: bool, name: str) -> bool:
    """Flushes the tasks' caches, then the producer; False (WARN) when records stay
    unacknowledged after 30 s."""
    for task in tasks:
        task.flush_caches()  # their changelog records must be acknowledged too
        task.send_dead_letters()  # in this transaction, before the offsets pass them
    try:
        remaining = kafka_call(producer.flush, 30)
    except KafkaException as exc:
        # A fatal producer error (under exactly-once: fenced while its partitions were
        # being added to the transaction) may surface here first, before any delivery
        # report says so.
        failure = (
            transaction_failure("flushing the producer", exc)
            if eos
            else StreamsError(f"flushing the producer failed: {error_text(exc)}")
        )
        if failure is not None:
            raise failure from exc
        remaining = len(producer)
    if not remaining and not eos:
        # Sink records refused with their batch are sent again alone before the commit
        # (StreamTask.send_refused_alone): only the one the broker refuses is dropped.
        for task in tasks:
            task.send_refused_alone()
    if remaining:
        # The broker is away: the records stay queued (librdkafka retries them until
        # message.timeout.ms, after which a delivery error fails the task; under
        # exactly-once the transaction stays open until the next commit).
        _log.warning(
            "stream-thread [%s] %d records not acknowledged within 30 s; committing later",
            name,
            remaining,
        )
        return False
    return True


def commit_with_consumer(
    consumer: Consumer,
    offsets: list[KafkaTopicPartition],
    put_off: Callable[[str], Any] | None,
    *,
    name: str,
) -> bool:
    """At-least-once: commits ``offsets`` with the consumer; False when the commit is to be
    tried again (a rebalance met, handed to ``put_off(why)``; or a failure the cluster may not
    have next time). Without ``put_off`` (revocation, shutdown) a rebalance is *task
    migrated*."""
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
        return True
    except KafkaException as exc:
        error = kafka_error(exc)
        kind = classify(error) if error is not None else ErrorKind.OTHER
        text = error_text(exc)
        if kind is ErrorKind.REBALANCE_IN_PROGRESS and put_off is not None:
            put_off(text)
            return False
        if kind in (ErrorKind.TASK_MIGRATED, ErrorKind.REBALANCE_IN_PROGRESS):
            raise TaskMigratedError(
                f"committing offsets failed: {text}; the consumer is no longer part of the group"
            ) from exc
        if kind is ErrorKind.RETRIABLE:
            _log.warning(
                "stream-thread [%s] committing offsets failed (%s); retrying at the next commit",
                name,
                text,
            )
            return False
        raise StreamsError(f"committing offsets failed: {text}") from exc
