"""Type stubs for the Rust extension module ``streamstate._core``."""

from collections.abc import Mapping
from typing import Any, final

import pyarrow as pa

__all__ = [
    "ConsumerRecord",
    "NativeDeserializer",
    "NativeExtractor",
    "NativeSerializer",
    "PartitionGroup",
    "RecordQueue",
    "StampedRecord",
    "Stamper",
    "__version__",
    "_panic_for_test",
    "build_profile",
    "decode_column",
    "decode_kafka_batch",
]
__version__: str

def build_profile() -> str:
    """``"release"`` or ``"debug"``: how the extension was compiled."""

def decode_column(array: Any, deserializer: str) -> pa.Array:
    """Deserializes a column of raw Kafka bytes into a typed pyarrow array.

    ``array`` is anything exporting the Arrow PyCapsule interface with a binary,
    large_binary or binary_view type. ``deserializer`` is one of ``bytes``, ``string``,
    ``short``, ``integer``, ``long``, ``float``, ``double``, ``uuid``.
    """

def decode_kafka_batch(batch: Any, key: str, value: str) -> pa.RecordBatch:
    """Deserializes ``key`` and ``value`` of a batch in Spark's Kafka source schema.

    Returns a batch with ``topic``, ``partition``, ``offset``, ``timestamp`` (epoch ms),
    ``key`` and ``value``; a malformed record raises ``DeserializationError`` naming its topic,
    partition and offset.
    """

def _panic_for_test(message: str) -> None:
    """Panics inside Rust on purpose; raises ``StreamsError``."""

@final
class ConsumerRecord:
    """A raw Kafka record; ``key``/``value`` are ``bytes`` or ``None``."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def headers(self) -> Any: ...
    @property
    def timestamp_type(self) -> Any: ...
    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: Any,
        value: Any,
        headers: Any = None,
        timestamp_type: int | None = None,
    ) -> ConsumerRecord: ...

@final
class StampedRecord:
    """A deserialized record with its extracted timestamp."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def headers(self) -> Any: ...
    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: Any,
        value: Any,
        headers: Any = None,
    ) -> StampedRecord: ...

@final
class NativeDeserializer:
    """A built-in deserializer running in Rust, built from a spec tuple."""

    def __new__(cls, spec: tuple[Any, ...]) -> NativeDeserializer: ...
    def deserialize(self, topic: str | None, data: bytes | None) -> Any: ...

@final
class NativeSerializer:
    """A built-in serializer running in Rust, built from a spec tuple."""

    def __new__(cls, spec: tuple[Any, ...]) -> NativeSerializer: ...
    def serialize(self, topic: str | None, obj: Any) -> bytes | None: ...

@final
class NativeExtractor:
    """A built-in timestamp extractor running in Rust, built from a spec tuple."""

    def __new__(cls, spec: tuple[Any, ...]) -> NativeExtractor: ...
    def extract(self, record: Any, partition_time: int) -> int: ...

@final
class RecordQueue:
    """Kafka Streams' per-partition FIFO of stamped records."""

    def __new__(
        cls,
        topic: str,
        partition: int,
        *,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
        timestamp_extractor: Any = None,
        deserialization_exception_handler: Any = None,
    ) -> RecordQueue: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    def add_raw_records(self, records: Any) -> int: ...
    def poll(self) -> StampedRecord | None: ...
    def poll_batch(self, max_records: int | None = None) -> list[StampedRecord]: ...
    @property
    def head_record(self) -> StampedRecord | None: ...
    @property
    def head_timestamp(self) -> int: ...
    @property
    def head_offset(self) -> int | None: ...
    @property
    def partition_time(self) -> int: ...
    def set_partition_time(self, t: int) -> None: ...
    def size(self) -> int: ...
    def __len__(self) -> int: ...
    def is_empty(self) -> bool: ...
    def clear(self) -> None: ...
    @property
    def dropped_records(self) -> dict[str, int]: ...

@final
class PartitionGroup:
    """Chooses the next record across a task's queues by head timestamp."""

    def __new__(cls, queues: Mapping[Any, RecordQueue]) -> PartitionGroup: ...
    def add_raw_records(self, tp: Any, records: Any) -> int: ...
    def next_record(self) -> tuple[StampedRecord, RecordQueue] | None: ...
    @property
    def stream_time(self) -> int: ...
    def num_buffered(self) -> int: ...
    def all_partitions_buffered(self) -> bool: ...
    def partition_time(self, tp: Any) -> int: ...
    def set_partition_time(self, tp: Any, t: int) -> None: ...
    def queue(self, tp: Any) -> RecordQueue: ...
    def partitions(self) -> list[Any]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

@final
class Stamper:
    """Kafka Streams' record-queue admission over Kafka-source Arrow batches (``stamp``).

    Built from the ``_spec`` tuples of built-in serdes/extractors; ``handler`` is ``"fail"`` or
    ``"continue"``; ``value_type`` (a ``pyarrow.DataType``) makes JSON/Avro values that type.
    Partition time carries across ``stamp`` calls.
    """

    def __new__(
        cls,
        key_spec: tuple[Any, ...],
        value_spec: tuple[Any, ...],
        extractor_spec: tuple[Any, ...],
        handler: str = "fail",
        value_type: Any = None,
    ) -> Stamper: ...
    def stamp(self, batch: Any) -> pa.RecordBatch:
        """Admitted records of ``batch``: topic, partition, offset, timestamp, key, value,
        partition_time; per partition in offset order."""
    @property
    def schema(self) -> pa.Schema: ...
    def partition_time(self, topic: str, partition: int) -> int: ...
    def dropped_records(self) -> dict[tuple[str, int], dict[str, int]]: ...
