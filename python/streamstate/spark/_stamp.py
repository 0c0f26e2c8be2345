"""``stamp``: Kafka Streams' record-queue admission over a Kafka-source DataFrame, in Rust.

Each Kafka partition is stamped whole and in offset order by one Rust ``Stamper`` per Spark
task: deserialize key and value, extract the timestamp with the current partition time, drop
records with a negative timestamp (or a deserialization error under ``"continue"``), and emit
the admitted records with the partition time after each. See ``docs/spark-stamp.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from streamstate._core import Stamper
from streamstate.serde import BytesDeserializer, Deserializer, StringDeserializer
from streamstate.spark._decode import SPARK_TYPES
from streamstate.timestamps import FailOnInvalidTimestamp, TimestampExtractor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

__all__ = ["stamp"]

Strategy = Literal["sort", "group", "as_is"]

_KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")

# Spark DDL of each built-in deserializer's natural output (JSON/Avro without a schema: text).
_NATURAL_SPARK_TYPES = {**SPARK_TYPES, "json": "string", "avro": "string"}

_BYTES = BytesDeserializer()
_FAIL = FailOnInvalidTimestamp()


def _spec(obj: object, role: str, base: type) -> tuple[Any, ...]:
    """The ``_spec`` tuple of a built-in serde/extractor; anything else is a ``TypeError``."""
    module = type(obj).__module__
    spec = getattr(obj, "_spec", None)
    if (
        not isinstance(obj, base)
        or module not in ("streamstate.serde", "streamstate.timestamps")
        or not isinstance(spec, tuple)
    ):
        raise TypeError(
            f"stamp() runs entirely in Rust and supports only streamstate's built-in "
            f"{role}s; got {type(obj).__qualname__} from {module}. Use a built-in one "
            f"(streamstate.serde / streamstate.timestamps), or a RecordQueue per partition for "
            f"custom Python code."
        )
    if isinstance(obj, StringDeserializer) and obj.encoding != "utf-8":
        raise TypeError(
            f"stamp() decodes strings in Rust as UTF-8 only; got StringDeserializer(encoding="
            f"{obj.encoding!r})"
        )
    return spec


def _as_nullable(dt: DataType) -> DataType:
    """Every field, element and map value nullable, as Spark's ``from_json`` makes its schema."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(dt, StructType):
        return StructType(
            [StructField(f.name, _as_nullable(f.dataType), True, f.metadata) for f in dt.fields]
        )
    if isinstance(dt, ArrayType):
        return ArrayType(_as_nullable(dt.elementType), True)
    if isinstance(dt, MapType):
        return MapType(dt.keyType, _as_nullable(dt.valueType), True)
    return dt


def _parse_type(schema: str | DataType) -> DataType:
    from pyspark.sql.types import DataType as SparkDataType
    from pyspark.sql.types import _parse_datatype_string

    if isinstance(schema, SparkDataType):
        return schema
    return _parse_datatype_string(schema)


def _output_schema(key_name: str, value_type: DataType) -> StructType:
    from pyspark.sql.types import (
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    return StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", LongType()),
            StructField("key", _parse_type(_NATURAL_SPARK_TYPES[key_name])),
            StructField("value", value_type),
            StructField("partition_time", LongType()),
        ]
    )


