"""The stores of a windowed stream-stream join (Kafka's ``KStreamImplJoin`` stores).

* :class:`JoinWindowStore`: each side's records, a window store **retaining duplicates**
  (Kafka's window store with ``retainDuplicates=true``): every record is kept, under its key,
  its timestamp and a sequence number, for ``before + after + grace``; the store key is
  ``segment (8) + key + timestamp (8) + seqnum (4)``, so a fetch of one key returns its
  records by timestamp, then in the order they were written, as Kafka's does. Segments,
  expiry and the reads that hide what is older than the retention are those of the DSL's
  window stores (:mod:`streamstate.dsl.stores`).
* :class:`OuterJoinStore`: the records of a left or outer join still waiting for a match
  (Kafka's ``KSTREAM-OUTERSHARED-...`` store of ``TimestampedKeyAndJoinSide`` to
  ``LeftOrRightValue``, a list-value store): keyed by ``timestamp (8) + side (1: left, 0:
  right) + key``, so iterating it visits the oldest records first, the right side's before
  the left side's at one timestamp, as Kafka's does; a key holds a list of values (records of
  one key, side and timestamp are all kept).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

from streamstate.dsl.stores import StoreSerdes, _Segmented
from streamstate.dsl.windows import Window, Windowed

__all__ = [
    "JoinWindowStore",
    "LeftOrRightValue",
    "OuterJoinStore",
    "TimestampedKeyAndJoinSide",
]

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SEQ_LOW = b"\x00" * 4
_SEQ_HIGH = b"\xff" * 4


class JoinWindowStore(_Segmented):
    """One side's records of a stream-stream join; see the module doc."""

    def __init__(
        self, inner: Any, serdes: StoreSerdes, retention_ms: int, window_size_ms: int
    ) -> None:
        """``inner``: the task's byte store (or a query's facade); ``window_size_ms``:
        ``before + after``, which gives the ``Windowed`` keys of :meth:`all` their end."""
        super().__init__(inner, serdes, retention_ms)
        self.window_size_ms = window_size_ms
        # Kafka's sequence number for duplicates: per store instance, from 0 at each start.
        self._seqnum = 0

    def put(self, key: Any, value: Any, timestamp: int) -> bool:
        """Keeps ``value`` under ``key`` at ``timestamp``; ``False`` when its segment has
        expired and the record is not kept (Kafka counts it as dropped). A ``None`` value is
        not kept (a delete of nothing, with duplicates retained) and does not move time."""
        if value is None:
            return True
        if not self._observe(timestamp):
            return False
        self._seqnum = (self._seqnum + 1) & 0x7FFFFFFF
        raw_key = (
            _LONG.pack(self._segment(timestamp))
            + self.serdes.key_to_bytes(key)
            + _LONG.pack(timestamp)
            + _INT.pack(self._seqnum)
        )
        self.inner.put(raw_key, self.serdes.value_to_bytes(value, timestamp))
        return True

    def fetch(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any]]:
        """``(timestamp, value)`` of ``key``'s records with ``time_from <= timestamp <=
        time_to`` (and within the retention), by timestamp then write order, lazily."""
        time_from = max(time_from, self._min_live_time())
        if time_to < time_from:
            return
        key_bytes = self.serdes.key_to_bytes(key)
        size = len(key_bytes) + 20
        de = self.serdes.value_from_bytes
        for segment in self._segments(time_from, time_to):
            seg = _LONG.pack(segment)
            low = seg + key_bytes + _LONG.pack(max(time_from, 0)) + _SEQ_LOW
            high = seg + key_bytes + _LONG.pack(time_to) + _SEQ_HIGH
            for raw_key, raw_value in self.inner.range(low, high):
                if len(raw_key) != size or raw_key[8:-12] != key_bytes:
                    continue  # another key whose bytes sort in between
                timestamp = _LONG.unpack_from(raw_key, size - 12)[0]
                if time_from <= timestamp <= time_to:
                    yield timestamp, de(raw_value).value

    def all(self) -> Iterator[tuple[Windowed[Any], Any]]:
        """Every record as ``(Windowed(key, [timestamp, timestamp + size]), value)``, as
        Kafka's window store iterates (what the ``TopologyTestDriver`` queries see)."""
        de = self.serdes.value_from_bytes
        size = self.window_size_ms
        for raw_key, raw_value in self._entries():
            timestamp = _LONG.unpack_from(raw_key, len(raw_key) - 12)[0]
            key = self.serdes.key_from_bytes(raw_key[8:-12])
            yield Windowed(key, Window(timestamp, timestamp + size)), de(raw_value).value


