"""``CachingKeyValueStore``: Kafka Streams' record cache in front of a task store.

A store added with ``caching=True`` keeps its writes in a dictionary until the task commits
(or until ``max_entries`` keys are dirty): reads see them at once, and the store underneath —
with its changelog — receives only the latest value of each key, in one ``put_all``. A word
counted 500 times between two commits costs one store write and one changelog record instead
of 500, as with Kafka's ``withCachingEnabled()`` (which bounds the cache in bytes,
``statestore.cache.max.bytes``, where this one counts keys). The stream thread flushes the
caches of its tasks before it flushes the producer, so the changelog records are acknowledged
before the offsets are committed: nothing is lost at a commit, and a crash between two commits
replays the input over the last flushed state, as without the cache.

Range scans, ``all`` and ``approximate_num_entries`` flush first, then read the store. Only the
stream thread uses the cache: interactive queries read the store underneath, so they see a
cached write after the next commit (Kafka's queries read through the cache).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from streamstate.state.write_buffer import WriteBuffer

__all__ = ["CachingKeyValueStore"]

_MAX_ENTRIES = 10_000


class CachingKeyValueStore(WriteBuffer):
    """A write-back cache over ``inner`` (a task store, logged or not); see the module doc."""

    def __init__(self, inner: Any, max_entries: int = _MAX_ENTRIES) -> None:
        """Caches up to ``max_entries`` dirty keys before writing them through."""
        self.inner = inner
        self.max_entries = max_entries
        self._dirty: dict[bytes, bytes | None] = {}
        # The DSL's aggregations forward each key's latest result as it is written through
        # (Kafka's cache flush listener): ``flush_listener(key, new, old)``, ``old`` read from
        # the store below only when ``flush_with_old``.
        self.flush_listener: Callable[[bytes, bytes | None, bytes | None], None] | None = None
        self.flush_with_old = False
        # A DSL store's cache of objects (streamstate.dsl.object_cache), flushed first.
        self.overlay: Any = None

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``: the cached one if it was written since the last flush."""
        dirty = self._dirty
        if key in dirty:
            return dirty[key]
        value: bytes | None = self.inner.get(key)
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        """Writes ``key`` (``None`` deletes it) to the cache."""
        self._check_types(key, value)
        dirty = self._dirty
        if self.flush_listener is not None and key in dirty:
            del dirty[key]  # Kafka's cache flushes keys in the order they were last written
        dirty[key] = value
        if len(dirty) > self.max_entries:
            self.flush_cache()

    def put_through(self, key: bytes, value: bytes | None) -> None:
        """Writes ``key`` to the store below at once, past the cache and its flush listener
        (a window store dropping an expired segment: nothing is forwarded for it, as Kafka
        drops segments without forwarding)."""
        self._dirty.pop(key, None)
        self.inner.put(key, value)

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key``, ascending (after a flush)."""
        self.flush_cache()
        return iter(self.inner.range(from_key, to_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry, ascending (after a flush)."""
        self.flush_cache()
        return iter(self.inner.all())

    def approximate_num_entries(self) -> int:
        """The number of entries, approximately (after a flush)."""
        self.flush_cache()
        return int(self.inner.approximate_num_entries())

    def discard(self) -> None:
        """Drops every dirty key unwritten (exactly-once: the transaction was aborted)."""
        self._dirty.clear()
        if self.overlay is not None:
            self.overlay.discard()

    def flush_cache(self) -> None:
        """Writes the latest value of every dirty key to the store below (and its changelog)."""
        if self.overlay is not None:
            self.overlay.flush()
        if not self._dirty:
            return
        pairs = list(self._dirty.items())
        self._dirty.clear()
        listener = self.flush_listener
        if listener is None:
            self.inner.put_all(pairs)
            return
        get = self.inner.get
        with_old = self.flush_with_old
        # A delete always reads the old value: the delete of a key the store never held is not
        # forwarded (Kafka's caching stores do the same).
        olds = [get(key) if with_old or new is None else None for key, new in pairs]
        self.inner.put_all(pairs)
        for (key, new), old in zip(pairs, olds, strict=True):
            if new is not None or old is not None:
                listener(key, new, old if with_old else None)
