"""The processors of stream-table joins (Kafka's ``KStreamKTableJoinProcessor``, which also
runs ``KStreamGlobalKTableJoin``), which read tables through their value getters
(:mod:`streamstate.dsl.value_getters`), and the time-ordered buffer of a join with a grace
period (KIP-923, Kafka's ``RocksDBTimeOrderedKeyValueBuffer``).

A stream record looks up one row: the table's value for the record's key (or, with a global
table, for ``key_selector(key, value)``), as of the record's timestamp when the table is
versioned. An inner join forwards ``joiner(value, row)`` only when there is a row; a left join
forwards it always (``row`` ``None`` when there is none). The table never triggers output.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from typing import Any

from streamstate.dsl.stores import StoreSerdes
from streamstate.dsl.value_getters import RowValueGetter, ValueGetterSupplier
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Headers, Record

__all__ = ["StreamTableJoinProcessor", "TimeOrderedJoinBuffer"]

_log = logging.getLogger("streamstate.dsl.KStreamKTableJoin")


class StreamTableJoinProcessor(Processor):
    """Joins each stream record with the table row of its (selected) key; see the module
    doc. ``key_selector`` is ``None`` for a ``KTable`` join (the record's key), ``grace_ms``
    and ``buffer`` are given for a join with a grace period."""

    def __init__(  # noqa: PLR0917 - made in one place, by the DSL
        self,
        table: ValueGetterSupplier,
        key_selector: Callable[[Any, Any], Any] | None,
        joiner: Callable[..., Any],
        left: bool,
        with_key: bool,
        grace_ms: int | None = None,
        buffer: Callable[[ProcessorGraphContext], TimeOrderedJoinBuffer] | None = None,
    ) -> None:
        """``table``: how the table is read (versioned: as of each record's time)."""
        self.table = table
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left
        self.with_key = with_key
        self.grace_ms = grace_ms
        self.open_buffer = buffer
        self.buffer: TimeOrderedJoinBuffer | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the value getter (and the buffer)."""
        self.context = context
        self.forward = context.trusted_forward()  # forwards only Records
        self.getter = RowValueGetter(self.table.open(context))
        self.versioned = self.table.versioned
        self._lookup = self.getter.get
        if self.open_buffer is not None:
            self.buffer = self.open_buffer(context)
        # The common case, a plain lookup by the record's own key, joined in process() itself
        # (one Python call per record saved).
        self._plain = (
            self.key_selector is None
            and not self.versioned
            and self.buffer is None
            and not self.with_key
        )

    def process(self, record: Record) -> None:
        """Joins ``record`` (or buffers it, with a grace period)."""
        key, value = record[0], record[1]
        if self._plain and key is not None and value is not None:
            row = self._lookup(key)
            if row is None and not self.left:
                return
            joined = self.joiner(value, row)
            self.forward(tuple.__new__(Record, (key, joined, record[2], record[3])))
            return
        mapped = key if self.key_selector is None else self.key_selector(key, value)
        if value is None or (mapped is None and not self.left):
            # Kafka's maybeDropRecord: a left join still joins a record whose (selected) key
            # is null, with no row.
            meta = self.context.record_metadata
            if meta is not None:
                _log.warning(
                    "Skipping record due to null join key or value. topic=[%s] partition=[%s] "
                    "offset=[%s]",
                    meta.topic,
                    meta.partition,
                    meta.offset,
                )
            else:
                _log.warning(
                    "Skipping record due to null join key or value. Topic, partition, and "
                    "offset not known."
                )
            self.context.record_dropped()
            return
        buffer = self.buffer
        if buffer is None or key is None or not buffer.put(record):
            self._join(record, mapped)
            return
        for evicted in buffer.evict():
            self._join(evicted, evicted[0])

    def _join(self, record: Record, mapped: Any) -> None:
        key, value = record[0], record[1]
        if mapped is None:
            row = None
        elif self.versioned:
            row = self.getter.get_as_of(mapped, record[2])
        else:
            row = self._lookup(mapped)
        if row is None and not self.left:
            return
        joined = self.joiner(key, value, row) if self.with_key else self.joiner(value, row)
        self.forward(tuple.__new__(Record, (key, joined, record[2], record[3])))


# -- the grace period's buffer ----------------------------------------------------------------

_TIME = struct.Struct(">Q")
_SEQ = struct.Struct(">I")
_META_VALUE = struct.Struct(">qI")
_SIGN = 1 << 63
# The buffer's own stream time and sequence number, kept in the store so that a restarted
# task decides lateness as before; it sorts before every entry (timestamps are >= 0).
_META = b"\x00streamstate:observed-stream-time"
_FIRST = _TIME.pack(_SIGN)  # the key of timestamp 0
_LEN = struct.Struct(">i")
_SHORT = struct.Struct(">H")


class TimeOrderedJoinBuffer:
    """Stream records waiting out a join's grace period, in timestamp order (Kafka's
    ``RocksDBTimeOrderedKeyValueBuffer``): store key ``timestamp (8) + key + sequence
    number (4)``, so records of one timestamp come out in key-byte order, as in Kafka; value
    the serialized value and headers. Logged like any store (``<name>-changelog``)."""

    def __init__(self, inner: Any, name: str, key_serde: Any, value_serde: Any, grace_ms: int):
        """``inner``: the task's byte store."""
        self.inner = inner
        self.name = name
        self.grace_ms = grace_ms
        # Keys are serialized as a store's (one rule for a key that cannot be stored).
        self.keys = StoreSerdes(name, key_serde, value_serde)
        self._value_ser = value_serde.serializer.serialize
        self._value_de = value_serde.deserializer.deserialize
        meta = inner.get(_META)
        self.observed, self.seqnum = _META_VALUE.unpack(meta) if meta is not None else (-1, 0)

    def put(self, record: Record) -> bool:
        """Buffers ``record``; ``False`` (not buffered) when it is already older than stream
        time minus the grace period: it is joined at once, as in Kafka."""
        timestamp = record[2]
        if self.observed - self.grace_ms > timestamp:
            return False
        self.seqnum = (self.seqnum + 1) & 0x7FFFFFFF
        raw_key = self.keys.key_to_bytes(record[0])
        store_key = _TIME.pack(timestamp ^ _SIGN) + raw_key + _SEQ.pack(self.seqnum)
        self.inner.put(store_key, _encode(self._value_ser(self.name, record[1]), record[3]))
        self.observed = max(self.observed, timestamp)
        self.inner.put(_META, _META_VALUE.pack(self.observed, self.seqnum))
        return True

    def evict(self) -> Iterator[Record]:
        """Removes and yields, oldest first, every record at or before stream time minus the
        grace period."""
        limit = self.observed - self.grace_ms
        if limit < 0:
            return
        # Every key below the first of timestamp limit + 1 (range() includes its end).
        upper = _TIME.pack((limit + 1) ^ _SIGN)
        due = [(k, v) for k, v in self.inner.range(_FIRST, upper) if k < upper]
        for store_key, raw in due:
            timestamp = _TIME.unpack_from(store_key)[0] ^ _SIGN
            key = self.keys.key_from_bytes(store_key[8:-4])
            raw_value, headers = _decode(raw)
            value = self._value_de(self.name, raw_value)
            self.inner.put(store_key, None)
            yield Record(key, value, timestamp, headers)

    def num_records(self) -> int:
        """How many records wait."""
        return sum(1 for k, _ in self.inner.range(_FIRST, b"\xff" * 16) if k != _META)


def _encode(value: bytes | None, headers: Headers) -> bytes:
    raw = b"" if value is None else bytes(value)
    parts = [_LEN.pack(len(raw)), raw, _SHORT.pack(len(headers))]
    for name, data in headers:
        encoded = name.encode()
        parts += [_SHORT.pack(len(encoded)), encoded]
        parts += [_LEN.pack(-1)] if data is None else [_LEN.pack(len(data)), bytes(data)]
    return b"".join(parts)


def _decode(raw: bytes) -> tuple[bytes, Headers]:
    length = _LEN.unpack_from(raw)[0]
    at = 4 + length
    value = raw[4:at]
    count = _SHORT.unpack_from(raw, at)[0]
    at += 2
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name_len = _SHORT.unpack_from(raw, at)[0]
        name = raw[at + 2 : at + 2 + name_len].decode()
        at += 2 + name_len
        data_len = _LEN.unpack_from(raw, at)[0]
        at += 4
        if data_len < 0:
            headers.append((name, None))
        else:
            headers.append((name, raw[at : at + data_len]))
            at += data_len
    return value, tuple(headers)
