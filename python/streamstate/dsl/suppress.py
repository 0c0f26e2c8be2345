"""``KTable.suppress`` (Kafka's ``Suppressed``, ``BufferConfig``, ``KTableSuppressProcessor``
and ``InMemoryTimeOrderedKeyValueChangeBuffer``): a table's updates held back in a buffer and
forwarded later, at most one per key.

* ``Suppressed.until_time_limit(wait, buffer)``: an update is buffered at its record's
  timestamp and forwarded once the processor's stream time (the highest timestamp it has seen)
  reaches that time plus ``wait``; later updates of a buffered key replace it but keep its place.
* ``Suppressed.until_window_closes(buffer)`` (windowed tables only): an update is buffered at its
  window's end and forwarded once stream time reaches the end plus the upstream windows' grace
  period (sessions: grace plus inactivity gap, as Kafka's ``GraphGraceSearchUtil``): each
  window's final result, once. Tombstones of windows are dropped there: nothing was forwarded
  for them before, so there is nothing to delete.
* Buffer limits (``BufferConfig.max_records``, ``max_bytes``): when full, the buffer either
  forwards its oldest entries early (``emit_early_when_full``) or stops the application
  (``shutdown_when_full``, raising :class:`SuppressionBufferFullError`).

Entries leave the buffer in order of buffer time, then serialized key. A forwarded update is
``Change(new, old)`` of the last update buffered for the key, with that update's timestamp and
headers, as Kafka forwards it; the old value of the first one is kept as the key's *prior* value
(what the table held before the suppressed updates, for value views).

The buffer is a task store (in memory, logged, no record cache, like Kafka's buffer): one entry
per serialized key, so a restarted task restores the buffer from its changelog and forwards
what was buffered before. Its order is kept in memory and rebuilt from the store when a task
starts (Kafka rebuilds its buffer from the changelog the same way).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from streamstate.dsl.materialized import Materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.table import KTable
from streamstate.dsl.table_processors import Change, TableState
from streamstate.dsl.windows import Duration, SessionWindows, to_millis
from streamstate.errors import StreamsError, TopologyError
from streamstate.processor.graph import ProcessorNode
from streamstate.processor.processor import Processor
from streamstate.processor.record import Headers, Record

if TYPE_CHECKING:
    from streamstate.processor.context import ProcessorGraphContext
    from streamstate.processor.serde_slot import SerdeSlot

__all__ = [
    "UNBOUNDED",
    "BufferConfig",
    "Buffered",
    "KTableSuppressProcessor",
    "Suppressed",
    "SuppressionBufferFullError",
    "TimeOrderedChangeBuffer",
    "add_suppression",
]

UNBOUNDED = 2**63 - 1
"""No limit: Java's ``Long.MAX_VALUE``, which Kafka's messages print for an unbounded buffer."""

_SUPPRESS = "KTABLE-SUPPRESS-"
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_NULL = -1  # a length meaning "no value"
_SAME_AS_OLD = -2  # the prior value is the old value (Kafka's BufferValue de-duplicates them)


def _limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{what} is an int, not {type(value).__name__}")
    if value < 0:
        raise TopologyError(f"{what} must not be negative, not {value}")
    return value


@dataclass(frozen=True)
class BufferConfig:
    """How much a suppression buffers and what it does when full (Kafka's
    ``Suppressed.BufferConfig``): at most ``record_limit`` entries and ``byte_limit`` bytes
    (:data:`UNBOUNDED`: no limit); when full, ``emit_early`` forwards the oldest entries early
    (Kafka's ``EagerBufferConfig``), else the application stops (``StrictBufferConfig``);
    ``logged``: whether the buffer has a changelog (without one, a restarted task loses what
    was buffered)."""

    record_limit: int = UNBOUNDED
    byte_limit: int = UNBOUNDED
    emit_early: bool = False
    logged: bool = True

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """No limit: the buffer grows as needed (never emits early)."""
        return cls()

    @classmethod
    def max_records(cls, record_limit: int) -> BufferConfig:
        """At most ``record_limit`` keys; emits early when full unless
        :meth:`shutdown_when_full` is called."""
        return cls(_limit(record_limit, "BufferConfig.max_records"), UNBOUNDED, True)

    @classmethod
    def max_bytes(cls, byte_limit: int) -> BufferConfig:
        """At most ``byte_limit`` bytes (Kafka's estimate of an entry's size: serialized key
        and values, timestamp, headers, topic name); emits early when full unless
        :meth:`shutdown_when_full` is called."""
        return cls(UNBOUNDED, _limit(byte_limit, "BufferConfig.max_bytes"), True)

    def with_max_records(self, record_limit: int) -> BufferConfig:
        """This config with a record limit."""
        return replace(self, record_limit=_limit(record_limit, "with_max_records"))

    def with_max_bytes(self, byte_limit: int) -> BufferConfig:
        """This config with a byte limit."""
        return replace(self, byte_limit=_limit(byte_limit, "with_max_bytes"))

    def with_no_bound(self) -> BufferConfig:
        """No limit (logging as before)."""
        return replace(self, record_limit=UNBOUNDED, byte_limit=UNBOUNDED, emit_early=False)

    def shutdown_when_full(self) -> BufferConfig:
        """A full buffer stops the application (raises :class:`SuppressionBufferFullError`)
        rather than forward a result early."""
        return replace(self, emit_early=False)

    def emit_early_when_full(self) -> BufferConfig:
        """A full buffer forwards its oldest entries early (results may then not be final)."""
        return replace(self, emit_early=True)

    def with_logging_disabled(self) -> BufferConfig:
        """No changelog: a restarted task starts with an empty buffer."""
        return replace(self, logged=False)

    def with_logging_enabled(self) -> BufferConfig:
        """A changelog (the default)."""
        return replace(self, logged=True)


@dataclass(frozen=True)
class Suppressed:
    """What a suppression holds back (Kafka's ``Suppressed``), made by
    :meth:`until_window_closes` (``final_results``: the wait is the upstream windows' close
    delay, found when the suppression is added) or :meth:`until_time_limit` (the wait is
    ``time_to_wait_ms``); ``buffer``: its :class:`BufferConfig`; ``name``: see
    :meth:`with_name`."""

    final_results: bool
    time_to_wait_ms: int
    buffer: BufferConfig
    name: str | None = None

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig) -> Suppressed:
        """Only each window's final result, when its window closes (window end + grace of the
        upstream windowed aggregation <= stream time); for windowed tables. The buffer may not
        emit early: an early result would not be final."""
        if not isinstance(buffer_config, BufferConfig):
            raise TopologyError(
                f"Suppressed.until_window_closes takes a BufferConfig, not {buffer_config!r}"
            )
        if buffer_config.emit_early:
            raise TopologyError(
                "Suppressed.until_window_closes needs a buffer that never emits early (an early "
                "result would not be final): use BufferConfig.unbounded(), or a limited one "
                "with .shutdown_when_full()"
            )
        return cls(True, 0, buffer_config)

    @classmethod
    def until_time_limit(cls, time_to_wait: Duration, buffer_config: BufferConfig) -> Suppressed:
        """Each key's latest update ``time_to_wait`` (int ms or ``timedelta``) of stream time
        after the key's first buffered update (or earlier, when a full buffer emits early)."""
        wait = to_millis(time_to_wait, "Suppressed.until_time_limit(time_to_wait)")
        if wait < 0:
            raise TopologyError(
                f"Suppressed.until_time_limit: time_to_wait must not be negative, not {wait} ms"
            )
        if not isinstance(buffer_config, BufferConfig):
            raise TopologyError(
                f"Suppressed.until_time_limit takes a BufferConfig, not {buffer_config!r}"
            )
        return cls(False, wait, buffer_config)

    def with_name(self, name: str) -> Suppressed:
        """The suppression's processor is named ``name``, its buffer store ``<name>-store``."""
        return replace(self, name=NameProvider.given(name, "Suppressed.with_name"))


class SuppressionBufferFullError(StreamsError):
    """A suppression buffer configured with ``shutdown_when_full()`` is full (Kafka's
    ``StreamsException`` "buffer exceeded its max capacity")."""


# -- the buffer -------------------------------------------------------------------------------


class Buffered(NamedTuple):
    """One buffered update: what is forwarded when it leaves the buffer."""

    key: Any
    change: Change
    timestamp: int
    headers: Headers


class _Entry(NamedTuple):
    time: int  # buffer time: the place in the queue
    size: int  # Kafka's estimate of the entry's memory


class _Decoded(NamedTuple):
    timestamp: int
    time: int
    topic: str | None
    headers: Headers
    new: bytes | None
    old: bytes | None
    prior: bytes | None


def _put_bytes(parts: list[bytes], value: bytes | None) -> None:
    if value is None:
        parts.append(_INT.pack(_NULL))
    else:
        parts.append(_INT.pack(len(value)))
        parts.append(value)


def _encode(entry: _Decoded) -> bytes:
    # The record's timestamp comes first: the changelog layer stamps the changelog record with
    # it, as for every DSL store.
    parts = [_LONG.pack(entry.timestamp), _LONG.pack(entry.time)]
    _put_bytes(parts, None if entry.topic is None else entry.topic.encode())
    parts.append(_INT.pack(len(entry.headers)))
    for header_key, header_value in entry.headers:
        _put_bytes(parts, header_key.encode())
        _put_bytes(parts, header_value)
    _put_bytes(parts, entry.new)
    _put_bytes(parts, entry.old)
    if entry.prior is not None and entry.prior == entry.old:
        parts.append(_INT.pack(_SAME_AS_OLD))
    else:
        _put_bytes(parts, entry.prior)
    return b"".join(parts)


def _decode(raw: bytes) -> _Decoded:
    view = memoryview(raw)
    pos = 16

    def take() -> bytes | None:
        nonlocal pos
        length = _INT.unpack_from(view, pos)[0]
        pos += 4
        if length < 0:
            return None
        pos += length
        return bytes(view[pos - length : pos])

    timestamp, time = _LONG.unpack_from(view, 0)[0], _LONG.unpack_from(view, 8)[0]
    topic = take()
    count = _INT.unpack_from(view, pos)[0]
    pos += 4
    headers = []
    for _ in range(count):
        header_key = take() or b""
        headers.append((header_key.decode(), take()))
    new, old = take(), take()
    prior = old if _INT.unpack_from(view, pos)[0] == _SAME_AS_OLD else take()
    return _Decoded(
        timestamp, time, None if topic is None else topic.decode(), tuple(headers), new, old, prior
    )


def _chars(text: str) -> int:
    # Java's String.toCharArray().length: UTF-16 code units.
    return len(text.encode("utf-16-le")) // 2


def _size(raw_key: bytes, entry: _Decoded) -> int:
    """Kafka's ``computeRecordSize``: buffer time, key, the values (the old one only when it
    differs from the prior one) and the record context (timestamp, offset, partition, topic
    name, headers)."""
    size = 8 + len(raw_key)
    for value in (entry.prior, entry.new):
        size += 0 if value is None else len(value)
    if entry.old is not None and entry.old != entry.prior:
        size += len(entry.old)
    size += 8 + 8 + 4 + (0 if entry.topic is None else _chars(entry.topic))
    for header_key, header_value in entry.headers:
        size += _chars(header_key) + (0 if header_value is None else len(header_value))
    return size


class TimeOrderedChangeBuffer:
    """A suppression buffer over the byte store ``inner`` (Kafka's
    ``InMemoryTimeOrderedKeyValueChangeBuffer``): one entry per serialized key; see the module
    doc. The queue (buffer time, key) is kept in memory and rebuilt from the store on first use.
    """

    def __init__(self, inner: Any, name: str, key_serde: Any, value_serde: Any) -> None:
        """``key_serde``/``value_serde``: the table's serdes."""
        self.inner = inner
        self.name = name
        self._ser_key = key_serde.serializer.serialize
        self._de_key = key_serde.deserializer.deserialize
        self._ser_value = value_serde.serializer.serialize
        self._de_value = value_serde.deserializer.deserialize
        self._index: dict[bytes, _Entry] | None = None
        self._queue: list[tuple[int, bytes]] = []
        self._bytes = 0

    def _loaded(self) -> dict[bytes, _Entry]:
        if self._index is None:
            index: dict[bytes, _Entry] = {}
            for raw_key, raw in self.inner.all():
                decoded = _decode(raw)
                index[raw_key] = _Entry(decoded.time, _size(raw_key, decoded))
            self._index = index
            self._queue = [(entry.time, raw_key) for raw_key, entry in index.items()]
            heapq.heapify(self._queue)
            self._bytes = sum(entry.size for entry in index.values())
        return self._index

    def _key_bytes(self, key: Any) -> bytes:
        raw = self._ser_key(self.name, key)
        if raw is None:
            raise ValueError(f"store {self.name!r}: a key serialized to None cannot be buffered")
        return bytes(raw)

    def _value_bytes(self, value: Any) -> bytes | None:
        if value is None:
            return None
        raw = self._ser_value(self.name, value)
        return None if raw is None else bytes(raw)

    def _value(self, raw: bytes | None) -> Any:
        return None if raw is None else self._de_value(self.name, raw)

    def put(self, time: int, record: Record, topic: str | None) -> None:
        """Buffers ``record`` (a ``Change`` value) at ``time``; a key already buffered keeps
        its place and its prior value (Kafka's non-resetting ``cleanPut``)."""
        index = self._loaded()
        raw_key = self._key_bytes(record[0])
        change = record[1]
        new, old = self._value_bytes(change.new), self._value_bytes(change.old)
        found = index.get(raw_key)
        if found is None:
            prior = old
        else:
            time = found.time
            prior = _decode(self.inner.get(raw_key)).prior
        entry = _Decoded(record[2], time, topic, record[3], new, old, prior)
        size = _size(raw_key, entry)
        self.inner.put(raw_key, _encode(entry))
        index[raw_key] = _Entry(time, size)
        if found is None:
            heapq.heappush(self._queue, (time, raw_key))
        else:
            self._bytes -= found.size
        self._bytes += size

    def evict_while(
        self, predicate: Callable[[], bool], callback: Callable[[Buffered], None]
    ) -> None:
        """While ``predicate()`` holds, hands the oldest entry to ``callback`` and removes
        it."""
        index = self._loaded()
        queue = self._queue
        while queue and predicate():
            raw_key = queue[0][1]
            decoded = _decode(self.inner.get(raw_key))
            key = self._de_key(self.name, raw_key)
            change = Change(self._value(decoded.new), self._value(decoded.old))
            callback(Buffered(key, change, decoded.timestamp, decoded.headers))
            heapq.heappop(queue)
            self._bytes -= index.pop(raw_key).size
            self.inner.put(raw_key, None)

    @property
    def min_timestamp(self) -> int:
        """The oldest buffer time (:data:`UNBOUNDED` when empty, as Kafka's)."""
        self._loaded()
        return self._queue[0][0] if self._queue else UNBOUNDED

    @property
    def num_records(self) -> int:
        """The number of buffered keys."""
        return len(self._loaded())

    @property
    def buffer_size(self) -> int:
        """The estimated size of the buffer, bytes (Kafka's ``bufferSize``)."""
        self._loaded()
        return self._bytes

    def prior_value_for_buffered(self, key: Any) -> tuple[bool, Any]:
        """``(True, value)``: ``key`` is buffered and the table held ``value`` before its
        suppressed updates; ``(False, None)``: not buffered (the suppressed table's view is
        then the parent's). What a value view of a suppressed table reads (Kafka's
        ``priorValueForBuffered``)."""
        raw_key = self._key_bytes(key)
        if raw_key not in self._loaded():
            return False, None
        return True, self._value(_decode(self.inner.get(raw_key)).prior)

    def all(self) -> Iterator[tuple[Any, Change]]:
        """Every buffered ``(key, Change)``, in serialized key order (for tests and queries)."""
        for raw_key, raw in self.inner.all():
            decoded = _decode(raw)
            yield (
                self._de_key(self.name, raw_key),
                Change(self._value(decoded.new), self._value(decoded.old)),
            )

    def approximate_num_entries(self) -> int:
        """The number of buffered keys, approximately."""
        return int(self.inner.approximate_num_entries())


# -- the processor ----------------------------------------------------------------------------


class KTableSuppressProcessor(Processor):
    """Buffers a table's changes and forwards them as :class:`Suppressed` says (Kafka's
    ``KTableSuppressProcessor``)."""

    def __init__(
        self,
        store_name: str,
        open_buffer: Callable[[Any], TimeOrderedChangeBuffer],
        suppressed: Suppressed,
        wait_ms: int,
    ) -> None:
        """``wait_ms``: how long after its buffer time an entry leaves the buffer."""
        self.store_name = store_name
        self.open_buffer = open_buffer
        self.final_results = suppressed.final_results
        self.wait_ms = wait_ms
        self.record_limit = suppressed.buffer.record_limit
        self.byte_limit = suppressed.buffer.byte_limit
        self.emit_early = suppressed.buffer.emit_early
        # Kafka keeps stream time in the processor only: a restarted task starts from -1.
        self.observed_stream_time = -1

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the buffer."""
        self.context = context
        self.buffer = self.open_buffer(context.get_state_store(self.store_name))

    def process(self, record: Record) -> None:
        """Buffers the change, then forwards what is due and what does not fit."""
        timestamp = record[2]
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        # Final results wait for the window's end, other suppressions for the record's time.
        time = record[0].window.end if self.final_results else timestamp
        meta = self.context.record_metadata
        self.buffer.put(time, record, None if meta is None else meta.topic)
        self._enforce_constraints()

    def _enforce_constraints(self) -> None:
        buffer = self.buffer
        expiry = self.observed_stream_time - self.wait_ms
        buffer.evict_while(lambda: buffer.min_timestamp <= expiry, self._emit)
        if self._over_capacity():
            if self.emit_early:
                buffer.evict_while(self._over_capacity, self._emit)
                return
            meta = self.context.record_metadata
            raise SuppressionBufferFullError(
                f"{self.context.node_name} buffer exceeded its max capacity. Currently "
                f"[{buffer.num_records}/{self.record_limit}] records and "
                f"[{buffer.buffer_size}/{self.byte_limit}] bytes. Raise the limits of its "
                f"BufferConfig, or let it emit early with .emit_early_when_full() (with "
                f"until_time_limit).",
                topic=None if meta is None else meta.topic,
                partition=None if meta is None else meta.partition,
                offset=None if meta is None else meta.offset,
                store_name=self.store_name,
            )

    def _over_capacity(self) -> bool:
        buffer = self.buffer
        return buffer.num_records > self.record_limit or buffer.buffer_size > self.byte_limit

    def _emit(self, buffered: Buffered) -> None:
        # A window's tombstone under final results: nothing was forwarded for the window
        # before, so there is nothing to delete (Kafka's safeToDropTombstones).
        if buffered.change.new is None and self.final_results:
            return
        self.context.forward(
            Record(buffered.key, buffered.change, buffered.timestamp, buffered.headers)
        )


# -- the DSL operation ------------------------------------------------------------------------


def _session_gap(table: KTable) -> int | None:
    """The inactivity gap of a session table, ``None`` if unknown."""
    gap = getattr(table, "gap_ms", None)
    if isinstance(gap, int):
        return gap
    # Until windowed.py records the gap on session tables (``table.gap_ms``), it is read from
    # the aggregation's processor: made here, never initialized, it only holds its windows.
    node = table.builder.topology._graph.nodes.get(table.name)
    if isinstance(node, ProcessorNode):
        windows = getattr(node.factory(), "windows", None)
        if isinstance(windows, SessionWindows):
            return windows.gap_ms
    return None


def _window_close_delay(table: KTable) -> int:
    """How long after a window's end it closes (Kafka's ``findAndVerifyWindowGrace``): the
    grace period, plus the inactivity gap for sessions."""
    if table.windowed == "time":
        return table.grace_ms
    if table.windowed == "session":
        gap = _session_gap(table)
        if gap is None:
            raise TopologyError(
                f"suppress: the inactivity gap of session table {table.name} is not known"
            )
        return table.grace_ms + gap
    raise TopologyError(
        f"Window close time is only defined for windowed computations. Got [{table.name}]: "
        f"Suppressed.until_window_closes suppresses the table of a windowed aggregation "
        f"(windowed_by(...).count() / reduce / aggregate)"
    )


def add_suppression(table: KTable, suppressed: Suppressed) -> KTable:
    """Adds the suppression processor and its buffer store under ``table``; returns the
    suppressed table (named as Kafka names it: ``KTABLE-SUPPRESS-<n>`` with store
    ``KTABLE-SUPPRESS-STATE-STORE-<n+1>``, or ``<name>`` and ``<name>-store``)."""
    if not isinstance(suppressed, Suppressed):
        raise TopologyError(f"KTable.suppress takes a Suppressed, not {suppressed!r}")
    if table.pending_store is not None and table.pending_store[1].versioned_retention is not None:
        raise TopologyError("suppress() is only supported for non-versioned KTables")
    builder = table.builder
    name = suppressed.name or builder.names.processor(_SUPPRESS)
    wait = _window_close_delay(table) if suppressed.final_results else suppressed.time_to_wait_ms
    store = f"{suppressed.name}-store" if suppressed.name else builder.names.store(_SUPPRESS)
    # The buffer keeps the old value of a key's first buffered change (Kafka enables old
    # values upstream for it).
    table.state.enable_send_old_values()
    key_slot: SerdeSlot = table.key_slot
    value_slot: SerdeSlot = table.value_slot

    def opener(inner: Any) -> TimeOrderedChangeBuffer:
        return TimeOrderedChangeBuffer(inner, store, key_slot.get(), value_slot.get())

    builder.topology.add_processor(
        name, lambda: KTableSuppressProcessor(store, opener, suppressed, wait), table.name
    )
    mat = Materialized(persistent=False, logged=suppressed.buffer.logged, caching=False)
    builder.add_store(store, mat, opener, name)
    result = KTable(builder, name, key_slot, value_slot, TableState(parent=table.state))
    # A suppressed windowed table is still windowed (a later until_window_closes finds the
    # same close time, as Kafka's grace search walks through the suppression).
    result.windowed = table.windowed
    result.grace_ms = table.grace_ms
    gap = _session_gap(table) if table.windowed == "session" else None
    if gap is not None:
        setattr(result, "gap_ms", gap)  # noqa: B010 - see _session_gap
    return result
