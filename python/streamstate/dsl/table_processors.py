"""The processors behind ``KTable`` and the aggregations that make one (Kafka's
``KTableSource``, ``KTableFilter``, ``KTableMapValues``, ``KTableToStream``,
``KTableRepartitionMap``, ``KTableAggregate``/``KTableReduce``, ``KStreamAggregate``/
``KStreamReduce``).

Between a table's processors a record's value is a :class:`Change`: the new value and, when a
processor downstream needs it (``send_old_values``, as Kafka enables it for ``group_by``), the
old one. A processor that keeps a store forwards through :class:`TableForwarder`: at once when
the store has no record cache, else when the cache writes the key through (Kafka's
``TimestampedTupleForwarder`` and cache flush listener), so a cached count forwards the
latest count of each key once per commit.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from streamstate.dsl.object_cache import MISSING
from streamstate.dsl.stores import new_value_and_timestamp
from streamstate.dsl.versioned_store import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
)
from streamstate.errors import StreamsError
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record

__all__ = [
    "Change",
    "ChangeDeserializer",
    "ChangeSerializer",
    "OutOfOrderChange",
    "StreamAggregateProcessor",
    "TableAggregateProcessor",
    "TableFilterProcessor",
    "TableForwarder",
    "TableMapValuesProcessor",
    "TableSelectProcessor",
    "TableSourceProcessor",
    "TableState",
    "TableToStreamProcessor",
    "skip_record",
]

_log = logging.getLogger(__name__)
# A NamedTuple's own __new__ is a Python function: the hot paths build theirs directly.
_tuple_new = tuple.__new__
_UNRESOLVED: Any = object()


class Change(NamedTuple):
    """A table update: the ``new`` value and the ``old`` one (``None`` when not sent)."""

    new: Any
    old: Any

    @property
    def is_latest(self) -> bool:
        """Whether the update is the key's latest by timestamp (Kafka's ``Change.isLatest``):
        ``False`` only for an :class:`OutOfOrderChange`."""
        return True


class OutOfOrderChange(Change):
    """An update of a versioned table older than the key's latest (KIP-914): forwarded (a
    ``to_stream`` emits it, as Kafka does) but not aggregated by ``group_by``, which counts
    the latest versions only."""

    __slots__ = ()

    @property
    def is_latest(self) -> bool:
        """``False``."""
        return False


class TableState:
    """What a ``KTable``'s processors learn only once the whole program is written: whether
    a processor downstream needs old values, and whether the table's store exists."""

    def __init__(self, parent: TableState | None = None, store: str | None = None) -> None:
        """``parent``: the table this one derives from."""
        self.parent = parent
        self.store = store
        self.send_old_values = False
        self.materializer: Callable[[], None] | None = None
        # How this table's value follows from its parent's, ``compute(key, parent_value)``
        # (filter, map_values): a join's value getter reads the nearest store up the chain
        # and computes down from it, as Kafka's KTableValueGetters do.
        self.compute: Callable[[Any, Any], Any] | None = None
        # The table's own store is versioned (Materialized(versioned_retention=...)): a
        # stream-table join reads it as of each record's time (get_as_of).
        self.versioned = False

    def output_versioned(self) -> bool:
        """Whether the table's values come from a versioned store: its own, or up the chain
        through tables without a store of their own (Kafka's ``isVersionedOrVersionedUpstream``:
        a table materialized in a non-versioned store is not versioned)."""
        if self.store is not None or self.parent is None:
            return self.versioned
        return self.parent.output_versioned()

    def enable_send_old_values(self, force: bool = True) -> bool:
        """Old values from here up to the nearest table that keeps them; a source table
        without a store gets one (Kafka's ``enableSendingOldValues(true)``). With
        ``force=False`` no store is made: old values are enabled only if a table up the chain
        already keeps them, and the result says whether they were (Kafka's
        ``enableSendingOldValues(false)``, which ``KTable.filter`` calls on its parent)."""
        if self.store is None:
            if self.parent is not None:
                if not self.parent.enable_send_old_values(force):
                    return self.send_old_values
            elif self.materializer is not None and force:
                self.materializer()
            elif not force:
                return self.send_old_values
        self.send_old_values = True
        return True


