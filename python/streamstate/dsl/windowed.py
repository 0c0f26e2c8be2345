"""``TimeWindowedKStream`` and ``SessionWindowedKStream`` (Kafka's): a grouped stream with
windows, aggregated into a ``KTable`` keyed by :class:`~streamstate.dsl.windows.Windowed`.

Their stores are window stores (time and sliding windows) or session stores, kept for the
``retention`` given in :class:`~streamstate.dsl.Materialized` or, by default, the window size
plus grace (sliding windows: twice the time difference plus grace; sessions: gap plus grace),
as Kafka keeps them. A retention shorter than that is a :class:`TopologyError`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from streamstate.dsl.grouped import KGroupedStream, count_aggregator, count_initializer
from streamstate.dsl.materialized import Materialized
from streamstate.dsl.stores import SessionStore, StoreSerdes, WindowStore
from streamstate.dsl.stream import _callable
from streamstate.dsl.table import KTable
from streamstate.dsl.table_processors import TableState
from streamstate.dsl.window_processors import (
    SessionWindowAggregateProcessor,
    TimeWindowAggregateProcessor,
)
from streamstate.dsl.windowed_serde import session_windowed_slot, time_windowed_slot
from streamstate.dsl.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from streamstate.errors import TopologyError
from streamstate.serde import Serdes

if TYPE_CHECKING:
    from streamstate.processor.serde_slot import SerdeSlot

__all__ = ["SessionWindowedKStream", "TimeWindowedKStream"]


def _retention(mat: Materialized, minimum: int, operation: str) -> int:
    given = mat.retention_ms()
    if given is None:
        return minimum
    if given < minimum:
        raise TopologyError(
            f"{operation}: the retention of store {mat.name!r} ({given} ms) must be no smaller "
            f"than its window size plus the grace period ({minimum} ms)"
        )
    return given


_Windowed = TypeVar("_Windowed", "TimeWindowedKStream", "SessionWindowedKStream")


def _with_emit(windowed: _Windowed, strategy: EmitStrategy) -> _Windowed:
    """A copy of ``windowed`` emitting by ``strategy`` (windowed streams are immutable)."""
    if not isinstance(strategy, EmitStrategy):
        raise TopologyError(f"emit_strategy takes an EmitStrategy, not {strategy!r}")
    copied = copy.copy(windowed)
    copied.emit = strategy
    return copied


class TimeWindowedKStream:
    """A grouped stream in time windows (tumbling, hopping) or sliding windows."""

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows | SlidingWindows) -> None:
        """Made by ``KGroupedStream.windowed_by``."""
        self.grouped = grouped
        self.windows = windows
        self.emit = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedKStream:
        """When results are forwarded: on every update (the default) or once per window,
        when it closes (KIP-825)."""
        return _with_emit(self, strategy)

    def _aggregate(  # noqa: PLR0917 - one place for the aggregations of this class
        self,
        operation: str,
        prefix: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        grouped, builder, windows = self.grouped, self.grouped.builder, self.windows
        store, mat, key, value = grouped.aggregation(operation, prefix, mat_value, value_slot)
        if isinstance(windows, SlidingWindows):
            size = windows.time_difference_ms
            minimum = 2 * size + windows.grace_ms
        else:
            size = windows.size_ms
            minimum = size + windows.grace_ms
        retention = _retention(mat, minimum, operation)
        node = builder.names.processor(prefix)
        parent = grouped.input_node(store)
        key.use()
        value.use()
        state = TableState(store=store)

        def opener(inner: Any) -> WindowStore:
            return WindowStore(inner, StoreSerdes(store, key.get(), value.get()), retention, size)

        emit = self.emit
        if isinstance(windows, SlidingWindows):
            from streamstate.dsl.sliding_processors import (  # noqa: PLC0415 - optional part
                SlidingWindowAggregateProcessor,
            )

            def make() -> Any:
                return SlidingWindowAggregateProcessor(
                    state, opener, windows, emit, initializer, aggregator
                )
        else:

            def make() -> Any:
                return TimeWindowAggregateProcessor(
                    state,
                    opener,
                    windows,
                    emit,
                    initializer,
                    aggregator,
                    counting=aggregator is count_aggregator,
                )

        slots = (time_windowed_slot(builder, key, size), value)
        table = builder.add_aggregation(
            node,
            make,
            parent,
            slots,
            state=state,
            store=(store, mat, opener),
            retention_ms=retention,
        )
        table.windowed = "time"
        table.grace_ms = windows.grace_ms
        return table

    def count(self, *, materialized: Materialized | str | None = None) -> KTable:
        """The number of records per key and window."""
        return self._aggregate(
            "windowed count",
            "KSTREAM-AGGREGATE-",
            materialized,
            self.grouped.builder.slot(Serdes.Long(), "value", "windowed count"),
            count_initializer,
            count_aggregator,
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``reducer(aggregate, value)`` per key and window."""
        _callable(reducer, "windowed reduce")
        return self._aggregate(
            "windowed reduce",
            "KSTREAM-REDUCE-",
            materialized,
            self.grouped.value_slot,
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
        """``aggregator(key, value, aggregate)`` per key and window, from ``initializer()``."""
        _callable(initializer, "windowed aggregate")
        _callable(aggregator, "windowed aggregate")
        return self._aggregate(
            "windowed aggregate",
            "KSTREAM-AGGREGATE-",
            materialized,
            self.grouped.builder.slot(None, "value", "windowed aggregate"),
            initializer,
            aggregator,
        )


class SessionWindowedKStream:
    """A grouped stream in session windows."""

    def __init__(self, grouped: KGroupedStream, windows: SessionWindows) -> None:
        """Made by ``KGroupedStream.windowed_by``."""
        self.grouped = grouped
        self.windows = windows
        self.emit = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedKStream:
        """When results are forwarded (see ``TimeWindowedKStream.emit_strategy``)."""
        return _with_emit(self, strategy)

    def _aggregate(  # noqa: PLR0917 - one place for the aggregations of this class
        self,
        operation: str,
        prefix: str,
        mat_value: Materialized | str | None,
        value_slot: SerdeSlot,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        grouped, builder, windows = self.grouped, self.grouped.builder, self.windows
        store, mat, key, value = grouped.aggregation(operation, prefix, mat_value, value_slot)
        retention = _retention(mat, windows.gap_ms + windows.grace_ms, operation)
        node = builder.names.processor(prefix)
        parent = grouped.input_node(store)
        key.use()
        value.use()
        state = TableState(store=store)

        def opener(inner: Any) -> SessionStore:
            return SessionStore(inner, StoreSerdes(store, key.get(), value.get()), retention)

        emit = self.emit
        table = builder.add_aggregation(
            node,
            lambda: SessionWindowAggregateProcessor(
                state, opener, windows, emit, initializer, aggregator, merger
            ),
            parent,
            (session_windowed_slot(builder, key), value),
            state=state,
            store=(store, mat, opener),
            retention_ms=retention,
        )
        table.windowed = "session"
        table.grace_ms = windows.grace_ms
        table.gap_ms = windows.gap_ms
        return table

    def count(self, *, materialized: Materialized | str | None = None) -> KTable:
        """The number of records per key and session."""
        return self._aggregate(
            "session count",
            "KSTREAM-AGGREGATE-",
            materialized,
            self.grouped.builder.slot(Serdes.Long(), "value", "session count"),
            count_initializer,
            count_aggregator,
            lambda _key, a, b: a + b,
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``reducer(aggregate, value)`` per key and session (merged sessions reduce too)."""
        _callable(reducer, "session reduce")

        def add(_key: Any, value: Any, aggregate: Any) -> Any:
            return value if aggregate is None else reducer(aggregate, value)

        def merge(_key: Any, a: Any, b: Any) -> Any:
            if a is None:
                return b
            return a if b is None else reducer(a, b)

        return self._aggregate(
            "session reduce",
            "KSTREAM-REDUCE-",
            materialized,
            self.grouped.value_slot,
            lambda: None,
            add,
            merge,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
        *,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """``aggregator(key, value, aggregate)`` per key and session from ``initializer()``;
        ``merger(key, aggregate1, aggregate2)`` when a record bridges two sessions."""
        for function in (initializer, aggregator, merger):
            _callable(function, "session aggregate")
        return self._aggregate(
            "session aggregate",
            "KSTREAM-AGGREGATE-",
            materialized,
            self.grouped.builder.slot(None, "value", "session aggregate"),
            initializer,
            aggregator,
            merger,
        )
