"""``StreamTask``: one partition's worth of processing, with its stores and commits.

Task ``p`` owns partition ``p`` of every source topic (co-partitioning), one
:class:`~streamstate.PartitionGroup` over them that hands records out in timestamp order, and
one instance of every task store, logged to partition ``p`` of the store's changelog.

Commit (Kafka Streams' at-least-once order): flush the producer (sink and changelog records are
acknowledged; their offsets are known), flush the stores, write the ``.checkpoint`` with the
changelog offsets, then commit the consumed offsets with the partition time in the metadata.
A crash anywhere re-processes from the last committed offsets over stores that are at or behind
the checkpoint, never ahead of what the changelog holds.
"""

from __future__ import annotations

import base64
import logging
import struct
import time
from typing import Any

from confluent_kafka import Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.config import StreamsConfig
from streamstate.app.context import ChangeLoggingKeyValueStore, ProcessorContext, ReadOnlyStoreView
from streamstate.app.topology import Topology
from streamstate.errors import CorruptCheckpointError, StreamsError
from streamstate.queue import PartitionGroup, RecordQueue
from streamstate.records import NOT_KNOWN, TopicPartition
from streamstate.serde import BytesDeserializer
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.stores import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    holds_data,
    wipe_store,
)

__all__ = ["StreamTask", "decode_partition_time", "encode_partition_time"]

_log = logging.getLogger("streamstate.app")
_METADATA_VERSION = 1


def encode_partition_time(partition_time: int) -> str:
    """Kafka Streams' commit metadata: base64 of a version byte and the partition time."""
    return base64.b64encode(struct.pack(">bq", _METADATA_VERSION, partition_time)).decode()


def decode_partition_time(metadata: str | None) -> int:
    """The partition time in commit metadata, ``NOT_KNOWN`` when absent or unreadable."""
    if not metadata:
        return NOT_KNOWN
    try:
        version, value = struct.unpack(">bq", base64.b64decode(metadata)[:9])
    except (ValueError, struct.error):
        return NOT_KNOWN
    return int(value) if version == _METADATA_VERSION else NOT_KNOWN


