"""``process`` over a processor graph (what ``StreamsBuilder.build()`` makes): the graph's task
``0_p`` per Kafka partition number, run per micro-batch with the runtime's own ``StreamTask``.

What Spark can run is a graph of ONE sub-topology (every source co-partitioned, no repartition
topic), task stores only, and processors that schedule no punctuation; everything else is
refused by :func:`graph_task` when ``process`` is called, with the reason.

Each micro-batch, for task ``p``, the Spark task makes the ``StreamTask`` the
``TopologyTestDriver`` and a ``StreamsApp`` make (sources' deserializers and timestamp
extractors, ``RecordQueue`` rules, the processors and their stores, sinks), fills its stores
with the entries kept in Spark's state store, sets each source partition's carried partition
time, hands it the micro-batch's records in timestamp order (``PartitionGroup``), then commits
it (record caches flushed, as at a ``StreamsApp`` commit) and keeps every store's entries for
the next micro-batch. With several co-partitioned sources the task waits for a lagging one as a
``StreamsApp``'s does (KIP-695: ``StreamTask.ready`` with the lags read from the broker, see
``_idling``): the records it does not process are held in its state and queued first next
micro-batch. Stores are in memory on the executor whatever the topology asks
(``persistent`` only changes where a ``StreamsApp`` keeps them; the entries are the same).

The stream time some DSL processors keep for themselves (windowed aggregations' and window
stores' ``observed_stream_time``, suppression's) is kept between micro-batches too, so grace,
retention and ``until_window_closes`` see the stream time an uninterrupted ``StreamsApp``
task sees (Kafka resets it only when a task restarts).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streamstate.app.config import StreamsConfig
from streamstate.app.task import StreamTask
from streamstate.app.topology import Topology
from streamstate.errors import StreamsError, TopologyError
from streamstate.processor.graph import TaskId
from streamstate.records import NOT_KNOWN
from streamstate.spark._chunks import batches_by_partition
from streamstate.spark._idling import (
    add_records,
    hold,
    idle_deadlines,
    keep_idle_deadlines,
    read_lags,
    wall_clock_ms,
)
from streamstate.spark._local_stores import LocalStores, LocalStoresConfig
from streamstate.spark._process import (
    _dump_queues,
    _fill,
    _load_queues,
    _output_row,
    _QueueState,
    _Rows,
    _TaskState,
)
from streamstate.state.stores import InMemoryKeyValueStore

__all__ = ["GraphTask", "graph_task"]

# The pseudo-store of a task's state that carries the processors' own stream times.
_STREAM_TIMES = "\x00stream-times"
_REPARTITION = (
    "key-changing operations before a grouping or join need a repartition, which Spark does "
    "as a shuffle: not supported yet; group by key instead, or run it in a StreamsApp"
)


def _refuse(what: str) -> TopologyError:
    return TopologyError(f"streamstate.spark.process cannot run this topology: {what}")


def graph_task(
    topology: Topology, config: Mapping[str, Any], changelog: bool, *, stores: str = "spark"
) -> GraphTask:
    """The runner of ``topology`` (a processor graph) on Spark; raises :class:`TopologyError`
    saying what Spark cannot run and why (see the module doc). ``stores`` is ``process``'s."""
    settings = dict(config)
    cfg = StreamsConfig.from_mapping(settings)
    topology.validate()
    bound = topology.bind(cfg.application_id, cfg.default_key_serde, cfg.default_value_serde)
    graph = bound.graph()
    if graph.repartitions:
        topics = list(graph.repartition_topics(cfg.application_id))
        raise _refuse(f"it writes to repartition topics {topics}: {_REPARTITION}")
    if len(graph.subtopologies) > 1:
        parts = [list(s.source_topics) for s in graph.subtopologies]
        raise _refuse(
            f"it has {len(graph.subtopologies)} sub-topologies (reading {parts}); a task of "
            f"Spark runs one sub-topology over the partitions of its own sources"
        )
    if bound.global_stores:
        raise _refuse(
            f"global stores {sorted(bound.global_stores)} (global tables) in a processor "
            "graph are not supported on Spark yet; run it in a StreamsApp"
        )
    # Every store in memory on the executor: its entries travel in Spark's state store.
    in_memory = dataclasses.replace(
        bound,
        _stores={n: dataclasses.replace(s, persistent=False) for n, s in bound.stores.items()},
    )
    changelogs = frozenset(s.changelog_topic(cfg.application_id) for s in bound.stores.values())
    local = (
        LocalStoresConfig.of(bound.stores, cfg, changelog, settings) if stores == "local" else None
    )
    task = GraphTask(in_memory, settings, changelog, changelogs, local)
    task.check_processors()
    return task


