"""``process``: a topology's processor over a streaming Kafka DataFrame, state in Spark's store.

The plan, per micro-batch::

    Kafka source ─ mapInArrow(pack) ─ groupBy(partition).applyInPandasWithState(task) ─
        observe(dropped_records) ─ mapInArrow(unpack) ─ rows for Spark's Kafka sink

Task ``p`` (Kafka Streams' task ``0_p``) owns partition ``p`` of every source topic, as in a
``StreamsApp``. For each micro-batch it does what a ``StreamTask`` does with a poll's worth of
records, with the runtime's own parts: one ``RecordQueue`` per source partition inside a
``PartitionGroup`` (deserialization, timestamp extraction with the carried partition time,
drops), records handed to the processor in timestamp order with a ``ProcessorContext``, task
stores that are ``InMemoryKeyValueStore`` objects (wrapped in ``ChangeLoggingKeyValueStore``
when changelog rows are asked for), and global stores read through ``ReadOnlyStoreView``.
What a task keeps between micro-batches — every store's entries, each source partition's
partition time, last offset and drop counts — is its state in Spark's state store, written
with the micro-batch's checkpoint and read back by a restarted query. ``ctx.send`` and the
changelog write rows instead of producing: Spark's Kafka sink produces them. With
``stores="local"`` the stores are on the executor's disk instead, and the task's state holds its
last micro-batch of writes only (``_local_stores.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from streamstate.app.config import StreamsConfig
from streamstate.app.context import (
    ChangeLoggingKeyValueStore,
    ProcessorContext,
    ReadOnlyStoreView,
    call_processor,
)
from streamstate.app.task_idling import may_process
from streamstate.app.topology import Topology
from streamstate.clients.config import GLOBAL_CONSUMER_PREFIX
from streamstate.errors import StreamsError
from streamstate.queue import PartitionGroup, RecordQueue
from streamstate.records import NOT_KNOWN, TopicPartition
from streamstate.serde import BytesDeserializer
from streamstate.spark._chunks import (
    CHUNK_DDL,
    batches_by_partition,
    ipc_bytes,
    read_chunk,
    spark_arrow_schema,
    to_chunks,
    unpack_chunks,
)
from streamstate.spark._global_stores import GlobalStoreCopies
from streamstate.spark._idling import (
    add_records,
    hold,
    idle_deadlines,
    keep_idle_deadlines,
    read_lags,
    wall_clock_ms,
)
from streamstate.spark._local_stores import (
    LOCAL_STATE_DDL,
    LocalStores,
    LocalStoresConfig,
)
from streamstate.spark._metrics import DEFAULT, DROP_REASONS, observe_drops, resolve_observation
from streamstate.spark._pyspark_compat import quiet_pandas3_warning
from streamstate.stores import InMemoryKeyValueStore, process_next

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["OUTPUT_DDL", "STATE_DDL", "process"]

# The rows ``process`` returns: the columns Spark's Kafka sink reads.
OUTPUT_DDL = (
    "topic string, partition int, key binary, value binary, timestamp timestamp, "
    "headers array<struct<key: string, value: binary>>"
)
# A task's state: its stores' entries (an Arrow IPC stream of store, key, value) and, per source
# partition, the record queue's carried state (JSON).
STATE_DDL = "stores binary, queues string"
_IDLING_FIELDS = ("position", "lagging", "held", "held_from", "idle_deadline")
_SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
_OUT_DDL = "chunk binary, " + ", ".join(f"{reason} bigint" for reason in DROP_REASONS)
_ENTRIES = pa.schema([("store", pa.string()), ("key", pa.binary()), ("value", pa.binary())])
_OUTPUT = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
    ]
)


class _Rows:
    """The producer a Spark task's ``ProcessorContext`` and changelogging stores write to:
    ``produce`` keeps the record as an output row, in call order."""

    def __init__(self) -> None:
        self.topic: list[str] = []
        self.partition: list[int | None] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.timestamp: list[int | None] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
    ) -> None:
        """Keeps one record (``on_delivery`` is not called: Spark's sink delivers it)."""
        self.keep(topic, value, key, partition, timestamp=timestamp, headers=headers)

    def keep(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        *,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """Keeps one record as an output row, whatever its topic."""
        self.topic.append(topic)
        self.partition.append(partition)
        self.key.append(key)
        self.value.append(value)
        self.timestamp.append(timestamp)
        self.headers.append(None if not headers else [{"key": k, "value": v} for k, v in headers])

    def poll(self, timeout: float = 0.0) -> int:
        """Nothing to serve: there are no delivery reports."""
        return 0

    def batch(self) -> pa.RecordBatch:
        """The rows as one batch in the output schema (timestamps ms → µs)."""
        micros = [None if t is None else t * 1000 for t in self.timestamp]
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.topic, pa.string()),
                pa.array(self.partition, pa.int32()),
                pa.array(self.key, pa.binary()),
                pa.array(self.value, pa.binary()),
                pa.array(micros, pa.timestamp("us", tz="UTC")),
                pa.array(self.headers, _OUTPUT.field("headers").type),
            ],
            schema=_OUTPUT,
        )


