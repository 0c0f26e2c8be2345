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
import time
from collections.abc import Callable, Iterator
from typing import Any

from streamstate.dsl.stores import StoreSerdes
from streamstate.dsl.value_getters import RowValueGetter, ValueGetterSupplier
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.processor_topology import PlainSink
from streamstate.processor.record import Headers, Record

__all__ = ["StreamTableJoinProcessor", "TimeOrderedJoinBuffer"]

_log = logging.getLogger("streamstate.dsl.KStreamKTableJoin")
_new_record = tuple.__new__


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

    def run_handler(self, sink: PlainSink, topology: Any) -> Callable[[list[Any]], int] | None:
        """For a plain lookup (the record's own key, an unversioned table, no grace, the
        joiner without the key) forwarding straight to ``sink``: a function that takes a run of
        source ``StampedRecord``s (``ProcessorTopology.run_handlers``) and joins and writes
        them one after the other exactly as :meth:`process` and the sink would, the source,
        the forward and the sink's calls inlined; it returns how many it took, stopping before
        a record with a null key or value or with headers (those go through :meth:`process`).
        ``topology.current`` is the record being joined (the one that raised, if one
        does). ``None`` for any other join."""
        if not self._plain or self.forward is not sink.write:
            return None
        lookup, joiner, left = self._lookup, self.joiner, self.left
        topic, write, on_delivery = sink.topic, sink.write, sink.on_delivery
        serialize_key, serialize_value = sink.serialize_key, sink.serialize_value
        producer = sink.producer
        poll = producer.poll
        # A stream thread's producer checks each sink timestamp (app/sink_timestamps.py): the
        # check inlined, a record failing it written by the sink itself. Looked up on the class:
        # a wrapper forwarding attributes (the exactly-once tracker) is not that producer.
        checked = getattr(type(producer), "inline_limits", None) is not None
        produce = producer.unchecked_produce if checked else producer.produce
        clock = time.time
        # The lookup of a cached table inlined for a string key whose row is flushed (the
        # common case): RowValueGetter.get_value's first branch, the rest through it.
        flushed = self.getter.flushed_rows()
        dirty, raw_rows, decode, store = flushed if flushed is not None else ({}, {}, None, "")

        def run(records: list[Any]) -> int:
            done = 0
            limits: tuple[int | None, int | None] | None = None
            for stamped in records:
                key = stamped.key
                value = stamped.value
                if key is None or value is None or stamped.headers:
                    break
                topology.current = stamped
                if type(key) is str and key not in dirty and (raw := raw_rows.get(key)):
                    row = decode(store, raw[8:])  # type: ignore[misc]
                else:
                    row = lookup(key)
                if row is None and not left:
                    done += 1
                    continue
                joined = joiner(value, row)
                timestamp = stamped.timestamp
                if checked and timestamp > 0:
                    if limits is None:
                        limits = producer.inline_limits(topic)
                    latest, earliest = limits
                    now = int(clock() * 1000)
                    if (latest is not None and timestamp - now > latest) or (
                        earliest is not None and now - timestamp > earliest
                    ):
                        write(_new_record(Record, (key, joined, timestamp, ())))
                        done += 1
                        continue
                elif timestamp < 0:
                    write(_new_record(Record, (key, joined, timestamp, ())))  # it raises
                    done += 1
                    continue
                raw_key = serialize_key(topic, key)
                raw_value = serialize_value(topic, joined)
                while True:
                    try:
                        produce(
                            topic, raw_value, raw_key, timestamp=timestamp, on_delivery=on_delivery
                        )
                        break
                    except BufferError:
                        poll(0.05)
                done += 1
            return done

        return run

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