@dataclass(frozen=True)
class GraphTask:
    """Everything a Spark task needs to run the graph's task over a micro-batch; pickled into
    the grouped operator's closure."""

    topology: Topology
    settings: dict[str, Any]
    changelog: bool
    changelogs: frozenset[str]  # the stores' changelog topics
    # stores="local": the stores on the executor's disk (_local_stores.py); None: in the cell.
    local: LocalStoresConfig | None = None

    def _task(self, partition: int, rows: Any, local: LocalStores | None = None) -> StreamTask:
        cfg = StreamsConfig.from_mapping(self.settings)
        # The wall clock: KIP-695's idle deadlines outlive the micro-batch (in the task's
        # state); it is also the processors' (the default of ProcessorTopology).
        return StreamTask(
            TaskId(0, partition),
            self.topology,
            cfg,
            rows,
            {},
            clock=wall_clock_ms,
            store_factory=None if local is None else lambda spec: local.buffers[spec.name],
        )

    def check_processors(self) -> None:
        """Makes the processors once (their ``init`` runs, as the ``TopologyTestDriver``
        runs it) to refuse what they need that Spark cannot give."""
        from streamstate.dsl.stream_join_processors import (
            JoinWindowProcessor,
            StreamJoinProcessor,
        )

        task = self._task(0, _Rows())
        try:
            task.punctuate()  # makes the processors, calls their init
            processors = task.processors
            assert processors is not None
            joins = [
                name
                for name, p in processors.processors.items()
                if isinstance(p, (StreamJoinProcessor, JoinWindowProcessor))
            ]
            if joins:
                raise _refuse(
                    f"stream-stream joins (processors {sorted(joins)}) are not supported on "
                    "Spark yet (their outer-join emission follows the wall clock); run them "
                    "in a StreamsApp"
                )
            scheduled = sorted(
                {
                    (schedule.node, kind)
                    for kind, queue in (
                        ("stream-time", processors._stream_queue),
                        ("wall-clock", processors._wall_queue),
                    )
                    for _, _, schedule in queue.heap
                }
            )
            if scheduled:
                raise _refuse(
                    f"processors schedule punctuations {scheduled}: a Spark task lives for "
                    "one micro-batch, so wall-clock punctuations would fire at no time a "
                    "StreamsApp fires them and stream-time schedules would restart every "
                    "micro-batch; run it in a StreamsApp"
                )
        finally:
            task.close()

    def run(self, key: tuple[Any, ...], frames: Iterable[Any], state: Any) -> Iterator[Any]:
        """The ``applyInPandasWithState`` body for task ``0_<key[0]>``."""

        partition = int(key[0])
        local: LocalStores | None = None
        times_entries: pa.RecordBatch | None = None
        if self.local is not None:
            # The stores' changelog layers write nothing: the changelog rows of the local
            # layout are the last micro-batch's writes, once Spark committed them.
            local, queues_json, times_cell = LocalStores.from_state(self.local, partition, state)
            carried = _TaskState({}, _load_queues(queues_json))
            times_entries = _TaskState.load_entries(times_cell).get(_STREAM_TIMES)
            rows: _Rows = _NoChangelogRows(self.changelogs)
            local.send_changelog(rows)
        else:
            carried = _TaskState.load(state)
            times_entries = carried.entries.get(_STREAM_TIMES)
            rows = _Rows() if self.changelog else _NoChangelogRows(self.changelogs)
        task = self._task(partition, rows, local)
        try:
            if local is None:
                for name, store in task.stores.items():
                    _fill(store, carried.entries.get(name))
            by_key = {(tp.topic, tp.partition): tp for tp in task.partitions}
            queue_states: dict[tuple[str, int], _QueueState] = {}
            for tp in task.partitions:
                q = carried.queues.get((tp.topic, tp.partition), _QueueState())
                queue_states[(tp.topic, tp.partition)] = q
                task.set_partition_time(tp, q.partition_time)
            task.punctuate()  # makes the processors (over the filled stores), calls init
            assert task.processors is not None
            times = _stream_time_holders(task.processors.processors)
            _set_stream_times(times, times_entries)

            records = batches_by_partition(frames)
            unknown = sorted({t for t, _ in records} - {t for t, _ in by_key})
            if unknown:
                raise StreamsError(
                    f"records of topics {unknown} reached task 0_{partition}, whose "
                    f"sub-topology reads {sorted(t for t, _ in by_key)}: subscribe the Kafka "
                    "source to the topology's source topics",
                    topic=unknown[0],
                    partition=partition,
                )
            rows_of = add_records(task.group.add_raw_records, by_key, queue_states, records)
            # KIP-695, as a StreamsApp's task: StreamTask.ready asks may_process with the lags
            # read now and the idle deadlines the last micro-batch left.
            idling = len(task.partitions) > 1 and task._config.max_task_idle_ms >= 0
            if idling:
                task.update_lags(read_lags(task._config, task.partitions, queue_states, records))
                task._idle_deadlines.update(idle_deadlines(task.partitions, queue_states))
            while task.group.num_buffered():
                if not task.process(task.group.num_buffered()):
                    if idling:
                        break  # waits for a lagging partition: the rest is held
                    # Never without idling; a record left behind would be lost.
                    raise StreamsError(
                        f"task 0_{partition} stopped with {task.group.num_buffered()} records "
                        "of its micro-batch unprocessed",
                        partition=partition,
                    )
            keep_idle_deadlines(task.partitions, queue_states, task._idle_deadlines)
            # A StreamsApp's commit: the caches flush (their records forwarded), then stores.
            task.flush_caches()
            if task._eos:
                task.committable_offsets()
                task.apply_committed()

            hold(task._queues, rows_of, queue_states)

            before = {tp: dict(q.dropped) for tp, q in queue_states.items()}
            for tp in task.partitions:
                q = queue_states[(tp.topic, tp.partition)]
                # A partition with held records carries the partition time of those it
                # processed: the held ones bring theirs back when they are queued again, and
                # the stream time set from it is the one a StreamsApp's task has.
                q.partition_time = (
                    task._processed_time.get(task._queues[tp], NOT_KNOWN)
                    if q.held is not None
                    else task.group.partition_time(tp)
                )
                for reason, n in task._queues[tp].dropped_records.items():
                    q.dropped[reason] = q.dropped.get(reason, 0) + n
            if local is not None:
                stream_times, _ = _TaskState.dump({_STREAM_TIMES: _stream_times(times)}, {})
                state.update((*local.next_cell(), _dump_queues(queue_states), stream_times))
            else:
                kept: dict[str, Any] = dict(task.stores)
                kept[_STREAM_TIMES] = _stream_times(times)
                state.update(_TaskState.dump(kept, queue_states))
        finally:
            task.close()
        yield _output_row(rows, queue_states, before)


