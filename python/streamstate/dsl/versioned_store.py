"""Versioned key-value stores (Kafka's ``VersionedKeyValueStore``, KIP-889) for DSL tables.

``Materialized(name, versioned_retention=...)`` on ``StreamsBuilder.table``,
``KStream.to_table``, ``KTable.filter``/``filter_not``/``map_values`` keeps every version of
each key for the history retention: a put with a newer timestamp becomes the latest, an older
one goes into the history (out of order), a ``None`` value is a tombstone at its timestamp.
``get(key)`` is the latest record, ``get(key, as_of)`` the record valid at ``as_of`` (the
greatest timestamp ``<= as_of``), with Kafka's ``RocksDBVersionedStore`` semantics:

* the store's observed stream time ``S`` is the greatest timestamp ever put (per partition);
* a put (or delete) older than ``S - retention`` is refused (:data:`PUT_RETURN_CODE_NOT_PUT`):
  the history retention doubles as the grace period;
* ``get(key, as_of)`` with ``as_of < S - retention`` is ``None`` unless the key's latest
  record is not a tombstone and is valid at ``as_of`` (the latest version never expires);
* ``put`` returns the new version's ``valid_to``: :data:`PUT_RETURN_CODE_VALID_TO_UNDEFINED`
  (-1) when it is the latest version.

Layout over the task's byte store (logged and restored as any DSL store, never cached: Kafka
disallows caching for versioned stores): one entry per key, ``0x00 + key`` -> 8 bytes (the
timestamp of the put that wrote it: the changelog record's timestamp) then the key's versions in
ascending ``valid_from`` order, each ``valid_from (8) + length (4, -1: tombstone) + value``.
Each changelog record is thus the key's whole history, so restoring the store byte for byte
rebuilds it (Kafka's changelog holds one record per put instead and replays them). The observed
stream time is kept under ``0x01`` (logged too, written when it advances) so that a restored
store and a query know it. A key's expired versions (``valid_to <= S - retention``) are dropped
when the key is written; reads never return them (Kafka drops whole segments instead).

:class:`VersionedStoreOpener` opens the store for the table's processors, the test driver
(:class:`VersionedKeyValueStore`) and ``StreamsApp.store`` (:class:`VersionedStoreQuery`).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from streamstate.dsl.stores import StoreSerdes, ValueAndTimestamp

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "VersionedStoreOpener",
    "VersionedStoreQuery",
]

_log = logging.getLogger(__name__)

PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
"""What ``put`` returns when the version put is the key's latest (Kafka's constant)."""
PUT_RETURN_CODE_NOT_PUT = -(2**63)
"""What ``put`` returns when the put is older than the history retention (Kafka's
``Long.MIN_VALUE``): nothing was written."""

_LONG = struct.Struct(">q")
_VERSION = struct.Struct(">qi")
_KEY = b"\x00"
_STREAM_TIME = b"\x01observed-stream-time"
_NO_TIMESTAMP = -1
# Kafka's VersionedChangelogTopicConfig: min.compaction.lag.ms = history retention + 1 day.
_CHANGELOG_EXTRA_LAG_MS = 86_400_000


class VersionedRecord(NamedTuple):
    """A version of a key (Kafka's ``VersionedRecord``): its ``value``, ``timestamp`` (when
    it became valid) and ``valid_to`` (when the next version replaced it; ``None`` for the
    latest version)."""

    value: Any
    timestamp: int
    valid_to: int | None = None


# A key's versions: (valid_from, value bytes or None for a tombstone), ascending.
_Versions = list[tuple[int, bytes | None]]


def _decode(raw: bytes) -> _Versions:
    versions: _Versions = []
    offset, end = 8, len(raw)
    while offset < end:
        valid_from, length = _VERSION.unpack_from(raw, offset)
        offset += _VERSION.size
        if length < 0:
            versions.append((valid_from, None))
        else:
            versions.append((valid_from, bytes(raw[offset : offset + length])))
            offset += length
    return versions


def _encode(put_timestamp: int, versions: _Versions) -> bytes:
    parts = [_LONG.pack(put_timestamp)]
    for valid_from, value in versions:
        if value is None:
            parts.append(_VERSION.pack(valid_from, -1))
        else:
            parts.append(_VERSION.pack(valid_from, len(value)))
            parts.append(value)
    return b"".join(parts)


def _find(versions: _Versions, timestamp: int) -> int:
    """The index of the version valid at ``timestamp`` (greatest ``valid_from <=
    timestamp``), or -1."""
    low, high = 0, len(versions)
    while low < high:
        middle = (low + high) // 2
        if versions[middle][0] <= timestamp:
            low = middle + 1
        else:
            high = middle
    return low - 1


def _as_of(
    versions: _Versions, as_of: int, stream_time: int, retention_ms: int
) -> tuple[bytes, int, int | None] | None:
    """The raw version of ``versions`` valid at ``as_of`` (value, valid_from, valid_to), by
    Kafka's rules (module doc)."""
    if not versions:
        return None
    if as_of < stream_time - retention_ms:
        # History retention exceeded: only the latest version (never expired) may answer.
        valid_from, value = versions[-1]
        if value is not None and valid_from <= as_of:
            return value, valid_from, None
        return None
    index = _find(versions, as_of)
    if index < 0:
        return None
    valid_from, value = versions[index]
    if value is None:
        return None
    valid_to = versions[index + 1][0] if index + 1 < len(versions) else None
    return value, valid_from, valid_to


