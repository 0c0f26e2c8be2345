"""``ObjectCache``: the record cache of a DSL store, holding Python objects.

A DSL store with caching (``Materialized(caching=True)``, the default) sits on a byte store
with Kafka's record cache (``state/caching.py``). Keeping the cache in bytes would serialize
and deserialize every update: a count over 100k records of 10k keys between two commits would
encode 100k values where 10k suffice. So the typed store keeps its dirty entries here, as
objects, and serializes each key and value once, when the cache flushes (at each commit, when
more than ``max_entries`` keys are dirty, and before any range scan of the byte store). The
flush writes the latest value of each key to the layer below the byte cache (the changelog and
the store) and then calls the flush listener with the key and the new and old objects (old
read from the store when wanted, and always for a delete: the delete of a key the store never
held is not forwarded), Kafka's ``TimestampedCacheFlushListener``. Keys flush in the order
they were last written, as in Kafka's cache. An aborted transaction (exactly-once) discards
the dirty entries with the byte cache's.

One ``ObjectCache`` per byte cache: every typed store opened over the same store layer (the
processor's, a test driver's) shares it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MISSING", "ObjectCache", "object_cache"]

MISSING: Any = object()
"""What :meth:`ObjectCache.get` returns for a key it does not hold."""

_MAX_ENTRIES = 10_000


class ObjectCache:
    """Dirty typed entries over a byte store's record cache ``layer``; see the module doc.

    ``encode(key, obj) -> (store_key | None, value_bytes | None)`` gives what to write
    (``store_key`` ``None``: nothing, e.g. a window that expired before the flush);
    ``decode(raw) -> obj`` reads an old value; ``listener(key, new, old, headers)`` is told
    of each flushed key."""

    def __init__(self, layer: Any, max_entries: int = _MAX_ENTRIES) -> None:
        """Attaches to ``layer`` (a ``CachingKeyValueStore``)."""
        self.layer = layer
        self.below = layer.inner
        self.max_entries = max_entries
        self.dirty: dict[Any, tuple[Any, Any, Any]] = {}
        self.encode: Callable[[Any, Any], tuple[bytes | None, bytes | None]] | None = None
        self.decode: Callable[[bytes], Any] | None = None
        self.listener: Callable[[Any, Any, Any, Any], None] | None = None
        self.with_old = False

    def get(self, cache_key: Any) -> Any:
        """The dirty object of ``cache_key`` (``None``: deleted), or :data:`MISSING`."""
        entry = self.dirty.get(cache_key)
        return MISSING if entry is None else entry[1]

    def put(self, cache_key: Any, key: Any, obj: Any, headers: Any = ()) -> None:
        """Caches ``obj`` (``None``: a delete) for ``key``, with the headers of the record
        that wrote it (forwarded with it, as Kafka's cache keeps each entry's context)."""
        dirty = self.dirty
        if cache_key in dirty:
            del dirty[cache_key]  # flushed in the order last written, as Kafka's cache
        dirty[cache_key] = (key, obj, headers)
        if len(dirty) > self.max_entries:
            self.layer.flush_cache()

    def discard(self) -> None:
        """Drops every dirty entry unwritten."""
        self.dirty.clear()

    def flush(self) -> None:
        """Writes every dirty entry below the byte cache and tells the listener."""
        if not self.dirty:
            return
        entries = list(self.dirty.values())
        self.dirty.clear()
        encode = self.encode
        assert encode is not None
        encoded = [encode(key, obj) for key, obj, _ in entries]
        listener = self.listener
        olds: list[bytes | None] = []
        if listener is not None:
            get, with_old = self.below.get, self.with_old
            olds = [
                get(raw_key) if raw_key is not None and (with_old or obj is None) else None
                for (raw_key, _), (_, obj, _) in zip(encoded, entries, strict=True)
            ]
        self.below.put_all([(raw_key, raw) for raw_key, raw in encoded if raw_key is not None])
        if listener is None:
            return
        decode = self.decode
        assert decode is not None
        with_old = self.with_old
        for (key, obj, headers), old in zip(entries, olds, strict=True):
            if obj is not None or old is not None:
                old_obj = decode(old) if with_old and old is not None else None
                listener(key, obj, old_obj, headers)


def object_cache(inner: Any) -> ObjectCache | None:
    """The object cache over ``inner`` when it is a byte store's record cache (made on first
    use), else ``None`` (no cache, or a query's read-only facade)."""
    if not hasattr(inner, "overlay"):
        return None
    cache: ObjectCache | None = inner.overlay
    if cache is None:
        cache = ObjectCache(inner)
        inner.overlay = cache
    return cache