class _NoChangelogRows(_Rows):
    """The task's producer when no changelog rows are asked for: changelog writes are
    dropped, everything else kept as an output row."""

    def __init__(self, changelogs: frozenset[str]) -> None:
        super().__init__()
        self._changelogs = changelogs

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """Keeps a sink's record; drops a changelog's."""
        if topic not in self._changelogs:
            super().produce(topic, *args, **kwargs)


def _stream_time_holders(processors: Mapping[str, Any]) -> dict[str, Any]:
    """The objects keeping their own stream time (``observed_stream_time``, an int attribute):
    the processors and what they hold (their window and session stores), by a stable name."""
    holders: dict[str, Any] = {}
    for name, processor in processors.items():
        if isinstance(vars(processor).get("observed_stream_time"), int):
            holders[name] = processor
        for attr, value in vars(processor).items():
            if hasattr(value, "__dict__") and isinstance(
                vars(value).get("observed_stream_time"), int
            ):
                holders[f"{name}.{attr}"] = value
    return holders


def _stream_times(holders: Mapping[str, Any]) -> InMemoryKeyValueStore:
    store = InMemoryKeyValueStore(_STREAM_TIMES)
    for name, holder in holders.items():
        store.put(name.encode(), struct.pack(">q", holder.observed_stream_time))
    return store


def _set_stream_times(holders: Mapping[str, Any], entries: pa.RecordBatch | None) -> None:
    if entries is None:
        return
    for key, value in zip(
        entries.column("key").to_pylist(), entries.column("value").to_pylist(), strict=True
    ):
        holder = holders.get(key.decode())
        if holder is not None:
            (observed,) = struct.unpack(">q", value)
            if observed != NOT_KNOWN:
                holder.observed_stream_time = max(holder.observed_stream_time, observed)
