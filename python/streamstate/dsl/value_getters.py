"""How a processor reads a table's current values: Kafka's ``KTableValueGetterSupplier`` (a
:class:`ValueGetterSupplier`: the stores to connect, and how a task opens the getter) and
``KTableValueGetter`` (a :class:`ValueGetter`). Every join reads tables through here: a
stream-table join's processor, each side of a table-table join, the foreign-key join's
subscription and response processors.

:func:`value_getter_supplier` is Kafka's ``KTableImpl.valueGetterSupplier()``, the nearest
store up a table's chain:

* a table with a store reads it (``KTableMaterializedValueGetterSupplier``); a source table
  without one is materialized for its readers, as Kafka's ``KTableSource`` is; a time-windowed
  aggregation's window store is read by ``Windowed`` key (its window's start);
* a ``filter``/``map_values`` without a store computes its row from its parent's row
  (``TableState.compute``; Kafka's ``KTableFilterValueGetter``/``KTableMapValuesValueGetter``),
  with the parent row's timestamp;
* an unmaterialized table-table join result joins its inputs' rows when read (Kafka's
  ``KTableKTable{Inner,Left,Outer}JoinValueGetter``), with the larger of the two timestamps;
* a table whose rows come from an operation that keeps no store (``suppress``) cannot be read:
  :class:`~streamstate.TopologyError` naming the operation.

The stores a supplier names must be connected to the processor that reads them, which puts the
table's source topics in that processor's sub-topology (Kafka's co-partition group). A table
whose store is versioned (KIP-914) has a versioned supplier, with the store's history
retention: its getter also answers ``get_as_of(key, timestamp)``, the row valid at that time.
A global table's getter (:func:`global_view`) reads its global store, on every instance, and
needs no store connected.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from streamstate.dsl.object_cache import MISSING
from streamstate.dsl.stores import (
    TimestampedKeyValueStore,
    ValueAndTimestamp,
    WindowStore,
    _cache_key,
)
from streamstate.dsl.table_processors import TableState
from streamstate.errors import TopologyError
from streamstate.processor.context import ProcessorGraphContext
from streamstate.serde import deserialize_function

if TYPE_CHECKING:
    from streamstate.dsl.table import GlobalKTable, KTable

__all__ = [
    "RowValueGetter",
    "ValueGetter",
    "ValueGetterSupplier",
    "ViewedTableState",
    "computed_view",
    "global_view",
    "join_view",
    "store_view",
    "value_getter_supplier",
]

# Kafka's "no timestamp" (ConsumerRecord.NO_TIMESTAMP): a global store keeps no timestamps.
_NO_TIMESTAMP = -1


class ValueGetter(Protocol):
    """Reads a table's rows (Kafka's ``KTableValueGetter``). The typed DSL key-value stores
    (timestamped and versioned) are getters themselves."""

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The current row of ``key`` (its value and timestamp), or ``None``."""

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        """The row of ``key`` valid at ``timestamp``, or ``None``; called only through a
        versioned supplier (a timestamped store does not answer it)."""


@dataclass(frozen=True)
class ValueGetterSupplier:
    """How processors read a table (Kafka's ``KTableValueGetterSupplier``): the ``stores`` to
    connect to a processor that reads it, and ``open(context)``, its getter in a task.
    ``versioned``: the rows come from a versioned store (read ``get_as_of``), whose history
    retention is ``history_ms`` (when known)."""

    stores: tuple[str, ...]
    open: Callable[[ProcessorGraphContext], ValueGetter]
    versioned: bool = False
    history_ms: int | None = None


class ViewedTableState(TableState):
    """A table's state whose rows, while it keeps no store, are read through ``view`` (a
    table-table join's result, joined from its inputs when read: Kafka's
    ``KTableKTableJoinMerger.view()``)."""

    def __init__(self, view: ValueGetterSupplier) -> None:
        """``view``: how its rows are read without a store."""
        super().__init__()
        self.view = view


def value_getter_supplier(table: KTable, operation: str) -> ValueGetterSupplier:
    """How a processor reads ``table``'s rows (Kafka's ``valueGetterSupplier()``); see the
    module doc. Raises :class:`TopologyError` naming ``operation`` for a table whose rows
    cannot be read (a ``suppress`` result)."""
    return _supplier(table, table.state, operation)


