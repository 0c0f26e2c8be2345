"""The processors of a KTable-KTable join on the primary key (Kafka's ``KTableKTableInnerJoin``,
``KTableKTableLeftJoin``, ``KTableKTableRightJoin``, ``KTableKTableOuterJoin`` and
``KTableKTableJoinMerger``). Each side reads the other through its value getter
(:mod:`streamstate.dsl.value_getters`).

A join is three processors: one under each side (``KTABLE-JOINTHIS-``, ``KTABLE-JOINOTHER-``),
each joining an update of its side with the other side's current row, read through the other
side's getter, and the ``KTABLE-MERGE-`` node both forward to, which is the result table (and
keeps its store when the join is materialized). The other side's processor runs the same join
with the joiner's arguments swapped; a left join's other side is Kafka's right join. The
result's timestamp is the larger of the update's and the row's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamstate.dsl.table_processors import (
    Change,
    OutOfOrderChange,
    TableState,
    _Stateful,
    skip_record,
)
from streamstate.dsl.value_getters import ValueGetterSupplier, ViewedTableState
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record

__all__ = [
    "JOIN_KINDS",
    "JoinTableState",
    "TableJoinMergeProcessor",
    "TableJoinProcessor",
]

JOIN_KINDS = ("inner", "left", "right", "outer")
"""What a side's processor does: ``right`` is the other side's processor of a left join."""

_log = logging.getLogger(__name__)


class JoinTableState(ViewedTableState):
    """A join result's :class:`TableState`: old values of the result need old values of both
    sides, which are then materialized (Kafka's ``KTableKTableJoinMerger``
    ``enableSendingOldValues``, which forces materialization upstream even when the result
    has a store). ``view`` reads the result joined on the fly when it has no store."""

    def __init__(self, this: TableState, other: TableState, view: ValueGetterSupplier) -> None:
        """``this``/``other``: the states of the joined tables."""
        super().__init__(view)
        self.sides = (this, other)

    def enable_send_old_values(self, force: bool = True) -> bool:
        """Old values from both sides, materializing them; always ``True``."""
        del force  # a join's old values are computed from its inputs': always forced
        for side in self.sides:
            side.enable_send_old_values(True)
        self.send_old_values = True
        return True


class TableJoinProcessor(Processor):
    """One side of a table-table join: each update of this side joined with the other side's
    current row (``joiner(this_value, other_value)``; the other side's processor is given the
    joiner with its arguments swapped). ``kind`` is one of :data:`JOIN_KINDS`."""

    def __init__(
        self,
        kind: str,
        other: ValueGetterSupplier,
        joiner: Callable[[Any, Any], Any],
        state: TableState,
        side: TableState | None = None,
    ) -> None:
        """``other``: how the other side is read; ``state``: the result's (its old values);
        ``side``: this side's table (whether it is versioned)."""
        self.kind = kind
        self.other = other
        self.joiner = joiner
        self.state = state
        self.side = side

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the other side's getter."""
        self.context = context
        self.getter = self.other.open(context)
        self.send_old_values = self.state.send_old_values
        # Kafka's versioned semantics (KIP-914), decided once the program is complete: on
        # when this side's rows come from a versioned store.
        self.versioned = self.side is not None and self.side.output_versioned()

    def process(self, record: Record) -> None:
        """Forwards the joined ``Change(new, old)``, or nothing (see Kafka's processors)."""
        key = record[0]
        if key is None:
            skip_record(self.context, "null key")
            return
        change = record[1]
        if self.versioned and not change.is_latest:
            _log.info(
                "Skipping out-of-order record from versioned table while performing "
                "table-table join."
            )
            self.context.record_dropped()
            return
        found = self.getter.get_with_timestamp(key)
        other = None if found is None else found[0]
        kind = self.kind
        joiner = self.joiner
        if other is None:
            if kind in {"inner", "right"}:
                return
            if change.new is None and change.old is None:
                return
            timestamp = record[2]
        else:
            timestamp = max(record[2], found[1])  # type: ignore[index]
        new = old = None
        if kind == "right":
            # Kafka's KTableKTableRightJoin: the left row exists, so the joiner always runs.
            new = joiner(change.new, other)
            if self.send_old_values:
                old = joiner(change.old, other)
        elif kind == "outer":
            if other is not None or change.new is not None:
                new = joiner(change.new, other)
            if self.send_old_values and (other is not None or change.old is not None):
                old = joiner(change.old, other)
        else:
            if change.new is not None:
                new = joiner(change.new, other)
            if self.send_old_values and change.old is not None:
                old = joiner(change.old, other)
        # An out-of-order update stays one downstream (Kafka passes isLatest on).
        joined = (
            OutOfOrderChange(new, old) if type(change) is OutOfOrderChange else Change(new, old)
        )
        self.context.forward(Record(key, joined, timestamp, record[3]))


class TableJoinMergeProcessor(_Stateful):
    """The join result (Kafka's ``KTableKTableJoinMerger``): what both sides' processors
    forward, into the result's store when the join is materialized (then forwarded as that
    store forwards: at once, or when its record cache flushes). ``open_store``: how the
    result's store is opened (``None`` when it keeps none)."""

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the result's store, if any."""
        super().init(context)
        self.send_old_values = self.state.send_old_values

    def process(self, record: Record) -> None:
        """Stores and forwards the joined change."""
        change = record[1]
        if self.forwarder is not None:
            key, timestamp, headers = record[0], record[2], record[3]
            self.store.put(key, change.new, timestamp, headers)
            self.forwarder.maybe_forward(key, change.new, change.old, timestamp, headers)
        elif self.send_old_values:
            self.context.forward(record)
        else:
            kept = type(change)(change.new, None)  # an out-of-order update stays one
            self.context.forward(Record(record[0], kept, record[2], record[3]))
