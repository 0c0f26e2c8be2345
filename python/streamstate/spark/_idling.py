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
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.changelog import restore_consumer_config
from streamstate.clients.config import connection_settings
from streamstate.errors import StreamsError
from streamstate.spark._chunks import ipc_bytes, read_chunk

__all__ = ["EndOffsets", "encode_held", "held_batch", "read_held"]

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