class StreamTask:
    """The processing of partition ``task_id`` of every source topic; see the module doc."""

    def __init__(
        self,
        task_id: int,
        topology: Topology,
        config: StreamsConfig,
        producer: Producer,
        global_stores: dict[str, Any],
    ) -> None:
        """Opens the task's stores; nothing is read or restored yet."""
        self.task_id = task_id
        self._config = config
        self._producer = producer
        node = topology.node()
        self._process = node.function
        self.partitions = [TopicPartition(t, task_id) for t in node.sources]
        key_de = node.key_deserializer or BytesDeserializer()
        value_de = node.value_deserializer or BytesDeserializer()
        queues = {
            tp: RecordQueue(
                tp.topic,
                tp.partition,
                key_deserializer=key_de,
                value_deserializer=value_de,
                timestamp_extractor=config.default_timestamp_extractor,
                deserialization_exception_handler=config.default_deserialization_exception_handler,
            )
            for tp in self.partitions
        }
        self.group = PartitionGroup(queues)
        self.directory = config.app_dir() / str(task_id)
        self.checkpoint_file = OffsetCheckpoint(self.directory / ".checkpoint")
        # Changelog offsets acknowledged by the broker: the checkpoint's content.
        self.changelog_offsets: dict[TopicPartition, int] = {}
        self.stores: dict[str, Any] = {}
        self.changelogs: dict[str, TopicPartition] = {}
        self._send_error: str | None = None
        declared: dict[str, Any] = {}
        for spec in topology.stores.values():
            store: InMemoryKeyValueStore | PersistentKeyValueStore
            if spec.persistent:
                self.directory.mkdir(parents=True, exist_ok=True)
                store = PersistentKeyValueStore(spec.name, self.directory / spec.name)
            else:
                store = InMemoryKeyValueStore(spec.name)
            self.stores[spec.name] = store
            if spec.logged:
                changelog = TopicPartition(spec.changelog_topic(config.application_id), task_id)
                self.changelogs[spec.name] = changelog
                wrapped: Any = ChangeLoggingKeyValueStore(
                    store, producer, changelog.topic, task_id, self._on_changelog_delivery
                )
            else:
                wrapped = store
            if spec.name in node.stores:
                declared[spec.name] = wrapped
        for name in node.stores:
            if name in global_stores:
                declared[name] = ReadOnlyStoreView(global_stores[name])
        self._changelog_by_topic = {tp.topic: tp for tp in self.changelogs.values()}
        self.context = ProcessorContext(task_id, declared, frozenset(node.sinks), producer)
        # Offsets consumed (next offset to read) since the last commit, per source partition's
        # queue (what next_record hands back with each record).
        self.consumed: dict[RecordQueue, int] = {}
        self._idle_since: float | None = None
        self.restoring = False

    # -- restoration --------------------------------------------------------------------------

    def restore_start_offsets(self) -> dict[str, int | None]:
        """Per logged store, the checkpointed offset to restore past, or ``None`` to restore
        from the beginning, having wiped any store whose contents the checkpoint does not vouch
        for: with a corrupt ``.checkpoint`` (WARN, then every store), and a persistent store
        holding data without a checkpointed offset. In-memory stores always start empty."""
        try:
            offsets = self.checkpoint_file.read()
        except CorruptCheckpointError as exc:
            _log.warning(
                "%s; task %d wipes its stores and restores them from the beginning",
                exc,
                self.task_id,
            )
            self.checkpoint_file.delete()
            offsets = {}
            for store in self.stores.values():
                wipe_store(store)
        starts: dict[str, int | None] = {}
        for name, tp in self.changelogs.items():
            store = self.stores[name]
            offset = offsets.get(tp) if store.persistent else None
            if offset is None and holds_data(store):
                wipe_store(store)
            if offset is not None:
                self.changelog_offsets[tp] = offset
            starts[name] = offset
        return starts

    # -- processing ---------------------------------------------------------------------------

    def add_records(self, tp: TopicPartition, messages: list[Message[Any, Any]]) -> None:
        """Buffers polled records of one source partition (deserialized and stamped in Rust)."""
        self.group.add_raw_records(tp, messages)

    def set_partition_time(self, tp: TopicPartition, partition_time: int) -> None:
        """Restores the partition time committed with the offsets."""
        if partition_time != NOT_KNOWN:
            self.group.set_partition_time(tp, partition_time)

    def ready(self) -> bool:
        """Whether the task may process now: every partition has records, or those without
        have waited ``max.task.idle.ms`` (Kafka Streams' enforced processing)."""
        if self.group.num_buffered() == 0:
            self._idle_since = None
            return False
        if len(self.partitions) == 1 or self.group.all_partitions_buffered():
            self._idle_since = None
            return True
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        return (now - self._idle_since) * 1000 >= self._config.max_task_idle_ms

    def process(self, max_records: int) -> int:
        """Processes up to ``max_records`` buffered records in timestamp order."""
        done = 0
        ctx = self.context
        while done < max_records and self.ready():
            picked = self.group.next_record()
            if picked is None:
                break
            record, queue = picked
            ctx.topic, ctx.partition = record.topic, record.partition
            ctx.offset, ctx.timestamp = record.offset, record.timestamp
            try:
                self._process(ctx, record)
            except StreamsError:
                raise
            except Exception as exc:
                raise StreamsError(
                    f"the processor failed: {type(exc).__name__}: {exc}",
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                ) from exc
            self.consumed[queue] = record.offset + 1
            done += 1
        if self._send_error is not None:
            raise StreamsError(f"task {self.task_id}: {self._send_error}")
        return done

    def _on_changelog_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._send_error = (
                f"a changelog record to {msg.topic()} partition {msg.partition()} failed: {err}"
            )
            return
        # One delivery report per store write: look the partition up instead of building it.
        tp = self._changelog_by_topic[msg.topic()]
        offset = msg.offset()
        if offset > self.changelog_offsets.get(tp, -1):
            self.changelog_offsets[tp] = offset

    # -- commit -------------------------------------------------------------------------------

    def prepare_commit(self) -> list[KafkaTopicPartition]:
        """Flushes stores and writes the checkpoint (after the caller flushed the producer);
        returns the offsets to commit, with the partition time as metadata."""
        if self._send_error is not None:
            raise StreamsError(f"task {self.task_id}: {self._send_error}")
        for store in self.stores.values():
            store.flush()
        persistent = {
            tp: offset
            for name, tp in self.changelogs.items()
            if self.stores[name].persistent
            and (offset := self.changelog_offsets.get(tp)) is not None
        }
        if persistent:
            self.checkpoint_file.write(persistent)
        offsets = []
        for queue, offset in self.consumed.items():
            metadata = encode_partition_time(queue.partition_time)
            tp = KafkaTopicPartition(queue.topic, queue.partition, offset, metadata=metadata)
            offsets.append(tp)
        return offsets

    def close(self) -> None:
        """Closes the stores (persistent ones flush on close)."""
        for store in self.stores.values():
            try:
                store.close()
            except Exception:  # closing must go on for the others
                _log.exception("task %d: closing store %r failed", self.task_id, store.name)
