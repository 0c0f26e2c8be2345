"""Decoding Spark's Kafka source columns with the Rust deserializers, batch by batch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamstate._core import decode_kafka_batch
from streamstate.spark._pyspark_compat import quiet_pandas3_warning

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["decode_kafka_columns", "kafka_source_schema"]

# Spark DDL of the column each flat built-in deserializer produces.
SPARK_TYPES = {
    "bytes": "binary",
    "string": "string",
    "short": "smallint",
    "integer": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "uuid": "string",
}


def kafka_source_schema() -> Any:
    """The columns of Spark's Kafka source that streamstate reads, as a ``StructType``: for
    building a DataFrame that stands for the source (an in-memory one in tests, say)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    return StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
        ]
    )


def _check(name: str) -> None:
    if name not in SPARK_TYPES:
        raise ValueError(f"unknown deserializer {name!r}; expected one of {sorted(SPARK_TYPES)}")


def decode_kafka_columns(df: DataFrame, *, key: str = "bytes", value: str = "bytes") -> DataFrame:
    """Deserializes the ``key`` and ``value`` columns of a DataFrame in Spark's Kafka source
    schema with Kafka's wire formats (``"long"``, ``"string"``, ...), in Rust, one Arrow batch
    per call (``mapInArrow``: no Python object per row).

    The other Kafka columns (``topic``, ``partition``, ``offset``, ``timestamp``) are kept, the
    timestamp as epoch milliseconds. A malformed key or value fails the job with a
    ``DeserializationError`` naming its topic, partition and offset.
    """
    _check(key)
    _check(value)
    schema = (
        f"topic string, partition int, offset bigint, timestamp bigint, "
        f"key {SPARK_TYPES[key]}, value {SPARK_TYPES[value]}"
    )
    columns = df.select("topic", "partition", "offset", "timestamp", "key", "value")

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield decode_kafka_batch(batch, key, value)

    with quiet_pandas3_warning():
        return columns.mapInArrow(decode, schema)
