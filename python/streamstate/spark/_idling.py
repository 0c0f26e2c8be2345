"""KIP-695 on Spark: a task of ``process`` waits for a co-partitioned source that has lag.

A ``StreamsApp``'s task with several input partitions processes only when each has buffered
records, or an empty one has no lag and has been waited for ``max.task.idle.ms``
(:func:`streamstate.app.task_idling.may_process`, the same rule here). A micro-batch holds
whatever Spark's Kafka source planned (``maxOffsetsPerTrigger`` splits it over the partitions),
so a task of ``process`` asks the broker for each of its partitions' end offset when it starts
its micro-batch; a partition that runs dry while the broker has more of it stops the task, and
the records of its other partitions not yet processed are *held*: kept in the task's state
(already stamped), put back in front of the next micro-batch's records, and only then
processed, in timestamp order with the lagging partition's records.

A partition's position (the offset up to which the source has read it) is the offset after its
last record; a partition the task has had no record of starts at the end offset seen the first
time (Spark may have started it at ``latest``: the offsets before cannot be waited for). Offsets
a consumer never returns (transaction markers, aborted records) would look like lag forever:
when a whole micro-batch later the partition has brought no record and its end offset has not
moved, its position is taken to be that end offset (Spark's source reads at least one offset of
each partition with lag per micro-batch).

Both forms ``process`` runs use the helpers below, in this order: :func:`add_records` (held
records first), :func:`read_lags` and :func:`idle_deadlines` before processing (the rule itself
is :func:`~streamstate.app.task_idling.may_process`, asked by the one-function loop and by a
graph's ``StreamTask.ready``), :func:`keep_idle_deadlines` and :func:`hold` after.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.config import StreamsConfig
from streamstate.changelog import restore_consumer_config
from streamstate.clients.config import CONSUMER_PREFIX, connection_settings
from streamstate.errors import StreamsError
from streamstate.records import TopicPartition
from streamstate.spark._chunks import ipc_bytes, read_chunk

__all__ = [
    "EndOffsets",
    "IdlingState",
    "add_records",
    "encode_held",
    "held_batch",
    "hold",
    "idle_deadlines",
    "keep_idle_deadlines",
    "read_held",
    "read_lags",
    "wall_clock_ms",
]

Key = tuple[str, int]  # (topic, partition)

_TIMEOUT_S = 30.0


class EndOffsets:
    """This Python worker's view of the end offsets (high watermarks) of one Kafka cluster."""

    _by_cluster: ClassVar[dict[tuple[str, tuple[tuple[str, str], ...]], EndOffsets]] = {}

    def __init__(self, bootstrap_servers: str, connection: Mapping[str, Any]) -> None:
        self._consumer = Consumer(restore_consumer_config(bootstrap_servers, **connection))

    @classmethod
    def for_servers(cls, bootstrap_servers: str, settings: Mapping[str, Any]) -> EndOffsets:
        """The worker's reader for ``bootstrap_servers`` reached with the connection settings
        (``security.protocol``, ``sasl.*``, ``ssl.*``) of ``settings`` (the app's main
        consumer's, which reads the lags in a ``StreamsApp``)."""
        connection = connection_settings(settings)
        key = (bootstrap_servers, tuple(sorted((k, str(v)) for k, v in connection.items())))
        reader = cls._by_cluster.get(key)
        if reader is None:
            reader = cls._by_cluster[key] = cls(bootstrap_servers, connection)
        return reader

    @classmethod
    def close_all(cls) -> None:
        """Closes this process's readers (a process that outlives its cluster, as a test's)."""
        readers = list(cls._by_cluster.values())
        cls._by_cluster.clear()
        for reader in readers:
            reader._consumer.close()

    def end_offset(self, topic: str, partition: int) -> int:
        """The partition's end offset on the broker now (not a cached one)."""
        try:
            _, high = self._consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), timeout=_TIMEOUT_S, cached=False
            )
        except Exception as exc:
            raise StreamsError(
                f"could not read the end offset that KIP-695 task idling needs: {exc}",
                topic=topic,
                partition=partition,
            ) from exc
        return int(high)


def held_batch(batches: Sequence[pa.RecordBatch], stamped: Sequence[Any]) -> pa.RecordBatch | None:
    """The source rows of the records ``stamped`` (still queued, in offset order) out of
    ``batches`` (the partition's source rows of this micro-batch, held ones first), with each
    timestamp replaced by the one the record was stamped with, so the next micro-batch stamps
    them the same whatever its partition time."""
    if not stamped:
        return None
    offsets = pa.array([r.offset for r in stamped], pa.int64())
    table = pa.Table.from_batches(batches).combine_chunks()
    rows = table.filter(pc.is_in(table.column("offset").cast(pa.int64()), value_set=offsets))
    rows = rows.sort_by("offset")
    if rows.num_rows != len(stamped):
        raise StreamsError(
            f"held {len(stamped)} records but found {rows.num_rows} of their source rows",
            topic=stamped[0].topic,
            partition=stamped[0].partition,
            offset=stamped[0].offset,
        )
    column = rows.schema.get_field_index("timestamp")
    kind = rows.schema.field(column).type
    if pa.types.is_timestamp(kind):
        scale = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[kind.unit]
        values = pa.array([int(r.timestamp * scale) for r in stamped], pa.int64()).cast(kind)
    else:
        values = pa.array([r.timestamp for r in stamped], kind)
    rows = rows.set_column(column, rows.schema.field(column), values)
    return rows.to_batches()[0]