class TimestampedKeyAndJoinSide(NamedTuple):
    """A key of the outer-join store: the record's key, timestamp and side (Kafka's)."""

    key: Any
    timestamp: int
    left_side: bool


class LeftOrRightValue(NamedTuple):
    """A value of the outer-join store: the left or the right record's value (Kafka's)."""

    left_value: Any
    right_value: Any


class OuterJoinStore:
    """The unmatched records of a left or outer join; see the module doc."""

    def __init__(self, inner: Any, key_serdes: StoreSerdes, left: Any, right: Any) -> None:
        """``key_serdes``: the store's name and key serde; ``left`` and ``right``: the value
        serdes of the two sides."""
        self.inner = inner
        self.name = key_serdes.name
        self._key = key_serdes
        self._values = (right, left)  # by side byte: 0 right, 1 left

    def _raw_key(self, key: Any, timestamp: int, left_side: bool) -> bytes:
        return (
            _LONG.pack(timestamp)
            + (b"\x01" if left_side else b"\x00")
            + (self._key.key_to_bytes(key))
        )

    def put(self, key: Any, timestamp: int, left_side: bool, value: Any) -> None:
        """Adds ``value`` to the list under ``(key, timestamp, side)``."""
        raw_key = self._raw_key(key, timestamp, left_side)
        raw = self._values[left_side].serializer.serialize(self.name, value) or b""
        entry = _INT.pack(len(raw) + 1) + (b"\x01" if left_side else b"\x00") + raw
        old = self.inner.get(raw_key)
        self.inner.put(raw_key, entry if old is None else bytes(old) + entry)

    def remove(self, key: Any, timestamp: int, left_side: bool) -> None:
        """Removes every value under ``(key, timestamp, side)``, if there are any (Kafka's
        ``putIfAbsent(key, null)``: no write, hence no changelog record, when there are
        none)."""
        raw_key = self._raw_key(key, timestamp, left_side)
        if self.inner.get(raw_key) is not None:
            self.inner.put(raw_key, None)

    def delete_raw(self, raw_key: bytes) -> None:
        """Removes the list under a key :meth:`entries` returned."""
        self.inner.put(raw_key, None)

    def entries(self) -> Iterator[tuple[bytes, TimestampedKeyAndJoinSide, LeftOrRightValue]]:
        """Every value, oldest first (see the module doc), with its raw key, lazily."""
        de_key = self._key.key_from_bytes
        for raw_key, raw_value in self.inner.all():
            timestamp = _LONG.unpack_from(raw_key)[0]
            left_side = raw_key[8] == 1
            key = TimestampedKeyAndJoinSide(de_key(raw_key[9:]), timestamp, left_side)
            for left, value in self._decode(raw_value):
                pair = LeftOrRightValue(value, None) if left else LeftOrRightValue(None, value)
                yield raw_key, key, pair

    def _decode(self, raw: bytes) -> Iterator[tuple[bool, Any]]:
        position = 0
        while position < len(raw):
            length = _INT.unpack_from(raw, position)[0]
            side = raw[position + 4] == 1
            body = bytes(raw[position + 5 : position + 4 + length])
            yield side, self._values[side].deserializer.deserialize(self.name, body)
            position += 4 + length

    def all(self) -> Iterator[tuple[TimestampedKeyAndJoinSide, LeftOrRightValue]]:
        """Every ``(TimestampedKeyAndJoinSide, LeftOrRightValue)``, oldest first."""
        for _, key, value in self.entries():
            yield key, value

    def approximate_num_entries(self) -> int:
        """The number of keys, approximately."""
        return int(self.inner.approximate_num_entries())
