"""Dropped-record counts as Spark ``observe`` metrics, by the reasons ``RecordQueue`` counts.

A streaming query reports them per micro-batch in ``StreamingQueryProgress.observedMetrics``
(``query.lastProgress["observedMetrics"]["dropped_records"]``); a batch query through a
``pyspark.sql.Observation`` (``observation.get``) or a query-execution listener. The metric
row has the same fields either way: ``deserialization_error``, ``negative_timestamp`` (the keys
of ``RecordQueue.dropped_records()``) and ``total``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "DEFAULT_OBSERVATION",
    "DROP_COLUMNS",
    "DROP_REASONS",
    "ObserveArg",
    "drop_counts",
    "observe_drops",
    "observe_summary_rows",
    "resolve_observation",
    "summary_row",
    "with_drop_columns",
]

DEFAULT_OBSERVATION = "dropped_records"
DROP_REASONS = ("deserialization_error", "negative_timestamp")
# Hidden columns of batch plans: per-batch drop counts ride on extra rows, filtered out after
# ``observe`` has summed them.
DROP_COLUMNS = tuple(f"__streamstate_dropped_{reason}" for reason in DROP_REASONS)

ObserveArg = Any  # str | pyspark.sql.Observation | None


class _Default:
    """The ``observe=`` default: the metrics on streaming DataFrames, none on batch ones."""

    def __repr__(self) -> str:
        return "<'dropped_records' on streams, None on batches>"


DEFAULT = _Default()


def resolve_observation(observe: object, streaming: bool) -> ObserveArg:
    """The observation to use: the argument, or the default for the kind of DataFrame."""
    if isinstance(observe, _Default):
        return DEFAULT_OBSERVATION if streaming else None
    if observe is None or isinstance(observe, str):
        if isinstance(observe, str) and not observe:
            raise ValueError("observe must be a non-empty name, an Observation or None")
        return observe
    from pyspark.sql import Observation

    if isinstance(observe, Observation):
        if streaming:
            raise TypeError(
                "a streaming query reports observed metrics by name: pass observe='name' and "
                "read query.lastProgress['observedMetrics']['name']"
            )
        return observe
    raise TypeError(f"observe must be a name, a pyspark.sql.Observation or None, not {observe!r}")


def observe_drops(df: DataFrame, observation: ObserveArg, columns: Iterable[str]) -> DataFrame:
    """``df.observe`` of the sums of ``columns`` (one per reason of :data:`DROP_REASONS`, in
    that order) under the reason names, plus their ``total``."""
    from pyspark.sql import functions as F

    sums = [F.coalesce(F.sum(F.col(column)), F.lit(0)).cast("bigint") for column in columns]
    named = [s.alias(reason) for s, reason in zip(sums, DROP_REASONS, strict=True)]
    total = sums[0]
    for more in sums[1:]:
        total = total + more
    return df.observe(observation, *named, total.alias("total"))


def observe_summary_rows(df: DataFrame, observation: ObserveArg) -> DataFrame:
    """Observes the drop counts of a batch plan built with :func:`with_drop_columns`, then
    removes the summary rows and the hidden columns."""
    from pyspark.sql import functions as F

    observed = observe_drops(df, observation, DROP_COLUMNS)
    return observed.where(F.col(DROP_COLUMNS[0]).isNull()).drop(*DROP_COLUMNS)


def drop_counts(dropped: Mapping[Any, Mapping[str, int]]) -> tuple[int, ...]:
    """The totals per reason of a ``Stamper.dropped_records()``-shaped mapping."""
    return tuple(
        sum(counts.get(reason, 0) for counts in dropped.values()) for reason in DROP_REASONS
    )


def with_drop_columns(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus the hidden drop-count columns."""
    return pa.schema([*schema, *(pa.field(c, pa.int64()) for c in DROP_COLUMNS)])


def summary_row(schema: pa.Schema, counts: tuple[int, ...]) -> pa.RecordBatch:
    """One row of nulls in ``schema``'s data columns carrying ``counts`` in the hidden ones."""
    data = [pa.nulls(1, field.type) for field in schema if field.name not in DROP_COLUMNS]
    extra = [pa.array([n], pa.int64()) for n in counts]
    return pa.RecordBatch.from_arrays([*data, *extra], schema=schema)


def add_null_drop_columns(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A data batch with the hidden columns, null (so ``observe`` ignores them)."""
    nulls = [pa.nulls(batch.num_rows, pa.int64()) for _ in DROP_COLUMNS]
    return pa.RecordBatch.from_arrays([*batch.columns, *nulls], schema=schema)


def counted(
    outputs: Iterable[tuple[pa.RecordBatch, tuple[int, ...]]], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Data batches with null hidden columns, each followed by a summary row of the drops it
    caused (when any)."""
    for batch, dropped in outputs:
        if batch.num_rows:
            yield add_null_drop_columns(batch, schema)
        if any(dropped):
            yield summary_row(schema, dropped)
