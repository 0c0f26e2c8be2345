"""Arrow chunks: whole Arrow batches carried as one binary cell through Spark's stateful operators.

Spark's Python state APIs of 4.0 (``applyInPandasWithState``) hand each group to Python as
pandas frames and take pandas frames back: a Python object per binary cell and a dict per struct
value, for every record. Streaming ``stamp`` and ``process`` instead pack the records of each
Kafka topic-partition into Arrow IPC streams first (``mapInArrow``, no shuffle: the Kafka source
already reads each offset range in one task), so the grouped operator moves a few large binary
cells per partition and micro-batch, and unpack the results with ``mapInArrow`` again. Every
per-record step stays columnar (Arrow in Python, the Rust kernel), at the price of two more
passes over the bytes, which cost a copy each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "CHUNK_DDL",
    "batches_by_partition",
    "conform",
    "in_offset_order",
    "ipc_bytes",
    "read_chunk",
    "spark_arrow_schema",
    "to_chunks",
    "unpack_chunks",
]

# One row per packed chunk: which Kafka partition it holds, where it starts, the IPC stream.
CHUNK_DDL = "topic string, partition int, first_offset bigint, chunk binary"
_CHUNK_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("first_offset", pa.int64()),
        ("chunk", pa.binary()),
    ]
)
# A binary cell has 32-bit offsets in Spark's default Arrow layout.
_MAX_CHUNK_BYTES = (1 << 31) - 1


def ipc_bytes(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Buffer:
    """``batches`` as one Arrow IPC stream (no compression: the bytes stay on this machine or
    cross Spark's shuffle, which compresses on its own)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    buffer: pa.Buffer = sink.getvalue()
    return buffer


def read_chunk(data: bytes | pa.Buffer) -> list[pa.RecordBatch]:
    """The batches of one IPC stream written by :func:`ipc_bytes` (zero-copy over ``data``)."""
    buffer = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    return list(pa.ipc.open_stream(buffer))


def _one_cell(buffer: pa.Buffer) -> pa.Array:
    offsets = pa.py_buffer(np.array([0, buffer.size], dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, buffer])


def _chunk_rows(batch: pa.RecordBatch, topic: str, partition: int) -> Iterator[pa.RecordBatch]:
    buffer = ipc_bytes([batch], batch.schema)
    if buffer.size > _MAX_CHUNK_BYTES and batch.num_rows > 1:
        half = batch.num_rows // 2
        yield from _chunk_rows(batch.slice(0, half), topic, partition)
        yield from _chunk_rows(batch.slice(half), topic, partition)
        return
    first = pc.min(batch.column("offset")).as_py()
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([topic], pa.string()),
            pa.array([partition], pa.int32()),
            pa.array([first], pa.int64()),
            _one_cell(buffer),
        ],
        schema=_CHUNK_SCHEMA,
    )


def _split_by_partition(batch: pa.RecordBatch) -> Iterator[tuple[str, int, pa.RecordBatch]]:
    topics = batch.column("topic")
    partitions = batch.column("partition")
    if topics.null_count or partitions.null_count:
        raise ValueError("Kafka records need a topic and a partition; found nulls")
    low, high = pc.min_max(partitions).values()
    distinct_topics = pc.unique(topics)
    if low == high and len(distinct_topics) == 1:
        # The Kafka source's case: one topic-partition offset range per Spark partition.
        yield distinct_topics[0].as_py(), low.as_py(), batch
        return
    table = pa.Table.from_batches([batch])
    keys = table.group_by(["topic", "partition"]).aggregate([]).to_pylist()
    for key in keys:
        mask = pc.and_(
            pc.equal(topics, pa.scalar(key["topic"], topics.type)),
            pc.equal(partitions, pa.scalar(key["partition"], partitions.type)),
        )
        yield key["topic"], key["partition"], batch.filter(mask)


def to_chunks(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: each batch's records, per topic-partition, as rows of
    :data:`CHUNK_DDL` (a chunk over 2 GiB is split in two)."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        for topic, partition, part in _split_by_partition(batch):
            yield from _chunk_rows(part, topic, partition)


def spark_arrow_schema(spark: Any, schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects back from ``mapInArrow`` for the Spark ``schema``
    (large binary/string types when ``spark.sql.execution.arrow.useLargeVarTypes`` is on)."""
    from streamstate.spark._pyspark_compat import to_arrow_type

    setting = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    large = str(setting).strip().lower() == "true"
    return pa.schema(list(to_arrow_type(schema, prefers_large_types=large)))


def conform(batch: pa.RecordBatch, expected: pa.Schema) -> pa.RecordBatch:
    """``batch`` in exactly the Arrow schema Spark expects (a cast only when they differ, e.g.
    with ``spark.sql.execution.arrow.useLargeVarTypes``)."""
    return batch if batch.schema == expected else batch.cast(expected)


def unpack_chunks(
    expected: pa.Schema,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` body turning rows with a ``chunk`` column back into the batches the
    chunks hold, in ``expected``'s schema."""

    def unpack(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chunks = batch.column("chunk")
            for i in range(batch.num_rows):
                if not chunks[i].is_valid:
                    continue
                for inner in read_chunk(chunks[i].as_buffer()):
                    if inner.num_rows:
                        yield conform(inner, expected)

    return unpack


def batches_by_partition(
    frames: Iterable[Any],
) -> dict[tuple[str, int], list[pa.RecordBatch]]:
    """The chunks a grouped operator received (pandas frames of :data:`CHUNK_DDL` rows), read
    back into batches per topic-partition, in offset order (see :func:`in_offset_order`);
    partitions sorted by topic, then partition."""
    found: dict[tuple[str, int], list[pa.RecordBatch]] = {}
    for frame in frames:
        for topic, partition, data in zip(
            frame["topic"], frame["partition"], frame["chunk"], strict=True
        ):
            found.setdefault((str(topic), int(partition)), []).extend(read_chunk(data))
    return {tp: in_offset_order(found[tp]) for tp in sorted(found)}


def in_offset_order(batches: Sequence[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """Batches of one topic-partition ordered so that offsets increase from each batch to the
    next (each batch is in offset order, as the Kafka source reads it); batches whose offset
    ranges overlap (the input was shuffled before) become one batch sorted by offset."""
    spans = []
    for batch in batches:
        if batch.num_rows:
            low, high = pc.min_max(batch.column("offset")).values()
            spans.append((low.as_py(), high.as_py(), batch))
    spans.sort(key=lambda span: span[0])
    ordered = [batch for _, _, batch in spans]
    disjoint = all(spans[i][0] > spans[i - 1][1] for i in range(1, len(spans)))
    in_order = all(_sorted(batch) for batch in ordered)
    if disjoint and in_order:
        return ordered
    table = pa.Table.from_batches(ordered).sort_by("offset").combine_chunks()
    merged: list[pa.RecordBatch] = table.to_batches()
    return merged


def _sorted(batch: pa.RecordBatch) -> bool:
    offsets = batch.column("offset")
    if len(offsets) < 2:
        return True
    steps = pc.greater(offsets.slice(1), offsets.slice(0, len(offsets) - 1))
    return bool(pc.all(steps).as_py())
