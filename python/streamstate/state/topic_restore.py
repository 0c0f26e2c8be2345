"""Restoring a whole changelog topic into a state directory: what ``streamstate restore`` runs.

Each partition ``p`` of the topic becomes a :class:`~streamstate.PersistentKeyValueStore` in
``STATE_DIR/NAME/p/`` with its ``.checkpoint`` file next to the database (the same file format
and meaning as Kafka Streams': the offset of the last record applied). One
:class:`~streamstate.StoreChangelogReader` restores every requested partition with one
restore consumer, so the record semantics are the reader's: a ``None`` value deletes its key,
null keys are skipped, transaction markers and compaction gaps never stall it, and an
out-of-range position wipes the store and restores it from the beginning.

A second run resumes past the checkpoint. Whenever the store's contents cannot be trusted to
match a checkpoint, the store is wiped and restored from the beginning of the changelog, with a
WARNING naming the topic and partition: a corrupt ``.checkpoint``, a checkpoint written for
another changelog, or a store that holds data but has no checkpoint (a run killed before its
first checkpoint). Replaying records already applied is harmless (the changelog is replayed in
order, so the last write to each key still wins), which is why a checkpoint is only ever written
after the store was flushed: a crash at any moment leaves a checkpoint at or behind the store.

:func:`store_directory` and :func:`read_checkpoint` are shared with the Spark runner
(:func:`streamstate.spark.restore_changelogs`), which writes the same layout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from streamstate._core import ChangelogFetcher
from streamstate.clients.config import admin_config, connection_settings, restore_consumer_config
from streamstate.clients.metadata import MetadataClient
from streamstate.clients.restore_consumer import RestoreConsumer, open_restore_consumer
from streamstate.errors import AuthenticationError, CorruptCheckpointError, StreamsError
from streamstate.records import TopicPartition
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import PersistentKeyValueStore, holds_data, wipe_store

__all__ = [
    "CHECKPOINT_FILE",
    "METADATA_TIMEOUT_S",
    "PartitionRestoreResult",
    "read_checkpoint",
    "restore_topic",
    "select_partitions",
    "store_directory",
    "topic_partitions",
]

# Named as before the module moved into streamstate.state: logging is configured by this name.
_log = logging.getLogger("streamstate.topic_restore")

CHECKPOINT_FILE = ".checkpoint"
METADATA_TIMEOUT_S = 30.0
"""How long a restore waits for the topic's metadata before it fails naming the servers."""
# Records a restore consumer poll may return at once: large batches amortize the Python side
# of each write batch (Kafka Streams' 1,000 is the reader's minimum).
_MAX_POLL_RECORDS = 10_000
# The same for the Rust fetch, whose records never become Python objects.
_MAX_FETCH_RECORDS = 1_000_000


