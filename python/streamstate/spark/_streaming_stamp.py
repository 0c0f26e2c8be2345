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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamstate.spark._chunks import (
    CHUNK_DDL,
    batches_by_partition,
    ipc_bytes,
    to_chunks,
    unpack_chunks,
)
from streamstate.spark._metrics import DROP_REASONS, drop_counts, observe_drops
from streamstate.spark._pyspark_compat import quiet_pandas3_warning

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["STATE_DDL", "stamp_stream"]

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
