"""``TransactionBuffer``: a task store's writes since the last commit, held until the
transaction that carries them has committed (exactly-once).

Under ``processing.guarantee=exactly_once_v2`` every store of a task is wrapped, *below* its
change-logging layer: caching (if any) → change-logging → buffer → the fjall or in-memory
store. A write goes to the buffer (a dict, key → value, ``None`` for a delete) and to the
changelog, inside the stream thread's open transaction; the store itself is untouched. A
window or session store's drop of its expired segments (``drop_range``, unlogged) waits in the
buffer too, as a key range: an aborted transaction must find the windows it wrote to again when
its records are processed anew. Reads see the buffer first (read-your-writes): ``get`` reads
the buffer then the store; ``range`` and ``all`` merge the buffered keys in range (sorted when
the scan starts) with the store's own iterator, lazily, a buffered value overriding the
store's and a buffered delete (or dropped range) hiding the key; the store is never
materialised.

The commit, in this order (the stream thread's ``_commit``): the transaction commits (sink
records, changelog records and consumed offsets together), then each buffer is applied to its
store (its dropped ranges, then its writes in ONE ``put_all``, atomic in fjall), the store is
flushed and the task's ``.checkpoint`` written with the committed changelog offsets. An
aborted transaction discards the buffer.

What a crash leaves, at any moment:

* before the transaction commits: the store and checkpoint are as of the previous commit, and
  Kafka aborts the transaction (its changelog records are never read ``read_committed``);
  nothing to undo.
* after the transaction commits, before the buffer is applied: store and checkpoint are as of
  the previous commit; the restart restores the changelog records past the checkpoint, which
  are exactly the committed transaction's (``read_committed``: aborted ones are skipped).
* after the buffer is applied, before the checkpoint is written: the restart re-applies the
  same tail; changelog records carry whole values, so applying them again converges.

So after a SIGKILL the store equals its last committed transaction and the restart restores
only the tail past the checkpoint, never the whole state (Kafka Streams wipes every task's
state after an unclean shutdown under exactly-once and restores it from scratch).

Interactive queries read the store underneath: they see committed data only (read-committed
queries). The state updater restores into the store underneath too.

The buffer counts its size as the key and value bytes of its entries (:attr:`uncommitted_bytes`;
a key written twice counts once, with its latest value); the stream thread commits early when a
task's buffers pass ``statestore.uncommitted.max.bytes``. Python's own overhead per entry (the
dict slot and two ``bytes`` objects, ~150 bytes) comes on top (``docs/runtime.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamstate.state.write_buffer import WriteBuffer

__all__ = ["TransactionBuffer"]


class TransactionBuffer(WriteBuffer):
    """The uncommitted writes of one store (``inner``); see the module doc."""

    def __init__(self, inner: Any) -> None:
        """Wraps ``inner`` (an ``InMemoryKeyValueStore`` or ``PersistentKeyValueStore``)."""
        self.inner = inner
        self._writes: dict[bytes, bytes | None] = {}
        # Key ranges ``[from, to)`` dropped since the last commit (see drop_range).
        self._drops: list[tuple[bytes, bytes]] = []
        self.uncommitted_bytes = 0

    @property
    def persistent(self) -> bool:
        """Whether the store underneath is persistent."""
        return bool(self.inner.persistent)

    def is_open(self) -> bool:
        """Whether the store underneath is open."""
        return bool(self.inner.is_open())

    def __len__(self) -> int:
        """The number of keys written since the last commit."""
        return len(self._writes)

    # -- writes -------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None) -> None:
        """Buffers ``key`` (``None`` deletes it)."""
        self._check_types(key, value)
        writes = self._writes
        if key in writes:
            old = writes[key]
            self.uncommitted_bytes -= len(key) + (len(old) if old is not None else 0)
        writes[key] = value
        self.uncommitted_bytes += len(key) + (len(value) if value is not None else 0)

    def drop_range(self, from_key: bytes, to_key: bytes) -> None:
        """Drops every key with ``from_key <= key < to_key`` at the commit; reads stop seeing
        them at once, and writes buffered in the range are discarded."""
        if from_key >= to_key:
            return
        writes = self._writes
        for key in [k for k in writes if from_key <= k < to_key]:
            old = writes.pop(key)
            self.uncommitted_bytes -= len(key) + (len(old) if old is not None else 0)
        self._drops.append((from_key, to_key))

    def _dropped(self, key: bytes) -> bool:
        return any(low <= key < high for low, high in self._drops)

    def _stored(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        # The store's entries less those in a range dropped since the last commit.
        if not self._drops:
            return entries
        dropped = self._dropped
        return (entry for entry in entries if not dropped(entry[0]))

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``: the buffered one if written since the last commit."""
        writes = self._writes
        if key in writes:
            return writes[key]
        if self._drops and self._dropped(key):
            return None
        value: bytes | None = self.inner.get(key)
        return value

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key``, ascending, buffered writes merged in."""
        stored = self._stored(iter(self.inner.range(from_key, to_key)))
        if not self._writes:
            return stored
        buffered = sorted((k, v) for k, v in self._writes.items() if from_key <= k <= to_key)
        return _merge(stored, buffered)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry, ascending, buffered writes merged in."""
        stored = self._stored(iter(self.inner.all()))
        if not self._writes:
            return stored
        return _merge(stored, sorted(self._writes.items()))

    def approximate_num_entries(self) -> int:
        """The store's count plus the buffered puts minus the buffered deletes (approximate:
        a buffered put of a key the store has counts twice, a delete of a key it lacks
        subtracts one; never below 0)."""
        deletes = sum(1 for v in self._writes.values() if v is None)
        count = int(self.inner.approximate_num_entries()) + len(self._writes) - 2 * deletes
        return max(0, count)

    # -- the transaction ----------------------------------------------------------------------

    def uncommitted(self) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]:
        """What :meth:`commit` would apply: the dropped key ranges ``[from, to)``, in order, and
        the buffered writes (key → value, ``None`` for a delete). Spark's local stores keep
        them in the micro-batch's state instead (``spark/_local_stores.py``)."""
        return list(self._drops), dict(self._writes)

    def commit(self) -> int:
        """Applies the buffer to the store (the transaction carrying these writes has
        committed): the dropped ranges first, then the writes in one atomic ``put_all``;
        returns the number of keys written. A crash between the two leaves the store short of
        the writes, which the changelog's tail past the checkpoint gives back."""
        for low, high in self._drops:
            self.inner.drop_range(low, high)
        self._drops = []
        if not self._writes:
            return 0
        pairs = list(self._writes.items())
        self.inner.put_all(pairs)
        self._writes = {}
        self.uncommitted_bytes = 0
        return len(pairs)

    def abort(self) -> None:
        """Discards the buffer (the transaction was aborted)."""
        self._writes = {}
        self._drops = []
        self.uncommitted_bytes = 0

    def flush(self) -> None:
        """Flushes the store underneath (the buffer is applied by :meth:`commit` only)."""
        self.inner.flush()

    def close(self) -> None:
        """Closes the store underneath; uncommitted writes are dropped."""
        self.abort()
        self.inner.close()


def _merge(
    stored: Iterator[tuple[bytes, bytes]], buffered: list[tuple[bytes, bytes | None]]
) -> Iterator[tuple[bytes, bytes]]:
    """The store's entries and the sorted buffered writes, in key order: a buffered value wins
    over the store's, a buffered ``None`` hides the key."""
    i, n = 0, len(buffered)
    for key, value in stored:
        while i < n and buffered[i][0] < key:
            bkey, bvalue = buffered[i]
            i += 1
            if bvalue is not None:
                yield bkey, bvalue
        if i < n and buffered[i][0] == key:
            bvalue = buffered[i][1]
            i += 1
            if bvalue is not None:
                yield key, bvalue
            continue
        yield key, value
    while i < n:
        bkey, bvalue = buffered[i]
        i += 1
        if bvalue is not None:
            yield bkey, bvalue