def skip_record(context: ProcessorGraphContext, why: str) -> None:
    """Logs and counts a record dropped on purpose (Kafka's ``droppedRecordsSensor``)."""
    meta = context.record_metadata
    if meta is not None:
        _log.warning(
            "Skipping record due to %s. topic=[%s] partition=[%s] offset=[%s]",
            why,
            meta.topic,
            meta.partition,
            meta.offset,
        )
    else:
        _log.warning("Skipping record due to %s. Topic, partition, and offset not known.", why)
    context.record_dropped()


class TableForwarder:
    """Forwards a store's updates: at once, or when its record cache writes them through."""

    def __init__(
        self,
        context: ProcessorGraphContext,
        store: Any,
        send_old_values: bool,
    ) -> None:
        """``store``: a typed DSL store with ``set_flush_listener``."""
        self.context = context
        self._forward = context.trusted_forward()
        self._to_stream: Any = _UNRESOLVED
        self.send_old_values = send_old_values
        self.cached = store.set_flush_listener(self._flushed, with_old=send_old_values)
        # A deleted key's cache entry holds no timestamp: the delete's own is kept here.
        self._deleted_at: dict[Any, int] = {}

    def _flushed(self, key: Any, new: Any, old: Any, headers: Any) -> None:
        # Once per key and commit: Record and Change are built as the tuples they are (their
        # classes' __new__ are Python functions), forwarded past the context's checks.
        if new is not None:
            timestamp = new[1]
            value = new[0]
        else:
            timestamp = self._deleted_at.pop(key, self.context.current_stream_time_ms)
            value = None
        if type(headers) is not tuple:
            headers = tuple(headers)
        timestamp = max(timestamp, 0)
        to_stream = self._to_stream
        if to_stream is _UNRESOLVED:
            to_stream = self._to_stream = self._resolve_to_stream()
        if to_stream is not None:
            # The table's only child is a plain to_stream(): what it would forward, at once.
            to_stream(_tuple_new(Record, (key, value, timestamp, headers)))
            return
        change = _tuple_new(
            Change, (value, old[0] if (old is not None and self.send_old_values) else None)
        )
        self._forward(_tuple_new(Record, (key, change, timestamp, headers)))

    def _resolve_to_stream(self) -> Any:
        # Made lazily: at the first flush every processor of the task has been initialised.
        child = getattr(self._forward, "__self__", None)
        if type(child) is TableToStreamProcessor and hasattr(child, "forward"):
            return child.forward
        return None

    def maybe_forward(self, key: Any, new: Any, old: Any, timestamp: int, headers: Any) -> None:
        """Forwards ``Change(new, old)`` unless the cache will."""
        if not self.cached:
            old = old if self.send_old_values else None
            self.context.forward(Record(key, Change(new, old), timestamp, headers))
        elif new is None:
            self._deleted_at[key] = timestamp


class _Stateful(Processor):
    def __init__(self, state: TableState, open_store: Callable[[Any], Any] | None) -> None:
        # open_store None: a table that never keeps a store (a join result not materialized).
        self.state = state
        self.open_store = open_store
        self.store: Any = None
        self.forwarder: TableForwarder | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        self.context = context
        if self.state.store is not None and self.open_store is not None:
            self.store = self.open_store(context.get_state_store(self.state.store))
            self.forwarder = TableForwarder(context, self.store, self.state.send_old_values)

    def _old_value(self, key: Any, change: Change, compute: Callable[[Any, Any], Any]) -> Any:
        """The old value a ``filter``/``mapValues`` forwards when asked for old values: read
        from its own store when it has one (its parent then sends none), else computed from
        the parent's old value (Kafka's ``computeOldValue``)."""
        if not self.state.send_old_values:
            return None
        if self.store is not None:
            found = self.store.get_with_timestamp(key)  # a versioned store's latest too
            return None if found is None else found.value
        return compute(key, change.old)

    def _emit(self, record: Record, new: Any, old: Any, timestamp: int) -> None:
        if self.forwarder is not None:
            if self.state.versioned:
                self._put_versioned(record, new, old, timestamp)
                return
            self.store.put(record[0], new, timestamp, record[3])
            self.forwarder.maybe_forward(record[0], new, old, timestamp, record[3])
        else:
            old = old if self.state.send_old_values else None
            # An out-of-order update of a versioned table stays one (Kafka passes isLatest on).
            late = type(record[1]) is OutOfOrderChange
            change = OutOfOrderChange(new, old) if late else Change(new, old)
            self.context.forward(Record(record[0], change, timestamp, record[3]))

    def _put_versioned(self, record: Record, new: Any, old: Any, timestamp: int) -> None:
        # KIP-914: a put older than the history retention is not stored and not forwarded
        # (counted as dropped, as Kafka's store counts it); one older than the key's latest
        # is kept in the history and forwarded as out of order (not aggregated downstream).
        valid_to = self.store.put(record[0], new, timestamp)
        if valid_to == PUT_RETURN_CODE_NOT_PUT:
            self.context.record_dropped()
            return
        old = old if self.state.send_old_values else None
        if valid_to == PUT_RETURN_CODE_VALID_TO_UNDEFINED:
            change = Change(new, old)
        else:
            change = OutOfOrderChange(new, old)
        self.context.forward(Record(record[0], change, timestamp, record[3]))


