"""The stores the DSL creates, as typed layers over streamstate's byte stores.

Each DSL store is a task store of bytes (in memory or fjall, logged, cached: the same store, the
same changelog and restoration path, the same record cache as the Processor API's); the classes
here give it Kafka's typed interfaces by serializing keys and values with the store's serdes:

* :class:`TimestampedKeyValueStore` (Kafka's ``TimestampedKeyValueStore``): a value and the
  timestamp of the record that wrote it, stored as 8 bytes of timestamp (big-endian) followed
  by the serialized value, Kafka's own layout for timestamped stores;
* :class:`WindowStore` (``TimestampedWindowStore``): a value per key and window start, in
  **segments** of time (``max(retention / 2, 60 s)``, as Kafka's segmented stores): the store
  key is ``segment (8) + key + window start (8)``, so a fetch scans the few live segments, and
  a segment whose every window is older than the retention is dropped whole (one
  ``drop_range`` of the byte store: the persistent store drops its tables without a
  tombstone, the in-memory one splits its map);
* :class:`SessionStore`: a value per key and session ``[start, end]``, segmented by session end:
  ``segment (8) + key + end (8) + start (8)``.

Changelog records carry the record's timestamp (the logging layer reads it from the value's
first 8 bytes). The record cache sits underneath, in bytes; an aggregation registers a flush
listener on it (:meth:`CachedForwarding`) to forward each key's latest result when the cache
flushes, as Kafka's ``TimestampedCacheFlushListener`` does. The same classes over an interactive
query's byte facade are the typed read-only stores ``StreamsApp.store`` and the
``TopologyTestDriver`` return.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from streamstate._core import UntrackedPairs
from streamstate.dsl.object_cache import MISSING, ObjectCache, object_cache
from streamstate.dsl.windows import Window, Windowed, windowed_of
from streamstate.processor.serde_slot import serialize_function

__all__ = [
    "SessionStore",
    "StoreSerdes",
    "TimestampedKeyValueStore",
    "ValueAndTimestamp",
    "WindowStore",
    "segment_interval",
]

_LONG = struct.Struct(">q")
_MAX_KEY_BYTES = 100_000
_MAX_LONG = 2**63 - 1
_TWO_LONGS = struct.Struct(">qq")
_MIN_SEGMENT_INTERVAL = 60_000
# Where a window or session store keeps its processor's metadata (the last window close time
# emitted under EmitStrategy.on_window_close, Kafka's processor metadata): after every segment.
_META = b"\xff" * 8
_BOUNDS = _META + b"segments"


def segment_interval(retention_ms: int) -> int:
    """Kafka's segment interval for a retention: ``max(retention / 2, 60 s)``."""
    return max(retention_ms // 2, _MIN_SEGMENT_INTERVAL)


class ValueAndTimestamp(NamedTuple):
    """A value and the timestamp of the record that wrote it."""

    value: Any
    timestamp: int


# ``new_value_and_timestamp(value, timestamp)``: a ValueAndTimestamp that the cyclic garbage
# collector does not track when both are numbers, strings, bytes or None. The counts make one
# per record and keep one per key (per window) in their caches: tracked, as CPython tracks
# every tuple-subclass instance, every full collection visited them all: 15-20% of a windowed
# count's CPU (rust/py/src/untracked.rs).
new_value_and_timestamp: Callable[[Any, int], ValueAndTimestamp] = UntrackedPairs(
    ValueAndTimestamp
).make


class StoreSerdes:
    """A store's key and value serdes (serializing for the store's name, as Kafka serializes
    store contents for the changelog topic)."""

    def __init__(self, name: str, key_serde: Any, value_serde: Any) -> None:
        """``key_serde``/``value_serde``: :class:`~streamstate.serde.Serde` pairs."""
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._ser_key = serialize_function(key_serde.serializer)
        self._de_key = key_serde.deserializer.deserialize
        self._ser_value = serialize_function(value_serde.serializer)
        self._de_value = value_serde.deserializer.deserialize
        # A built-in (Rust) key serializer is a pure function: a string key's bytes are kept
        # (the hot paths serialize the same keys at every commit).
        self._key_bytes: dict[str, bytes] | None = (
            {} if self._ser_key is not key_serde.serializer.serialize else None
        )

    def key_to_bytes(self, key: Any) -> bytes:
        """The store key's bytes (a ``None`` key cannot be stored)."""
        memo = self._key_bytes
        if memo is not None and type(key) is str:
            known = memo.get(key)
            if known is None:
                known = self._key_to_bytes(key)
                if len(memo) >= _MAX_KEY_BYTES:
                    memo.clear()
                memo[key] = known
            return known
        return self._key_to_bytes(key)

    def _key_to_bytes(self, key: Any) -> bytes:
        raw = self._ser_key(self.name, key)
        if raw is None:
            raise ValueError(f"store {self.name!r}: a key serialized to None cannot be stored")
        return bytes(raw)

    def key_from_bytes(self, raw: bytes) -> Any:
        """The key of ``raw``."""
        return self._de_key(self.name, raw)

    def value_to_bytes(self, value: Any, timestamp: int) -> bytes:
        """``timestamp`` (8 bytes) + the serialized value."""
        raw = self._ser_value(self.name, value)
        return _LONG.pack(timestamp) + (raw or b"")

    def value_from_bytes(self, raw: bytes) -> ValueAndTimestamp:
        """The value and timestamp of ``raw`` (see :meth:`value_to_bytes`)."""
        return new_value_and_timestamp(
            self._de_value(self.name, raw[8:]), _LONG.unpack_from(raw)[0]
        )


FlushListener = Callable[[Any, "ValueAndTimestamp | None", "ValueAndTimestamp | None", Any], None]


def _listen(
    inner: Any, decode: Callable[[bytes], Any], serdes: StoreSerdes
) -> Callable[[FlushListener, bool], bool]:
    """How a typed store registers a flush listener on its byte store's record cache."""

    def register(listener: FlushListener, with_old: bool) -> bool:
        if not hasattr(inner, "flush_listener"):
            return False
        de = serdes.value_from_bytes

        def on_flush(key: bytes, new: bytes | None, old: bytes | None) -> None:
            if key.startswith(_META):
                return
            listener(
                decode(key),
                de(new) if new is not None else None,
                de(old) if old is not None else None,
                (),  # a byte cache keeps no headers
            )

        inner.flush_listener = on_flush
        inner.flush_with_old = with_old
        return True

    return register


def _cache_key(key: Any, serdes: StoreSerdes) -> Any:
    # Keys of these types are their own cache key (no serialization per record); others are
    # cached by their bytes.
    return key if type(key) in _OWN_KEYS else serdes.key_to_bytes(key)


_OWN_KEYS = frozenset({str, int, bytes})


def _attach(cache: ObjectCache | None, serdes: StoreSerdes, encode: Any) -> None:
    if cache is not None and cache.encode is None:
        cache.encode = encode
        cache.decode = serdes.value_from_bytes


def _register_listener(
    cache: ObjectCache | None,
    byte_register: Callable[[FlushListener, bool], bool],
    listener: FlushListener,
    with_old: bool,
) -> bool:
    if cache is None:
        return byte_register(listener, with_old)
    cache.listener = listener
    cache.with_old = with_old
    return True


class TimestampedKeyValueStore:
    """A typed key-value store of ``ValueAndTimestamp`` over the byte store ``inner``."""

    def __init__(self, inner: Any, serdes: StoreSerdes) -> None:
        """``inner``: a byte store (a task store layer, or a query facade)."""
        self.inner = inner
        self.serdes = serdes
        self.name = serdes.name
        self._register = _listen(inner, serdes.key_from_bytes, serdes)
        self.cache = object_cache(inner)
        _attach(self.cache, serdes, self._encode)

    def _encode(self, key: Any, found: ValueAndTimestamp | None) -> tuple[bytes, bytes | None]:
        raw = None if found is None else self.serdes.value_to_bytes(found[0], found[1])
        return self.serdes.key_to_bytes(key), raw

    def set_flush_listener(self, listener: FlushListener, *, with_old: bool) -> bool:
        """Calls ``listener(key, new, old)`` for each key the record cache writes through
        (``old`` only when ``with_old``); ``False`` if the store has no cache."""
        return _register_listener(self.cache, self._register, listener, with_old)

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The value of ``key`` and its timestamp, or ``None``."""
        cache = self.cache
        if cache is not None:
            cached = cache.get(_cache_key(key, self.serdes))
            if cached is not MISSING:
                return cached  # type: ignore[no-any-return]
        raw = self.inner.get(self.serdes.key_to_bytes(key))
        return None if raw is None else self.serdes.value_from_bytes(raw)

    def get(self, key: Any) -> Any:
        """The value of ``key``, or ``None``."""
        found = self.get_with_timestamp(key)
        return None if found is None else found.value

    def put(self, key: Any, value: Any, timestamp: int = -1, headers: Any = ()) -> None:
        """Writes ``key`` (a ``None`` value deletes it); ``timestamp`` is the record's
        (-1, Kafka's "no timestamp", when written from outside the topology), ``headers`` its
        headers (forwarded with the result when the record cache flushes)."""
        cache = self.cache
        if cache is not None:
            found = None if value is None else new_value_and_timestamp(value, timestamp)
            cache.put(_cache_key(key, self.serdes), key, found, headers)
            return
        raw_key = self.serdes.key_to_bytes(key)
        if value is None:
            self.inner.put(raw_key, None)
        else:
            self.inner.put(raw_key, self.serdes.value_to_bytes(value, timestamp))

    def delete(self, key: Any) -> Any:
        """Deletes ``key``; returns its value before."""
        old = self.get(key)
        self.put(key, None)
        return old

    def _pairs(self, raw: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        de_key, de_value = self.serdes.key_from_bytes, self.serdes.value_from_bytes
        for key, value in raw:
            yield de_key(key), de_value(value).value

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` with ``from_key <= key <= to_key`` in serialized order, lazily."""
        to_bytes = self.serdes.key_to_bytes
        return self._pairs(iter(self.inner.range(to_bytes(from_key), to_bytes(to_key))))

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every ``(key, value)`` in serialized key order, lazily."""
        return self._pairs(iter(self.inner.all()))

    def approximate_num_entries(self) -> int:
        """The number of entries, approximately."""
        return int(self.inner.approximate_num_entries())


class _Segmented:
    """What window and session stores share: segments of time in the store key, the store's
    observed stream time, and dropping expired segments whole."""

    def __init__(self, inner: Any, serdes: StoreSerdes, retention_ms: int) -> None:
        self.inner = inner
        self.serdes = serdes
        self.name = serdes.name
        self.retention_ms = retention_ms
        self.interval = segment_interval(retention_ms)
        self.observed_stream_time = -1
        self._bounds: tuple[int, int] | None = None  # read from the store when first needed
        self._dropped_once = False
        self._live = 0  # the oldest live segment, as of the observed stream time
        self.cache: ObjectCache | None = None  # a window store's object cache

    @staticmethod
    def _first_segment(scan: Any, fallback: int) -> int:
        first = next(iter(scan.all()), None)
        if first is None or first[0].startswith(_META):
            return fallback
        return min(int(_LONG.unpack_from(first[0])[0]), fallback)

    def _segment(self, timestamp: int) -> int:
        return timestamp // self.interval

    # Kafka's time-ordered window store (the one EmitStrategy.on_window_close uses, with its
    # TimeFirstWindowKeySchema) keeps a window one ms longer: its "actual from" is
    # ``stream time - retention``, not ``stream time - retention + 1``.
    time_first = False

    def _min_live_time(self) -> int:
        # Reads hide what is older than the retention even before its segment is dropped,
        # as Kafka's segmented stores do (their "actual from").
        return self.observed_stream_time - self.retention_ms + (0 if self.time_first else 1)

    def _load_bounds(self) -> tuple[int, int] | None:
        # The lowest and highest segment holding data, kept in the store itself so that a
        # query (over every local partition: hence range, not get) knows where to look.
        if self._bounds is None:
            found = [_TWO_LONGS.unpack(v) for _, v in self.inner.range(_BOUNDS, _BOUNDS)]
            if found:
                self._bounds = (min(b[0] for b in found), max(b[1] for b in found))
        return self._bounds

    def _set_bounds(self, low: int, high: int) -> None:
        self._bounds = (low, high)
        self.inner.put(_BOUNDS, _TWO_LONGS.pack(low, high))

    def _track(self, segment: int) -> None:
        bounds = self._load_bounds()
        if bounds is None:
            self._set_bounds(segment, segment)
        elif segment < bounds[0] or segment > bounds[1]:
            self._set_bounds(min(segment, bounds[0]), max(segment, bounds[1]))

    def _segments(self, time_from: int, time_to: int) -> range:
        bounds = self._load_bounds()
        if bounds is None:
            return range(0)
        low = max(self._segment(max(time_from, 0)), self._min_live_segment(), bounds[0])
        return range(low, min(self._segment(max(time_to, 0)), bounds[1]) + 1)

    def _min_live_segment(self) -> int:
        return max(self._segment(max(self.observed_stream_time - self.retention_ms, 0)), 0)

    def _observe(self, timestamp: int) -> bool:
        """Advances the observed stream time; drops segments that expired. ``False`` when a
        write at ``timestamp`` falls in an expired segment (Kafka skips those)."""
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
            live = self._min_live_segment()
            if live != self._live:  # once per segment of stream time, not per record
                self._live = live
                self._drop_expired()
        segment = timestamp // self.interval
        if segment < self._live:
            return False
        bounds = self._bounds
        if bounds is None or not bounds[0] <= segment <= bounds[1]:
            self._track(segment)
        return True

    def _drop_expired(self) -> None:
        bounds = self._load_bounds()
        live = self._min_live_segment()
        if bounds is None or bounds[0] >= live:
            return
        # Below the record cache (a scan of the cache would flush it): an expired window is
        # not an update to forward; what the cache still holds of it is forwarded when it
        # flushes and not stored (Kafka's segmented store skips writes to expired segments).
        if self.cache is None and hasattr(self.inner, "flush_cache"):
            # A byte cache (session stores) forwards and writes what it holds first: an update
            # of a window about to expire is forwarded before the window goes, in order.
            self.inner.flush_cache()
        scan = self.inner.inner if hasattr(self.inner, "put_through") else self.inner
        # The first drop after the store opened starts from its first key: a restored store
        # holds the windows its last drops did not log.
        low = bounds[0] if self._dropped_once else self._first_segment(scan, bounds[0])
        self._dropped_once = True
        high = min(live, bounds[1] + 1)
        if low < high:
            # One call for every expired segment, unlogged: the store drops them whole
            # (KeyValueStore::drop_range in rust/core/src/store).
            scan.drop_range(_LONG.pack(low), _LONG.pack(high))
        self._set_bounds(live, max(live, bounds[1]))

    def get_metadata(self, name: bytes) -> int | None:
        """A number the processor keeps with the store (``None`` if never put)."""
        raw = self.inner.get(_META + name)
        return None if raw is None else int(_LONG.unpack(raw)[0])

    def put_metadata(self, name: bytes, value: int) -> None:
        """Keeps ``value`` under ``name`` (logged and restored with the store)."""
        self.inner.put(_META + name, _LONG.pack(value))

    def _entries(self) -> Iterator[tuple[bytes, bytes]]:
        # From the oldest live segment on: a store restored from its changelog may still
        # hold windows of segments dropped (unlogged) before, until its next drop.
        bounds = self._load_bounds()
        if bounds is None:
            return
        for raw_key, raw_value in self.inner.range(_LONG.pack(bounds[0]), _META):
            if not raw_key.startswith(_META):
                yield raw_key, raw_value


class WindowStore(_Segmented):
    """A typed window store: a ``ValueAndTimestamp`` per key and window start."""

    def __init__(
        self, inner: Any, serdes: StoreSerdes, retention_ms: int, window_size_ms: int
    ) -> None:
        """``window_size_ms`` gives results their window end."""
        super().__init__(inner, serdes, retention_ms)
        self.window_size_ms = window_size_ms
        self._register = _listen(inner, self._windowed_key, serdes)
        self.cache = object_cache(inner)
        _attach(self.cache, serdes, self._encode)
        # With an object cache: no window starting after ``absent_after`` is in the store
        # below unless the cache's clean entries hold it (they hold every window flushed
        # since, until evicted); ``None``: not known yet. Lets a new window skip its read.
        self.absent_after: int | None = None
        if self.cache is not None:
            self.cache.forget_listeners.append(self._forgotten)

    def _forgotten(self, keys: list[Any] | None) -> None:
        if keys is None:
            # The store went back to its last commit: what its bounds allow (known here
            # without reading the store, which would flush the cache mid-record), else read.
            bounds = self._bounds
            self.absent_after = _MAX_LONG if bounds is None else (bounds[1] + 1) * self.interval - 1
        elif self.absent_after is not None:
            latest = max(start for _, start in keys)
            self.absent_after = max(self.absent_after, latest)

    def stored_absent_after(self) -> int:
        """The window start after which the store below holds no window the object cache's
        clean entries do not hold (see ``absent_after``), read from the segments' bounds:
        called when the processor opens the store (the read flushes the record cache)."""
        if self.absent_after is None:
            bounds = self._load_bounds()
            if bounds is not None:
                self.absent_after = (bounds[1] + 1) * self.interval - 1
            elif next(iter(self.inner.range(_LONG.pack(0), _META)), None) is None:
                self.absent_after = -1  # no window stored
            else:
                self.absent_after = _MAX_LONG  # windows without bounds: always read
        return self.absent_after

    def _encode(
        self, key_and_start: tuple[Any, int], found: ValueAndTimestamp | None
    ) -> tuple[bytes | None, bytes | None]:
        key, start = key_and_start
        segment = start // self.interval
        if segment < self._live:  # _min_live_segment(), kept by _observe
            return None, None  # expired before the flush: forwarded, not stored (as Kafka)
        raw = None if found is None else self.serdes.value_to_bytes(found[0], found[1])
        return _LONG.pack(segment) + self.serdes.key_to_bytes(key) + _LONG.pack(start), raw

    def set_flush_listener(self, listener: FlushListener, *, with_old: bool) -> bool:
        """As :meth:`TimestampedKeyValueStore.set_flush_listener`; keys are ``Windowed``."""
        if self.cache is None:
            return self._register(listener, with_old)
        size = self.window_size_ms

        def windowed(key_and_start: tuple[Any, int], new: Any, old: Any, headers: Any) -> None:
            listener(windowed_of(key_and_start[0], key_and_start[1], size), new, old, headers)

        return _register_listener(self.cache, self._register, windowed, with_old)

    def _store_key(self, key_bytes: bytes, start: int) -> bytes:
        return _LONG.pack(self._segment(start)) + key_bytes + _LONG.pack(start)

    def _windowed_key(self, raw: bytes) -> Windowed[Any]:
        start = _LONG.unpack_from(raw, len(raw) - 8)[0]
        key = self.serdes.key_from_bytes(raw[8:-8])
        return Windowed(key, Window(start, start + self.window_size_ms))

    def put(
        self, key: Any, value: Any, timestamp: int, window_start: int, headers: Any = ()
    ) -> None:
        """Writes the window of ``key`` starting at ``window_start`` (``None`` deletes it);
        a write into an expired segment is skipped, as Kafka skips it."""
        if not self._observe(window_start):
            return
        cache = self.cache
        if cache is not None:
            found = None if value is None else new_value_and_timestamp(value, timestamp)
            cache.put(
                (_cache_key(key, self.serdes), window_start), (key, window_start), found, headers
            )
            return
        raw_key = self._store_key(self.serdes.key_to_bytes(key), window_start)
        raw = None if value is None else self.serdes.value_to_bytes(value, timestamp)
        self.inner.put(raw_key, raw)

    def fetch_with_timestamp(self, key: Any, window_start: int) -> ValueAndTimestamp | None:
        """The value of ``key``'s window at ``window_start``, or ``None`` (also when it is
        older than the retention)."""
        if window_start < self._min_live_time():
            return None
        cache = self.cache
        if cache is not None:
            cached = cache.get((_cache_key(key, self.serdes), window_start))
            if cached is not MISSING:
                return cached  # type: ignore[no-any-return]
        raw = self.inner.get(self._store_key(self.serdes.key_to_bytes(key), window_start))
        return None if raw is None else self.serdes.value_from_bytes(raw)

    def fetch_stored(self, key: Any, window_start: int) -> ValueAndTimestamp | None:
        """The value of ``key``'s window at ``window_start`` in the store below the object
        cache (the caller looked there, and checked the retention)."""
        raw = self.inner.get(self._store_key(self.serdes.key_to_bytes(key), window_start))
        return None if raw is None else self.serdes.value_from_bytes(raw)

    def _scan(
        self, key_bytes: bytes | None, time_from: int, time_to: int
    ) -> Iterator[tuple[bytes, bytes]]:
        time_from = max(time_from, self._min_live_time())
        for segment in self._segments(time_from, time_to):
            seg = _LONG.pack(segment)
            if key_bytes is None:
                low, high = seg, _LONG.pack(segment + 1)
            else:
                low = seg + key_bytes + _LONG.pack(max(time_from, 0))
                high = seg + key_bytes + _LONG.pack(time_to)
            for raw_key, raw_value in self.inner.range(low, high):
                if key_bytes is None:
                    if raw_key >= high:
                        continue
                    start = _LONG.unpack_from(raw_key, len(raw_key) - 8)[0]
                    if time_from <= start <= time_to:
                        yield raw_key, raw_value
                elif len(raw_key) == len(key_bytes) + 16 and raw_key[8:-8] == key_bytes:
                    yield raw_key, raw_value

    def fetch(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any]]:
        """``(window_start, value)`` of ``key``'s windows starting in ``[time_from,
        time_to]``, ascending, lazily."""
        de = self.serdes.value_from_bytes
        for raw_key, raw_value in self._scan(self.serdes.key_to_bytes(key), time_from, time_to):
            yield _LONG.unpack_from(raw_key, len(raw_key) - 8)[0], de(raw_value).value

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Windowed[Any], Any]]:
        """``(Windowed, value)`` of every window starting in ``[time_from, time_to]``."""
        de = self.serdes.value_from_bytes
        for raw_key, raw_value in self._scan(None, time_from, time_to):
            yield self._windowed_key(raw_key), de(raw_value).value

    def fetch_all_with_timestamps(
        self, time_from: int, time_to: int
    ) -> Iterator[tuple[Windowed[Any], ValueAndTimestamp]]:
        """``(Windowed, ValueAndTimestamp)`` of every window starting in the range."""
        de = self.serdes.value_from_bytes
        for raw_key, raw_value in self._scan(None, time_from, time_to):
            yield self._windowed_key(raw_key), de(raw_value)

    def all(self) -> Iterator[tuple[Windowed[Any], Any]]:
        """Every ``(Windowed, value)``."""
        de = self.serdes.value_from_bytes
        for raw_key, raw_value in self._entries():
            yield self._windowed_key(raw_key), de(raw_value).value


class SessionStore(_Segmented):
    """A typed session store: a ``ValueAndTimestamp`` per key and session ``[start, end]``."""

    def __init__(self, inner: Any, serdes: StoreSerdes, retention_ms: int) -> None:
        """Segments by session end."""
        super().__init__(inner, serdes, retention_ms)
        self._register = _listen(inner, self._windowed_key, serdes)

    def set_flush_listener(self, listener: FlushListener, *, with_old: bool) -> bool:
        """As :meth:`TimestampedKeyValueStore.set_flush_listener`; keys are ``Windowed``."""
        return self._register(listener, with_old)

    def _store_key(self, key_bytes: bytes, window: Window) -> bytes:
        return (
            _LONG.pack(self._segment(window.end))
            + key_bytes
            + _TWO_LONGS.pack(window.end, window.start)
        )

    def _windowed_key(self, raw: bytes) -> Windowed[Any]:
        end, start = _TWO_LONGS.unpack_from(raw, len(raw) - 16)
        return Windowed(self.serdes.key_from_bytes(raw[8:-16]), Window(start, end))

    def put(self, session: Windowed[Any], value: Any, timestamp: int | None = None) -> None:
        """Writes ``session`` (``None`` removes it); the timestamp defaults to its end."""
        window = session.window
        if not self._observe(window.end):
            return
        raw_key = self._store_key(self.serdes.key_to_bytes(session.key), window)
        stamp = window.end if timestamp is None else timestamp
        raw = None if value is None else self.serdes.value_to_bytes(value, stamp)
        self.inner.put(raw_key, raw)

    def remove(self, session: Windowed[Any]) -> None:
        """Removes ``session``."""
        raw_key = self._store_key(self.serdes.key_to_bytes(session.key), session.window)
        self.inner.put(raw_key, None)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        """The value of ``key``'s session ``[start, end]``, or ``None``."""
        raw = self.inner.get(self._store_key(self.serdes.key_to_bytes(key), Window(start, end)))
        return None if raw is None else self.serdes.value_from_bytes(raw).value

    def find_sessions(
        self, key: Any, earliest_end: int, latest_start: int
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """``key``'s sessions with ``end >= earliest_end`` and ``start <= latest_start``,
        ascending by end (Kafka's ``findSessions``)."""
        key_bytes = self.serdes.key_to_bytes(key)
        de = self.serdes.value_from_bytes
        earliest_end = max(earliest_end, self._min_live_time())
        for segment in self._segments(earliest_end, 2**62):
            seg = _LONG.pack(segment)
            low = seg + key_bytes + _TWO_LONGS.pack(max(earliest_end, 0), 0)
            high = seg + key_bytes + _TWO_LONGS.pack(2**63 - 1, 2**63 - 1)
            for raw_key, raw_value in self.inner.range(low, high):
                if len(raw_key) != len(key_bytes) + 24 or raw_key[8:-16] != key_bytes:
                    continue
                end, start = _TWO_LONGS.unpack_from(raw_key, len(raw_key) - 16)
                if end >= earliest_end and start <= latest_start:
                    yield Windowed(key, Window(start, end)), de(raw_value).value

    def sessions_ending_in(
        self, earliest_end: int, latest_end: int
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """Every key's sessions with ``earliest_end <= end <= latest_end``, by segment then key
        (what ``EmitStrategy.on_window_close`` emits)."""
        de = self.serdes.value_from_bytes
        for segment in self._segments(earliest_end, latest_end):
            low, high = _LONG.pack(segment), _LONG.pack(segment + 1)
            for raw_key, raw_value in self.inner.range(low, high):
                if raw_key >= high:
                    continue
                session = self._windowed_key(raw_key)
                if earliest_end <= session.window.end <= latest_end:
                    yield session, de(raw_value).value

    def fetch(self, key: Any) -> Iterator[tuple[Windowed[Any], Any]]:
        """Every session of ``key``, ascending by end."""
        return self.find_sessions(key, 0, 2**62)

    def all(self) -> Iterator[tuple[Windowed[Any], Any]]:
        """Every ``(Windowed, value)``."""
        de = self.serdes.value_from_bytes
        for raw_key, raw_value in self._entries():
            yield self._windowed_key(raw_key), de(raw_value).value