def stamp(
    df: DataFrame,
    *,
    key_deserializer: Deserializer = _BYTES,
    value_deserializer: Deserializer = _BYTES,
    timestamp_extractor: TimestampExtractor = _FAIL,
    deserialization_exception_handler: Literal["fail", "continue"] = "fail",
    value_schema: str | DataType | None = None,
    strategy: Strategy = "sort",
) -> DataFrame:
    """Stamps a DataFrame in Spark's Kafka source schema with Kafka Streams' RecordQueue rules.

    Per Kafka partition, in offset order: deserialize key and value, extract the timestamp
    (passing the current partition time), drop records whose timestamp is negative (and, with
    ``deserialization_exception_handler="continue"``, records that do not deserialize), and
    keep the rest. Columns out: ``topic``, ``partition``, ``offset``, ``timestamp`` (extracted,
    epoch ms), ``key``, ``value`` and ``partition_time`` (after admitting that record).

    ``value_schema`` (a Spark DDL string such as ``"id bigint, meta struct<ts: bigint>"``, or a
    ``DataType``) turns JSON/Avro values into that type, like ``from_json`` in PERMISSIVE mode
    (missing fields and fields of the wrong type are null). Without it JSON/Avro values are
    JSON text. Only the built-in serdes and extractors are supported (they run in Rust); any
    other object raises ``TypeError``.

    ``strategy`` picks how each Kafka partition reaches one Rust stamper whole and in order:
    ``"sort"`` (default) hash-partitions by (topic, partition) and sorts by offset, then streams
    Arrow batches (``mapInArrow``); ``"group"`` uses ``groupBy(topic, partition).applyInArrow``
    (a whole Kafka partition in memory at once); ``"as_is"`` skips the shuffle and trusts that
    every Spark partition already holds whole Kafka partitions in offset order — true for
    Spark's Kafka batch source *without* ``minPartitions`` / ``maxRecordsPerPartition``.
    """
    from pyspark.sql.pandas.types import to_arrow_type

    key_spec = _spec(key_deserializer, "deserializer", Deserializer)
    value_spec = _spec(value_deserializer, "deserializer", Deserializer)
    extractor_spec = _spec(timestamp_extractor, "timestamp extractor", TimestampExtractor)
    if deserialization_exception_handler not in ("fail", "continue"):
        raise ValueError(
            "deserialization_exception_handler must be 'fail' or 'continue', got "
            f"{deserialization_exception_handler!r}"
        )
    if strategy not in ("sort", "group", "as_is"):
        raise ValueError(f"strategy must be 'sort', 'group' or 'as_is', got {strategy!r}")
    missing = [c for c in _KAFKA_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"stamp() needs Spark's Kafka source columns; missing {missing} in {df.columns}"
        )

    if value_schema is None:
        value_type = _parse_type(_NATURAL_SPARK_TYPES[value_spec[0]])
        arrow_value_type = None
    else:
        value_type = _as_nullable(_parse_type(value_schema))
        arrow_value_type = to_arrow_type(value_type)
    schema = _output_schema(key_spec[0], value_type)
    handler = deserialization_exception_handler
    # Checks the configuration on the driver, where a mistake is cheap to report.
    target = Stamper(key_spec, value_spec, extractor_spec, handler, arrow_value_type).schema
    columns = df.select(*_KAFKA_COLUMNS)

    def new_stamper() -> Any:
        return Stamper(key_spec, value_spec, extractor_spec, handler, arrow_value_type)

    def conform(batch: pa.RecordBatch, expected: pa.Schema) -> pa.RecordBatch:
        return batch if batch.schema == expected else batch.cast(expected)

    if strategy == "group":

        def stamp_group(table: pa.Table) -> pa.Table:
            stamper = new_stamper()
            outs = [stamper.stamp(b) for b in table.sort_by("offset").to_batches()]
            return pa.Table.from_batches([o for o in outs if o.num_rows], schema=target)

        return columns.groupBy("topic", "partition").applyInArrow(stamp_group, schema)

    if strategy == "sort":
        partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200")
        columns = columns.repartition(partitions, "topic", "partition").sortWithinPartitions(
            "topic", "partition", "offset"
        )
    large = (
        str(df.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false"))
        .strip()
        .lower()
        == "true"
    )
    expected: pa.Schema = to_arrow_type(schema, prefers_large_types=large)
    expected = pa.schema(list(expected))

    def stamp_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stamper = new_stamper()
        for batch in batches:
            out = stamper.stamp(batch)
            if out.num_rows:
                yield conform(out, expected)

    return columns.mapInArrow(stamp_batches, schema)
