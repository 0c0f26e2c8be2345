"""``ProcessorTopology``: one task's instance of its sub-topology (Kafka's ``ProcessorTopology``
with the routing of ``StreamTask``): processors made for the task, sources routing each input
record to their children, sinks serializing and producing, and the task's punctuation queues.

A record from source partition ``topic``/``p`` becomes a :class:`~streamstate.Record` (key and
value as the source deserialized them, timestamp, headers) and is handed depth first to the
source's children; each processor forwards as it likes. Stream-time punctuations are checked
after every input record (Kafka's ``StreamTask`` tests drive it so: one record, then
``maybePunctuateStreamTime``), wall-clock ones each time the stream thread calls
:meth:`punctuate_wall_clock`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import Producer

from streamstate.errors import StreamsError
from streamstate.processor.context import Forward, ProcessorGraphContext
from streamstate.processor.graph import (
    ProcessorGraph,
    ProcessorNode,
    SinkNode,
    SourceNode,
    Subtopology,
    TaskId,
)
from streamstate.processor.processor import Processor
from streamstate.processor.punctuation import (
    Cancellable,
    PunctuationQueue,
    PunctuationSchedule,
    PunctuationType,
)
from streamstate.processor.record import Record
from streamstate.processor.serde_slot import serialize_function, unwrap
from streamstate.records import NOT_KNOWN

__all__ = ["PlainSink", "ProcessorTopology"]

_log = logging.getLogger("streamstate.app")
_new_record = tuple.__new__


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


_serialize_function = serialize_function


class PlainSink(NamedTuple):
    """A sink without a partitioner, as a processor taking a run of records inlines it:
    ``write(record)`` is the sink itself, which the inlined copy must match exactly (key and
    value serialized, ``producer.produce(topic, value, key, timestamp=..., on_delivery=...)``,
    ``producer.poll(0.05)`` while its queue is full) and defer to for any record off the
    common path (headers, a timestamp the sink refuses or checks)."""

    topic: str
    serialize_key: Callable[[str, Any], Any]
    serialize_value: Callable[[str, Any], Any]
    write: Forward
    producer: Any
    on_delivery: Callable[[Any, Any], None]


class ProcessorTopology:
    """The nodes of ``subtopology`` made for task ``task_id``; see the module doc."""

    def __init__(  # noqa: PLR0917 - made in one place, by the task
        self,
        graph: ProcessorGraph,
        subtopology: Subtopology,
        task_id: TaskId,
        application_id: str,
        stores: dict[str, Any],
        global_stores: dict[str, Any],
        producer: Producer,
        stream_time: Callable[[], int],
        on_delivery: Callable[[Any, Any], None],
        clock: Callable[[], int] = _wall_clock_ms,
        on_dropped: Callable[[], None] | None = None,
    ) -> None:
        """Makes every processor (``factory()``) and calls their ``init`` in the order they were
        added; ``stores`` are the task's stores by name (already wrapped for logging);
        ``clock()`` is the wall-clock time in epoch ms."""
        self.application_id = application_id
        self.clock = clock
        self.task_id = task_id
        self.stream_time = stream_time
        self.current: Any = None  # the StampedRecord being processed; None in a punctuation
        self.commit_requested = False
        # Records a processor drops on purpose (the DSL's null keys, late records) count in the
        # task's dropped-records-total.
        self.record_dropped: Callable[[], None] = on_dropped or (lambda: None)
        self._producer = producer
        self._on_delivery = on_delivery
        self._stream_queue = PunctuationQueue()
        self._stream_heap = self._stream_queue.heap
        self._wall_queue = PunctuationQueue()
        self.processors: dict[str, Processor] = {}
        self._contexts: dict[str, ProcessorGraphContext] = {}
        forwards: dict[str, Forward] = {}
        self._sources: dict[str, tuple[Forward, ...]] = {}
        self._plain_sinks: dict[Forward, PlainSink] = {}
        # Children before parents, so each node's targets exist when it is made.
        for name in reversed(subtopology.nodes):
            node = graph.nodes[name]
            kids = {kid: forwards[kid] for kid in graph.children[name]}
            if isinstance(node, SinkNode):
                forwards[name] = self._sink(node, graph.decorate(node.topic, application_id))
            elif isinstance(node, ProcessorNode):
                processor = node.factory()
                if not isinstance(processor, Processor):
                    raise StreamsError(
                        f"the factory of processor {name!r} returned "
                        f"{type(processor).__name__}, not a Processor"
                    )
                reach = {s: stores[s] for s in graph.processor_stores.get(name, ())}
                reach.update(global_stores)
                self.processors[name] = processor
                self._contexts[name] = ProcessorGraphContext(name, self, kids, reach)
                forwards[name] = processor.process
            elif isinstance(node, SourceNode):
                targets = tuple(kids.values())
                for topic in node.topics:
                    self._sources[graph.decorate(topic, application_id)] = targets
        for name in subtopology.nodes:
            if name in self.processors:
                self._call(name, "init", self.processors[name].init, self._contexts[name])

    # -- records --------------------------------------------------------------------------------

    def process(self, _context: Any, stamped: Any) -> None:
        """Routes one input record (a ``StampedRecord``) from its source through the graph,
        then fires the stream-time punctuations that are due."""
        self.current = stamped
        headers = stamped.headers
        record = _new_record(
            Record,
            (stamped.key, stamped.value, stamped.timestamp, tuple(headers) if headers else ()),
        )
        for target in self._sources[stamped.topic]:
            target(record)
        # The queue's heap itself: a list's truth is a C call, a __len__ a Python one.
        if self._stream_heap:
            self.maybe_punctuate_stream_time()

    def run_handlers(self) -> dict[str, Callable[[list[Any]], int]]:
        """For each source topic whose records go to one processor that can take a run of
        them (``run_handler(sink, topology)``, e.g. a plain stream-table join) forwarding to
        one plain sink: the function that processes a run of that topic's ``StampedRecord``s
        exactly as :meth:`process` would one by one, and returns how many it took (a prefix:
        it stops before a record not in its shape, which then goes through :meth:`process`;
        a record that raises is :attr:`current`). Valid while no stream-time punctuation is
        scheduled (the caller checks :meth:`has_stream_punctuations` before each run)."""
        handlers: dict[str, Callable[[list[Any]], int]] = {}
        for topic, targets in self._sources.items():
            if len(targets) != 1:
                continue
            processor = getattr(targets[0], "__self__", None)
            make = getattr(processor, "run_handler", None)
            sink = self._plain_sinks.get(getattr(processor, "forward", None))  # type: ignore[arg-type]
            if make is None or (
                sink is None and not getattr(processor, "runs_without_sink", False)
            ):
                continue  # (a processor forwarding nothing per record needs no sink)
            handler = make(sink, self)
            if handler is not None:
                handlers[topic] = handler
        return handlers

    def has_stream_punctuations(self) -> bool:
        """Whether a stream-time punctuation is scheduled (checked after every record)."""
        return bool(self._stream_heap)

    def _sink(self, node: SinkNode, topic: str) -> Forward:
        serialize_key = _serialize_function(unwrap(node.key_serializer))
        serialize_value = _serialize_function(unwrap(node.value_serializer))
        produce = self._producer.produce
        poll = self._producer.poll
        on_delivery = self._on_delivery
        name = node.name
        if node.partitioner is not None:
            return self._partitioned_sink(node, topic, serialize_key, serialize_value)

        def write(record: Record) -> None:
            key = serialize_key(topic, record[0])
            value = serialize_value(topic, record[1])
            timestamp = record[2]
            if timestamp < 0:
                raise StreamsError(
                    f"sink {name!r}: invalid (negative) timestamp {timestamp} of an output "
                    f"record; a processor must forward a record with a valid timestamp",
                    topic=topic,
                )
            headers = record[3]
            while True:
                try:
                    if headers:
                        produce(
                            topic,
                            value,
                            key,
                            timestamp=timestamp,
                            headers=list(headers),
                            on_delivery=on_delivery,
                        )
                    else:
                        produce(topic, value, key, timestamp=timestamp, on_delivery=on_delivery)
                    return
                except BufferError:
                    poll(0.05)

        # A run of records may take an inlined copy of it (run_handlers).
        self._plain_sinks[write] = PlainSink(
            topic, serialize_key, serialize_value, write, self._producer, on_delivery
        )
        return write

    def _partitioned_sink(
        self,
        node: SinkNode,
        topic: str,
        serialize_key: Callable[[str, Any], Any],
        serialize_value: Callable[[str, Any], Any],
    ) -> Forward:
        """A sink whose ``partitioner(key, value)`` picks the partition (``None``: the
        producer's choice), as Kafka's ``StreamPartitioner`` does."""
        partitioner = node.partitioner
        assert partitioner is not None
        produce = self._producer.produce
        poll = self._producer.poll
        on_delivery = self._on_delivery

        def write(record: Record) -> None:
            if record[2] < 0:
                raise StreamsError(
                    f"sink {node.name!r}: invalid (negative) timestamp {record[2]} of an "
                    f"output record",
                    topic=topic,
                )
            partition = partitioner(record[0], record[1])
            options: dict[str, Any] = {"timestamp": record[2], "on_delivery": on_delivery}
            if partition is not None:
                options["partition"] = partition
            if record[3]:
                options["headers"] = list(record[3])
            key = serialize_key(topic, record[0])
            value = serialize_value(topic, record[1])
            while True:
                try:
                    produce(topic, value, key, **options)
                    return
                except BufferError:
                    poll(0.05)

        return write

    # -- punctuation ----------------------------------------------------------------------------

    def schedule(
        self,
        node: str,
        interval_ms: int,
        punctuation_type: PunctuationType,
        callback: Callable[[int], None],
    ) -> Cancellable:
        """Adds a schedule of ``node`` (see ``ProcessorGraphContext.schedule``)."""
        if punctuation_type is PunctuationType.STREAM_TIME:
            # Aligned to 0: fires as soon as the task has a stream time (Kafka's rule).
            return self._stream_queue.schedule(PunctuationSchedule(node, 0, interval_ms, callback))
        start = self.clock() + interval_ms
        return self._wall_queue.schedule(PunctuationSchedule(node, start, interval_ms, callback))

    def maybe_punctuate_stream_time(self) -> bool:
        """Fires the stream-time schedules due at the task's stream time."""
        now = self.stream_time()
        if now == NOT_KNOWN:
            return False
        return self._stream_queue.may_punctuate(now, self._punctuate)

    def punctuate_wall_clock(self) -> bool:
        """Fires the wall-clock schedules that are due now."""
        if not self._wall_queue:
            return False
        return self._wall_queue.may_punctuate(self.clock(), self._punctuate)

    def _punctuate(self, schedule: PunctuationSchedule, now: int) -> None:
        previous, self.current = self.current, None
        try:
            self._call(schedule.node, "punctuation", schedule.callback, now)
        finally:
            self.current = previous

    def _call(self, node: str, what: str, fn: Callable[[Any], None], arg: Any) -> None:
        try:
            fn(arg)
        except StreamsError:
            raise
        except Exception as exc:
            raise StreamsError(
                f"task {self.task_id}: {what} of processor {node!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    # -- close ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every processor (an error is logged, the others still close)."""
        self._stream_queue.close()
        self._wall_queue.close()
        for name, processor in self.processors.items():
            try:
                processor.close()
            except Exception:
                _log.exception("task %s: closing processor %r failed", self.task_id, name)