@dataclass
class _QueueState:
    """What one source partition's record queue carries between micro-batches."""

    partition_time: int = NOT_KNOWN
    last_offset: int = -1
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    # KIP-695 (see ``_idling``): how far the source has read the partition (None: not known
    # yet), its [position, end offset] when it last had lag, the records held for the next
    # micro-batch (their source rows, stamped) and the first held offset, and when the wait
    # for this empty partition ends (wall clock, ms).
    position: int | None = None
    lagging: list[int] | None = None
    held: str | None = None
    held_from: int | None = None
    idle_deadline: float | None = None


@dataclass
class _TaskState:
    """A task's state as kept in Spark's state store (:data:`STATE_DDL`)."""

    entries: dict[str, pa.RecordBatch]
    queues: dict[tuple[str, int], _QueueState]

    @classmethod
    def load(cls, state: Any) -> _TaskState:
        if not state.exists:
            return cls({}, {})
        stores, queues = state.get
        return cls(cls.load_entries(stores), _load_queues(queues))

    @staticmethod
    def load_entries(stores: bytes | None) -> dict[str, pa.RecordBatch]:
        """Store name → its entries, from a cell's ``stores`` column."""
        entries: dict[str, pa.RecordBatch] = {}
        if stores:
            table = pa.Table.from_batches(read_chunk(stores), schema=_ENTRIES)
            for name in pc.unique(table.column("store")).to_pylist():
                rows = table.filter(pc.equal(table.column("store"), name)).combine_chunks()
                entries[name] = rows.to_batches()[0] if rows.num_rows else rows
        return entries

    @staticmethod
    def dump(
        stores: Mapping[str, InMemoryKeyValueStore], queues: Mapping[Any, Any]
    ) -> tuple[bytes, str]:
        names: list[str] = []
        keys: list[bytes] = []
        values: list[bytes] = []
        for name, store in stores.items():
            for key, value in store.all():
                names.append(name)
                keys.append(key)
                values.append(value)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(names, pa.string()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
            ],
            schema=_ENTRIES,
        )
        return ipc_bytes([batch], _ENTRIES).to_pybytes(), _dump_queues(queues)


def _load_queues(queues: str | None) -> dict[tuple[str, int], _QueueState]:
    """The record queues' carried state from a task's cell (its JSON column)."""
    return {
        (q["topic"], q["partition"]): _QueueState(
            q["partition_time"],
            q["last_offset"],
            dict(q["dropped"]),
            q.get("position"),
            q.get("lagging"),
            q.get("held"),
            q.get("held_from"),
            q.get("idle_deadline"),
        )
        for q in json.loads(queues or "[]")
    }


def _dump_queues(queues: Mapping[tuple[str, int], _QueueState]) -> str:
    """The record queues' carried state as a task's cell keeps it (JSON)."""
    return json.dumps(
        [
            {
                "topic": topic,
                "partition": partition,
                "partition_time": q.partition_time,
                "last_offset": q.last_offset,
                "dropped": q.dropped,
                **{
                    name: getattr(q, name)
                    for name in _IDLING_FIELDS
                    if getattr(q, name) is not None
                },
            }
            for (topic, partition), q in sorted(queues.items())
        ]
    )