@dataclass(frozen=True)
class PartitionRestoreResult:
    """What the restoration of one partition did, as ``streamstate restore --json`` reports it.

    ``start_offset`` is where restoring started (the checkpoint + 1, or the log start; equal to
    ``end_offset`` when there was nothing to restore), ``end_offset`` the end offset read at the
    start (exclusive), ``restored`` how many records were applied, and ``seconds`` how long the
    partition took from its start to its end.
    """

    partition: int
    start_offset: int
    end_offset: int
    restored: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"partition", "start_offset", "end_offset", "restored", "seconds"}``."""
        return asdict(self)


def store_directory(state_dir: str | Path, store_name: str, partition: int) -> Path:
    """``state_dir/store_name/partition``: where the store of that partition lives."""
    if not store_name or "/" in store_name or store_name in (".", ".."):
        raise ValueError(f"a store name must be a plain directory name, not {store_name!r}")
    return Path(state_dir) / store_name / str(partition)


def topic_partitions(
    bootstrap_servers: str,
    topic: str,
    timeout_s: float | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> list[int]:
    """The partition numbers of ``topic``, from the cluster's metadata; raises
    :class:`~streamstate.errors.StreamsError` naming the topic when it does not exist.
    ``client_config``'s connection settings (``security.protocol``, ``sasl.*``, ``ssl.*``)
    are used to reach the cluster. ``timeout_s`` defaults to :data:`METADATA_TIMEOUT_S`."""
    if timeout_s is None:
        timeout_s = METADATA_TIMEOUT_S
    settings = connection_settings(client_config or {})
    # A metadata request naming a topic lets a broker with auto.create.topics.enable (Kafka's
    # default) create it: a restore must never create topics, so creation is disallowed here.
    settings["allow.auto.create.topics"] = False
    client = MetadataClient(admin_config(bootstrap_servers, log_level=0, **settings))
    try:
        metadata = client.list_topics(timeout_s, topic=topic)
    except AuthenticationError as exc:
        # The same typed refusal, now naming the topic it was for.
        raise type(exc)(
            f"could not read the metadata of topic {topic!r}: {exc.reason}", topic=topic
        ) from exc
    except KafkaException as exc:
        raise StreamsError(
            f"could not read the metadata of topic {topic!r} from {bootstrap_servers}: "
            f"{exc.args[0] if exc.args else exc}",
            topic=topic,
        ) from exc
    described = metadata.topics.get(topic)
    if described is None or described.error is not None or not described.partitions:
        reason = described.error.str() if described is not None and described.error else ""
        raise StreamsError(
            f"topic {topic!r} does not exist at {bootstrap_servers}"
            + (f" ({reason})" if reason else ""),
            topic=topic,
        )
    return sorted(described.partitions)


def select_partitions(
    bootstrap_servers: str,
    topic: str,
    partitions: Iterable[int] | None,
    client_config: Mapping[str, Any] | None = None,
) -> list[int]:
    """``partitions`` (default: all of ``topic``'s), sorted and checked against the topic;
    raises :class:`~streamstate.errors.StreamsError` naming the topic and the missing ones.
    ``client_config``'s connection settings are used to reach the cluster."""
    known = topic_partitions(bootstrap_servers, topic, client_config=client_config)
    wanted = sorted(set(known if partitions is None else partitions))
    missing = [p for p in wanted if p not in known]
    if missing:
        raise StreamsError(
            f"topic {topic!r} has partitions {_ranges(known)}, not {_ranges(missing)}",
            topic=topic,
        )
    return wanted


def read_checkpoint(
    store: PersistentKeyValueStore, directory: Path, tp: TopicPartition
) -> int | None:
    """The checkpointed offset of ``tp`` for the store in ``directory``, or ``None`` to restore
    from the beginning, having made the store safe for that: wiped (with a WARNING) when its
    checkpoint is corrupt, names another changelog, or is missing while the store holds data."""
    checkpoint = OffsetCheckpoint(directory / CHECKPOINT_FILE)
    where = f"changelog topic {tp.topic!r} partition {tp.partition}"
    try:
        offsets = checkpoint.read()
    except CorruptCheckpointError as exc:
        _log.warning(
            "%s; wiping store %r of %s and restoring it from the beginning", exc, store.name, where
        )
        _wipe(store, checkpoint)
        return None
    offset = offsets.get(tp)
    if offset is None and offsets:
        others = ", ".join(f"{t.topic}-{t.partition}" for t in sorted(offsets, key=_tp_key))
        _log.warning(
            "The checkpoint %s is for %s, not %s; wiping store %r and restoring it from the "
            "beginning",
            checkpoint.path,
            others,
            where,
            store.name,
        )
        _wipe(store, checkpoint)
        return None
    if offset is None and holds_data(store):
        _log.warning(
            "Store %r of %s holds data but has no checkpoint (an earlier restore stopped before "
            "writing one); wiping it and restoring from the beginning",
            store.name,
            where,
        )
        _wipe(store, checkpoint)
    return offset


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def _wipe(store: PersistentKeyValueStore, checkpoint: OffsetCheckpoint) -> None:
    # The store is emptied and flushed before the checkpoint goes: a crash in between leaves
    # the same bad checkpoint, and the next run wipes again.
    wipe_store(store)
    store.flush()
    checkpoint.delete()


class _Timing(StateRestoreListener):
    """Start offsets, counts and durations per partition; forwards to the caller's listener."""

    def __init__(self, downstream: StateRestoreListener | None) -> None:
        self.downstream = downstream
        self.start_offsets: dict[int, int] = {}
        self.restored: dict[int, int] = {}
        self.started_at: dict[int, float] = {}
        self.seconds: dict[int, float] = {}

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        self.start_offsets[tp.partition] = start_offset
        self.started_at.setdefault(tp.partition, time.monotonic())
        if self.downstream is not None:
            self.downstream.on_restore_start(tp, store_name, start_offset, end_offset)

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.restored[tp.partition] = self.restored.get(tp.partition, 0) + num_restored
        if self.downstream is not None:
            self.downstream.on_batch_restored(tp, store_name, batch_end_offset, num_restored)

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        started = self.started_at.get(tp.partition)
        if started is not None:
            self.seconds[tp.partition] = time.monotonic() - started
        if self.downstream is not None:
            self.downstream.on_restore_end(tp, store_name, total_restored)


class _Partition:
    """One partition's store and checkpoint file during a restore."""

    def __init__(self, tp: TopicPartition, store: PersistentKeyValueStore, directory: Path):
        self.tp = tp
        self.store = store
        self.checkpoint = OffsetCheckpoint(directory / CHECKPOINT_FILE)
        self.written: int | None = None

    def save(self, offset: int | None) -> None:
        """Flushes the store, then checkpoints ``offset`` (never ahead of what is durable)."""
        if offset is None or offset == self.written:
            return
        self.store.flush()
        self.checkpoint.write({self.tp: offset})
        self.written = offset

    def forget(self) -> None:
        """Deletes the checkpoint: the reader is about to wipe the store."""
        self.checkpoint.delete()
        self.written = None


def restore_topic(
    bootstrap_servers: str,
    topic: str,
    state_dir: str | Path,
    *,
    store_name: str | None = None,
    partitions: Iterable[int] | None = None,
    eos: bool = False,
    restore_listener: StateRestoreListener | None = None,
    consumer_config: Mapping[str, Any] | None = None,
    checkpoint_interval_s: float = 5.0,
    stall_timeout_s: float = 120.0,
    fetch: str | None = None,
    parallelism: int | None = None,
    max_poll_records: int | None = None,
) -> list[PartitionRestoreResult]:
    """Restores partitions of changelog ``topic`` into ``state_dir/NAME/<partition>/``.

    ``store_name`` (``NAME``) defaults to the topic; ``partitions`` to every partition of the
    topic. ``eos`` reads with ``isolation.level=read_committed`` (records of aborted
    transactions are skipped, and the end is the last stable offset). ``restore_listener``
    receives the reader's callbacks; ``consumer_config`` overrides restore consumer settings
    (:func:`~streamstate.clients.config.restore_consumer_config`). A checkpoint is written every
    ``checkpoint_interval_s`` seconds while restoring and at the end, so an interrupted run
    resumes close to where it stopped. A partition without progress for ``stall_timeout_s``
    raises :class:`~streamstate.errors.ProcessorStateError` naming it. ``fetch`` and
    ``parallelism`` choose the read path
    (:func:`~streamstate.clients.restore_consumer.open_restore_consumer`): by default
    librdkafka driven from Rust, up to one partition per core at once. ``max_poll_records``
    caps the records one poll reads, and so the size of each batch the listener hears of (at
    least 1,000, Kafka's ``max.poll.records`` for a restore consumer; by default 10,000 on
    confluent-kafka and 1,000,000 on the Rust fetch, whose records never become Python objects).

    Returns one :class:`PartitionRestoreResult` per partition, in partition order.
    """
    name = store_name or topic
    if checkpoint_interval_s <= 0:
        raise ValueError(f"checkpoint_interval_s must be > 0, not {checkpoint_interval_s}")
    if max_poll_records is not None and max_poll_records < 1000:
        raise ValueError(f"max_poll_records must be >= 1000, not {max_poll_records}")
    wanted = select_partitions(bootstrap_servers, topic, partitions, consumer_config)

    timing = _Timing(restore_listener)
    opened: list[_Partition] = []
    consumer: RestoreConsumer | None = None
    try:
        checkpoints: dict[int, int | None] = {}
        for p in wanted:
            directory = store_directory(state_dir, name, p)
            directory.mkdir(parents=True, exist_ok=True)
            part = _Partition(
                TopicPartition(topic, p), PersistentKeyValueStore(name, directory), directory
            )
            opened.append(part)
            checkpoints[p] = read_checkpoint(part.store, directory, part.tp)
            part.written = checkpoints[p]

        config = restore_consumer_config(bootstrap_servers, eos=eos, **dict(consumer_config or {}))
        consumer = open_restore_consumer(config, fetch=fetch, parallelism=parallelism)
        if max_poll_records is None:
            # Records of the Rust fetch never become Python objects: its calls may take many
            # (the fetcher writes at most 1 MiB per partition at once either way).
            fetched = isinstance(consumer, ChangelogFetcher)
            max_poll_records = _MAX_FETCH_RECORDS if fetched else _MAX_POLL_RECORDS
        reader = StoreChangelogReader(
            consumer,
            restore_listener=timing,
            eos=eos,
            stall_timeout_s=stall_timeout_s,
            max_poll_records=max_poll_records,
        )
        for part in opened:
            checkpoint = checkpoints[part.tp.partition]
            reader.register(StateRestorer(part.tp, part.store, checkpoint, before_wipe=part.forget))

        last_save = time.monotonic()
        try:
            while len(reader.restore()) < len(opened):
                if time.monotonic() - last_save >= checkpoint_interval_s:
                    _save_all(opened, reader)
                    last_save = time.monotonic()
        finally:
            # Whatever happened, keep what was applied: a later run resumes from it.
            _save_all(opened, reader)

        results = []
        for part in opened:
            p = part.tp.partition
            end = reader.end_offset(part.tp)
            assert end is not None
            position = reader.position(part.tp)
            start = timing.start_offsets.get(p, end if position is None else position)
            results.append(
                PartitionRestoreResult(
                    partition=p,
                    start_offset=start,
                    end_offset=end,
                    restored=timing.restored.get(p, 0),
                    seconds=round(timing.seconds.get(p, 0.0), 3),
                )
            )
        return results
    finally:
        if consumer is not None:
            consumer.close()
        for part in opened:
            part.store.close()


def _save_all(opened: Sequence[_Partition], reader: StoreChangelogReader) -> None:
    offsets = reader.restored_offsets()
    for part in opened:
        part.save(offsets.get(part.tp))


def _ranges(partitions: Sequence[int]) -> str:
    return ",".join(str(p) for p in partitions)
