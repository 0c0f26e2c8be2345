"""Type stubs for the Rust extension module ``streamstate._core``."""

import os
import pathlib
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, final

import pyarrow as pa
from confluent_kafka import KafkaError, Message

__all__ = [
    "ChangelogFetcher",
    "ConsumerRecord",
    "InMemoryKeyValueStore",
    "KeyValueIterator",
    "NativeDeserializer",
    "NativeExtractor",
    "NativeSerializer",
    "PartitionGroup",
    "PartitionRestore",
    "PersistentKeyValueStore",
    "RecordQueue",
    "RestoredBatch",
    "StampedRecord",
    "Stamper",
    "StreamsGroupMember",
    "UntrackedPairs",
    "__version__",
    "_panic_for_test",
    "build_profile",
    "decode_column",
    "decode_kafka_batch",
    "encode_window_counts",
    "process_next",
    "split_by_partition",
    "timestamp_type_id_from_confluent",
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

def split_by_partition(
    messages: Iterable[Message[Any, Any]],
) -> tuple[
    dict[tuple[str, int], list[Message[Any, Any]]],
    list[tuple[KafkaError, str | None, int | None, int | None]],
]:
    """Splits what one ``Consumer.consume()`` call returned, reading each message once.

    Returns ``({(topic, partition): [message, ...]}, [(error, topic, partition, offset), ...])``:
    each partition's records in poll order (partitions in the order they first appear; a record
    without a topic or partition is left out), and the messages carrying an error, in poll
    order, with their topic, partition and offset. Nothing is classified here
    (``streamstate.clients.poll`` does that).
    """

def _panic_for_test(message: str) -> None:
    """Panics inside Rust on purpose; raises ``StreamsError``."""

def timestamp_type_id_from_confluent(kind: int) -> int:
    """Kafka's timestamp-type id (-1 none, 0 create time, 1 log-append time) of
    confluent-kafka's number for it (0, 1, 2)."""

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
    @property
    def name(self) -> str: ...
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
    def next_record(self) -> tuple[StampedRecord, RecordQueue] | None:
        """The head record with the lowest timestamp (ties: the earlier partition) and its
        queue, which is the very object given for that partition (hashable by identity)."""
    def next_record_indexed(self) -> tuple[StampedRecord, int] | None:
        """Like ``next_record``, with the index of the record's partition in ``partitions()``
        instead of its queue: a caller that keeps per-partition state in a list (or has the
        ``TopicPartition``s in that order) learns the partition without building one."""
    def next_run(self, max_records: int) -> tuple[int, int] | None:
        """``(index, n)``: the run ``next_record`` would hand out next, ``n`` (1 to
        ``max(max_records, 1)``) records in a row from the queue at ``index`` in
        ``partitions()``, up to where it would switch queues (ties included) if nothing is
        added meanwhile; ``None`` when every queue is empty. Changes nothing."""
    def peek(self, index: int, n: int) -> list[StampedRecord]:
        """The first ``n`` records of the queue at ``index``, without removing them."""
    def advance(self, index: int, n: int) -> int:
        """Removes the first ``n`` records of the queue at ``index``, advancing stream time
        past each, as ``n`` calls of ``next_record`` would; returns how many it removed."""
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
    def last_offset(self, topic: str, partition: int) -> int | None: ...
    def resume(
        self,
        topic: str,
        partition: int,
        partition_time: int,
        last_offset: int | None = None,
        *,
        deserialization_error: int = 0,
        negative_timestamp: int = 0,
    ) -> None:
        """Continues ``(topic, partition)`` from a carried partition time, last offset and drop
        counts (Spark's streaming ``stamp`` keeps them in its state store)."""
    def dropped_records(self) -> dict[tuple[str, int], dict[str, int]]: ...

# --- stores and restoration (streamstate.stores) ---

@final
class KeyValueIterator:
    """``(key, value)`` pairs of a store in ascending key order, fetched a page at a time."""

    def __iter__(self) -> KeyValueIterator: ...
    def __next__(self) -> tuple[bytes, bytes]: ...

@final
class InMemoryKeyValueStore:
    """A key-value store in memory (an ordered map); its contents go when it is closed."""

    def __new__(cls, name: str) -> InMemoryKeyValueStore: ...
    @property
    def name(self) -> str: ...
    @property
    def persistent(self) -> bool: ...
    def is_open(self) -> bool: ...
    def get(self, key: bytes) -> bytes | None: ...
    def put(self, key: bytes, value: bytes | None) -> None: ...
    def put_all(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> None: ...
    def delete(self, key: bytes) -> bytes | None: ...
    def drop_range(self, from_key: bytes, to_key: bytes) -> None: ...
    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator: ...
    def all(self) -> KeyValueIterator: ...
    def approximate_num_entries(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> InMemoryKeyValueStore: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

@final
class PersistentKeyValueStore:
    """A key-value store on disk (fjall) in directory ``path``; ``flush`` makes writes durable."""

    def __new__(
        cls, name: str, path: str | os.PathLike[str], *, level_base_bytes: int | None = None
    ) -> PersistentKeyValueStore: ...
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def persistent(self) -> bool: ...
    def is_open(self) -> bool: ...
    def get(self, key: bytes) -> bytes | None: ...
    def put(self, key: bytes, value: bytes | None) -> None: ...
    def put_all(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> None: ...
    def delete(self, key: bytes) -> bytes | None: ...
    def drop_range(self, from_key: bytes, to_key: bytes) -> None: ...
    def range(self, from_key: bytes, to_key: bytes) -> KeyValueIterator: ...
    def all(self) -> KeyValueIterator: ...
    def approximate_num_entries(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> PersistentKeyValueStore: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

@final
class RestoredBatch:
    """What one ``process_next`` step did (see ``streamstate.stores``)."""

    def __new__(
        cls, next_offset: int, last_restored_offset: int, num_restored: int
    ) -> RestoredBatch: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def last_restored_offset(self) -> int: ...
    @property
    def num_restored(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def process_next(
    store: InMemoryKeyValueStore | PersistentKeyValueStore,
    records: Iterable[Any],
    end_offset: int,
) -> RestoredBatch:
    """Applies the changelog records below ``end_offset`` in one atomic write batch.

    ``records``: messages or records of one partition in offset order, or a
    ``pyarrow.RecordBatch`` with ``key``, ``value`` and ``offset`` columns (Spark's Kafka
    source schema).
    """

@final
class ChangelogFetcher:
    """Reads changelog partitions with librdkafka and applies them to their stores in Rust,
    on up to ``parallelism`` consumers and threads; called like a confluent-kafka restore
    consumer, plus ``restore`` in place of poll-then-apply (see ``streamstate.changelog``)."""

    def __new__(
        cls, config: Mapping[str, Any], parallelism: int | None = None
    ) -> ChangelogFetcher: ...
    @staticmethod
    def rejected_setting(config: Mapping[str, Any]) -> tuple[str, str] | None: ...
    @staticmethod
    def librdkafka_version() -> str: ...
    @property
    def parallelism(self) -> int: ...
    def get_watermark_offsets(
        self, partition: Any, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]: ...
    def incremental_assign(self, partitions: Iterable[Any]) -> None: ...
    def incremental_unassign(self, partitions: Iterable[Any]) -> None: ...
    def pause(self, partitions: Iterable[Any]) -> None: ...
    def resume(self, partitions: Iterable[Any]) -> None: ...
    def assignment(self) -> list[Any]: ...
    def position(self, partitions: Iterable[Any]) -> list[Any]: ...
    def memberid(self) -> None: ...
    def restore(
        self,
        targets: Iterable[
            tuple[str, int, InMemoryKeyValueStore | PersistentKeyValueStore, int, int]
        ],
        timeout: float,
        max_records: int = 1000000,
    ) -> list[PartitionRestore]: ...
    def take_events(self) -> list[str]: ...
    def close(self) -> None: ...

@final
class PartitionRestore:
    """What one ``ChangelogFetcher.restore`` call did for one partition."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def num_restored(self) -> int: ...
    @property
    def last_restored_offset(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def eof(self) -> bool: ...
    @property
    def invalid_offset(self) -> tuple[int, str] | None: ...
    @property
    def error(self) -> Any: ...
    @property
    def error_offset(self) -> int | None: ...

# StreamsGroupMember: the Streams rebalance protocol's member (KIP-1071), in streams_group.rs.
_TopicInfoArg = tuple[str, int, int, list[tuple[str, str]]]
_SubtopologyArg = tuple[
    str,
    list[str],
    list[str],
    list[_TopicInfoArg],
    list[str],
    list[_TopicInfoArg],
    list[tuple[list[int], list[int], list[int]]],
]
_TaskList = list[tuple[str, int]]
_TasksTuple = tuple[_TaskList, _TaskList, _TaskList]

@final
class StreamsGroupMember:
    def __new__(
        cls,
        bootstrap_servers: str,
        group_id: str,
        process_id: str,
        topology_epoch: int,
        subtopologies: list[_SubtopologyArg],
        *,
        client_id: str = ...,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 300000,
        user_endpoint: tuple[str, int] | None = None,
        client_tags: list[tuple[str, str]] = ...,
        request_timeout_ms: int = 30000,
        security_protocol: str = ...,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_key_password: str | None = None,
        ssl_verify_hostname: bool = True,
    ) -> StreamsGroupMember: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def heartbeat_version(self) -> int | None: ...
    def heartbeat(
        self, active: _TaskList, standby: _TaskList, warmup: _TaskList
    ) -> tuple[
        int,
        _TasksTuple,
        _TasksTuple,
        _TasksTuple,
        bool,
        list[tuple[str, str]],
        int,
        bool,
        str | None,
    ]: ...
    def set_task_offsets(
        self, offsets: list[tuple[str, int, int]], end_offsets: list[tuple[str, int, int]]
    ) -> None: ...
    def commit_offsets(
        self, offsets: list[tuple[str, int, int, str | None]]
    ) -> list[tuple[str, int, int]]: ...
    def committed_offsets(
        self, partitions: list[tuple[str, int]]
    ) -> list[tuple[str, int, int, str | None, int]]: ...
    def leave(self) -> None: ...
    def endpoints(
        self,
    ) -> list[tuple[tuple[str, int], list[tuple[str, list[int]]], list[tuple[str, list[int]]]]]: ...
    def describe(
        self,
    ) -> tuple[
        str,
        int,
        int,
        int | None,
        list[tuple[str, int, str, tuple[str, int] | None, _TasksTuple, _TasksTuple]],
    ]: ...
    def request_shutdown(self) -> None: ...
    def _set_member_epoch_for_test(self, epoch: int) -> None: ...

def encode_window_counts(
    items: list[Any], interval: int, live_segment: int
) -> tuple[list[tuple[bytes, bytes]], list[int], list[tuple[bytes, bytes, int]], list[int]] | None:
    """The writes of a built-in windowed count's record-cache flush of ``items``."""

@final
class UntrackedPairs:
    """Makes two-item instances of a tuple subclass without an instance dict (a
    ``NamedTuple``), not tracked by the cyclic garbage collector when both items are an
    exact ``int``, ``float``, ``str``, ``bytes``, a ``bool`` or ``None``
    (``rust/py/src/untracked.rs``)."""

    def __new__(cls, pair_type: type[Any]) -> UntrackedPairs:
        """For ``pair_type``; ``TypeError`` unless a tuple subclass whose instances have no
        dict."""
    def make(self, first: Any, second: Any) -> Any:
        """``cls((first, second))``, untracked when both items are atomic."""