def _output_row(
    rows: _Rows, queue_states: Mapping[Any, _QueueState], before: Mapping[Any, Any]
) -> Any:
    """A task's one output row of a micro-batch: its records as one Arrow IPC chunk (``None``
    when there are none) and, per drop reason, the records dropped since ``before``."""
    import pandas as pd

    out = rows.batch()
    row: dict[str, list[Any]] = {
        "chunk": [ipc_bytes([out], _OUTPUT).to_pybytes() if out.num_rows else None]
    }
    for reason in DROP_REASONS:
        row[reason] = [
            sum(
                q.dropped.get(reason, 0) - before[tp].get(reason, 0)
                for tp, q in queue_states.items()
            )
        ]
    return pd.DataFrame(row)


def _fill(store: InMemoryKeyValueStore, entries: pa.RecordBatch | None) -> None:
    """Loads a store's entries in one Rust write batch."""
    if entries is None or entries.num_rows == 0:
        return
    batch = pa.RecordBatch.from_arrays(
        [
            entries.column("key"),
            entries.column("value"),
            pa.array(range(entries.num_rows), pa.int64()),
        ],
        names=["key", "value", "offset"],
    )
    process_next(store, batch, entries.num_rows)


@dataclass(frozen=True)
class _Task:
    """Everything a Spark task needs to run one Kafka Streams task over a micro-batch; pickled
    into the grouped operator's closure."""

    topology: Topology
    config: StreamsConfig
    changelog: bool
    global_topics: dict[str, str]
    # stores="local": the stores on the executor's disk (_local_stores.py); None: in the cell.
    local: LocalStoresConfig | None = None

    def run(self, key: tuple[Any, ...], frames: Iterable[Any], state: Any) -> Iterator[Any]:
        """The ``applyInPandasWithState`` body for task ``key[0]``."""

        task_id = int(key[0])
        node = self.topology.node()
        rows = _Rows()
        stores: dict[str, InMemoryKeyValueStore] = {}
        declared: dict[str, Any] = {}
        local: LocalStores | None = None
        if self.local is not None:
            local, queues_json, _ = LocalStores.from_state(self.local, task_id, state)
            carried = _TaskState({}, _load_queues(queues_json))
            local.send_changelog(rows)
            declared = {n: b for n, b in local.buffers.items() if n in node.stores}
        else:
            carried = _TaskState.load(state)
            stores, declared = self._cell_stores(node, task_id, carried, rows)
        try:
            queue_states, before = self._process(
                node, task_id, declared=declared, rows=rows, carried=carried, frames=frames
            )
            if local is not None:
                state.update((*local.next_cell(), _dump_queues(queue_states), None))
            else:
                state.update(_TaskState.dump(stores, queue_states))
        finally:
            # Closed even when the micro-batch fails: a local store left open would hold its
            # directory's lock in this Python worker, and the retry could not open it.
            if local is not None:
                local.close()
            for store in stores.values():
                store.close()
        yield _output_row(rows, queue_states, before)

    def _process(
        self,
        node: Any,
        task_id: int,
        *,
        declared: dict[str, Any],
        rows: _Rows,
        carried: _TaskState,
        frames: Iterable[Any],
    ) -> tuple[dict[tuple[str, int], _QueueState], dict[Any, dict[str, int]]]:
        """Runs the micro-batch's records through the processor over ``declared`` stores;
        returns the record queues' new state and their drop counts before it."""
        if self.global_topics:
            copies = GlobalStoreCopies.for_servers(
                self.config.bootstrap_servers,
                self.config.overrides.get(GLOBAL_CONSUMER_PREFIX, {}),
            )
            for name, topic in self.global_topics.items():
                declared[name] = ReadOnlyStoreView(copies.caught_up(name, topic))
        ctx = ProcessorContext(task_id, declared, frozenset(node.sinks), rows)  # type: ignore[arg-type]

        records = batches_by_partition(frames)
        queues = self._queues(node, task_id, records)
        group = PartitionGroup(queues)
        queue_states: dict[tuple[str, int], _QueueState] = {}
        for tp in queues:
            q = carried.queues.get((tp.topic, tp.partition), _QueueState())
            queue_states[(tp.topic, tp.partition)] = q
            if q.partition_time != NOT_KNOWN:
                group.set_partition_time(tp, q.partition_time)
        by_key = {(tp.topic, tp.partition): tp for tp in queues}
        rows_of = add_records(group.add_raw_records, by_key, queue_states, records)

        ready = self._idling(task_id, queues, queue_states, records) if len(queues) > 1 else None
        _run_processor(node.function, ctx, group, ready)
        hold(queues, rows_of, queue_states)

        before = {tp: dict(q.dropped) for tp, q in queue_states.items()}
        for tp, queue in queues.items():
            q = queue_states[(tp.topic, tp.partition)]
            q.partition_time = group.partition_time(tp)
            for reason, n in queue.dropped_records.items():
                q.dropped[reason] = q.dropped.get(reason, 0) + n
        return queue_states, before

    def _cell_stores(
        self, node: Any, task_id: int, carried: _TaskState, rows: _Rows
    ) -> tuple[dict[str, InMemoryKeyValueStore], dict[str, Any]]:
        """The default layout's stores, filled from the task's cell, and the processor's view
        of them (change-logging when changelog rows are asked for)."""
        stores: dict[str, InMemoryKeyValueStore] = {}
        declared: dict[str, Any] = {}
        app_id = self.config.application_id
        for spec in self.topology.stores.values():
            store = InMemoryKeyValueStore(spec.name)
            _fill(store, carried.entries.get(spec.name))
            stores[spec.name] = store
            wrapped: Any = store
            if self.changelog and spec.logged:
                changelog = spec.changelog_topic(app_id)
                wrapped = ChangeLoggingKeyValueStore(store, rows, changelog, task_id, _ignore)  # type: ignore[arg-type]
            if spec.name in node.stores:
                declared[spec.name] = wrapped
        return stores, declared

    def _idling(
        self,
        task_id: int,
        queues: Mapping[TopicPartition, RecordQueue],
        queue_states: Mapping[tuple[str, int], _QueueState],
        records: Mapping[tuple[str, int], Any],
    ) -> Callable[[], bool] | None:
        """KIP-695's readiness check for this micro-batch (``None``: never wait), with each
        partition's lag read from the broker now (see ``_idling``)."""
        idle_ms = self.config.max_task_idle_ms
        if idle_ms < 0:
            return None
        lags = read_lags(self.config, queues, queue_states, records)
        deadlines = idle_deadlines(queues, queue_states)

        def ready() -> bool:
            buffered = {tp: queue.size() for tp, queue in queues.items()}
            ok = may_process(buffered, lags, deadlines, wall_clock_ms, idle_ms)
            keep_idle_deadlines(queues, queue_states, deadlines)
            return ok

        return ready

    def _queues(
        self, node: Any, task_id: int, records: Mapping[tuple[str, int], Any]
    ) -> dict[TopicPartition, RecordQueue]:
        """One record queue per source topic's partition ``task_id``, configured as the
        runtime's ``StreamTask`` configures them."""
        unknown = sorted({topic for topic, _ in records} - set(node.sources))
        if unknown:
            raise StreamsError(
                f"records of topics {unknown} reached task {task_id}, whose processor reads "
                f"{list(node.sources)}: subscribe the Kafka source to the processor's sources",
                topic=unknown[0],
                partition=task_id,
            )
        key_de = node.key_deserializer or BytesDeserializer()
        value_de = node.value_deserializer or BytesDeserializer()
        return {
            TopicPartition(topic, task_id): RecordQueue(
                topic,
                task_id,
                key_deserializer=key_de,
                value_deserializer=value_de,
                timestamp_extractor=self.config.default_timestamp_extractor,
                deserialization_exception_handler=self.config.default_deserialization_exception_handler,
            )
            for topic in node.sources
        }


