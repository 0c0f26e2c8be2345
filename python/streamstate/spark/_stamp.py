"""``stamp``: Kafka Streams' record-queue admission over a Kafka-source DataFrame, in Rust.

Each Kafka partition is stamped whole and in offset order by one Rust ``Stamper`` per Spark
task: deserialize key and value, extract the timestamp with the current partition time, drop
records with a negative timestamp (or a deserialization error under ``"continue"``), and emit
the admitted records with the partition time after each. See ``docs/spark-stamp.md``; on
streaming DataFrames the partition state lives in Spark's state store instead
(``_streaming_stamp``, ``docs/spark-streaming.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from streamstate._core import Stamper
from streamstate.serde import BytesDeserializer, Deserializer, StringDeserializer
from streamstate.spark._chunks import conform, spark_arrow_schema
from streamstate.spark._decode import SPARK_TYPES
from streamstate.spark._metrics import (
    DEFAULT,
    DROP_COLUMNS,
    counted,
    drop_counts,
    observe_summary_rows,
    resolve_observation,
    with_drop_columns,
)
from streamstate.spark._pyspark_compat import quiet_pandas3_warning, to_arrow_type
from streamstate.spark._streaming_stamp import (
    reads_partition_time,
    stamp_stream,
    stamp_stream_per_record,
)
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
    observe: Any = DEFAULT,
    partition_time: bool = True,
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

    On a **streaming** DataFrame (``spark.readStream.format("kafka")``) each Kafka partition's
    partition time and drop counts live in Spark's state store (``applyInPandasWithState``
    keyed by topic and partition), so every micro-batch continues where the last one stopped,
    also after a restart from the checkpoint: the result equals one RecordQueue reading each
    partition from its first record. The query must use the ``append`` output mode;
    ``strategy`` does not apply. See ``docs/spark-streaming.md``.

    On a batch DataFrame, ``strategy`` picks how each Kafka partition reaches one Rust stamper
    whole and in order: ``"sort"`` (default) hash-partitions by (topic, partition) and sorts by
    offset, then streams Arrow batches (``mapInArrow``); ``"group"`` uses
    ``groupBy(topic, partition).applyInArrow`` (a whole Kafka partition in memory at once);
    ``"as_is"`` skips the shuffle and trusts that every Spark partition already holds whole
    Kafka partitions in offset order — true for Spark's Kafka batch source *without*
    ``minPartitions`` / ``maxRecordsPerPartition``.

    ``observe`` reports dropped records through Spark's ``observe`` metrics, as a row with
    ``deserialization_error``, ``negative_timestamp`` and ``total``: a name (streams: read
    ``query.lastProgress["observedMetrics"][name]`` per micro-batch) or a
    ``pyspark.sql.Observation`` (batch: ``observation.get`` after an action), or ``None`` for
    none. The default is ``"dropped_records"`` on streaming DataFrames and ``None`` on batch
    ones. Two observations of one query need different names.

    ``partition_time=False`` leaves out the ``partition_time`` column. On a stream it also
    drops the state: each record is stamped on its own in a stateless ``mapInArrow`` (faster
    than the stateful plan; see ``docs/PERFORMANCE.md``), which is exact only with an
    extractor that never reads the partition time, so ``UsePartitionTimeOnInvalidTimestamp`` and
    ``JsonFieldTimestampExtractor(on_invalid="partition_time")`` are refused with a
    ``ValueError``. See ``docs/spark-stamp.md``, "Streams: the state, and partition_time=False".
    """
    from pyspark.sql.types import LongType, StructField, StructType

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
    observation = resolve_observation(observe, df.isStreaming)
    if df.isStreaming and not partition_time and reads_partition_time(extractor_spec):
        raise ValueError(
            "stamp(partition_time=False) on a stream stamps each record on its own, without "
            "the partition time of earlier micro-batches; the extractor "
            f"{type(timestamp_extractor).__name__} can return the partition time, so its "
            "records would depend on it. Keep partition_time=True, or use an extractor that "
            "fails or skips on an invalid timestamp."
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
    Stamper(key_spec, value_spec, extractor_spec, handler, arrow_value_type)
    columns = df.select(*_KAFKA_COLUMNS)

    def new_stamper() -> Any:
        return Stamper(key_spec, value_spec, extractor_spec, handler, arrow_value_type)

    expected = spark_arrow_schema(df.sparkSession, schema)

    if df.isStreaming and not partition_time:
        schema = StructType([f for f in schema.fields if f.name != "partition_time"])
        expected = spark_arrow_schema(df.sparkSession, schema)
        return stamp_stream_per_record(columns, new_stamper, schema, expected, observation)
    if df.isStreaming:
        return stamp_stream(columns, new_stamper, schema, expected, observation)
    if not partition_time:
        return stamp(
            df,
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            timestamp_extractor=timestamp_extractor,
            deserialization_exception_handler=deserialization_exception_handler,
            value_schema=value_schema,
            strategy=strategy,
            observe=observe,
        ).drop("partition_time")

    if observation is not None:
        schema = StructType([*schema.fields, *(StructField(c, LongType()) for c in DROP_COLUMNS)])
        expected = with_drop_columns(expected)

    def stamped(
        stamper: Any, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[tuple[pa.RecordBatch, tuple[int, ...]]]:
        """Each batch's output with the drops stamping it caused."""
        before = drop_counts(stamper.dropped_records())
        for batch in batches:
            out = stamper.stamp(batch)
            after = drop_counts(stamper.dropped_records()) if observation is not None else before
            yield out, tuple(a - b for a, b in zip(after, before, strict=True))
            before = after

    def outputs(stamper: Any, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if observation is None:
            for out, _ in stamped(stamper, batches):
                if out.num_rows:
                    yield conform(out, expected)
        else:
            for out in counted(stamped(stamper, batches), expected):
                yield conform(out, expected)

    if strategy == "group":

        def stamp_group(table: pa.Table) -> pa.Table:
            batches = table.sort_by("offset").to_batches()
            return pa.Table.from_batches(list(outputs(new_stamper(), batches)), schema=expected)

        with quiet_pandas3_warning():
            grouped = columns.groupBy("topic", "partition").applyInArrow(stamp_group, schema)
        return grouped if observation is None else observe_summary_rows(grouped, observation)

    if strategy == "sort":
        partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or "200")
        columns = columns.repartition(partitions, "topic", "partition").sortWithinPartitions(
            "topic", "partition", "offset"
        )

    def stamp_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return outputs(new_stamper(), batches)

    with quiet_pandas3_warning():
        mapped = columns.mapInArrow(stamp_batches, schema)
    return mapped if observation is None else observe_summary_rows(mapped, observation)
