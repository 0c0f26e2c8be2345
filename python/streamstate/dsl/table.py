"""``KTable`` and ``GlobalKTable`` (Kafka's): a changelog stream seen as the latest value per
key.

A table's processors pass :class:`~streamstate.dsl.table_processors.Change` values to each
other; ``to_stream`` turns them back into plain records (the new values; a deleted key gives a
``None`` value, a tombstone). A table is materialized (has a store) when it was given a
:class:`~streamstate.dsl.Materialized` name or when an operation downstream needs its previous
values (``group_by``), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.dsl.joins import table_join
from streamstate.dsl.materialized import Materialized, materialized
from streamstate.dsl.stream import KStream, _callable, _named
from streamstate.dsl.table_processors import (
    TableFilterProcessor,
    TableMapValuesProcessor,
    TableSelectProcessor,
    TableState,
    TableToStreamProcessor,
)
from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import SerdeSlot

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.dsl.grouped import KGroupedTable
    from streamstate.dsl.suppress import Suppressed
    from streamstate.serde import Serde

__all__ = ["GlobalKTable", "KTable"]


class KTable:
    """A table: the latest value of each key; see the module doc."""

    def __init__(
        self,
        builder: StreamsBuilder,
        name: str,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        state: TableState,
        *,
        source_topic: str | None = None,
    ) -> None:
        """Made by the builder, aggregations and other tables' operations."""
        self.builder = builder
        self.name = name
        self.key_slot = key_slot
        self.value_slot = value_slot
        self.state = state
        self.source_topic = source_topic
        # (store name, Materialized, opener) of a store this table gets only if needed.
        self.pending_store: tuple[str, Materialized, Callable[[Any], Any]] | None = None
        self.windowed: str | None = None  # "time" or "session" for windowed aggregations
        self.grace_ms = 0  # a windowed aggregation's grace period (suppression needs it)
        self.gap_ms = 0  # a session aggregation's inactivity gap (suppression needs it)
        state.materializer = self.materialize

    @property
    def query_store_name(self) -> str | None:
        """The name of the store to query this table by, or ``None`` if it has none meant
        for queries (Kafka's ``queryableStoreName``)."""
        if self.pending_store is not None and self.pending_store[1].name is not None:
            return self.pending_store[1].name
        return None

    def materialize(self) -> None:
        """Gives the table its store (once)."""
        if self.pending_store is None or self.state.store is not None:
            return
        store, mat, opener = self.pending_store
        self.builder.add_store(store, mat, opener, self.name)
        self.state.store = store

    # -- operations -----------------------------------------------------------------------------

    def _derived(
        self,
        prefix: str,
        make: Callable[[TableState, Any], Any],
        operation: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot | None,
    ) -> KTable:
        mat = materialized(mat_value, operation)
        node = _named(self.builder.names, None, prefix, operation)
        store = mat.name or (self.builder.names.store(prefix) if mat_value is not None else None)
        key = self.builder.slot(mat.key_serde, "key", operation).or_else(self.key_slot)
        value = self.builder.slot(mat.value_serde, "value", operation).or_else(
            value_slot or self.value_slot
        )
        state = TableState(parent=self.state)
        if prefix == "KTABLE-FILTER-" and self.state.enable_send_old_values(force=False):
            # Kafka's KTableFilter: old values when the parent keeps them anyway, so a row that
            # never passed is not forwarded as a tombstone.
            state.send_old_values = True
        if store is None:
            opener = self.builder.kv_store_opener(node, key, value)
        else:  # a versioned store when mat has a versioned_retention (Kafka allows it here)
            opener = self.builder.table_store_opener(
                store, mat, key, value, state=state, operation=operation
            )
        self.builder.topology.add_processor(node, lambda: make(state, opener), self.name)
        table = KTable(self.builder, node, key, value, state)
        # A window's close time carries through filters and mappings (Kafka's grace search).
        table.windowed, table.grace_ms, table.gap_ms = self.windowed, self.grace_ms, self.gap_ms
        if store is not None:
            table.pending_store = (store, mat, opener)
            table.materialize()
        return table

    def filter(
        self,
        predicate: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """The rows for which ``predicate(key, value)`` is true; a row that stops passing is
        deleted (a tombstone downstream)."""
        _callable(predicate, "KTable.filter")
        table = self._derived(
            "KTABLE-FILTER-",
            lambda state, opener: TableFilterProcessor(state, opener, predicate, True),
            "KTable.filter",
            materialized,
            None,
        )
        table.state.compute = _filtering(predicate, True)
        return table

    def filter_not(
        self,
        predicate: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """The rows for which ``predicate(key, value)`` is false."""
        _callable(predicate, "KTable.filter_not")
        table = self._derived(
            "KTABLE-FILTER-",
            lambda state, opener: TableFilterProcessor(state, opener, predicate, False),
            "KTable.filter_not",
            materialized,
            None,
        )
        table.state.compute = _filtering(predicate, False)
        return table

    def map_values(
        self,
        mapper: Callable[..., Any],
        *,
        with_key: bool = False,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """Each row's value through ``mapper(value)`` (``mapper(key, value)`` with
        ``with_key``)."""
        _callable(mapper, "KTable.map_values")
        table = self._derived(
            "KTABLE-MAPVALUES-",
            lambda state, opener: TableMapValuesProcessor(state, opener, mapper, with_key),
            "KTable.map_values",
            materialized,
            self.builder.slot(None, "value", "KTable.map_values"),
        )
        table.state.compute = _mapping(mapper, with_key)
        return table

    def to_stream(self, mapper: Callable[[Any, Any], Any] | None = None) -> KStream:
        """The table's updates as a stream of records (``mapper(key, value)`` gives each a
        new key, a key-changing operation)."""
        node = _named(self.builder.names, None, "KTABLE-TOSTREAM-", "to_stream")
        self.builder.topology.add_processor(node, TableToStreamProcessor, self.name)
        stream = KStream(self.builder, node, self.key_slot, self.value_slot)
        if mapper is not None:
            return stream.select_key(mapper)
        return stream

    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        name: str | None = None,
    ) -> KGroupedTable:
        """The rows regrouped by ``selector(key, value) -> (key2, value2)`` for an
        aggregation; an update moving a row between groups subtracts it from the old group
        before adding it to the new one."""
        from streamstate.dsl.grouped import KGroupedTable  # noqa: PLC0415 - builds on table

        _callable(selector, "KTable.group_by")
        self.state.enable_send_old_values()
        node = _named(self.builder.names, name, "KTABLE-SELECT-", "KTable.group_by")
        self.builder.topology.add_processor(node, lambda: TableSelectProcessor(selector), self.name)
        key = self.builder.slot(key_serde, "key", "KTable.group_by")
        value = self.builder.slot(value_serde, "value", "KTable.group_by")
        return KGroupedTable(self.builder, node, key, value, name)

    def join(self, other: KTable, *args: Any, **options: Any) -> KTable:
        """An inner join of two tables: ``join(other, joiner(v1, v2), *, materialized=None)``
        on the primary key, or ``join(other, foreign_key_extractor(v), joiner(v1, v2), *,
        materialized=None)`` on a foreign key (KIP-213). See ``docs/dsl.md``."""
        return table_join(self, "inner", other, args, options)

    def left_join(self, other: KTable, *args: Any, **options: Any) -> KTable:
        """A left join (the forms of :meth:`join`): a row with no match is joined with
        ``None``."""
        return table_join(self, "left", other, args, options)

    def outer_join(self, other: KTable, *args: Any, **options: Any) -> KTable:
        """An outer join on the primary key, ``outer_join(other, joiner(v1, v2))``: a row of
        either side with no match is joined with ``None``."""
        return table_join(self, "outer", other, args, options)

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Holds back updates as ``suppressed`` says (``Suppressed.until_window_closes``:
        only each window's final result; ``until_time_limit``: at most one update per key per
        time limit)."""
        from streamstate.dsl.suppress import add_suppression  # noqa: PLC0415 - builds on table

        if self.state.output_versioned():
            # Kafka's build() refuses it (KIP-914); here the operation does, naming the table.
            raise TopologyError(
                f"KTable.suppress on {self.name}: Invalid topology: suppress() is only supported "
                f"for non-versioned KTables (note that version semantics might be inherited "
                f"from upstream)"
            )
        table: KTable = add_suppression(self, suppressed)
        return table


def _filtering(predicate: Callable[[Any, Any], Any], keep: bool) -> Callable[[Any, Any], Any]:
    """A filtered table's value from its parent's (for value getters; see ``TableState``)."""

    def compute(key: Any, value: Any) -> Any:
        if value is not None and bool(predicate(key, value)) is keep:
            return value
        return None

    return compute


def _mapping(mapper: Callable[..., Any], with_key: bool) -> Callable[[Any, Any], Any]:
    """A mapped table's value from its parent's (for value getters; see ``TableState``)."""

    def compute(key: Any, value: Any) -> Any:
        if value is None:
            return None
        return mapper(key, value) if with_key else mapper(value)

    return compute


class GlobalKTable:
    """A table of every partition of a topic, kept on every instance by the global thread
    (Kafka's ``GlobalKTable``): ``store_name`` names its global store; joins read it."""

    def __init__(self, store_name: str, topic: str, key_slot: SerdeSlot, value_slot: SerdeSlot):
        """Made by ``StreamsBuilder.global_table``."""
        self.store_name = store_name
        self.topic = topic
        self.key_slot = key_slot
        self.value_slot = value_slot

    @property
    def query_store_name(self) -> str:
        """The global store's name."""
        return self.store_name