class TableSourceProcessor(_Stateful):
    """A topic's records as table updates (``builder.table``, ``to_table``): a ``None`` value
    deletes the key; a ``None`` key is dropped and counted."""

    def process(self, record: Record) -> None:
        """Updates the table (its store, when materialized) and forwards the change."""
        key = record[0]
        if key is None:
            skip_record(self.context, "null key")
            return
        old = None
        if self.store is not None:
            found = self.store.get_with_timestamp(key)
            if found is not None:
                old = found.value
                if record[2] < found.timestamp:
                    _log.warning(
                        "Detected out-of-order KTable update for %s, old timestamp=[%d] new "
                        "timestamp=[%d].",
                        self.state.store,
                        found.timestamp,
                        record[2],
                    )
        self._emit(record, record[1], old, record[2])


class TableFilterProcessor(_Stateful):
    """Keeps the rows for which ``predicate(key, value)`` is ``keep``; a row that stops
    passing becomes a tombstone."""

    def __init__(
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        predicate: Callable[[Any, Any], Any],
        keep: bool,
    ) -> None:
        """``keep=False``: ``filter_not``."""
        super().__init__(state, open_store)
        self.predicate = predicate
        self.keep = keep

    def _compute(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self.predicate(key, value)) is self.keep:
            return value
        return None

    def process(self, record: Record) -> None:
        """Forwards the filtered change."""
        change = record[1]
        new = self._compute(record[0], change.new)
        old = self._old_value(record[0], change, self._compute)
        if self.state.send_old_values and old is None and new is None:
            # Kafka's versioned semantics (KIP-914) forward the tombstone anyway when the
            # table filtered is versioned.
            parent = self.state.parent
            if parent is None or not parent.output_versioned():
                return
        self._emit(record, new, old, record[2])