def _latest(versions: _Versions) -> tuple[bytes, int, int | None] | None:
    """The latest version (value, valid_from, no valid_to), ``None`` if it is a tombstone."""
    if not versions:
        return None
    valid_from, value = versions[-1]
    return None if value is None else (value, valid_from, None)


def _prune(versions: _Versions, stream_time: int, retention_ms: int) -> _Versions:
    """``versions`` without those no allowed read or put can reach any more: versions whose
    ``valid_to`` is at most ``S - retention``, and a latest tombstone older than that."""
    horizon = stream_time - retention_ms
    first = 0
    while first + 1 < len(versions) and versions[first + 1][0] <= horizon:
        first += 1
    kept = versions[first:]
    if len(kept) == 1 and kept[0][1] is None and kept[0][0] < horizon:
        # A latest tombstone before the horizon answers every allowed read as no version
        # would, and every allowed put lands after it.
        return []
    return kept


class VersionedKeyValueStore:
    """A typed versioned key-value store over the byte store ``inner``; see the module doc.
    ``retention_ms`` is the history retention (and grace period)."""

    def __init__(self, inner: Any, serdes: StoreSerdes, retention_ms: int) -> None:
        """``inner``: a task's store layer (reads and writes), or a query's read-only view."""
        self.inner = inner
        self.serdes = serdes
        self.name = serdes.name
        self.retention_ms = retention_ms
        self.cache = None  # never cached (Kafka disallows caching for versioned stores)

    # -- what the store knows -------------------------------------------------------------------

    @property
    def observed_stream_time(self) -> int:
        """The greatest timestamp ever put (-1: none yet), read from the store each time:
        every typed store over the same byte store (the table's, a join's) sees the same."""
        return _stream_time(self.inner)

    def _store_key(self, key: Any) -> bytes:
        return _KEY + self.serdes.key_to_bytes(key)

    def _versions(self, key: Any) -> _Versions:
        raw = self.inner.get(self._store_key(key))
        return [] if raw is None else _decode(raw)

    def _record(self, found: tuple[bytes, int, int | None] | None) -> VersionedRecord | None:
        if found is None:
            return None
        value = self.serdes.value_serde.deserializer.deserialize(self.name, found[0])
        return VersionedRecord(value, found[1], found[2])

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The latest record of ``key`` (``as_of`` ``None``), or the one valid at ``as_of``
        (the greatest timestamp ``<= as_of``); ``None`` when there is none, when a tombstone
        was valid then, or when ``as_of`` is older than the history retention (unless the
        latest record answers)."""
        versions = self._versions(key)
        if as_of is None:
            return self._record(_latest(versions))
        stream_time = self.observed_stream_time
        found = _as_of(versions, as_of, stream_time, self.retention_ms)
        if found is None and as_of < stream_time - self.retention_ms:
            _log.debug("Returning null for expired get (store %s).", self.name)
        return self._record(found)

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The latest value of ``key`` and its timestamp, as a timestamped store gives them
        (Kafka's ``KeyValueStoreWrapper.get``), or ``None``."""
        found = self.get(key)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)

    def get_as_of(self, key: Any, as_of: int) -> ValueAndTimestamp | None:
        """``get(key, as_of)`` as a ``ValueAndTimestamp`` (what a stream-table join reads,
        Kafka's ``KeyValueStoreWrapper.get(key, timestamp)``), or ``None``."""
        found = self.get(key, as_of)
        return None if found is None else ValueAndTimestamp(found.value, found.timestamp)

    def all(self) -> Iterator[tuple[Any, VersionedRecord]]:
        """Every key whose latest record is not a tombstone, with that record, in serialized
        key order (not part of Kafka's interface; for tests and inspection)."""
        de_key = self.serdes.key_from_bytes
        for raw_key, raw in self.inner.range(_KEY, _STREAM_TIME[:1]):
            if not raw_key.startswith(_KEY):
                continue
            record = self._record(_latest(_decode(raw)))
            if record is not None:
                yield de_key(raw_key[1:]), record

    def approximate_num_entries(self) -> int:
        """The number of keys with any version, approximately."""
        entries = int(self.inner.approximate_num_entries())
        return entries - (self.inner.get(_STREAM_TIME) is not None)

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int, headers: Any = ()) -> int:
        """Adds the version ``value`` (``None``: a tombstone) of ``key`` at ``timestamp`` (one
        version per key and timestamp: a second put replaces the first). Returns the version's
        ``valid_to``: :data:`PUT_RETURN_CODE_VALID_TO_UNDEFINED` if it is the latest,
        :data:`PUT_RETURN_CODE_NOT_PUT` if ``timestamp`` is older than the history retention
        (nothing is written). ``headers`` is ignored (the signature of the timestamped
        store's ``put``)."""
        stream_time = self.observed_stream_time
        if timestamp < stream_time - self.retention_ms:
            _log.warning("Skipping record for expired put (store %s).", self.name)
            return PUT_RETURN_CODE_NOT_PUT
        if timestamp > stream_time:
            stream_time = timestamp
            self.inner.put(_STREAM_TIME, _LONG.pack(timestamp))
        raw_value = None
        if value is not None:
            raw_value = bytes(self.serdes.value_serde.serializer.serialize(self.name, value) or b"")
        store_key = self._store_key(key)
        raw = self.inner.get(store_key)
        versions = [] if raw is None else _decode(raw)
        index = _find(versions, timestamp)
        if index >= 0 and versions[index][0] == timestamp:
            versions[index] = (timestamp, raw_value)
        else:
            index += 1
            versions.insert(index, (timestamp, raw_value))
        valid_to = (
            versions[index + 1][0]
            if index + 1 < len(versions)
            else PUT_RETURN_CODE_VALID_TO_UNDEFINED
        )
        versions = _prune(versions, stream_time, self.retention_ms)
        self.inner.put(store_key, _encode(timestamp, versions) if versions else None)
        return valid_to

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Puts a tombstone for ``key`` at ``timestamp``; returns the record valid at
        ``timestamp`` before (``None`` also when ``timestamp`` is older than the history
        retention: then nothing is deleted)."""
        if timestamp < self.observed_stream_time - self.retention_ms:
            _log.warning("Skipping record for expired delete (store %s).", self.name)
            return None
        existing = self.get(key, timestamp)
        self.put(key, None, timestamp)
        return existing

    def set_flush_listener(self, listener: Any, *, with_old: bool) -> bool:
        """``False``: a versioned store has no record cache (updates are forwarded at once)."""
        return False


def _stream_time(inner: Any) -> int:
    raw = inner.get(_STREAM_TIME)
    return _NO_TIMESTAMP if raw is None else int(_LONG.unpack(raw)[0])


class VersionedStoreQuery:
    """A versioned table's store as ``StreamsApp.store(name)`` gives it (interactive queries,
    Kafka's ``VersionedKeyQuery``): ``get(key)`` and ``get(key, as_of)`` over every local
    partition (each partition answers by its own observed stream time)."""

    def __init__(self, view: Any, serdes: StoreSerdes, retention_ms: int) -> None:
        """``view``: the query's read-only byte facade over the local partitions."""
        self.view = view
        self.serdes = serdes
        self.name = serdes.name
        self.retention_ms = retention_ms

    def _over_partitions(self, read: Callable[[list[Any]], Any]) -> Any:
        # The facade answers over every local partition; an as-of read needs the stream time
        # of the partition holding the key, so the partitions are read one by one, inside the
        # facade's checks (a store closed under the read raises StateStoreMigratedError).
        call = getattr(self.view, "_call", None)
        return read([self.view]) if call is None else call(read)

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """As :meth:`VersionedKeyValueStore.get`."""

        def find(stores: list[Any]) -> VersionedRecord | None:
            for store in stores:
                typed = VersionedKeyValueStore(store, self.serdes, self.retention_ms)
                if store.get(typed._store_key(key)) is not None:
                    return typed.get(key, as_of)
            return None

        found: VersionedRecord | None = self._over_partitions(find)
        return found

    def all(self) -> Iterator[tuple[Any, VersionedRecord]]:
        """As :meth:`VersionedKeyValueStore.all`, over every local partition (read at once)."""

        def every(stores: list[Any]) -> list[tuple[Any, VersionedRecord]]:
            rows: list[tuple[Any, VersionedRecord]] = []
            for store in stores:
                rows += VersionedKeyValueStore(store, self.serdes, self.retention_ms).all()
            return rows

        rows: list[tuple[Any, VersionedRecord]] = self._over_partitions(every)
        return iter(rows)


class VersionedStoreOpener:
    """How a processor, the test driver or a query opens the versioned store ``name``: a
    task's store layer gives a :class:`VersionedKeyValueStore`, a query's read-only facade a
    :class:`VersionedStoreQuery`."""

    def __init__(self, name: str, key_slot: Any, value_slot: Any, retention_ms: int) -> None:
        """``key_slot``/``value_slot``: the table's serde slots; ``retention_ms``: the
        history retention."""
        key_slot.use()
        value_slot.use()
        self.name = name
        self.retention_ms = retention_ms
        self._key = key_slot
        self._value = value_slot

    def __call__(self, inner: Any) -> Any:
        """The typed store over ``inner``."""
        serdes = StoreSerdes(self.name, self._key.get(), self._value.get())
        if hasattr(inner, "_call"):
            return VersionedStoreQuery(inner, serdes, self.retention_ms)
        return VersionedKeyValueStore(inner, serdes, self.retention_ms)

    def changelog_config(self) -> dict[str, str]:
        """The changelog topic's configs, as Kafka creates a versioned store's: compacted,
        compaction held back for the history retention plus a day."""
        return {
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": str(self.retention_ms + _CHANGELOG_EXTRA_LAG_MS),
        }