def _supplier(table: KTable, state: TableState, operation: str) -> ValueGetterSupplier:
    if state.store is None:
        if isinstance(state, ViewedTableState):
            return state.view
        if state.compute is not None and state.parent is not None:
            return computed_view(_supplier(table, state.parent, operation), state.compute)
        if state.parent is None and state.materializer is not None:
            state.materializer()  # a source table: materialized for its readers, as in Kafka
    if state.store is None:
        raise TopologyError(
            f"{operation}: the values of table {table.name} cannot be read by a join (it is "
            f"the result of an operation that keeps no store, e.g. suppress); give that "
            f"operation a Materialized store, or join before it"
        )
    spec = table.builder.topology.stores.get(state.store)
    if spec is None or spec.typed is None:
        raise TopologyError(f"{operation}: table {table.name} has no readable store {state.store}")
    return store_view(state.store, spec.typed, versioned=state.versioned)


def _row(value: Any, timestamp: int) -> ValueAndTimestamp | None:
    """Kafka's ``ValueAndTimestamp.make``: no row for a ``None`` value."""
    return None if value is None else ValueAndTimestamp(value, timestamp)


class _Current(ABC):
    """A getter of a table that is never versioned: its row as of any time is its current
    one."""

    @abstractmethod
    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The current row of ``key``, or ``None``."""

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        del timestamp
        return self.get_with_timestamp(key)


class _WindowGetter(_Current):
    """A time-windowed table's rows (keys ``Windowed(key, window)``) from its window store."""

    def __init__(self, store: WindowStore) -> None:
        self.store = store

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        return self.store.fetch_with_timestamp(key.key, key.window.start)


class _CachedGetter(_Current):
    """A key-value store with a record cache, read by a processor that may change the rows it
    is given (a joiner): a row still dirty in the cache comes as a copy through its bytes, as
    every reader of Kafka's cache deserializes its own (``ObjectCache.get_private``); a
    flushed one is decoded anew from the cache's bytes, and only a missing one is read from
    the store."""

    def __init__(self, store: TimestampedKeyValueStore) -> None:
        self.store = store
        self.serdes = store.serdes
        cache = store.cache
        assert cache is not None
        self.get_private = cache.get_private
        self._dirty = cache.dirty
        self._raw = cache.raw
        self._name = store.name
        self._de_value = deserialize_function(store.serdes.value_serde.deserializer)

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        found = self.get_private(_cache_key(key, self.serdes))
        if found is MISSING:
            return self.store.get_with_timestamp(key)
        return found  # type: ignore[no-any-return]

    def get_value(self, key: Any) -> Any:
        """The value of ``key``'s current row, or ``None`` (a stream-table join's read): a
        flushed row is decoded from the cache's bytes without its timestamp."""
        cache_key = key if type(key) is str else _cache_key(key, self.serdes)
        if cache_key not in self._dirty:
            raw = self._raw.get(cache_key)
            if raw is not None:
                # StoreSerdes.value_to_bytes: the timestamp's 8 bytes, then the value's.
                return self._de_value(self._name, raw[8:])
        found = self.get_with_timestamp(key)
        return None if found is None else found[0]


def store_view(
    name: str, opener: Callable[[Any], Any], *, versioned: bool = False
) -> ValueGetterSupplier:
    """A table's rows from its store ``name``, opened by ``opener`` (Kafka's
    ``KTableMaterializedValueGetterSupplier``; a windowed aggregation's window store is read
    by key and window start). ``versioned``: a versioned store, whose history retention is
    its opener's ``retention_ms``. A row the reader is given is its own: changing it changes
    neither the store nor what the next reader gets (Kafka's getters deserialize each row)."""

    def open_getter(context: ProcessorGraphContext) -> ValueGetter:
        store = opener(context.get_state_store(name))
        if isinstance(store, WindowStore):
            return _WindowGetter(store)
        if type(store) is TimestampedKeyValueStore and store.cache is not None:
            return _CachedGetter(store)
        getter: ValueGetter = store
        return getter

    retention = getattr(opener, "retention_ms", None) if versioned else None
    history_ms = retention if isinstance(retention, int) else None
    return ValueGetterSupplier((name,), open_getter, versioned, history_ms)