class TableMapValuesProcessor(_Stateful):
    """Maps each row's value (``None`` stays ``None``)."""

    def __init__(
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        mapper: Callable[..., Any],
        with_key: bool,
    ) -> None:
        """``with_key``: the mapper takes ``(key, value)``."""
        super().__init__(state, open_store)
        self.mapper = mapper
        self.with_key = with_key

    def _compute(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.mapper(key, value) if self.with_key else self.mapper(value)

    def process(self, record: Record) -> None:
        """Forwards the mapped change."""
        change = record[1]
        new = self._compute(record[0], change.new)
        old = self._old_value(record[0], change, self._compute)
        self._emit(record, new, old, record[2])


class TableToStreamProcessor(Processor):
    """A table's changes as a stream of their new values (``mapper(key, value)`` re-keys them
    when given, as Kafka's ``toStream(KeyValueMapper)`` adds a key-select)."""

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps ``forward``."""
        self.forward = context.trusted_forward()

    def process(self, record: Record) -> None:
        """Forwards the new value."""
        self.forward(tuple.__new__(Record, (record[0], record[1].new, record[2], record[3])))


class TableSelectProcessor(Processor):
    """``KTable.group_by``: each change re-keyed by ``selector(key, value) -> (key2,
    value2)``; the old row is subtracted from its group and the new one added to its own (one
    record when both are in the same group)."""

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        """The selector returns a pair."""
        self.selector = selector

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps ``forward``."""
        self.forward = context.forward

    def _select(self, key: Any, value: Any) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self.selector(key, value)
        if pair is None:  # Kafka skips a null KeyValue, as a null key or value
            return None
        try:
            new_key, new_value = pair
        except (TypeError, ValueError):
            raise StreamsError(
                f"group_by: the selector must return a (key, value) pair, not {pair!r}"
            ) from None
        if new_key is None or new_value is None:
            return None
        return new_key, new_value

    def process(self, record: Record) -> None:
        """Forwards the subtraction and the addition."""
        if record[0] is None:
            raise StreamsError("Record key for the grouping KTable should not be null.")
        change = record[1]
        if not change.is_latest:
            # KIP-914: an aggregate of a versioned table counts the latest versions only.
            return
        new = self._select(record[0], change.new)
        old = self._select(record[0], change.old)
        timestamp, headers = record[2], record[3]
        if old is not None and new is not None and old[0] == new[0]:
            self.forward(Record(old[0], Change(new[1], old[1]), timestamp, headers))
            return
        if old is not None:
            self.forward(Record(old[0], Change(None, old[1]), timestamp, headers))
        if new is not None:
            self.forward(Record(new[0], Change(new[1], None), timestamp, headers))


class StreamAggregateProcessor(_Stateful):
    """``KGroupedStream.aggregate`` / ``reduce`` / ``count``: one result per key, with the
    latest timestamp of its inputs. ``initializer`` is ``None`` for ``reduce`` (the first
    value is the result). ``counting``: the aggregation is the built-in ``count`` (the
    initializer gives 0, the aggregator adds 1), which the hot path does without calling
    them."""

    def __init__(
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        initializer: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any, Any], Any],
        *,
        counting: bool = False,
    ) -> None:
        """``aggregator(key, value, aggregate)``."""
        super().__init__(state, open_store)
        self.initializer = initializer
        self.aggregator = aggregator
        self.counting = counting
        self._dirty: dict[Any, Any] | None = None
        self._clean: dict[Any, Any] = {}

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the store; with its object cache, the hot path reads and writes it directly."""
        super().init(context)
        cache = self.store.cache
        if cache is not None and self.forwarder is not None and self.forwarder.cached:
            self._dirty = cache.dirty
            self._clean = cache.clean
            self._cache_put = cache.put

    # A run of records is handed over here (app/task_runs.py) only over a cached store: it
    # writes nothing downstream while processing (its cache's flush does).
    runs_without_sink = True

    def run_handler(self, sink: Any, topology: Any) -> Callable[[list[Any]], int] | None:
        """Over a cached store (the hot path): a function that takes a run of source
        ``StampedRecord``s (``ProcessorTopology.run_handlers``) and aggregates them one after
        the other exactly as :meth:`process` would, the hot path inlined and the source's
        ``Record`` made only for a key not yet cached; it returns how many it took, stopping
        before a record with a key not a string, a null value or headers (those go through
        :meth:`process`). ``topology.current`` is the record being processed. ``None``
        otherwise."""
        del sink  # the table forwards at its cache's flush, not per record
        dirty = self._dirty
        if dirty is None:
            return None
        clean, cache_put, process = self._clean, self._cache_put, self.process
        counting, aggregator = self.counting, self.aggregator

        def run(records: list[Any]) -> int:
            done = 0
            for stamped in records:
                key = stamped.key
                value = stamped.value
                if type(key) is not str or value is None or stamped.headers:
                    break
                topology.current = stamped
                timestamp = stamped.timestamp
                entry = dirty.get(key)
                found = entry[1] if entry is not None else clean.get(key, MISSING)
                if found is MISSING or found is None:
                    process(_tuple_new(Record, (key, value, timestamp, ())))
                else:
                    old_timestamp = found[1]
                    new = found[0] + 1 if counting else aggregator(key, value, found[0])
                    cache_put(
                        key,
                        key,
                        new_value_and_timestamp(
                            new, timestamp if timestamp > old_timestamp else old_timestamp
                        ),
                        (),
                    )
                done += 1
            return done

        return run

    def process(self, record: Record) -> None:
        """Aggregates ``record`` into its key's result."""
        key, value, timestamp = record[0], record[1], record[2]
        if key is None or value is None:
            skip_record(self.context, "null key or value")
            return
        dirty = self._dirty
        if dirty is not None and type(key) is str:
            # The common case, inlined (one Python call per record saved twice): a string key
            # is its own cache key; the cache forwards at its flush.
            entry = dirty.get(key)
            if entry is not None:
                found = entry[1]
            else:
                found = self._clean.get(key, MISSING)
                if found is MISSING:
                    found = self.store.get_with_timestamp(key)
            if found is not None:
                old_timestamp = found[1]
                new = found[0] + 1 if self.counting else self.aggregator(key, value, found[0])
                self._cache_put(
                    key,
                    key,
                    new_value_and_timestamp(
                        new, timestamp if timestamp > old_timestamp else old_timestamp
                    ),
                    record[3],
                )
                return
        else:
            found = self.store.get_with_timestamp(key)
        if found is None:
            if self.initializer is None:
                new = value
                old = None
            else:
                old = self.initializer()
                new = self.aggregator(key, value, old)
        else:
            old = found.value
            new = self.aggregator(key, value, old)
            timestamp = max(timestamp, found.timestamp)
        self._emit(record, new, old, timestamp)


