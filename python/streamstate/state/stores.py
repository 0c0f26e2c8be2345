"""Key-value state stores and ``process_next``, the batch step of changelog restoration, in Rust.

Two store kinds, with the same methods; keys and values are ``bytes``, keys ordered by unsigned
byte comparison:

- ``InMemoryKeyValueStore(name)`` — an ordered map; its contents go when it is closed.
- ``PersistentKeyValueStore(name, path, *, level_base_bytes=None)`` — on disk, in directory
  ``path`` (created if missing; the database is ``path/fjall/``, and the directory also has room
  for a ``.checkpoint``). ``level_base_bytes`` (at least 4 MiB; fjall's 256 MiB by default) is
  the size of the LSM tree's level 1, set when the store is created and kept with it: a smaller
  one keeps each merge small as the store grows (``docs/api.md``).
  The engine is fjall, an LSM tree (``docs/stores.md`` has the measurements that chose it). As
  in Kafka Streams, whose RocksDB stores do not sync their write-ahead log, writes are atomic
  but not synced: ``flush()`` makes everything so far durable (``close()`` flushes). A crash
  loses at most the writes since the last flush, and never part of a batch. One directory is
  open in one store object at a time: a second one raises ``ProcessorStateError`` until the
  first is closed. Keys may be empty but at most 65,534 bytes long.

Methods: ``get(key)``, ``put(key, value)`` (a ``None`` value deletes, as Kafka Streams' ``put``
does), ``put_all(pairs)`` (atomic), ``delete(key)`` (returns the old value),
``range(from_key, to_key)`` (inclusive at both ends, ascending; an inverted range is empty),
``all()``, ``approximate_num_entries()``, ``flush()``, ``close()``, ``is_open()``, and the
``name`` and ``persistent`` properties. Iterators fetch a page of entries at a time, so iterating
a huge store holds little memory; they see writes made after they started to keys they have not
reached yet. A key or value that is not ``bytes`` raises ``TypeError``; any operation on a closed
store raises ``ProcessorStateError`` naming the store. Stores are context managers that close on
exit.

``process_next(store, records, end_offset) -> RestoredBatch`` takes the records polled from one
changelog partition, in offset order: a list of ``confluent_kafka.Message`` or
``ConsumerRecord`` (or any objects with ``offset``, ``key`` and ``value`` attributes), or a
``pyarrow.RecordBatch`` with binary ``key`` and ``value`` and int64 ``offset`` columns (Spark's
Kafka source schema; ``topic`` and ``partition`` columns, if present, name the records in errors
and warnings), whose keys and values are then copied without the GIL. It applies
every record with ``offset < end_offset`` and a key, in ONE atomic write batch with the GIL
released (a ``None`` value deletes the key), and stops at the first record with
``offset >= end_offset``, which is not applied. A record with a ``None`` key is consumed but not
applied, and logged at WARNING on the ``streamstate.changelog`` logger with its topic, partition
and offset. The ``RestoredBatch`` says:

- ``next_offset``: the offset of that first record at or past the end, else the last record's
  offset + 1. With no records at all it is ``-1``: nothing was read, so the consumer's position is
  the answer (Kafka Streams' ``processNext`` asks ``restoreConsumer.position`` in that case).
- ``last_restored_offset``: the offset of the last record applied, ``-1`` when none was (null-key
  records are never applied, so they never count here).
- ``num_restored``: how many records were applied — puts and deletes alike; not null-key records
  and not records at or past the end. (Kafka Streams 2.x passes the whole polled count to
  ``onBatchRestored``; 3.x passes the applied count, which is this number.)

Offsets that do not strictly increase raise ``ValueError`` (records of different partitions
mixed) and nothing is applied; a message carrying an error raises ``ValueError``; a store failure
raises ``ProcessorStateError`` naming the store, topic, partition and first offset, and nothing of
the batch is applied.

Two utilities serve every place that must decide whether a store's contents can be trusted:
:func:`holds_data` (does it hold anything) and :func:`wipe_store` (empty it).
"""

from __future__ import annotations

import itertools

from streamstate._core import (
    InMemoryKeyValueStore,
    KeyValueIterator,
    PersistentKeyValueStore,
    RestoredBatch,
    process_next,
)

__all__ = [
    "InMemoryKeyValueStore",
    "KeyValueIterator",
    "PersistentKeyValueStore",
    "RestoredBatch",
    "holds_data",
    "process_next",
    "wipe_store",
]

# Keys deleted per write batch when a store is wiped.
_WIPE_BATCH = 10_000


def holds_data(store: InMemoryKeyValueStore | PersistentKeyValueStore) -> bool:
    """Whether ``store`` has any entry (reads the first one, never counts them): a store with
    data but no checkpoint vouching for it is wiped before it is restored."""
    return next(iter(store.all()), None) is not None


def wipe_store(store: InMemoryKeyValueStore | PersistentKeyValueStore) -> int:
    """Deletes every key of ``store``, 10,000 per atomic write batch; returns how many.

    A crash part-way leaves a store holding a subset of its keys, which is why a wiped store
    must be restored from the beginning of its changelog before it is used.
    """
    removed = 0
    while True:
        keys = [k for k, _ in itertools.islice(store.all(), _WIPE_BATCH)]
        if not keys:
            return removed
        store.put_all([(k, None) for k in keys])
        removed += len(keys)
