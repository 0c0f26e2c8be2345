"""KTable-KTable joins on the primary key (Kafka's ``KTable.join/leftJoin/outerJoin(KTable,
ValueJoiner[, Named][, Materialized])``, ``KTableImpl.doJoin``).

``table.join(other, joiner)`` is a table whose row of a key is ``joiner(row, other_row)`` while
both tables have that key; ``left_join`` keeps every row of ``table`` (``other_row`` ``None``
when ``other`` has none), ``outer_join`` every row of either. Each update of either side
updates the result: a ``Change(new, old)`` downstream, ``new`` ``None`` for a deleted result
row (a tombstone after ``to_stream()``). Kafka's rules, kept exactly:

* An update joins with the other side's current row, read through that side's value getter
  (:mod:`streamstate.dsl.value_getters`: the nearest store up its chain, a source table
  materialized for it, ``filter``/``map_values`` computed, an unmaterialized join result
  joined again from its inputs). The result carries the larger of the two rows' timestamps.
* An inner join's update with no row on the other side forwards nothing; a deleted row with a
  row on the other side forwards a tombstone (``Change(None, old)``) even when there was no
  previous result when old values are off (``old`` is then ``None``). A left join's delete on
  the left forwards a tombstone; an outer join's delete forwards ``joiner(None, other_row)``
  while the other side has a row.
* Old values (``Change.old``) are computed from the updated side's old value and sent only when
  a later operation needs them (``group_by``, a ``filter``, a join's own caller); a left join
  turns on the left table's old values, an outer join both tables'.
* An update of a versioned table older than its key's latest version (KIP-914) is dropped by
  the join and counted in ``dropped-records-total``.
* Nodes: ``KTABLE-MERGE-<n>`` (the result), ``KTABLE-JOINTHIS-<n+1>`` under ``table``,
  ``KTABLE-JOINOTHER-<n+2>`` under ``other``; with ``name``: ``<name>``,
  ``<name>-join-this``, ``<name>-join-other``. Given ``materialized`` the result keeps a store
  (its name, or ``KTABLE-MERGE-STATE-STORE-<n>`` numbered before the nodes) and is queryable
  by it; otherwise it keeps none.
* Both tables' source topics end up in one sub-topology (each side's processor reads the other
  side's store), so they must be co-partitioned: ``StreamsApp.start()`` raises
  :class:`~streamstate.TopologyError` naming both topics and their partition counts otherwise.
  A repartition topic a table is read from (an aggregation after ``group_by``) is sized as the
  other table's topic, as Kafka's co-partition groups are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.dsl.materialized import Materialized
from streamstate.dsl.materialized import materialized as as_materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.table_join_processors import (
    JoinTableState,
    TableJoinMergeProcessor,
    TableJoinProcessor,
)
from streamstate.dsl.value_getters import join_view, value_getter_supplier
from streamstate.errors import TopologyError
from streamstate.processor.graph import ProcessorNode, SourceNode

if TYPE_CHECKING:
    from streamstate.dsl.table import KTable

__all__ = ["join_tables"]

_KINDS = {"inner": "join", "left": "left_join", "outer": "outer_join"}
# The kind of the other side's processor (Kafka's reversed join of each kind).
_OTHER_KIND = {"inner": "inner", "left": "right", "outer": "outer"}


def join_tables(
    table: KTable,
    other: KTable,
    joiner: Callable[[Any, Any], Any],
    *,
    kind: str,
    materialized: Materialized | str | None = None,
    name: str | None = None,
    **more: Any,
) -> KTable:
    """``table.<kind>_join(other, joiner(v1, v2), *, materialized=None, name=None)``: the
    join of two tables on their keys; see the module doc. ``kind`` is ``inner``, ``left`` or
    ``outer``."""
    from streamstate.dsl.table import KTable  # noqa: PLC0415 - table imports this module

    if kind not in _KINDS:
        raise TopologyError(f"KTable join: kind is inner, left or outer, not {kind!r}")
    operation = f"KTable.{_KINDS[kind]}"
    if more:
        raise TopologyError(
            f"{operation}: unknown option(s) {sorted(more)}; a table-table join takes "
            f"materialized= and name="
        )
    if not callable(joiner):
        raise TopologyError(f"{operation}: joiner must be a function, not {joiner!r}")
    for side in (table, other):
        if side.windowed == "session":
            raise TopologyError(
                f"{operation}: joining session-windowed table {side.name} is not supported; "
                f"join their to_stream() re-keyed, or un-windowed tables"
            )
    given = NameProvider.given(name, operation)
    builder = table.builder
    names = builder.names
    # Kafka's order of generated names: the result's store (its Materialized is made before
    # doJoin), the merge node, then the two sides' processors.
    mat: Materialized | None = None
    store: str | None = None
    if materialized is not None:
        mat = as_materialized(materialized, operation)
        if mat.versioned_retention is not None:
            raise TopologyError(
                f"{operation}: the result of a table-table join cannot be materialized as a "
                f"versioned store; give its Materialized no versioned_retention"
            )
        store = mat.name or names.store("KTABLE-MERGE-")
    # A given name still takes its numbers, as Kafka's NamedInternal burns them.
    merge = _named(names, given, "", "KTABLE-MERGE-")
    if kind in {"left", "outer"}:
        table.state.enable_send_old_values(True)
    if kind == "outer":
        other.state.enable_send_old_values(True)
    _copartition(table, other)
    this_view = value_getter_supplier(table, operation)
    other_view = value_getter_supplier(other, operation)
    this_node = _named(names, given, "-join-this", "KTABLE-JOINTHIS-")
    other_node = _named(names, given, "-join-other", "KTABLE-JOINOTHER-")

    def reversed_joiner(other_value: Any, this_value: Any) -> Any:
        return joiner(this_value, other_value)

    state = JoinTableState(table.state, other.state, join_view(kind, this_view, other_view, joiner))
    topology = builder.topology
    topology.add_processor(
        this_node,
        lambda: TableJoinProcessor(kind, other_view, joiner, state, table.state),
        table.name,
    )
    topology.add_processor(
        other_node,
        lambda: TableJoinProcessor(
            _OTHER_KIND[kind], this_view, reversed_joiner, state, other.state
        ),
        other.name,
    )
    # Kafka's result serdes: the Materialized's, else the key serde of `table` and no value
    # serde (the app's default where one is needed).
    key = table.key_slot
    value = builder.slot(None, "value", operation)
    opener: Callable[[Any], Any] | None = None
    if mat is not None and store is not None:
        key = builder.slot(mat.key_serde, "key", operation).or_else(table.key_slot)
        value = builder.slot(mat.value_serde, "value", operation)
        opener = builder.kv_store_opener(store, key, value)
    topology.add_processor(
        merge, lambda: TableJoinMergeProcessor(state, opener), this_node, other_node
    )
    for name_ in other_view.stores:
        topology.connect_store(name_, this_node)
    for name_ in this_view.stores:
        topology.connect_store(name_, other_node)
    result = KTable(builder, merge, key, value, state)
    if mat is not None and store is not None and opener is not None:
        # Kafka's join result is queryable by its store's name even when it was generated.
        result.pending_store = (store, dataclasses.replace(mat, name=store), opener)
        result.materialize()
    return result


def _copartition(*tables: KTable) -> None:
    """Kafka's ``ensureCopartitionWith``: the repartition topics the joined tables are read
    from (an aggregation after a ``group_by``, for one) join the tables' topics in a
    co-partition group, so they get those topics' partition count (Kafka's
    ``CopartitionedTopicsEnforcer``) instead of their writer's."""
    graph = tables[0].builder.topology._graph
    by_topic = {spec.topic: name for name, spec in graph.repartitions.items()}
    seen: set[str] = set()
    stack = [table.name for table in tables]
    while stack:
        node = graph.nodes[stack.pop()]
        if node.name in seen:
            continue
        seen.add(node.name)
        if isinstance(node, SourceNode):
            for topic in node.topics:
                name = by_topic.get(topic)
                if name is not None and not graph.repartitions[name].copartition:
                    spec = dataclasses.replace(graph.repartitions[name], copartition=True)
                    graph.repartitions[name] = spec
        elif isinstance(node, ProcessorNode):
            stack.extend(node.parents)


def _named(names: NameProvider, given: str | None, suffix: str, prefix: str) -> str:
    generated = names.processor(prefix)
    return generated if given is None else f"{given}{suffix}"
