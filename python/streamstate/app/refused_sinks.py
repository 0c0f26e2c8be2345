"""Sink records the broker refuses, under exactly-once: dropped without dooming the rest.

A broker refuses a produce batch for what one record holds (a null key on a compacted topic,
a record larger than the topic's ``max.message.bytes``, a timestamp out of the topic's bounds):
librdkafka fails every record of the batch with that error, and a transactional producer's
transaction becomes abortable. Kafka Streams hands the refused record to the production
exception handler; its Java producer dooms the transaction all the same, so a ``"continue"``
under ``exactly_once_v2`` cannot keep the records around it in that transaction. Here, as
Kafka's answer is meant (``continue`` drops that record only; every other record is delivered
and committed), the stream thread aborts and re-processes from the last committed offsets,
remembering each sink send by where it came from — the source record (topic, partition,
offset) and its position among that record's sink sends — in :class:`RefusedSends`, which
outlives the tasks closed by the abort:

1. A record refused with its batch is a *suspect*: the transaction is aborted without asking
   the handler (the valid records of the batch were refused too, and nothing tells them apart).
2. Re-processed, a suspect is sent alone (the producer flushed before and after it). Accepted,
   it was innocent. Refused on its own, the production exception handler is asked: ``"fail"``
   fails the thread; ``"continue"`` marks it *skipped* and the transaction is aborted again.
3. Re-processed again, a skipped send is not made (its dead-letter record, if a dead-letter
   topic is set, is written in its place), and the transaction commits.

Each abort finds at least one new suspect or skip among the finitely many sends since the last
commit, so re-processing ends. Processing must be deterministic for a send to be found again
(Kafka's re-processing under exactly-once assumes it too); sends from punctuations have no
source record and are not tracked (a refused one is handled as before: the handler is asked
and the transaction aborted). What is remembered is forgotten once the source offset commits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from streamstate.clients.producer_proxy import ProducerProxy, UnsentMessage

__all__ = [
    "RefusedSends",
    "SendId",
    "Source",
    "TrackedSinkProducer",
    "lost_with_transaction",
    "send_id",
]

SendId = tuple[str, int, int, int]
"""A sink send: its source record's topic, partition and offset, and its index among that
record's sink sends."""
Source = tuple[str, int, int, int, Any]
"""The source record being processed: topic, partition, offset, timestamp, and its raw
``(key, value, headers)`` (``None`` when not kept)."""


# Failures of a record under exactly-once that the transaction's state explains: produce
# refused in a doomed transaction, records purged by an abort.
_LOST_WITH_TRANSACTION = frozenset(
    {KafkaError._STATE, KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}
)


def lost_with_transaction(err: Any) -> str | None:
    """Under exactly-once, the error text when ``err`` (a delivery error, or raised by
    ``produce``) is a record's failure the transaction's abort explains: no handler's
    business, since re-processing sends the record again; else ``None``."""
    error = err.args[0] if isinstance(err, KafkaException) and err.args else err
    if not isinstance(error, KafkaError):
        return None
    if error.code() in _LOST_WITH_TRANSACTION or error.txn_requires_abort():
        return str(error.str())
    return None


def send_id(source: Source, index: int) -> SendId:
    """The name of the ``index``-th sink send of the source record ``source``."""
    return (source[0], source[1], source[2], index)


class RefusedSends:
    """A stream thread's memory of suspect and skipped sink sends (see the module doc)."""

    def __init__(self) -> None:
        """Remembers nothing."""
        self.alone: set[SendId] = set()
        # Skipped sends, with the dead-letter record written in place of each (or None).
        self.skip: dict[SendId, Any] = {}

    def __bool__(self) -> bool:
        """Whether anything is remembered."""
        return bool(self.alone or self.skip)

    def refused(self, send_id: SendId, decide: Callable[[], tuple[bool, Any]]) -> str | None:
        """The broker refused ``send_id``: why the transaction is to be aborted, or ``None``
        when it is not (the handler said ``"fail"``). A send refused with its batch becomes a
        suspect; a suspect refused alone is the handler's: ``decide()`` answers whether to
        continue, and the dead-letter record to write in its place."""
        if send_id not in self.alone:
            self.alone.add(send_id)
            return "re-processing to isolate the refused one"
        keep_going, dead_letter = decide()
        if not keep_going:
            return None
        self.alone.discard(send_id)
        self.skip[send_id] = dead_letter
        return "re-processing to commit without it"

    def forget_committed(self, committed: dict[tuple[str, int], int]) -> None:
        """Forgets the sends of source records before their partition's committed offset."""
        if not self:
            return
        self.alone = {s for s in self.alone if s[2] >= committed.get((s[0], s[1]), -1)}
        self.skip = {s: r for s, r in self.skip.items() if s[2] >= committed.get((s[0], s[1]), -1)}


class TrackedSinkProducer(ProducerProxy):
    """A task's sink producer that names each send by its source (see the module doc): the
    delivery report reaches ``on_delivery(err, msg, send=(source, index))`` (:func:`send_id`
    names it); a skipped send is not made (``on_skip(send_id)`` instead); a suspect is sent
    alone. Everything else is ``producer``'s (``flusher`` is the producer itself, under any
    wrapper)."""

    def __init__(
        self,
        producer: Any,
        flusher: Any,
        sends: RefusedSends | None,
        on_delivery: Callable[..., None],
        on_skip: Callable[[SendId], None],
        *,
        raw: Any = None,
    ) -> None:
        """Tracks ``producer``'s sends; ``sends`` is ``None`` under at-least-once (sends are
        named, for the dead-letter records, but never skipped). ``raw`` (a
        :class:`~streamstate.app.dead_letter_queue.SourceBytes`) holds the raw bytes of the
        source records, when a dead-letter topic needs them."""
        super().__init__(producer)
        self._raw = raw
        self._flusher = flusher
        self._sends = sends
        self._on_delivery = on_delivery
        self._on_skip = on_skip
        self.source: Source | None = None
        self._seq = 0

    def begin_record(self, record: Any) -> None:
        """:meth:`begin` for the source ``record`` (a ``ConsumerRecord``)."""
        topic, partition, offset = record.topic, record.partition, record.offset
        raw = self._raw.take(topic, partition, offset) if self._raw is not None else None
        self.source = (topic, partition, offset, record.timestamp, raw)
        self._seq = 0

    def begin(self, source: Source | None) -> None:
        """The source record whose processing the next sends come from (``None``: a
        punctuation)."""
        self.source = source
        self._seq = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """``Producer.produce``, named, skipped or sent alone (see the class doc)."""
        source = self.source
        seq = self._seq
        sends = self._sends
        alone = False
        # The common case (nothing refused since the last commit) builds no name here.
        if source is not None and sends is not None and (sends.skip or sends.alone):
            send_id = (source[0], source[1], source[2], seq)
            if send_id in sends.skip:
                self._seq = seq + 1
                self._on_skip(send_id)
                return
            alone = send_id in sends.alone
        if "on_delivery" in kwargs:
            kwargs["on_delivery"] = functools.partial(self._on_delivery, send=(source, seq))
        if alone:
            self._flusher.flush(30)  # nothing else in its batch
        try:
            self._producer.produce(topic, value, key, **kwargs)
        except BufferError:
            raise  # the caller polls and sends again, under the same name
        except KafkaException as exc:
            if "on_delivery" not in kwargs:
                raise
            self._seq = seq + 1
            kwargs["on_delivery"](exc, UnsentMessage(topic, kwargs.get("partition")))
            return
        self._seq = seq + 1
        if alone:
            self._flusher.flush(30)  # its delivery report, before anything joins it
