"""``KGroupedStream`` and ``KGroupedTable`` (Kafka's): records grouped by key, ready to be
aggregated into a :class:`~streamstate.dsl.KTable`.

An aggregation of a stream whose key changed upstream first goes through a repartition topic
named after the aggregation's store (``<application.id>-<store>-repartition``) or after the
grouping's ``name``; a table's ``group_by`` always does, carrying each row's old and new value
so that the old one is subtracted from its group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.dsl.materialized import Materialized, materialized
from streamstate.dsl.stream import _callable
from streamstate.dsl.table import KTable
from streamstate.dsl.table_processors import (
    ChangeDeserializer,
    ChangeSerializer,
    StreamAggregateProcessor,
    TableAggregateProcessor,
    TableState,
)
from streamstate.dsl.windows import SessionWindows, SlidingWindows, TimeWindows
from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import SerdeSlot
from streamstate.serde import Serdes

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.dsl.windowed import SessionWindowedKStream, TimeWindowedKStream

__all__ = ["KGroupedStream", "KGroupedTable"]


def count_initializer() -> int:
    """``count``'s initializer."""
    return 0


def count_aggregator(_key: Any, _value: Any, aggregate: int) -> int:
    """``count``'s aggregator."""
    return aggregate + 1


class KGroupedStream:
    """A grouped stream; see the module doc."""

    def __init__(
        self,
        builder: StreamsBuilder,
        name: str,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        *,
        repartition_required: bool,
        repartition_name: str | None,
    ) -> None:
        """Made by ``KStream.group_by`` / ``group_by_key``."""
        self.builder = builder
        self.name = name
        self.key_slot = key_slot
        self.value_slot = value_slot
        self.repartition_required = repartition_required
        self.repartition_name = repartition_name

    def input_node(self, store: str) -> str:
        """The node an aggregation hangs under: a repartition topic's source if needed."""
        if not self.repartition_required:
            return self.name
        prefix = self.repartition_name or store
        return self.builder.repartition(self.name, prefix, self.key_slot, self.value_slot)

    def aggregation(
        self,
        operation: str,
        prefix: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot,
        *,
        burn: bool = False,
    ) -> tuple[str, Materialized, SerdeSlot, SerdeSlot]:
        """The store name, Materialized and serde slots of an aggregation."""
        mat = materialized(mat_value, operation)
        if burn and mat_value is not None and mat.name is None:
            self.builder.names.store(prefix)  # Kafka burns a number here (compatibility)
        store = mat.name or self.builder.names.store(prefix)
        key = self.builder.slot(mat.key_serde, "key", operation).or_else(self.key_slot)
        value = self.builder.slot(mat.value_serde, "value", operation).or_else(value_slot)
        return store, mat, key, value

    def _aggregate(  # noqa: PLR0917 - one place for the aggregations of this class
        self,
        operation: str,
        prefix: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any, Any], Any],
        *,
        burn: bool = False,
    ) -> KTable:
        store, mat, key, value = self.aggregation(
            operation, prefix, mat_value, value_slot, burn=burn
        )
        node = self.builder.names.processor(prefix)
        parent = self.input_node(store)
        state = TableState(store=store)
        opener = self.builder.kv_store_opener(store, key, value)
        return self.builder.add_aggregation(
            node,
            lambda: StreamAggregateProcessor(
                state, opener, initializer, aggregator, counting=aggregator is count_aggregator
            ),
            parent,
            (key, value),
            state=state,
            store=(store, mat, opener),
        )

    def count(self, *, materialized: Materialized | str | None = None) -> KTable:
        """The number of records per key (a ``None`` key or value is dropped and counted)."""
        long_slot = self.builder.slot(Serdes.Long(), "value", "count")
        return self._aggregate(
            "count",
            "KSTREAM-AGGREGATE-",
            materialized,
            long_slot,
            count_initializer,
            count_aggregator,
            burn=True,
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``reducer(aggregate, value)`` over each key's values (the first value starts)."""
        _callable(reducer, "reduce")
        return self._aggregate(
            "reduce",
            "KSTREAM-REDUCE-",
            materialized,
            self.value_slot,
            None,
            lambda _key, value, aggregate: reducer(aggregate, value),
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``aggregator(key, value, aggregate)`` over each key's values, starting from
        ``initializer()``."""
        _callable(initializer, "aggregate")
        _callable(aggregator, "aggregate")
        value_slot = self.builder.slot(None, "value", "aggregate")
        return self._aggregate(
            "aggregate", "KSTREAM-AGGREGATE-", materialized, value_slot, initializer, aggregator
        )

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows
    ) -> TimeWindowedKStream | SessionWindowedKStream:
        """Windows for an aggregation: ``TimeWindows`` (tumbling, hopping) or
        ``SlidingWindows`` give a ``TimeWindowedKStream``; ``SessionWindows`` a
        ``SessionWindowedKStream``."""
        from streamstate.dsl.windowed import (  # noqa: PLC0415 - windowed builds on this
            SessionWindowedKStream,
            TimeWindowedKStream,
        )

        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        if isinstance(windows, (TimeWindows, SlidingWindows)):
            return TimeWindowedKStream(self, windows)
        raise TopologyError(
            f"windowed_by takes TimeWindows, SlidingWindows or SessionWindows, not "
            f"{type(windows).__name__}"
        )


class KGroupedTable:
    """A regrouped table; see the module doc."""

    def __init__(
        self,
        builder: StreamsBuilder,
        name: str,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        repartition_name: str | None,
    ) -> None:
        """Made by ``KTable.group_by``."""
        self.builder = builder
        self.name = name
        self.key_slot = key_slot
        self.value_slot = value_slot
        self.repartition_name = repartition_name

    def _aggregate(  # noqa: PLR0917 - one place for the aggregations of this class
        self,
        operation: str,
        prefix: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot,
        initializer: Callable[[], Any] | None,
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        mat = materialized(mat_value, operation)
        store = mat.name or self.builder.names.store("KTABLE-AGGREGATE-")
        key = self.builder.slot(mat.key_serde, "key", operation).or_else(self.key_slot)
        value = self.builder.slot(mat.value_serde, "value", operation).or_else(value_slot)
        source = self.builder.repartition(
            self.name,
            self.repartition_name or store,
            self.key_slot,
            self.value_slot,
            null_key_filter=False,
            value_wrap=(ChangeSerializer, ChangeDeserializer),
            topic_named=self.repartition_name is not None,
        )
        node = self.builder.names.processor(prefix)
        state = TableState(store=store)
        opener = self.builder.kv_store_opener(store, key, value)
        return self.builder.add_aggregation(
            node,
            lambda: TableAggregateProcessor(state, opener, initializer, adder, subtractor),
            source,
            (key, value),
            state=state,
            store=(store, mat, opener),
        )

    def count(self, *, materialized: Materialized | str | None = None) -> KTable:
        """The number of rows per group."""
        return self._aggregate(
            "KGroupedTable.count",
            "KTABLE-AGGREGATE-",
            materialized,
            self.builder.slot(Serdes.Long(), "value", "KGroupedTable.count"),
            count_initializer,
            count_aggregator,
            lambda _key, _value, aggregate: aggregate - 1,
        )

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``adder(aggregate, value)`` for rows joining a group, ``subtractor(aggregate,
        value)`` for rows leaving it."""
        _callable(adder, "KGroupedTable.reduce")
        _callable(subtractor, "KGroupedTable.reduce")
        return self._aggregate(
            "KGroupedTable.reduce",
            "KTABLE-REDUCE-",
            materialized,
            self.value_slot,
            None,
            lambda _key, value, aggregate: adder(aggregate, value),
            lambda _key, value, aggregate: subtractor(aggregate, value),
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``adder(key, value, aggregate)`` for rows joining a group,
        ``subtractor(key, value, aggregate)`` for rows leaving it, from ``initializer()``."""
        for function in (initializer, adder, subtractor):
            _callable(function, "KGroupedTable.aggregate")
        return self._aggregate(
            "KGroupedTable.aggregate",
            "KTABLE-AGGREGATE-",
            materialized,
            self.builder.slot(None, "value", "KGroupedTable.aggregate"),
            initializer,
            adder,
            subtractor,
        )
