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

Flushed entries whose objects cannot change (scalars, tuples of them: ``_immutable``) stay as
**clean** objects (up to ``max_clean``, the oldest evicted first), as
Kafka's cache keeps flushed entries until it needs the room: the next update of a key read
since the last commit then costs no store read and no deserialization. Flushed entries whose
objects can change (a dict, a list) stay as their **bytes** instead (``raw``, as many, within
``max_raw_bytes``): :meth:`ObjectCache.get` decodes a new object from them on every read, as
every reader of Kafka's cache deserializes its own copy, so a reader that changes what it got
(a joiner, a ``map_values`` downstream) changes nothing another reader sees; the read costs
no store ``get``. A clean entry is only ever what the store below holds (written by the flush
itself; a dirty entry shadows it), and the abort of a transaction drops them all with the
dirty ones (the store goes back to its last commit).

One ``ObjectCache`` per byte cache: every typed store opened over the same store layer (the
processor's, a test driver's) shares it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["MISSING", "ObjectCache", "object_cache"]

MISSING: Any = object()
"""What :meth:`ObjectCache.get` returns for a key it does not hold."""

_MAX_ENTRIES = 10_000
_MAX_CLEAN = 100_000
_MAX_RAW_BYTES = 32 << 20
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def _immutable(obj: Any) -> bool:
    """Whether ``obj`` can stay shared after the flush forwarded it. A processor downstream may
    change a forwarded dict or list in place; kept as a clean entry, that change would become
    the next aggregation's old value (Kafka's cache holds bytes, and every reader decodes its
    own copy). Scalars, and tuples of them (``ValueAndTimestamp``), cannot change."""
    if type(obj) in _SCALARS:
        return True
    return isinstance(obj, tuple) and all(_immutable(item) for item in obj)


