"""``ThreadProducer``: a stream thread's producer and, under exactly-once, its transaction.

Under at-least-once the producer is idempotent and this class only holds it. Under
``exactly_once_v2`` (KIP-447) it is transactional, with the thread's ``transactional.id``, and
this class runs its transactional calls the way Kafka Streams' ``StreamsProducer`` does: each
call's failure is classified once (``clients/kafka_errors.classify_transaction``) into what the
stream thread does about it (:func:`transaction_failure`): a fenced producer, a stale epoch or
another fatal producer error is :class:`ProducerFencedError` (task migration, the producer
replaced); offsets refused because the member is out of the group, :class:`TaskMigratedError`;
offsets that met a rebalance, and an abortable transaction, :class:`TransactionAbortedError`
(abort, re-process, the member stays); a retriable failure is retried until
``task.timeout.ms``, then the transaction is aborted. A producer that cannot abort is replaced
and initialised again, which fences the old one for good (``docs/runtime.md``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.config import StreamsConfig
from streamstate.app.metrics import ThreadMetrics
from streamstate.app.task import TransactionAbortedError
from streamstate.clients.config import producer_config
from streamstate.clients.kafka_errors import (
    TransactionErrorKind,
    classify_transaction,
    error_text,
    kafka_call,
    kafka_error,
)
from streamstate.errors import StreamsError, TaskMigratedError

__all__ = ["ProducerFencedError", "ThreadProducer", "transaction_failure"]

_log = logging.getLogger("streamstate.app")


class ProducerFencedError(TaskMigratedError):
    """Task migration whose cause is the producer itself (fenced, or fatally failed): it is
    replaced before the thread goes on."""


def transaction_failure(what: str, exc: KafkaException) -> Exception | None:
    """What a transactional producer's failure ``exc`` (while doing ``what``) means to the
    thread (see the module doc); None when it is retriable."""
    error = kafka_error(exc)
    kind = classify_transaction(error) if error is not None else TransactionErrorKind.OTHER
    text = error_text(exc)
    if kind is TransactionErrorKind.PRODUCER_FENCED:
        return ProducerFencedError(f"{what} failed: {text}")
    if kind is TransactionErrorKind.TASK_MIGRATED:
        return TaskMigratedError(
            f"{what} failed: {text}; the consumer is no longer part of the group"
        )
    if kind is TransactionErrorKind.REBALANCE_IN_PROGRESS:
        return TransactionAbortedError(f"{what} failed: {text}; the group is rebalancing")
    if kind is TransactionErrorKind.ABORTABLE:
        return TransactionAbortedError(f"{what} failed: {text}")
    if kind is TransactionErrorKind.RETRIABLE:
        return None
    return StreamsError(f"{what} failed: {text}")


def _begin(producer: Producer, timeout: float) -> None:
    # begin_transaction takes no timeout (it is local); the shape of ThreadProducer.call's calls.
    producer.begin_transaction()


class ThreadProducer:
    """The producer of the stream thread ``name``; transactional when ``transactional_id`` is
    given."""

    def __init__(
        self,
        config: StreamsConfig,
        name: str,
        transactional_id: str | None,
        metrics: ThreadMetrics,
    ) -> None:
        """Creates the producer; transactions are initialised by :meth:`init`."""
        self._config = config
        self._name = name
        self._metrics = metrics
        self.transactional_id = transactional_id
        self.eos = transactional_id is not None
        # Whether a transaction is open (begun, not yet committed or aborted).
        self.in_transaction = False
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        return Producer(
            producer_config(
                self._config.bootstrap_servers,
                client_id=f"{self._name}-producer",
                transactional_id=self.transactional_id,
                overrides=self._config.overrides,
            )
        )

    def fenced_cause(self, exc: BaseException) -> str | None:
        """Under exactly-once, what says that ``exc`` (a processor's failure, say) came from a
        producer that can write no more (a ``produce`` refused because it was fenced), if
        anything does."""
        if not self.eos:
            return None
        seen: BaseException | None = exc
        while seen is not None:
            if isinstance(seen, KafkaException):
                error = kafka_error(seen)
                if error is not None and (
                    classify_transaction(error) is TransactionErrorKind.PRODUCER_FENCED
                ):
                    return f"the producer was fenced: {error.str()}"
            seen = seen.__cause__ or seen.__context__
        return None

    def call(self, what: str, call: Callable[..., Any], *args: Any) -> None:
        """Calls the producer's transactional ``call(*args, timeout)``, classifying its
        failures (see the module doc); retriable ones are retried until ``task.timeout.ms``."""
        deadline = time.monotonic() + self._config.task_timeout_ms / 1000.0
        while True:
            timeout = max(1.0, min(30.0, deadline - time.monotonic()))
            try:
                kafka_call(call, *args, timeout)
                return
            except KafkaException as exc:
                failure = transaction_failure(what, exc)
                if failure is not None:
                    raise failure from exc
                text = error_text(exc)
                if time.monotonic() < deadline:
                    _log.warning(
                        "stream-thread [%s] %s failed (%s); retrying", self._name, what, text
                    )
                    time.sleep(0.1)
                    continue
                raise TransactionAbortedError(
                    f"{what} failed for task.timeout.ms ({text})"
                ) from exc

    def init(self) -> None:
        """``init_transactions``: fences a previous producer of the ``transactional.id`` and
        completes (aborts) its open transaction."""
        self.call("initializing transactions", self.producer.init_transactions)

    def begin(self) -> None:
        """Begins a transaction."""
        self.call("beginning a transaction", _begin, self.producer)
        self.in_transaction = True

    def commit(self, offsets: list[KafkaTopicPartition], group_metadata: Any) -> None:
        """Sends ``offsets`` (if any) to the open transaction with the consumer's
        ``group_metadata``, then commits it."""
        if offsets:
            self.call(
                "sending offsets to the transaction",
                self.producer.send_offsets_to_transaction,
                offsets,
                group_metadata,
            )
        self.call("committing the transaction", self.producer.commit_transaction)
        self.in_transaction = False

    def abort(self, *, replace_producer: bool = False) -> None:
        """Aborts the open transaction, if any; replaces the producer (and initialises
        transactions again) when it is fenced or cannot abort. A no-op under at-least-once."""
        if not self.eos:
            return
        if self.in_transaction and not replace_producer:
            try:
                kafka_call(self.producer.abort_transaction, 30)
                self._metrics.transactions_aborted += 1
            except KafkaException as exc:
                _log.warning(
                    "stream-thread [%s] aborting the transaction failed (%s); replacing the "
                    "producer",
                    self._name,
                    error_text(exc),
                )
                replace_producer = True
        self.in_transaction = False
        if replace_producer:
            old, self.producer = self.producer, self._new_producer()
            try:
                old.purge()
            except (KafkaException, RuntimeError):
                pass
            # Closed now, as Kafka's StreamsProducer.resetProducer closes it: left to the
            # garbage collector, it lived on after its tests and kept reconnecting (and logging)
            # to their stopped brokers.
            self._close_producer(old)
            # Fences the old producer for good and aborts its open transaction, if any.
            self.init()
            self._metrics.producers_replaced += 1

    def abort_on_close(self) -> None:
        """Aborts an open transaction of a thread on its way out (no ``read_committed`` reader
        then waits for ``transaction.timeout.ms``); never raises."""
        if self.in_transaction:
            try:
                kafka_call(self.producer.abort_transaction, 10)
            except (KafkaException, RuntimeError):
                pass
            self.in_transaction = False

    def close(self) -> None:
        """Flushes and closes the producer; never raises."""
        # Closed now, not when the garbage collector finds it: a producer left open keeps
        # reconnecting (and logging) after its brokers are gone. A producer that failed fatally
        # raises from flush, and close warns that it could not abort (an error where warnings
        # are errors): neither may skip the rest of the close.
        try:
            kafka_call(self.producer.flush, 10)
        except (KafkaException, RuntimeError):
            pass
        self._close_producer(self.producer)

    def _close_producer(self, producer: Producer) -> None:
        try:
            producer.close()
        except Exception as exc:  # see close()
            _log.debug("stream-thread [%s] closing the producer: %s", self._name, exc)
