"""What a stream thread's consumer fetches: back-pressure per partition, and the lags it knows.

**Back-pressure** (Kafka Streams' ``buffered.records.per.partition``, 1,000 by default): once a
partition's queue holds more records than that, the partition is *held* until its queue has
drained to the limit, so a slow processor over a large backlog keeps a bounded number of records
in memory instead of everything the consumer can fetch. Kafka pauses the partition. With
librdkafka a pause costs far more: it purges what the consumer had prefetched for the partition
and fetches it again on resume, and each pause-resume cycle stalled the partition for ~0.75 s
here (a 200k-record backlog behind a processor doing 25k records/s took 39 s instead of 8 s).
So while any partition is held the thread takes at most one record per poll (the poll still
serves rebalances and keeps the member within ``max.poll.interval.ms``) and librdkafka's own
bounded prefetch queue (``queued.max.messages.kbytes``) holds the rest. Except while a task is
*starving*: it has records but processed none, waiting (KIP-695) for another of its partitions,
whose records may sit in librdkafka's one queue behind the held partition's; then polls take full
batches until they arrive (measured on a stream-table join of 1M records over 4 partitions,
whose table records queued behind the stream's: 262k loops, 261.9k of them with a partition
held, and 47 s; now 22.6 s). The held queues grow meanwhile by at most
what librdkafka had prefetched ahead of the awaited records (its ``queued.min.messages``,
100k per partition by default), and never past that.

**Lags** (KIP-695 idling and the ``records-lag`` metric): a partition's lag is the high
watermark of the last fetch response minus the consumer's position, where the position is the
offset after the last record handed to the application, or, before any was, the offset of the
last end-of-partition event (the main consumer has them on), or else the committed offset the
task started from (:meth:`FetchControl.starting_at`). A partition whose log is empty (its low
and high watermarks equal) has no lag whatever the position. ``-1`` means unknown: no fetch
response yet, or no position. The last two matter because librdkafka queues an
end-of-partition event behind the records already fetched for the other partitions: a task over
two sources, one of them empty, would otherwise wait for that event while its thread, holding a
full partition, takes one record per poll (measured: 3x the time, 6x the CPU).

**Published lags.** Only the stream thread calls its consumer: confluent-kafka's ``position()``
called from another thread waits behind the owner's ``consume()`` (20-30 s measured under
at-least-once). So the thread computes the lags of its running partitions once per loop
(:meth:`FetchControl.publish_lags`) and ``StreamsApp.metrics()`` reads that snapshot
(:meth:`FetchControl.published_lags`), never the consumer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.records import TopicPartition

__all__ = ["FetchControl"]

_log = logging.getLogger("streamstate.app")
UNKNOWN_LAG = -1
# A starving task's polls take full batches until a held queue holds this many records:
# librdkafka's default queued.min.messages, what it prefetches per partition anyway, so the
# records drawn into a held queue are at most those that sat in librdkafka's queue.
_STARVING_LIMIT = 100_000


class FetchControl:
    """Holds partitions by queue size (see the module doc); reads ``consumer``'s lags."""

    def __init__(self, consumer: Consumer, max_buffered: int, *, name: str) -> None:
        """``max_buffered`` is ``buffered.records.per.partition``; ``name`` prefixes logs."""
        self._consumer = consumer
        self._max = max_buffered
        self._name = name
        # Held partitions and their queue sizes at the last poll that added to them.
        self.held: dict[tuple[str, int], int] = {}
        self._end_positions: dict[tuple[str, int], int] = {}
        self._start_positions: dict[tuple[str, int], int] = {}
        # Replaced whole, never mutated: other threads read it without a lock.
        self._published: dict[TopicPartition, int] = {}

    # -- back-pressure ------------------------------------------------------------------------

    def added(self, tp: TopicPartition, size: int) -> None:
        """A poll left ``size`` records in ``tp``'s queue: hold it if that is too many."""
        key = (tp.topic, tp.partition)
        if key in self.held:
            self.held[key] = size
        elif size > self._max:
            self.held[key] = size
            _log.debug("stream-thread [%s] holding %s-%d: %d buffered", self._name, *key, size)

    def release_drained(self, size_of: Callable[[tuple[str, int]], int | None]) -> None:
        """Releases each held partition whose queue drained to the limit; ``size_of`` gives
        a partition's queue size, ``None`` when no task owns it any more (it is forgotten)."""
        for key in list(self.held):
            size = size_of(key)
            if size is None or size <= self._max:
                del self.held[key]

    def records_to_poll(self, wanted: int, *, starving: bool = False) -> int:
        """How many records the next poll may take: ``wanted``, or 1 while a partition is
        held, unless a task is ``starving`` (it has records but waits for another partition's,
        which the consumer's queue may hold behind the held partition's: one record per poll
        would reach them only after as many loops as records ahead of them)."""
        if not self.held:
            return wanted
        if starving and max(self.held.values()) < max(self._max, _STARVING_LIMIT):
            return wanted
        return 1

    def forget(self, keys: Iterable[tuple[str, int]]) -> None:
        """Partitions revoked or lost: no longer held, lags unknown."""
        for key in keys:
            self.held.pop(key, None)
            self._end_positions.pop(key, None)
            self._start_positions.pop(key, None)

    # -- lags ---------------------------------------------------------------------------------

    def reached_end(self, end_positions: dict[tuple[str, int], int]) -> None:
        """Records the end-of-partition events of one poll."""
        self._end_positions.update(end_positions)

    def starting_at(self, offsets: dict[tuple[str, int], int]) -> None:
        """The committed offsets new tasks' partitions start from: their position until the
        consumer hands over a record or an end-of-partition event."""
        self._start_positions.update(offsets)

    def _known_position(self, key: tuple[str, int], consumer_position: int) -> int:
        if consumer_position >= 0:
            return consumer_position
        end = self._end_positions.get(key)
        return end if end is not None else self._start_positions.get(key, -1)

    def lag(self, tp: TopicPartition) -> int:
        """``tp``'s lag as far as the consumer knows, ``-1`` when unknown."""
        return self.lags([tp]).get(tp, UNKNOWN_LAG)

    def lags(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The known lags of ``partitions`` (unknown ones are absent)."""
        if not partitions:
            return {}
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            positions = self._consumer.position(wanted)
        except (KafkaException, RuntimeError):
            return {}
        out: dict[TopicPartition, int] = {}
        for tp, ktp, pos in zip(partitions, wanted, positions, strict=True):
            position = self._known_position((tp.topic, tp.partition), pos.offset)
            try:
                low, high = self._consumer.get_watermark_offsets(ktp, cached=True)
            except (KafkaException, RuntimeError):
                continue
            if high < 0:
                continue  # no fetch response yet
            if position >= 0:
                out[tp] = max(0, high - position)
            elif low == high:
                out[tp] = 0  # an empty log: no record to wait for
        return out

    def publish_lags(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The stream thread's own call: the known lags of ``partitions`` (its running tasks'),
        kept as the snapshot :meth:`published_lags` returns, and returned."""
        lags = self.lags(partitions)
        self._published = lags
        return lags

    def published_lags(self) -> dict[TopicPartition, int]:
        """The lags the stream thread last published; safe to call from any thread (it touches
        no client)."""
        return dict(self._published)

    def position(self, tp: TopicPartition) -> int:
        """The consumer's position in ``tp`` (the offset after the last record handed over),
        or the last end-of-partition offset, or ``-1``."""
        try:
            (pos,) = self._consumer.position([KafkaTopicPartition(tp.topic, tp.partition)])
        except (KafkaException, RuntimeError):
            return -1
        if pos.offset >= 0:
            return int(pos.offset)
        return self._end_positions.get((tp.topic, tp.partition), -1)
