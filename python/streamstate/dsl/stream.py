"""``KStream``: a stream of records and its operations (Kafka's ``KStream``).

Each operation adds a processor under this stream's node and returns a new ``KStream``
(immutable, as in Kafka). Serdes travel with the stream as Kafka's do: an operation that
cannot change the key keeps the key serde, one that may change the value drops the value
serde (the app's default is used where one is needed again), and a key-changing operation
(``map``, ``flat_map``, ``select_key``, ``group_by``) marks the stream so that a later grouping
repartitions it through ``<application.id>-<name>-repartition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamstate.dsl.joins import stream_join
from streamstate.dsl.materialized import Materialized
from streamstate.dsl.materialized import materialized as as_materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.stream_processors import (
    BranchProcessor,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    ForeachProcessor,
    MapProcessor,
    MapValuesProcessor,
    PassThroughProcessor,
    SelectKeyProcessor,
)
from streamstate.dsl.table_processors import TableSourceProcessor, TableState
from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import SerdeSlot, SlotSerializer
from streamstate.serde import Serde

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.dsl.grouped import KGroupedStream
    from streamstate.dsl.table import KTable

__all__ = ["KStream"]


class KStream:
    """A stream of key-value records; see the module doc."""

    def __init__(
        self,
        builder: StreamsBuilder,
        name: str,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        *,
        repartition_required: bool = False,
    ) -> None:
        """Made by the builder and by other streams' operations."""
        self.builder = builder
        self.name = name
        self.key_slot = key_slot
        self.value_slot = value_slot
        self.repartition_required = repartition_required
        # The source node of this stream's repartition for a join, reused by its next unnamed
        # join (Kafka's KStreamImpl.repartitionNode; dsl/join_repartition.py).
        self.join_repartition: str | None = None

    # -- helpers --------------------------------------------------------------------------------

    def _add(self, prefix: str, factory: Any, name: str | None = None) -> str:
        node = _named(self.builder.names, name, prefix, prefix.lower().strip("-"))
        self.builder.topology.add_processor(node, factory, self.name)
        return node

    def _slot(self, role: str, operation: str) -> SerdeSlot:
        return self.builder.slot(None, role, operation)

    def _derive(
        self,
        node: str,
        *,
        key: SerdeSlot | None = None,
        value: SerdeSlot | None = None,
        repartition: bool | None = None,
    ) -> KStream:
        return KStream(
            self.builder,
            node,
            key or self.key_slot,
            value or self.value_slot,
            repartition_required=(
                self.repartition_required if repartition is None else repartition
            ),
        )

    # -- stateless ------------------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any, Any], Any], *, name: str | None = None) -> KStream:
        """The records for which ``predicate(key, value)`` is true."""
        _callable(predicate, "filter")
        return self._derive(self._add("KSTREAM-FILTER-", lambda: FilterProcessor(predicate), name))

    def filter_not(
        self, predicate: Callable[[Any, Any], Any], *, name: str | None = None
    ) -> KStream:
        """The records for which ``predicate(key, value)`` is false."""
        _callable(predicate, "filter_not")
        node = self._add("KSTREAM-FILTER-", lambda: FilterProcessor(predicate, False), name)
        return self._derive(node)

    def map(self, mapper: Callable[[Any, Any], Any], *, name: str | None = None) -> KStream:
        """``mapper(key, value) -> (key2, value2)`` for each record (a key-changing
        operation)."""
        _callable(mapper, "map")
        node = self._add("KSTREAM-MAP-", lambda: MapProcessor(mapper), name)
        return self._derive(
            node,
            key=self._slot("key", "map"),
            value=self._slot("value", "map"),
            repartition=True,
        )

    def map_values(
        self, mapper: Callable[..., Any], *, with_key: bool = False, name: str | None = None
    ) -> KStream:
        """``mapper(value)`` (``mapper(key, value)`` with ``with_key``) for each record."""
        _callable(mapper, "map_values")
        node = self._add("KSTREAM-MAPVALUES-", lambda: MapValuesProcessor(mapper, with_key), name)
        return self._derive(node, value=self._slot("value", "map_values"))

    def flat_map(
        self, mapper: Callable[[Any, Any], Iterable[Any]], *, name: str | None = None
    ) -> KStream:
        """Every ``(key2, value2)`` of ``mapper(key, value)`` (a key-changing operation)."""
        _callable(mapper, "flat_map")
        node = self._add("KSTREAM-FLATMAP-", lambda: FlatMapProcessor(mapper), name)
        return self._derive(
            node,
            key=self._slot("key", "flat_map"),
            value=self._slot("value", "flat_map"),
            repartition=True,
        )

    def flat_map_values(
        self,
        mapper: Callable[..., Iterable[Any]],
        *,
        with_key: bool = False,
        name: str | None = None,
    ) -> KStream:
        """Every value of ``mapper(value)`` under the record's key."""
        _callable(mapper, "flat_map_values")
        node = self._add(
            "KSTREAM-FLATMAPVALUES-", lambda: FlatMapValuesProcessor(mapper, with_key), name
        )
        return self._derive(node, value=self._slot("value", "flat_map_values"))

    def select_key(
        self, selector: Callable[[Any, Any], Any], *, name: str | None = None
    ) -> KStream:
        """Each record under ``selector(key, value)`` (a key-changing operation)."""
        _callable(selector, "select_key")
        node = self._add("KSTREAM-KEY-SELECT-", lambda: SelectKeyProcessor(selector), name)
        return self._derive(node, key=self._slot("key", "select_key"), repartition=True)

    def peek(self, action: Callable[[Any, Any], Any], *, name: str | None = None) -> KStream:
        """Calls ``action(key, value)`` for each record and passes it on."""
        _callable(action, "peek")
        return self._derive(
            self._add("KSTREAM-PEEK-", lambda: ForeachProcessor(action, True), name)
        )

    def foreach(self, action: Callable[[Any, Any], Any], *, name: str | None = None) -> None:
        """Calls ``action(key, value)`` for each record (a terminal operation)."""
        _callable(action, "foreach")
        self._add("KSTREAM-FOREACH-", lambda: ForeachProcessor(action, False), name)

    def merge(self, other: KStream, *, name: str | None = None) -> KStream:
        """The records of both streams, as they arrive."""
        if not isinstance(other, KStream) or other.builder is not self.builder:
            raise TopologyError("merge: the other stream must come from the same StreamsBuilder")
        node = _named(self.builder.names, name, "KSTREAM-MERGE-", "merge")
        self.builder.topology.add_processor(node, PassThroughProcessor, self.name, other.name)
        return KStream(
            self.builder,
            node,
            self._slot("key", "merge"),
            self._slot("value", "merge"),
            repartition_required=self.repartition_required or other.repartition_required,
        )

    def branch(self, *predicates: Callable[[Any, Any], Any]) -> list[KStream]:
        """One stream per predicate; a record goes to the first whose predicate it matches,
        else nowhere (Kafka's ``split().branch(...)``)."""
        if not predicates:
            raise TopologyError("branch: give at least one predicate")
        for predicate in predicates:
            _callable(predicate, "branch")
        names = self.builder.names
        split = names.processor("KSTREAM-BRANCH-")
        children = [f"{split}{i}" for i in range(1, len(predicates) + 1)]
        for _ in children:
            names.processor("KSTREAM-BRANCH-")  # each branch takes a number, as in Kafka
        self.builder.topology.add_processor(
            split, lambda: BranchProcessor(predicates, children, None), self.name
        )
        branches = []
        for child in children:
            self.builder.topology.add_processor(child, PassThroughProcessor, split)
            branches.append(self._derive(child))
        return branches

    # -- topics ---------------------------------------------------------------------------------

    def to(
        self,
        topic: str,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        name: str | None = None,
    ) -> None:
        """Writes every record to ``topic`` (partitioned by the serialized key's murmur2
        hash, as Java's producer)."""
        node = _named(self.builder.names, name, "KSTREAM-SINK-", "to")
        key = self.builder.slot(key_serde, "key", f"to({topic!r})").or_else(self.key_slot)
        value = self.builder.slot(value_serde, "value", f"to({topic!r})").or_else(self.value_slot)
        self.builder.topology.add_sink(
            node,
            topic,
            self.name,
            key_serializer=SlotSerializer(key),
            value_serializer=SlotSerializer(value),
        )

    def repartition(
        self,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        partitions: int | None = None,
        name: str | None = None,
    ) -> KStream:
        """The stream written to and read back from a repartition topic
        ``<application.id>-<name>-repartition`` (``partitions`` of them; by default as many
        as the input's)."""
        given = NameProvider.given(name, "repartition")
        prefix = given or self.builder.names.processor("KSTREAM-REPARTITION-")
        key = self.builder.slot(key_serde, "key", "repartition").or_else(self.key_slot)
        value = self.builder.slot(value_serde, "value", "repartition").or_else(self.value_slot)
        source = self.builder.repartition(self.name, prefix, key, value, partitions=partitions)
        return KStream(self.builder, source, key, value)

    def to_table(self, *, materialized: Materialized | str | None = None) -> KTable:
        """The stream as a table: each record updates its key (a ``None`` value deletes)."""
        from streamstate.dsl.table import KTable  # noqa: PLC0415 - table builds on stream

        mat = as_materialized(materialized, "to_table")
        node = self.builder.names.processor("KSTREAM-TOTABLE-")
        store = mat.name or self.builder.names.store("KSTREAM-TOTABLE-")
        key = self.builder.slot(mat.key_serde, "key", "to_table").or_else(self.key_slot)
        value = self.builder.slot(mat.value_serde, "value", "to_table").or_else(self.value_slot)
        state = TableState()
        opener = self.builder.table_store_opener(
            store, mat, key, value, state=state, operation="to_table"
        )
        parent = self.name
        if self.repartition_required:  # a key changed upstream: the table's key is the new one
            parent = self.builder.repartition(self.name, node, key, value)
        self.builder.topology.add_processor(
            node, lambda: TableSourceProcessor(state, opener), parent
        )
        table = KTable(self.builder, node, key, value, state)
        table.pending_store = (store, mat, opener)
        if mat.name is not None or state.versioned:
            table.materialize()
        return table

    # -- grouping -------------------------------------------------------------------------------

    def group_by_key(
        self,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        name: str | None = None,
    ) -> KGroupedStream:
        """The stream grouped by its key (repartitioned first if a key-changing operation came
        before)."""
        from streamstate.dsl.grouped import KGroupedStream  # noqa: PLC0415 - builds on stream

        key = self.builder.slot(key_serde, "key", "group_by_key").or_else(self.key_slot)
        value = self.builder.slot(value_serde, "value", "group_by_key").or_else(self.value_slot)
        return KGroupedStream(
            self.builder,
            self.name,
            key,
            value,
            repartition_required=self.repartition_required,
            repartition_name=NameProvider.given(name, "group_by_key"),
        )

    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        name: str | None = None,
    ) -> KGroupedStream:
        """The stream grouped by ``selector(key, value)``: repartitioned through
        ``<application.id>-<name>-repartition`` before it is aggregated."""
        from streamstate.dsl.grouped import KGroupedStream  # noqa: PLC0415 - builds on stream

        _callable(selector, "group_by")
        given = NameProvider.given(name, "group_by")
        node = _named(self.builder.names, given, "KSTREAM-KEY-SELECT-", "group_by")
        self.builder.topology.add_processor(node, lambda: SelectKeyProcessor(selector), self.name)
        key = self.builder.slot(key_serde, "key", "group_by")
        value = self.builder.slot(value_serde, "value", "group_by").or_else(self.value_slot)
        return KGroupedStream(
            self.builder, node, key, value, repartition_required=True, repartition_name=given
        )

    # -- joins (streamstate.dsl.joins tells them apart) ---------------------------------------

    def join(self, other: Any, *args: Any, **options: Any) -> KStream:
        """An inner join: with a ``KTable`` ``join(table, joiner(v1, v2))``; with a
        ``GlobalKTable`` ``join(global_table, key_selector(k, v), joiner(v1, v2))``; with a
        ``KStream`` ``join(other, joiner(v1, v2), JoinWindows, *, other_value_serde=None)``.
        See ``docs/dsl.md`` for what each emits and when."""
        return stream_join(self, "inner", other, args, options)

    def left_join(self, other: Any, *args: Any, **options: Any) -> KStream:
        """A left join (the forms of :meth:`join`): a record with no match is joined with
        ``None``; with a ``KStream``, once its window has closed."""
        return stream_join(self, "left", other, args, options)

    def outer_join(self, other: KStream, *args: Any, **options: Any) -> KStream:
        """A windowed outer join of two streams, ``outer_join(other, joiner(v1, v2),
        JoinWindows)``: a record of either side with no match is joined with ``None`` once
        its window has closed."""
        return stream_join(self, "outer", other, args, options)

    # -- the Processor API ----------------------------------------------------------------------

    def process(
        self, processor_factory: Any, *store_names: str, name: str | None = None
    ) -> KStream:
        """Runs a :class:`~streamstate.Processor` (``processor_factory()`` per task) on the
        stream, with the stores ``store_names`` (added with ``builder.add_state_store``);
        what it forwards is the returned stream."""
        node = _named(self.builder.names, name, "KSTREAM-PROCESSOR-", "process")
        self.builder.topology.add_processor(node, processor_factory, self.name)
        for store in store_names:
            if store in self.builder.topology.stores:
                self.builder.topology.connect_store(store, node)
                continue
            spec = self.builder.declared_stores.get(store)
            if spec is None:
                raise TopologyError(
                    f"process: no store named {store!r}; add it with "
                    f"builder.add_state_store({store!r})",
                    store_name=store,
                )
            self.builder.topology.add_store_spec(spec, node)
        return KStream(
            self.builder,
            node,
            self._slot("key", "process"),
            self._slot("value", "process"),
            repartition_required=True,
        )


def _named(names: NameProvider, name: str | None, prefix: str, operation: str) -> str:
    given = NameProvider.given(name, operation)
    generated = names.processor(prefix)  # a given name still takes a number, as in Kafka
    return given or generated


def _callable(function: Any, operation: str) -> None:
    if not callable(function):
        raise TopologyError(f"{operation}: expects a function, not {type(function).__name__}")
