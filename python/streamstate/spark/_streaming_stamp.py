"""``stamp`` on a streaming DataFrame: partition time and drop counts in Spark's state store.

The plan, per micro-batch::

    Kafka source ─ mapInArrow(pack) ─ groupBy(topic, partition).applyInPandasWithState ─
        observe(dropped_records) ─ mapInArrow(unpack) ─ stamped records

The grouped operator's state for one Kafka partition is what a ``RecordQueue`` reading it would
know after the previous micro-batch: its partition time, the offset of the last record seen
and the drop counts by reason. The Rust ``Stamper`` resumes from that state
(``Stamper.resume``), stamps this micro-batch's records of the partition in offset order and
hands the new state back (``partition_time``, ``last_offset``, ``dropped_records``), which Spark
checkpoints with the batch. A restarted query re-runs an unfinished micro-batch against the
state of the last finished one, so the result is the same as without the restart.

``stamp(..., partition_time=False)`` needs none of this: without the ``partition_time`` column
and with an extractor that never reads the partition time, every record is stamped on its own
in one stateless ``mapInArrow`` (:func:`stamp_stream_per_record`; ``docs/spark-stamp.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamstate.spark._chunks import (
    CHUNK_DDL,
    batches_by_partition,
    conform,
    ipc_bytes,
    to_chunks,
    unpack_chunks,
)
from streamstate.spark._metrics import (
    DROP_COLUMNS,
    DROP_REASONS,
    counted,
    drop_counts,
    observe_drops,
    observe_summary_rows,
    with_drop_columns,
)
from streamstate.spark._pyspark_compat import quiet_pandas3_warning

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["STATE_DDL", "reads_partition_time", "stamp_stream", "stamp_stream_per_record"]

# What one Kafka partition's record queue carries from one micro-batch to the next.
STATE_DDL = (
    "partition_time bigint, last_offset bigint, deserialization_error bigint, "
    "negative_timestamp bigint"
)
_OUT_DDL = "chunk binary, " + ", ".join(f"{reason} bigint" for reason in DROP_REASONS)
_NOT_KNOWN = -1


def stamp_stream(
    columns: DataFrame,
    new_stamper: Callable[[], Any],
    schema: StructType,
    expected: pa.Schema,
    observation: Any,
) -> DataFrame:
    """The streaming plan of ``stamp`` (see the module doc); ``columns`` are the Kafka source
    columns, ``new_stamper`` builds the configured Rust ``Stamper``, ``schema``/``expected``
    are the output's Spark and Arrow schemas."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def stamp_partition(key: tuple[Any, ...], frames: Iterable[Any], state: Any) -> Iterator[Any]:
        topic, partition = str(key[0]), int(key[1])
        stamper = new_stamper()
        if state.exists:
            partition_time, last_offset, *dropped = state.get
            stamper.resume(
                topic,
                partition,
                partition_time,
                None if last_offset is None or last_offset < 0 else last_offset,
                deserialization_error=dropped[0],
                negative_timestamp=dropped[1],
            )
        before = drop_counts(stamper.dropped_records())
        outs: list[pa.RecordBatch] = []
        for batches in batches_by_partition(frames).values():
            outs.extend(stamper.stamp(batch) for batch in batches)
        after = drop_counts(stamper.dropped_records())
        last = stamper.last_offset(topic, partition)
        state.update(
            (
                stamper.partition_time(topic, partition),
                _NOT_KNOWN if last is None else last,
                *after,
            )
        )
        kept = [out for out in outs if out.num_rows]
        chunk = ipc_bytes(kept, kept[0].schema).to_pybytes() if kept else None
        row: dict[str, list[Any]] = {"chunk": [chunk]}
        for reason, n_after, n_before in zip(DROP_REASONS, after, before, strict=True):
            row[reason] = [n_after - n_before]
        yield pd.DataFrame(row)

    with quiet_pandas3_warning():
        stamped = (
            columns.mapInArrow(to_chunks, CHUNK_DDL)
            .groupBy("topic", "partition")
            .applyInPandasWithState(
                stamp_partition, _OUT_DDL, STATE_DDL, "append", GroupStateTimeout.NoTimeout
            )
        )
        if observation is not None:
            stamped = observe_drops(stamped, observation, DROP_REASONS)
        return stamped.select("chunk").mapInArrow(unpack_chunks(expected), schema)


def reads_partition_time(extractor_spec: tuple[Any, ...]) -> bool:
    """Whether the built-in extractor of ``extractor_spec`` may return the partition time
    (``UsePartitionTimeOnInvalidTimestamp``, ``JsonFieldTimestampExtractor(on_invalid=
    "partition_time")``): then a record's timestamp, and whether it is dropped or raises,
    depends on the records before it."""
    return extractor_spec == ("record", "partition_time") or (
        extractor_spec[0] == "json_field" and extractor_spec[-1] == "partition_time"
    )


def stamp_stream_per_record(
    columns: DataFrame,
    new_stamper: Callable[[], Any],
    schema: StructType,
    expected: pa.Schema,
    observation: Any,
) -> DataFrame:
    """``stamp(..., partition_time=False)`` on a stream: a stateless ``mapInArrow``.

    Exact only when the extractor never reads the partition time (the caller checks
    :func:`reads_partition_time`): then each record's key, value, timestamp and drop are a
    function of that record alone, so no state crosses micro-batches, Kafka partitions may be
    split over Spark tasks (``minPartitions``) or shuffled, and a restart re-stamps the same
    records the same way. ``schema``/``expected`` are the output schemas without
    ``partition_time``; each Arrow batch gets a fresh ``Stamper`` (the order check across
    batches of one partition does not apply to records stamped one by one).
    """
    from pyspark.sql.types import LongType, StructField, StructType

    names = [field.name for field in expected]
    if observation is not None:
        schema = StructType([*schema.fields, *(StructField(c, LongType()) for c in DROP_COLUMNS)])
        expected = with_drop_columns(expected)

    def stamped(
        batches: Iterable[pa.RecordBatch],
    ) -> Iterator[tuple[pa.RecordBatch, tuple[int, ...]]]:
        for batch in batches:
            if not batch.num_rows:
                continue
            stamper = new_stamper()
            out = stamper.stamp(batch).select(names)
            yield out, drop_counts(stamper.dropped_records())

    def stamp_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if observation is None:
            for out, _ in stamped(batches):
                if out.num_rows:
                    yield conform(out, expected)
        else:
            for out in counted(stamped(batches), expected):
                yield conform(out, expected)

    with quiet_pandas3_warning():
        mapped = columns.mapInArrow(stamp_batches, schema)
    return mapped if observation is None else observe_summary_rows(mapped, observation)