class TableAggregateProcessor(_Stateful):
    """``KGroupedTable.aggregate`` / ``reduce`` / ``count``: ``subtractor`` takes a row's old
    value out of its group, ``adder`` puts its new value in. ``initializer`` is ``None`` for
    ``reduce``."""

    def __init__(
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        initializer: Callable[[], Any] | None,
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> None:
        """``adder(key, value, aggregate)``, ``subtractor(key, value, aggregate)``."""
        super().__init__(state, open_store)
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor

    def process(self, record: Record) -> None:
        """Applies the change to its group's result."""
        key = record[0]
        if key is None:
            raise StreamsError(
                f"Record key for KTable aggregate operator with state {self.state.store} "
                f"should not be null."
            )
        change = record[1]
        found = self.store.get_with_timestamp(key)
        old = None if found is None else found.value
        timestamp = record[2]
        if change.old is not None and old is not None:
            intermediate = self.subtractor(key, change.old, old)
            timestamp = max(timestamp, found.timestamp)
        else:
            intermediate = old
        if change.new is not None:
            if intermediate is None:
                if self.initializer is None:
                    new = change.new
                else:
                    new = self.adder(key, change.new, self.initializer())
            else:
                new = self.adder(key, change.new, intermediate)
            if found is not None:
                timestamp = max(record[2], found.timestamp)
        else:
            new = intermediate
        self._emit(record, new, old, timestamp)


# -- Change on a repartition topic ----------------------------------------------------------

_HEADER = struct.Struct(">Bi")


class ChangeSerializer:
    """A :class:`Change` as bytes for a ``KTable.group_by`` repartition topic: a flags byte
    (new present, old present), the new value's length (4 bytes), then both values."""

    def __init__(self, inner: Any) -> None:
        """``inner``: the value serializer."""
        self.inner = inner

    def serialize(self, topic: str | None, change: Any) -> bytes:
        """Both values, serialized by ``inner``."""
        new = None if change.new is None else self.inner.serialize(topic, change.new)
        old = None if change.old is None else self.inner.serialize(topic, change.old)
        flags = (new is not None) | ((old is not None) << 1)
        new_bytes = new or b""
        return _HEADER.pack(flags, len(new_bytes)) + new_bytes + (old or b"")


class ChangeDeserializer:
    """Reads what :class:`ChangeSerializer` wrote."""

    def __init__(self, inner: Any) -> None:
        """``inner``: the value deserializer."""
        self.inner = inner

    def deserialize(self, topic: str | None, data: bytes | None) -> Change | None:
        """The :class:`Change`."""
        if data is None:
            return None
        flags, length = _HEADER.unpack_from(data)
        body = data[_HEADER.size :]
        new = self.inner.deserialize(topic, body[:length]) if flags & 1 else None
        old = self.inner.deserialize(topic, body[length:]) if flags & 2 else None
        return Change(new, old)
