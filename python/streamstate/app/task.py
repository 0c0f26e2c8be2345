"""``StreamTask``: one partition's worth of processing, with its stores and commits.

Task ``p`` owns partition ``p`` of every source topic (co-partitioning), one
:class:`~streamstate.PartitionGroup` over them that hands records out in timestamp order, and
one instance of every task store, logged to partition ``p`` of the store's changelog.

Commit (Kafka Streams' at-least-once order): flush the producer (sink and changelog records are
acknowledged; their offsets are known), flush the stores, write the ``.checkpoint`` with the
changelog offsets, then commit the consumed offsets with the partition time in the metadata.
A crash anywhere re-processes from the last committed offsets over stores that are at or behind
the checkpoint, never ahead of what the changelog holds.

What is committed follows Kafka 3.x's ``StreamTask``: for each partition that processed or
dropped records since the last commit, the offset of the record at the head of its queue, or,
when the queue is empty, the consumer's position (``findOffset``): records dropped after the last
processed one (bad records, negative timestamps) and transaction markers leave no lag. The
metadata carries the partition time as the highest timestamp *processed* (not merely buffered),
so a new owner stamps exactly as an uninterrupted run would.

Under exactly-once (``exactly_once_v2``) the stream thread commits every task in one
transaction, and the stores never get ahead of it: each store is wrapped in a
:class:`~streamstate.state.transaction_buffer.TransactionBuffer` below its change-logging layer,
so the commit is split in two: :meth:`StreamTask.committable_offsets` before the transaction
commits, :meth:`StreamTask.apply_committed` (buffers applied, stores flushed, checkpoint
written) after it; :meth:`StreamTask.abort` discards every uncommitted write (caches and
buffers). A delivery report saying the transaction cannot commit (the producer fenced, the
transaction abortable) is raised at the next check as :class:`~streamstate.errors.TaskMigratedError`
or :class:`TransactionAbortedError`, never handed to the production exception handler.

Readiness follows KIP-695 (Kafka 3.0+): with several partitions, a task processes only when
every partition has buffered records, or when an empty partition's lag is known to be 0 and it
has waited ``max.task.idle.ms`` (``-1``: never wait). The stream thread refreshes the lags after
each poll (:meth:`StreamTask.update_lags`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app import handlers, task_state
from streamstate.app.config import StreamsConfig
from streamstate.app.context import ChangeLoggingKeyValueStore, ProcessorContext, ReadOnlyStoreView
from streamstate.app.dead_letter_queue import DeadLetterQueue, DeadLetterRecord, SourceBytes
from streamstate.app.partition_time import decode_partition_time, encode_partition_time
from streamstate.app.refused_sinks import (
    RefusedSends,
    SendId,
    Source,
    TrackedSinkProducer,
    lost_with_transaction,
    send_id,
)
from streamstate.app.sink_timestamps import SinkTimestampLimits, TimestampCheckedProducer
from streamstate.app.state_directory import TASK_DIRECTORIES
from streamstate.app.task_idling import may_process
from streamstate.app.task_runs import RunHandler, run_handlers, take_next_run
from streamstate.app.topology import Topology
from streamstate.clients.kafka_errors import TransactionErrorKind, classify_transaction
from streamstate.errors import (
    StreamsError,
    TaskMigratedError,
)
from streamstate.processor.processor_topology import ProcessorTopology
from streamstate.queue import PartitionGroup, RecordQueue
from streamstate.records import NOT_KNOWN, TopicPartition
from streamstate.serde import BytesDeserializer
from streamstate.state.caching import CachingKeyValueStore
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.stores import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
)
from streamstate.state.transaction_buffer import TransactionBuffer

__all__ = [
    "StreamTask",
    "TransactionAbortedError",
    "decode_partition_time",
    "encode_partition_time",
]

_log = logging.getLogger("streamstate.app")


# Broker errors that refuse a produce batch for what one record holds (a timestamp, a null key
# on a compacted topic, its size): librdkafka fails every record of the batch with them, since
# it cannot tell which one it was (Kafka's KIP-467 record errors are not exposed). Kafka drops
# only the records its handler is asked about; sent again alone, the valid ones get through.
_BATCH_REFUSALS = frozenset(
    {
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_MSG,
        KafkaError.MSG_SIZE_TOO_LARGE,
    }
)


def _transaction_must_abort(exc: Exception) -> bool:
    """Whether ``exc`` (raised by a send) says the producer's transaction must be aborted."""
    if not isinstance(exc, KafkaException) or not exc.args:
        return False
    error = exc.args[0]
    return isinstance(error, KafkaError) and (
        error.code() == KafkaError._STATE or error.txn_requires_abort()
    )


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class TransactionAbortedError(StreamsError):
    """The thread's transaction cannot commit and must be aborted (librdkafka's
    ``txn_requires_abort``); its tasks are then re-processed from the last committed offsets.
    Raised inside the stream thread only."""