class _ComputedGetter:
    def __init__(self, parent: ValueGetter, compute: Callable[[Any, Any], Any]) -> None:
        self.parent = parent
        self.compute = compute

    def _computed(self, key: Any, found: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if found is None:
            return None
        return _row(self.compute(key, found[0]), found[1])

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        return self._computed(key, self.parent.get_with_timestamp(key))

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        return self._computed(key, self.parent.get_as_of(key, timestamp))


def computed_view(
    parent: ValueGetterSupplier, compute: Callable[[Any, Any], Any]
) -> ValueGetterSupplier:
    """A table without a store: its parent's row through ``compute(key, value)``, with the
    parent row's timestamp (Kafka's ``KTableFilter``/``KTableMapValues`` value getters);
    versioned as its parent is."""

    def open_getter(context: ProcessorGraphContext) -> ValueGetter:
        return _ComputedGetter(parent.open(context), compute)

    return dataclasses.replace(parent, open=open_getter)


class _JoinGetter(_Current):
    def __init__(
        self, kind: str, left: ValueGetter, right: ValueGetter, joiner: Callable[[Any, Any], Any]
    ) -> None:
        self.kind = kind
        self.left = left
        self.right = right
        self.joiner = joiner

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        one = self.left.get_with_timestamp(key)
        if one is None and self.kind != "outer":
            return None
        two = self.right.get_with_timestamp(key)
        if one is None:
            if two is None:
                return None
            return _row(self.joiner(None, two[0]), two[1])
        if two is None:
            if self.kind == "inner":
                return None
            return _row(self.joiner(one[0], None), one[1])
        return _row(self.joiner(one[0], two[0]), max(one[1], two[1]))


def join_view(
    kind: str,
    left: ValueGetterSupplier,
    right: ValueGetterSupplier,
    joiner: Callable[[Any, Any], Any],
) -> ValueGetterSupplier:
    """The rows of an unmaterialized table-table join result, joined when read (Kafka's
    ``KTableKTable{Inner,Left,Outer}JoinValueGetter``): ``kind`` is ``inner``, ``left`` or
    ``outer``; the timestamp is the larger of the two rows'. Never versioned."""
    stores = tuple(dict.fromkeys(left.stores + right.stores))

    def open_getter(context: ProcessorGraphContext) -> ValueGetter:
        return _JoinGetter(kind, left.open(context), right.open(context), joiner)

    return ValueGetterSupplier(stores, open_getter)


class _GlobalGetter(_Current):
    """A global table's rows: its global store holds the topic's bytes as they are, without
    their timestamps (a stream-global-table join reads only values)."""

    def __init__(self, store: Any, key_serde: Any, value_serde: Any, name: str) -> None:
        self.store = store
        self.name = name
        self._serialize = key_serde.serializer.serialize
        self._deserialize = value_serde.deserializer.deserialize

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        raw_key = self._serialize(self.name, key)
        if raw_key is None:
            return None
        raw = self.store.get(bytes(raw_key))
        return None if raw is None else _row(self._deserialize(self.name, raw), _NO_TIMESTAMP)


def global_view(table: GlobalKTable) -> ValueGetterSupplier:
    """A global table's rows, read with its serdes from its global store (Kafka's
    ``GlobalKTableImpl.valueGetterSupplier()``): a global store is open in every task, so
    there is no store to connect."""
    store = table.store_name
    key_slot = table.key_slot.use()
    value_slot = table.value_slot.use()

    def open_getter(context: ProcessorGraphContext) -> ValueGetter:
        return _GlobalGetter(
            context.get_state_store(store), key_slot.get(), value_slot.get(), store
        )

    return ValueGetterSupplier((), open_getter)


class RowValueGetter:
    """A getter's values without their timestamps, as a stream-table join reads a table
    (Kafka's ``ValueAndTimestamp.getValueOrNull`` of each row)."""

    def __init__(self, rows: ValueGetter) -> None:
        """``rows``: the table's getter."""
        self.rows = rows
        if isinstance(rows, _CachedGetter):
            self.get = rows.get_value  # type: ignore[method-assign]

    def get(self, key: Any) -> Any:
        """The current value of ``key``, or ``None``."""
        found = self.rows.get_with_timestamp(key)
        return None if found is None else found[0]

    def flushed_rows(self) -> tuple[Any, Any, Callable[[str, bytes], Any], str] | None:
        """For a reader inlining :meth:`get` over a run of string keys (a stream-table join
        taking a run of records): ``(dirty, raw, decode, name)`` of a cached table, where a
        ``str`` key not in ``dirty`` whose ``raw.get(key)`` is not ``None`` has the row
        ``decode(name, raw[8:])`` (what :meth:`get` returns for it); any other key goes through
        :meth:`get`. ``None`` for a table without a record cache."""
        rows = self.rows
        if not isinstance(rows, _CachedGetter):
            return None
        return rows._dirty, rows._raw, rows._de_value, rows._name

    def get_as_of(self, key: Any, timestamp: int) -> Any:
        """The value of ``key`` valid at ``timestamp`` (a versioned table), or ``None``."""
        found = self.rows.get_as_of(key, timestamp)
        return None if found is None else found[0]