class ObjectCache:
    """Dirty typed entries over a byte store's record cache ``layer``; see the module doc.

    ``encode(key, obj) -> (store_key | None, value_bytes | None)`` gives what to write
    (``store_key`` ``None``: nothing, e.g. a window that expired before the flush);
    ``decode(raw) -> obj`` reads an old value; ``listener(key, new, old, headers)`` is told
    of each flushed key."""

    def __init__(
        self, layer: Any, max_entries: int = _MAX_ENTRIES, max_clean: int | None = None
    ) -> None:
        """Attaches to ``layer`` (a ``CachingKeyValueStore``); keeps up to ``max_clean``
        clean entries (default 100,000)."""
        self.layer = layer
        self.below = layer.inner
        self.max_entries = max_entries
        self.max_clean = _MAX_CLEAN if max_clean is None else max_clean
        self.dirty: dict[Any, tuple[Any, Any, Any]] = {}
        # Flushed objects by cache key (None: the key is deleted), as the store below holds
        # them; a dirty entry of the same key shadows its clean one.
        self.clean: dict[Any, Any] = {}
        # The store's bytes of flushed objects that can change, by cache key (decoded anew on
        # each read); a key is in ``clean`` or here, never in both.
        self.raw: dict[Any, bytes] = {}
        self.raw_bytes = 0
        self.max_raw_bytes = _MAX_RAW_BYTES
        # Told of cache keys the clean entries no longer cover: ``forgotten(keys)`` with the
        # evicted keys and those flushed as bytes (objects that can change), ``forgotten(None)``
        # when every clean entry is dropped.
        self.forget_listeners: list[Callable[[list[Any] | None], None]] = []
        self.encode: Callable[[Any, Any], tuple[bytes | None, bytes | None]] | None = None
        self.decode: Callable[[bytes], Any] | None = None
        self.listener: Callable[[Any, Any, Any, Any], None] | None = None
        self.with_old = False
        # A flush that writes and tells the listener's effect itself, in one batch (a built-in
        # windowed count: window_processors.CountFlush): ``batch_flush(items)`` with the dirty
        # items in order, ``False`` when it cannot (the general flush then takes them).
        self.batch_flush: Callable[[list[tuple[Any, tuple[Any, Any, Any]]]], bool] | None = None

    def get(self, cache_key: Any) -> Any:
        """The dirty or clean object of ``cache_key`` (``None``: deleted), or :data:`MISSING`;
        a flushed object that can change is decoded anew from its bytes (module doc)."""
        entry = self.dirty.get(cache_key)
        if entry is None:
            found = self.clean.get(cache_key, MISSING)
            if found is MISSING:
                raw = self.raw.get(cache_key)
                if raw is not None:
                    decode = self.decode
                    assert decode is not None
                    return decode(raw)
            return found
        return entry[1]

    def get_private(self, cache_key: Any) -> Any:
        """As :meth:`get`, but a dirty object that can change comes as a copy made through
        the store's bytes (encoded and decoded), as a reader of Kafka's cache gets it: for a
        reader that may change what it is given (a joiner), while the dirty object stays the
        writer's."""
        entry = self.dirty.get(cache_key)
        if entry is None:
            return self.get(cache_key)
        obj = entry[1]
        if obj is None or _immutable(obj):
            return obj
        encode, decode = self.encode, self.decode
        assert encode is not None and decode is not None
        raw = encode(entry[0], obj)[1]
        return None if raw is None else decode(raw)

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
        """Drops every dirty entry unwritten (and the clean ones: the store below goes back
        to its last commit)."""
        self.dirty.clear()
        self.clean.clear()
        self.raw.clear()
        self.raw_bytes = 0
        for forgotten in self.forget_listeners:
            forgotten(None)

    def flush(self) -> None:
        """Writes every dirty entry below the byte cache and tells the listener."""
        if not self.dirty:
            return
        # The hot paths hold this dict: emptied in place, entries written meanwhile (by the
        # listener's processors) start the next batch.
        items = list(self.dirty.items())
        self.dirty.clear()
        batch_flush = self.batch_flush
        if batch_flush is not None and batch_flush(items):
            return
        encode = self.encode
        assert encode is not None
        listener = self.listener
        with_old = self.with_old
        get = self.below.get
        clean = self.clean
        keep_raw = self.raw if self.decode is not None else None
        raw_bytes = self.raw_bytes
        # One pass: encode each entry, keep it clean, and (with a listener) read the old value
        # of the keys that need one before the write below replaces it.
        puts: list[tuple[bytes, bytes | None]] = []
        told: list[tuple[Any, Any, Any, bytes | None]] = []
        uncovered: list[Any] = []  # flushed, but not as clean objects
        for cache_key, (key, obj, headers) in items:
            raw_key, raw = encode(key, obj)
            if keep_raw is not None:
                dropped = keep_raw.pop(cache_key, None)
                if dropped is not None:
                    raw_bytes -= len(dropped)
            if raw_key is None:
                clean.pop(cache_key, None)  # not stored (an expired window)
                old = None
            else:
                puts.append((raw_key, raw))
                if cache_key in clean:
                    del clean[cache_key]  # re-inserted last: evicted last
                if _immutable(obj):
                    clean[cache_key] = obj
                else:
                    uncovered.append(cache_key)
                    if keep_raw is not None and raw is not None:
                        keep_raw[cache_key] = raw
                        raw_bytes += len(raw)
                old = get(raw_key) if listener is not None and (with_old or obj is None) else None
            if listener is not None and (obj is not None or old is not None):
                told.append((key, obj, headers, old))
        self.raw_bytes = raw_bytes
        if uncovered:
            # The store below now holds these keys and no clean entry does: a reader that
            # trusts the clean entries (a window store's absent_after) must read the store.
            for forgotten in self.forget_listeners:
                forgotten(uncovered)
        self._evict_clean()
        if keep_raw is not None:
            self._evict_raw(keep_raw)
        self.below.put_all(puts)
        if listener is None:
            return
        decode = self.decode
        assert decode is not None
        for key, obj, headers, old in told:
            listener(key, obj, decode(old) if with_old and old is not None else None, headers)

    def keep_flushed(
        self, items: list[tuple[Any, tuple[Any, Any, Any]]], expired: list[int]
    ) -> None:
        """The clean entries after a batch flush of ``items`` whose objects cannot change
        (``_immutable``) wrote all but ``expired`` (indexes) to the store below: what
        :meth:`flush` keeps for them, before the batch writes them below."""
        clean = self.clean
        raw = self.raw
        if raw:
            for cache_key, _ in items:
                dropped = raw.pop(cache_key, None)
                if dropped is not None:
                    self.raw_bytes -= len(dropped)
        pop = clean.pop
        for cache_key, _ in items:
            pop(cache_key, None)  # re-inserted last: evicted last
        if expired:
            gone = frozenset(expired)
            clean.update(
                (cache_key, entry[1]) for i, (cache_key, entry) in enumerate(items) if i not in gone
            )
        else:
            clean.update((cache_key, entry[1]) for cache_key, entry in items)
        self._evict_clean()
        if raw:
            self._evict_raw(raw)

    def _evict_clean(self) -> None:
        # The oldest first, past max_clean entries.
        clean = self.clean
        excess = len(clean) - self.max_clean
        if excess > 0:
            evicted = list(itertools.islice(clean, excess))
            for cache_key in evicted:
                del clean[cache_key]
            for forgotten in self.forget_listeners:
                forgotten(evicted)

    def _evict_raw(self, raw: dict[Any, bytes]) -> None:
        # The oldest first, past max_clean entries or max_raw_bytes bytes.
        excess = len(raw) - self.max_clean
        evicted: list[Any] = []
        if excess > 0 or self.raw_bytes > self.max_raw_bytes:
            for cache_key, value in raw.items():
                if excess <= 0 and self.raw_bytes <= self.max_raw_bytes:
                    break
                evicted.append(cache_key)
                self.raw_bytes -= len(value)
                excess -= 1
            for cache_key in evicted:
                del raw[cache_key]
            for forgotten in self.forget_listeners:
                forgotten(evicted)


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