def encode_held(batch: pa.RecordBatch) -> str:
    """A held batch as text for the task state's ``queues`` JSON."""
    return base64.b64encode(ipc_bytes([batch], batch.schema).to_pybytes()).decode("ascii")


def read_held(text: str | None) -> list[pa.RecordBatch]:
    """The batches :func:`encode_held` wrote (none for ``None``)."""
    return read_chunk(base64.b64decode(text)) if text else []


def wall_clock_ms() -> int:
    """The clock of the idle deadlines on Spark: wall-clock ms, since a task's deadline is kept
    in its state and read by the next micro-batch, maybe in another process or machine."""
    return int(time.time() * 1000)


class IdlingState(Protocol):
    """What a task's state carries per source partition for KIP-695 (``_QueueState``)."""

    last_offset: int
    position: int | None
    lagging: list[int] | None
    held: str | None
    held_from: int | None
    idle_deadline: float | None


def add_records(
    add: Callable[[TopicPartition, pa.RecordBatch], Any],
    by_key: Mapping[Key, TopicPartition],
    states: Mapping[Key, IdlingState],
    records: Mapping[Key, list[pa.RecordBatch]],
) -> dict[Key, list[pa.RecordBatch]]:
    """Buffers a task's records with ``add`` (its ``PartitionGroup``'s ``add_raw_records``):
    those the last micro-batch held first, already stamped, then the micro-batch's ``records``,
    whose offsets must follow the partition's last one. Returns each partition's source rows in
    the order added, what :func:`hold` takes the held records' rows from."""
    rows_of: dict[Key, list[pa.RecordBatch]] = {}
    for key, q in states.items():
        held = read_held(q.held)
        if held:
            rows_of[key] = list(held)
            for batch in held:
                add(by_key[key], batch)
        q.held = q.held_from = None
    for (topic, partition), batches in records.items():
        q = states[(topic, partition)]
        rows_of.setdefault((topic, partition), []).extend(batches)
        first = pc.min(batches[0].column("offset")).as_py()
        if first <= q.last_offset:
            raise StreamsError(
                f"records of a partition must arrive in increasing offset order: offset "
                f"{first} after offset {q.last_offset}",
                topic=topic,
                partition=partition,
                offset=first,
            )
        for batch in batches:
            add(by_key[(topic, partition)], batch)
        q.last_offset = pc.max(batches[-1].column("offset")).as_py()
    return rows_of


def read_lags(
    config: StreamsConfig,
    partitions: Iterable[TopicPartition],
    states: Mapping[Key, IdlingState],
    records: Mapping[Key, Any],
) -> dict[TopicPartition, int]:
    """Each partition's lag now: the broker's end offset past the partition's position (see
    the module doc), read with the app's main consumer's connection settings."""
    ends = EndOffsets.for_servers(
        config.bootstrap_servers, config.overrides.get(CONSUMER_PREFIX, {})
    )
    lags: dict[TopicPartition, int] = {}
    for tp in partitions:
        key = (tp.topic, tp.partition)
        q = states[key]
        end = ends.end_offset(tp.topic, tp.partition)
        if q.last_offset >= 0:
            q.position = max(q.position or 0, q.last_offset + 1)
        elif q.position is None:
            q.position = end  # where Spark started it is not known: wait for what comes
        lag = max(0, end - q.position)
        if lag and key not in records and q.lagging == [q.position, end]:
            # A whole micro-batch read past the position and brought nothing: offsets no
            # consumer returns (transaction markers, aborted records).
            q.position, lag = end, 0
        q.lagging = [q.position, end] if lag else None
        lags[tp] = lag
    return lags


def idle_deadlines(
    partitions: Iterable[TopicPartition], states: Mapping[Key, IdlingState]
) -> dict[TopicPartition, float]:
    """The idle deadlines (wall-clock ms) the last micro-batch left, for ``may_process``."""
    return {
        tp: q.idle_deadline
        for tp in partitions
        if (q := states[(tp.topic, tp.partition)]).idle_deadline is not None
    }


def keep_idle_deadlines(
    partitions: Iterable[TopicPartition],
    states: Mapping[Key, IdlingState],
    deadlines: Mapping[TopicPartition, float],
) -> None:
    """Keeps the deadlines ``may_process`` left in the task's state."""
    for tp in partitions:
        states[(tp.topic, tp.partition)].idle_deadline = deadlines.get(tp)


def hold(
    queues: Mapping[TopicPartition, Any],
    rows_of: Mapping[Key, Sequence[pa.RecordBatch]],
    states: Mapping[Key, IdlingState],
) -> None:
    """Takes the records still queued (not processed: the task waits for a lagging partition)
    out of their ``RecordQueue`` and keeps them, with their stamps, in the partition's state
    for the next micro-batch."""
    for tp, queue in queues.items():
        if queue.size():
            key = (tp.topic, tp.partition)
            batch = held_batch(rows_of[key], queue.poll_batch())
            if batch is not None:
                q = states[key]
                q.held = encode_held(batch)
                q.held_from = pc.min(batch.column("offset")).as_py()
