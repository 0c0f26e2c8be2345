"""What a :class:`~streamstate.StoreChangelogReader` restores, and who hears about it.

A :class:`StateRestorer` pairs one store with one changelog partition and the checkpoint the
store is known to hold; a :class:`StateRestoreListener` (Kafka Streams' interface of the same
name) receives the progress of every restoration the reader drives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streamstate.records import TopicPartition

if TYPE_CHECKING:
    from streamstate.state.stores import InMemoryKeyValueStore, PersistentKeyValueStore

__all__ = ["StateRestoreListener", "StateRestorer"]


class StateRestoreListener:
    """Receives the progress of restorations; subclass it and override what you need.

    Kafka Streams' ``StateRestoreListener``. The reader calls, per changelog partition:
    :meth:`on_restore_start` once when restoration starts, :meth:`on_batch_restored` after each
    batch applied to the store, and :meth:`on_restore_end` once when the store has caught up
    (or :meth:`on_restore_suspended` if the partition is removed before that).
    A partition with nothing to restore (its checkpoint is at the end, or the changelog has never
    held a record) hears :meth:`on_restore_start` (start = end), then :meth:`on_restore_end` with
    0 records, as in Kafka Streams 2.6+. If the store has to be wiped and restored from
    the beginning while restoring (its position fell out of the log), :meth:`on_restore_start`
    is called again with the new start. An exception raised here stops
    :meth:`~streamstate.StoreChangelogReader.restore` as a
    :class:`~streamstate.errors.StreamsError` naming the store and partition.
    """

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        """Restoration of ``store_name`` from ``tp`` starts at ``start_offset`` and will stop at
        ``end_offset`` (exclusive). Does nothing unless overridden."""

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        """``num_restored`` records were applied in one batch, the last of them at
        ``batch_end_offset`` (inclusive). Does nothing unless overridden."""

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        """Restoration of ``store_name`` from ``tp`` is complete; ``total_restored`` records were
        applied since it (last) started. Does nothing unless overridden."""

    def on_restore_suspended(
        self, tp: TopicPartition, store_name: str, total_restored: int
    ) -> None:
        """Restoration of ``store_name`` from ``tp`` stopped before completing, because the
        partition was removed (:meth:`~streamstate.StoreChangelogReader.remove`);
        ``total_restored`` records were applied. Does nothing unless overridden (Kafka Streams
        3.5+, KAFKA-10575)."""


class StateRestorer:
    """One store to restore from one changelog partition.

    ``tp`` is the changelog partition, ``store`` the (open) store to write into, an
    ``InMemoryKeyValueStore`` or a ``PersistentKeyValueStore``, and ``checkpoint`` the offset
    of the last record the store already holds (what its ``.checkpoint`` file says) or ``None``
    to restore from the beginning of the changelog.

    The reader sets ``checkpoint`` to ``None`` when it wipes the store. ``before_wipe``, if
    given, is called just before that: the place to delete the store's ``.checkpoint`` file, so
    that a crash during the wipe or the restoration after it cannot leave a checkpoint that
    claims contents the store no longer has.
    """

    partition: TopicPartition
    store: InMemoryKeyValueStore | PersistentKeyValueStore
    checkpoint: int | None
    before_wipe: Callable[[], None] | None

    def __init__(
        self,
        tp: TopicPartition,
        store: InMemoryKeyValueStore | PersistentKeyValueStore,
        checkpoint: int | None = None,
        *,
        before_wipe: Callable[[], None] | None = None,
    ) -> None:
        """Pairs ``store`` with changelog partition ``tp``; see the class docstring.

        Raises ``ValueError`` for a negative checkpoint or partition and ``TypeError`` for a
        checkpoint that is not an ``int``.
        """
        if checkpoint is not None:
            if isinstance(checkpoint, bool) or not isinstance(checkpoint, int):
                raise TypeError(f"checkpoint must be an int or None, not {checkpoint!r}")
            if checkpoint < 0:
                raise ValueError(
                    f"checkpoint of topic {tp.topic!r} partition {tp.partition} must not be "
                    f"negative (got {checkpoint}); pass None to restore from the beginning"
                )
        if tp.partition < 0:
            raise ValueError(f"changelog partition of topic {tp.topic!r} must be >= 0")
        self.partition = TopicPartition(tp.topic, tp.partition)
        self.store = store
        self.checkpoint = checkpoint
        self.before_wipe = before_wipe

    @property
    def store_name(self) -> str:
        """The store's name."""
        return self.store.name

    @property
    def persistent(self) -> bool:
        """Whether the store is persistent (only those report restored offsets:
        :meth:`~streamstate.StoreChangelogReader.restored_offsets`)."""
        return self.store.persistent

    def __repr__(self) -> str:
        """``StateRestorer(topic-partition, store=name, checkpoint=n)``."""
        tp = self.partition
        return (
            f"StateRestorer({tp.topic}-{tp.partition}, store={self.store_name!r}, "
            f"checkpoint={self.checkpoint})"
        )