def _ignore(err: Any, msg: Any) -> None:
    """Delivery reports of changelog rows never come: the sink delivers them."""


def _run_processor(
    function: Callable[[Any, Any], None],
    ctx: ProcessorContext,
    group: PartitionGroup,
    ready: Callable[[], bool] | None = None,
) -> None:
    """Hands the buffered records to ``function`` in timestamp order, as ``StreamTask.process``
    does (errors name the record): all of them, or with ``ready`` (KIP-695) as long as it
    allows, asked again each time a partition runs dry."""
    go = group.num_buffered() > 0 and (ready is None or ready())
    while go and (picked := group.next_record()) is not None:
        record, queue = picked
        call_processor(function, ctx, record)
        if ready is not None and not queue.size():
            go = group.num_buffered() > 0 and ready()


def process(
    df: DataFrame,
    topology: Topology,
    config: Mapping[str, Any],
    *,
    changelog: bool = False,
    observe: Any = DEFAULT,
    stores: str = "spark",
) -> DataFrame:
    """Runs ``topology``'s processor over ``df``, a DataFrame of Spark's Kafka source.

    Returns rows for Spark's Kafka sink (``topic``, ``partition``, ``key``, ``value``,
    ``timestamp``, ``headers``): what the processor sent with ``ctx.send`` and, with
    ``changelog=True``, every write to a logged store as a record of
    ``<application.id>-<store>-changelog`` (partition = task), so a ``StreamsApp`` or
    ``streamstate restore`` can take the state over. ``config`` takes a ``StreamsApp``'s
    settings; ``process`` reads ``application.id``, ``bootstrap.servers`` (global stores,
    creating the changelog topics, end offsets), ``max.task.idle.ms`` (KIP-695, for a topology
    with several co-partitioned sources), ``default.timestamp.extractor`` and
    ``default.deserialization.exception.handler``.

    One task per Kafka partition number, as in a ``StreamsApp``: its records are stamped with
    the ``RecordQueue`` rules and processed in timestamp order; its stores live in Spark's
    state store (checkpointed with each micro-batch, restored by a restarted query). Global
    stores are read by each Spark task from their topics, brought up to the topics' end at the
    start of every micro-batch. ``observe`` reports dropped records as ``stamp`` does. A
    streaming query must use the ``append`` output mode. See ``docs/spark-streaming.md``.

    ``stores`` says where the task stores live. ``"spark"`` (the default): in Spark's state
    store, one cell per task, read and written whole by each micro-batch the task has records
    in (its cost grows with the stores). ``"local"``: as Kafka Streams keeps them, on the
    executor's disk under ``state.dir/<application.id>/spark/``, Spark's state store holding
    only each task's last micro-batch of writes, so a micro-batch costs what it touches; their
    changelog (``changelog=True``) is then the durable copy a task restores from when its disk
    is gone (``streamstate.spark._local_stores``).
    """
    if stores not in ("spark", "local"):
        raise ValueError(f"stores must be 'spark' or 'local', not {stores!r}")
    task: Any
    if topology.is_graph:
        from streamstate.spark._graph import graph_task

        # A processor graph (the DSL's): what Spark cannot run is refused here (_graph.py).
        task = graph_task(topology, config, changelog, stores=stores)
    cfg = StreamsConfig.from_mapping(config)
    missing = [c for c in _SOURCE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"process() needs Spark's Kafka source columns; missing {missing} in {df.columns}"
        )
    observation = resolve_observation(observe, df.isStreaming)
    if changelog and any(spec.logged for spec in topology.stores.values()):
        _create_changelog_topics(topology, config)
    if not topology.is_graph:
        node = topology.node()
        global_topics = {
            name: spec.topic for name, spec in topology.global_stores.items() if name in node.stores
        }
        local = None
        if stores == "local":
            local = LocalStoresConfig.of(topology.stores, cfg, changelog, config)
        task = _Task(topology, cfg, changelog, global_topics, local)

    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import StructType, _parse_datatype_string

    with quiet_pandas3_warning():
        processed = (
            df.select(*_SOURCE_COLUMNS)
            .mapInArrow(to_chunks, CHUNK_DDL)
            .groupBy("partition")
            .applyInPandasWithState(
                task.run,
                _OUT_DDL,
                LOCAL_STATE_DDL if stores == "local" else STATE_DDL,
                "append",
                GroupStateTimeout.NoTimeout,
            )
        )
        if observation is not None:
            processed = observe_drops(processed, observation, DROP_REASONS)
        schema = _parse_datatype_string(OUTPUT_DDL)
        assert isinstance(schema, StructType)
        expected = spark_arrow_schema(df.sparkSession, schema)
        return processed.select("chunk").mapInArrow(unpack_chunks(expected), schema)


def _create_changelog_topics(topology: Topology, config: Mapping[str, Any]) -> None:
    """Creates the missing changelog topics exactly as a ``StreamsApp`` starting does (one
    partition per source partition, compacted), so the rows have somewhere to go and a
    ``StreamsApp`` finds them."""
    from streamstate.app.streams_app import StreamsApp

    StreamsApp(topology, config)._prepare_topics()