class _Position:
    """Where a graph task's loop records the input record's position (the one-function form
    keeps it in its ``ProcessorContext``; a graph's processors read ``record_metadata``)."""

    __slots__ = ("offset", "partition", "timestamp", "topic")


class StreamTask:
    """The processing of partition ``task_id`` of every source topic; see the module doc."""

    def __init__(
        self,
        task_id: Any,
        topology: Topology,
        config: StreamsConfig,
        producer: Producer,
        global_stores: dict[str, Any],
        *,
        position: Callable[[TopicPartition], int] | None = None,
        clock: Callable[[], int] | None = None,
        sink_limits: SinkTimestampLimits | None = None,
        refused_sends: RefusedSends | None = None,
        store_factory: Callable[[Any], Any] | None = None,
    ) -> None:
        """Opens the task's stores; nothing is read or restored yet. ``task_id`` is the
        partition in the one-function form, a ``TaskId`` in a graph. ``position(tp)`` is the
        consumer's position in a source partition (negative when unknown), what a commit uses
        for a partition whose queue is empty. ``clock()`` is the time in ms of a graph's
        wall-clock punctuations, ``current_system_time_ms`` and ``max.task.idle.ms`` (the
        system clock by default; the ``TopologyTestDriver`` passes its own). With
        ``sink_limits`` a sink record whose timestamp the broker would refuse is not sent
        (``app/sink_timestamps.py``). ``refused_sends`` is the stream thread's memory of sink
        sends the broker refused under exactly-once (``app/refused_sinks.py``).
        ``store_factory(spec)``, if given, makes each store's bottom layer instead of a fjall
        or in-memory store by ``spec.persistent`` (Spark's ``stores="local"``)."""
        self.task_id = task_id
        self._position = position
        self._idle_clock: Callable[[], float] = clock or _monotonic_ms
        self._config = config
        self._producer = producer
        sink_producer: Any = (
            producer if sink_limits is None else TimestampCheckedProducer(producer, sink_limits)
        )
        self._eos = config.exactly_once
        dlq_topic = config.dead_letter_queue_topic
        # The dead-letter queue (app/dead_letter_queue.py): written under exactly-once in the
        # open transaction, so a record found before it begins waits for send_dead_letters.
        self._dlq: DeadLetterQueue | None = None
        self._raw: SourceBytes | None = None
        if dlq_topic is not None:
            self._dlq = DeadLetterQueue(
                dlq_topic,
                producer,
                immediate=lambda: not self._eos,
                on_failure=self._on_dead_letter_failure,
            )
            self._raw = SourceBytes()
        # Each sink send named by its source record: for the dead-letter record of a refused
        # one, and under exactly-once to drop a refused one alone (app/refused_sinks.py).
        self._refusals = refused_sends if self._eos else None
        self._tracker: TrackedSinkProducer | None = None
        if self._eos or self._dlq is not None:
            self._tracker = sink_producer = TrackedSinkProducer(
                sink_producer,
                producer,
                self._refusals,
                self._on_sink_delivery,
                self._on_skipped_send,
                raw=self._raw,
            )
        self._committed: dict[tuple[str, int], int] = {}
        deserialization_handler = config.default_deserialization_exception_handler
        if self._dlq is not None:
            deserialization_handler = self._dlq.deserialization_handler(deserialization_handler)
        graph = topology.graph() if topology.is_graph else None
        app_id = config.application_id
        # (topic, key deserializer, value deserializer, timestamp extractor or None) per source
        sources: list[tuple[str, Any, Any, Any]]
        if graph is None:
            node = topology.node()
            self.partition: int = task_id
            key_de = node.key_deserializer or BytesDeserializer()
            value_de = node.value_deserializer or BytesDeserializer()
            sources = [(t, key_de, value_de, None) for t in node.sources]
            store_specs = list(topology.stores.values())
            declared_names: tuple[str, ...] = node.stores
        else:
            subtopology = graph.subtopologies[task_id.subtopology]
            self.partition = task_id.partition
            sources = graph.task_sources(subtopology, app_id)
            store_specs = [topology.stores[name] for name in subtopology.stores]
            declared_names = subtopology.stores
        self.partitions = [TopicPartition(t, self.partition) for t, _, _, _ in sources]
        queues = {
            TopicPartition(topic, self.partition): RecordQueue(
                topic,
                self.partition,
                key_deserializer=key_de,
                value_deserializer=value_de,
                timestamp_extractor=extractor or config.default_timestamp_extractor,
                deserialization_exception_handler=deserialization_handler,
            )
            for topic, key_de, value_de, extractor in sources
        }
        self.group = PartitionGroup(queues)
        self._queues = queues
        # Per partition index, the processor taking runs of its records (task_runs.py).
        self._run_handlers: list[RunHandler | None] | None = None
        self.directory = config.app_dir() / str(task_id)
        # Before any store opens there: the state cleaner leaves a held directory alone.
        TASK_DIRECTORIES.claim(self.directory, self)
        self.checkpoint_file = OffsetCheckpoint(self.directory / ".checkpoint")
        # Changelog offsets acknowledged by the broker: the checkpoint's content.
        self.changelog_offsets: dict[TopicPartition, int] = {}
        self.stores: dict[str, Any] = {}
        self.changelogs: dict[str, TopicPartition] = {}
        self._send_error: str | None = None
        # At-least-once: sink records refused with their batch, to be sent again alone, with
        # the source record of each.
        self._refused_with_batch: list[tuple[Message[Any, Any], Source | None]] = []
        # Under exactly-once: a delivery error that dooms the transaction (see the module doc).
        self._txn_error: tuple[TransactionErrorKind, str] | None = None
        self._caches: list[CachingKeyValueStore] = []
        self._buffers: list[TransactionBuffer] = []
        declared: dict[str, Any] = {}
        # Every store as processors see it (its outermost layer: cache, changelog, buffer).
        self.store_layers: dict[str, Any] = {}
        for spec in store_specs:
            store: InMemoryKeyValueStore | PersistentKeyValueStore
            if store_factory is not None:
                store = store_factory(spec)
            elif spec.persistent:
                self.directory.mkdir(parents=True, exist_ok=True)
                store = PersistentKeyValueStore(spec.name, self.directory / spec.name)
            else:
                store = InMemoryKeyValueStore(spec.name)
            self.stores[spec.name] = store
            below: Any = store
            if self._eos:
                below = TransactionBuffer(store)
                self._buffers.append(below)
            if spec.logged:
                changelog = TopicPartition(spec.changelog_topic(app_id), self.partition)
                self.changelogs[spec.name] = changelog
                wrapped: Any = ChangeLoggingKeyValueStore(
                    below,
                    producer,
                    changelog.topic,
                    self.partition,
                    self._on_changelog_delivery,
                    value_timestamps=spec.timestamped,
                )
            else:
                wrapped = below
            if spec.caching:
                wrapped = CachingKeyValueStore(wrapped)
                self._caches.append(wrapped)
            self.store_layers[spec.name] = wrapped
            if spec.name in declared_names:
                declared[spec.name] = wrapped
        global_views = {
            name: ReadOnlyStoreView(store)
            for name, store in global_stores.items()
            if graph is not None or name in declared_names
        }
        if graph is None:
            declared.update(global_views)
        self._changelog_by_topic = {tp.topic: tp for tp in self.changelogs.values()}
        # A graph's processors are made and initialized once the stores are restored (Kafka
        # initializes the topology after restoration): see _initialize_topology.
        self.processors: ProcessorTopology | None = None
        self._make_topology: Callable[[], ProcessorTopology] | None = None
        if graph is None:
            self.context: Any = ProcessorContext(
                task_id,
                declared,
                frozenset(node.sinks),
                sink_producer,
                on_send=self._on_sink_delivery,
            )
            self._process = node.function
        else:
            self.context = _Position()
            self._process = self._initialize_topology
            self._make_topology = functools.partial(
                ProcessorTopology,
                graph,
                subtopology,
                task_id,
                app_id,
                declared,
                global_views,
                sink_producer,
                lambda: self.group.stream_time,
                self._on_sink_delivery,
                **({"clock": clock} if clock is not None else {}),
                on_dropped=self._on_record_dropped,
            )
        # The partitions to commit: those that processed or dropped records since the last
        # commit, each with the offset after the last record added (the fallback of a commit
        # when its queue is empty and the consumer's position is not known).
        self.consumed: dict[RecordQueue, int] = {}
        self._processed: set[RecordQueue] = set()  # partitions processed since the last commit
        # The highest timestamp processed per partition (what Kafka commits as partition time).
        self._processed_time: dict[RecordQueue, int] = {}
        # KIP-695: the lag of each partition at the last poll (absent: unknown), and the
        # wall-clock deadline (ms) of each empty partition with lag 0.
        self.lags: dict[TopicPartition, int] = {}
        self._idle_deadlines: dict[TopicPartition, float] = {}
        self._processing_handler = config.processing_exception_handler
        self._production_handler = config.default_production_exception_handler
        self.dropped = 0  # records dropped by the processing and production handlers
        self.restoring = False
        # Kafka's TaskMetadata (app.metadata_for_local_threads()): per input partition the
        # offset last committed by this task and the highest offset polled (-1: none yet), and
        # since when (epoch ms) the task has not been processable (None: it is).
        self.committed_offsets = dict.fromkeys(self.partitions, -1)
        self.end_offsets = dict.fromkeys(self.partitions, -1)
        self.idling_since: int | None = None

    def restore_start_offsets(self) -> dict[str, int | None]:
        """Where restoration starts (:func:`streamstate.app.task_state.restore_start_offsets`)."""
        return task_state.restore_start_offsets(self)

    # -- processing ---------------------------------------------------------------------------

    def add_records(self, tp: TopicPartition, messages: list[Message[Any, Any]]) -> int:
        """Buffers polled records of one source partition (deserialized and stamped in Rust);
        returns the partition's queue size afterwards."""
        queue = self._queues[tp]
        last = self.end_offsets.get(tp, -1)
        if (messages[0].offset() or 0) <= last:
            messages = self._drop_delivered_again(tp, messages, last)
            if not messages:
                return len(queue)
        if self._raw is not None:
            self._raw.add(tp.topic, tp.partition, messages)
        # Recorded before admission: a failing record leaves the ones before it queued, and
        # the partition must be committed even if every record added is dropped.
        self.consumed[queue] = (messages[-1].offset() or 0) + 1
        self.end_offsets[tp] = max(self.end_offsets.get(tp, -1), messages[-1].offset() or 0)
        return int(self.group.add_raw_records(tp, messages))

    def _drop_delivered_again(
        self, tp: TopicPartition, messages: list[Message[Any, Any]], last: int
    ) -> list[Message[Any, Any]]:
        """``messages`` past ``last``, the highest offset this task has taken from ``tp``.

        A consumer hands a partition's records over in offset order, once; the runtime seeks
        only by replacing the task. Records at or below ``last`` are therefore a second
        delivery of records this task already buffered or processed, which librdkafka was seen
        to make while the member's other partitions were rebalanced (a contiguous range,
        processed and committed twice under exactly-once): they are dropped, with a warning.
        """
        fresh = [m for m in messages if (m.offset() or 0) > last]
        _log.warning(
            "stream-task [%s] %d records of %s-%d at offsets %d..%d were delivered again by "
            "the consumer (the task has taken up to offset %d); dropped",
            self.task_id,
            len(messages) - len(fresh),
            tp.topic,
            tp.partition,
            messages[0].offset() or 0,
            min(last, messages[-1].offset() or 0),
            last,
        )
        return fresh

    def offset_reset(self, tp: TopicPartition) -> None:
        """The consumer reset its position in ``tp`` (an invalid offset, ``auto.offset.reset``):
        records below the highest offset taken so far are new ones from now on."""
        self.end_offsets[tp] = -1

    def queue_size(self, tp: TopicPartition) -> int:
        """The number of records buffered for ``tp``."""
        return len(self._queues[tp])

    def set_partition_time(self, tp: TopicPartition, partition_time: int) -> None:
        """Restores the partition time committed with the offsets."""
        if partition_time != NOT_KNOWN:
            self.group.set_partition_time(tp, partition_time)
            self._processed_time[self._queues[tp]] = partition_time

    def update_lags(self, lags: dict[TopicPartition, int]) -> None:
        """The lag of each partition now (what the consumer knows; absent or negative:
        unknown), read by :meth:`ready`."""
        self.lags = lags

    def ready(self) -> bool:
        """Whether the task may process now (KIP-695, see the module doc); notes since when
        it has not been (Kafka's ``timeCurrentIdlingStarted``)."""
        ready = self._ready()
        if ready:
            self.idling_since = None
        elif self.idling_since is None:
            self.idling_since = int(time.time() * 1000)
        return ready

    def _ready(self) -> bool:
        if self.group.num_buffered() == 0:
            return False
        idle_ms = self._config.max_task_idle_ms
        if len(self.partitions) == 1 or idle_ms < 0:
            return True
        if self.group.all_partitions_buffered():
            self._idle_deadlines.clear()
            return True
        buffered = {tp: self._queues[tp].size() for tp in self.partitions}
        return may_process(buffered, self.lags, self._idle_deadlines, self._idle_clock, idle_ms)

    def process(self, max_records: int) -> int:
        """Processes up to ``max_records`` buffered records in timestamp order."""
        done = 0
        ctx = self.context
        processed_time = self._processed_time
        processed = self._processed
        ready = self.ready()
        tracker = self._tracker
        if self._dlq is not None:
            self._dlq.send_pending()
        # A doomed transaction (a send refused in it) stops the loop: all of it is re-processed.
        while done < max_records and ready and self._txn_error is None:
            if self._run_handlers is not None:
                # A processor taking runs of records gets them in one call (task_runs.py).
                taken, dry = take_next_run(self, max_records - done)
                if taken:
                    done += taken
                    if dry:
                        ready = self.ready()
                    continue
            picked = self.group.next_record()
            if picked is None:
                break
            record, queue = picked
            ctx.topic, ctx.partition = record.topic, record.partition
            ctx.offset, ctx.timestamp = record.offset, record.timestamp
            if tracker is not None:
                tracker.begin_record(record)
            try:
                self._process(ctx, record)
            except StreamsError:
                raise
            except Exception as exc:
                self._on_failed_send_or_processor(record, exc)
            # Partition time is the highest timestamp processed (Kafka 2.6+).
            if record.timestamp > processed_time.get(queue, NOT_KNOWN):
                processed_time[queue] = record.timestamp
            processed.add(queue)
            done += 1
            if not queue.size():
                # A partition ran dry: KIP-695 may have to wait for it again.
                ready = self.ready()
        if tracker is not None:
            tracker.begin(None)  # what a punctuation sends has no source record
        self._raise_if_failed()
        return done

    def _on_failed_send_or_processor(self, record: Any, exc: Exception) -> None:
        # A sink record the broker refused comes first: under exactly-once it leaves the
        # transaction abortable, and the next send then fails inside the processor (_STATE),
        # which is no fault of the processor's.
        self._raise_if_failed()
        if self._eos and _transaction_must_abort(exc):
            self._producer.poll(0)  # the delivery reports that say why
            self._raise_if_failed()
            raise TransactionAbortedError(
                f"task {self.task_id}: the transaction must be aborted ({exc})"
            ) from exc
        self._on_processing_error(record, exc)

    def _start_topology(self) -> ProcessorTopology:
        # Once the stores are restored: make the processors and call their init.
        assert self._make_topology is not None
        self.processors = self._make_topology()
        self._process = self.processors.process
        self._run_handlers = run_handlers(self, self.processors)
        return self.processors

    def _initialize_topology(self, context: Any, record: Any) -> None:
        self._start_topology().process(context, record)

    def punctuate(self) -> bool:
        """Fires the due punctuations of a graph's processors (Kafka's ``maybePunctuate*``):
        wall-clock ones by the clock, stream-time ones by the task's stream time (those are
        also checked after every record). Returns whether any fired. The stream thread calls
        it for restored tasks only, so it also starts a graph's processors that have had no
        record yet (their wall-clock punctuations run without input, as in Kafka)."""
        if self.processors is None:
            if self._make_topology is None:
                return False
            self._start_topology()
            assert self.processors is not None
        fired = self.processors.punctuate_wall_clock()
        return self.processors.maybe_punctuate_stream_time() or fired

    @property
    def commit_requested(self) -> bool:
        """Whether a processor called ``context.commit()`` since the last commit."""
        return self.processors is not None and self.processors.commit_requested

    def _on_processing_error(self, record: Any, exc: Exception) -> None:
        context = handlers.ProcessingErrorContext(
            record.topic, record.partition, record.offset, self.task_id, exc
        )
        answer = handlers.decide(self._processing_handler, context)
        if self._dlq is not None:
            # Kafka's built-in handlers build it for FAIL and CONTINUE alike.
            source = self._tracker.source if self._tracker is not None else None
            self._dlq.add(self._dlq.record_of(exc, source))
        if answer == handlers.CONTINUE:
            self.dropped += 1
            _log.warning(
                "task %s: the processor failed on the record at topic %s partition %d offset "
                "%d (%s: %s); processing.exception.handler chose to continue: dropped",
                self.task_id,
                record.topic,
                record.partition,
                record.offset,
                type(exc).__name__,
                exc,
            )
            return
        raise StreamsError(
            f"the processor failed: {type(exc).__name__}: {exc}",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
        ) from exc

    def _on_sink_delivery(
        self, err: Any, msg: Any, send: tuple[Source | None, int] | None = None
    ) -> None:
        """A sink record's delivery report, or ``err`` raised by ``produce`` (``msg`` then
        names the topic only), with the ``send`` it was (``app/refused_sinks.py``): the
        production exception handler decides. A record the broker refused with its whole batch
        is first sent again alone: under at-least-once before the commit
        (:meth:`send_refused_alone`), under exactly-once when re-processed after an abort."""
        if err is None:
            return
        refused_with_batch = isinstance(err, KafkaError) and err.code() in _BATCH_REFUSALS
        source, index = send if send is not None else (None, 0)
        if self._eos and refused_with_batch and source is not None and self._refusals is not None:
            self._on_refused_in_transaction(err, msg, send_id(source, index), source)
            return
        if self._doomed_transaction(err) or self._lost_with_transaction(err, msg):
            return
        if not self._eos and isinstance(msg, Message) and refused_with_batch:
            self._refused_with_batch.append((msg, source))
            return
        self._on_sink_failure(err, msg, source)

    def _on_refused_in_transaction(
        self, err: Any, msg: Any, name: SendId, source: Source | None
    ) -> None:
        """Exactly-once: a sink send the broker refused (see ``app/refused_sinks.py``)."""
        assert self._refusals is not None

        def decide() -> tuple[bool, Any]:
            answer, dead_letter = self._on_sink_failure(err, msg, source, write_dead_letter=False)
            return answer == handlers.CONTINUE, dead_letter

        reason = self._refusals.refused(name, decide)
        if reason is not None and self._txn_error is None:
            self._txn_error = (
                TransactionErrorKind.ABORTABLE,
                f"the broker refused a record to topic {msg.topic()} ({err}); {reason}",
            )

    def _lost_with_transaction(self, err: Any, msg: Any) -> bool:
        """Under exactly-once, whether ``err`` is a record's failure that the transaction's
        abort explains (a send refused because the transaction is doomed, a record purged by
        the abort): no handler's business; re-processing sends it again."""
        text = lost_with_transaction(err) if self._eos else None
        if text is None:
            return False
        if self._txn_error is None:
            topic = msg.topic() if msg is not None else None
            self._txn_error = (TransactionErrorKind.ABORTABLE, f"a record to {topic}: {text}")
        return True

    def _on_skipped_send(self, name: SendId) -> None:
        """Exactly-once, re-processing: a send dropped by the production handler is not made;
        its dead-letter record is written in its place."""
        if self._refusals is not None and self._dlq is not None:
            dead_letter = self._refusals.skip.get(name)
            if dead_letter is not None:
                self._dlq.add(dead_letter)

    def send_refused_alone(self) -> None:
        """At-least-once, with the producer flushed (before a commit): sends each sink record
        the broker refused with its batch again, alone, and waits for it, so that only the
        record the broker refuses on its own reaches the production exception handler (see
        :data:`_BATCH_REFUSALS`)."""
        pending, self._refused_with_batch = self._refused_with_batch, []
        for msg, source in pending:
            topic = msg.topic()
            if topic is None:
                continue  # a delivery report always names its topic
            kwargs: dict[str, Any] = {
                "partition": msg.partition(),
                "on_delivery": functools.partial(self._on_sent_alone, source=source),
            }
            kind, timestamp = msg.timestamp()
            if kind != TIMESTAMP_NOT_AVAILABLE and timestamp >= 0:
                kwargs["timestamp"] = timestamp
            if headers := msg.headers():
                kwargs["headers"] = headers
            self._producer.produce(topic, msg.value(), msg.key(), **kwargs)
            # Nothing else is in flight: the record is a batch of its own.
            self._producer.flush(30)
        if self._dlq is not None:
            # The dead-letter records of those refused alone, before the commit.
            self._producer.flush(30)

    def _on_sent_alone(self, err: Any, msg: Any, source: Source | None = None) -> None:
        if err is not None:
            self._on_sink_failure(err, msg, source)

    def _on_sink_failure(
        self, err: Any, msg: Any, source: Source | None = None, *, write_dead_letter: bool = True
    ) -> tuple[str, DeadLetterRecord | None]:
        """The production exception handler's decision on one refused sink record (whose
        source record is ``source``), and the dead-letter record for it (written unless
        not to ``write_dead_letter``; ``None`` without a dead-letter topic)."""
        topic = msg.topic() if msg is not None else None
        partition = msg.partition() if msg is not None else None
        exc = err if isinstance(err, BaseException) else StreamsError(str(err))
        context = handlers.ProcessingErrorContext(topic, partition, None, self.task_id, exc)
        answer = handlers.decide(self._production_handler, context)
        dead_letter = None
        if self._dlq is not None:
            dead_letter = self._dlq.record_of(exc, source)
            if write_dead_letter:
                self._dlq.add(dead_letter)
        if answer == handlers.CONTINUE:
            self.dropped += 1
            _log.warning(
                "task %s: a record to topic %s partition %s was not written (%s); "
                "production.exception.handler chose to continue: dropped",
                self.task_id,
                topic,
                partition,
                err,
            )
        elif self._send_error is None:
            self._send_error = f"a record to topic {topic} partition {partition} failed: {err}"
        return answer, dead_letter

    # -- the dead-letter queue ----------------------------------------------------------------

    def _on_dead_letter_failure(self, err: Any, msg: Any) -> None:
        # Under exactly-once a dead-letter record of a doomed transaction fails with it, and
        # is written again when the task re-processes: only a refusal of its own counts.
        if self._eos and (
            self._txn_error is not None
            or self._doomed_transaction(err)
            or self._lost_with_transaction(err, msg)
        ):
            return
        self._on_sink_failure(err, msg, None, write_dead_letter=False)

    def send_dead_letters(self) -> None:
        """Writes the dead-letter records found while the producer could not take them (a bad
        record polled before the transaction began): called before each flush of a commit."""
        if self._dlq is not None:
            self._dlq.send_pending()

    def _on_record_dropped(self) -> None:
        self.dropped += 1

    def dropped_records(self) -> int:
        """Records dropped so far: bad records (deserialization, negative timestamps) and
        those the processing and production handlers chose to drop."""
        total = self.dropped
        for queue in self._queues.values():
            total += sum(queue.dropped_records.values())
        return total

    def _doomed_transaction(self, err: Any) -> bool:
        """Under exactly-once, records ``err`` when it means the transaction cannot commit (a
        fenced producer, an abortable transaction, records purged by an abort)."""
        if not self._eos:
            return False
        error = err.args[0] if isinstance(err, BaseException) and err.args else err
        if not hasattr(error, "code"):
            return False
        kind = classify_transaction(error)
        if kind is TransactionErrorKind.PRODUCER_FENCED or kind is TransactionErrorKind.ABORTABLE:
            if self._txn_error is None or kind is TransactionErrorKind.PRODUCER_FENCED:
                self._txn_error = (kind, str(error.str() if hasattr(error, "str") else error))
            return True
        return False

    def _raise_if_failed(self) -> None:
        txn_error = self._txn_error
        if txn_error is not None and txn_error[0] is TransactionErrorKind.PRODUCER_FENCED:
            fenced = f"the producer was fenced ({txn_error[1]})"
            raise TaskMigratedError(f"task {self.task_id}: {fenced}")
        # A handler's "fail" wins over an abort: re-processing would only meet it again.
        if self._send_error is not None:
            raise StreamsError(f"task {self.task_id}: {self._send_error}")
        if self._txn_error is not None:
            raise TransactionAbortedError(
                f"task {self.task_id}: a record failed ({self._txn_error[1]})"
            )

    def _on_changelog_delivery(self, err: Any, msg: Any) -> None:
        if err is not None and self._doomed_transaction(err):
            return
        if err is not None:
            self._send_error = (
                f"a changelog record to {msg.topic()} partition {msg.partition()} failed: {err}"
            )
            return
        # One delivery report per store write: look the partition up instead of building it.
        tp = self._changelog_by_topic[msg.topic()]
        offset = msg.offset()
        if offset > self.changelog_offsets.get(tp, -1):
            self.changelog_offsets[tp] = offset

    # -- commit -------------------------------------------------------------------------------

    def flush_caches(self) -> None:
        """Writes the record caches of caching stores through to their stores and changelogs
        (before the producer is flushed for a commit)."""
        for cache in self._caches:
            cache.flush_cache()

    @property
    def uncommitted_bytes(self) -> int:
        """Under exactly-once, the key and value bytes its stores hold uncommitted (0 under
        at-least-once): the thread commits early when this passes
        ``statestore.uncommitted.max.bytes``."""
        return sum(b.uncommitted_bytes for b in self._buffers)

    def prepare_commit(self) -> list[KafkaTopicPartition]:
        """At-least-once: flushes stores and writes the checkpoint (after the caller flushed
        the producer); returns the offsets to commit, with the partition time as metadata."""
        self._raise_if_failed()
        self._write_checkpoint()
        return self.committable_offsets()

    def apply_committed(self) -> None:
        """Exactly-once, once the transaction committed: applies every store's buffered
        writes (one atomic ``put_all`` each), flushes the stores and writes the checkpoint with
        the committed changelog offsets."""
        for buffer in self._buffers:
            buffer.commit()
        self._write_checkpoint()

    def abort(self) -> None:
        """Discards every write since the last commit: the record caches and the buffers (the
        transaction carrying them was aborted, or will never commit)."""
        for cache in self._caches:
            cache.discard()
        for buffer in self._buffers:
            buffer.abort()

    def _write_checkpoint(self) -> None:
        for store in self.stores.values():
            store.flush()
        persistent = {
            tp: offset
            for name, tp in self.changelogs.items()
            if self.stores[name].persistent
            and (offset := self.changelog_offsets.get(tp)) is not None
        }
        if persistent:
            self.checkpoint_file.write(persistent)

    def committable_offsets(self) -> list[KafkaTopicPartition]:
        """The offsets to commit, with the partition time as metadata (the caller flushed the
        producer first); raises when a record of this period failed."""
        self._raise_if_failed()
        if self.processors is not None:
            self.processors.commit_requested = False
        offsets = []
        for queue in self._processed - self.consumed.keys():
            self.consumed[queue] = -1
        for queue, added_until in self.consumed.items():
            offset = queue.head_offset
            if offset is None:
                tp = TopicPartition(queue.topic, queue.partition)
                position = self._position(tp) if self._position is not None else -1
                offset = position if position >= 0 else added_until
            if offset < 0:
                continue  # nothing known to commit (cannot happen: processed means added)
            metadata = encode_partition_time(self._processed_time.get(queue, NOT_KNOWN))
            tp = KafkaTopicPartition(queue.topic, queue.partition, offset, metadata=metadata)
            offsets.append(tp)
            self._committed[(queue.topic, queue.partition)] = offset
        return offsets

    def mark_committed(self) -> None:
        """The offsets :meth:`prepare_commit` returned are committed."""
        self.consumed.clear()
        self._processed.clear()
        for (topic, partition), offset in self._committed.items():
            self.committed_offsets[TopicPartition(topic, partition)] = offset
        if self._refusals:
            self._refusals.forget_committed(self._committed)

    def close(self) -> None:
        """Closes the processors of a graph, then the stores (persistent ones flush on
        close); under exactly-once, writes not committed by then are discarded."""
        if self.processors is not None:
            self.processors.close()
        self.abort()
        for store in self.stores.values():
            try:
                store.close()
            except Exception:  # closing must go on for the others
                _log.exception("task %s: closing store %r failed", self.task_id, store.name)
        TASK_DIRECTORIES.release(self.directory, self)
