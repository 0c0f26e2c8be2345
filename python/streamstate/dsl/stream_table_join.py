"""Stream-table and stream-global-table joins (Kafka's ``KStream.join/leftJoin(KTable)`` and
``KStream.join/leftJoin(GlobalKTable, KeyValueMapper, ValueJoiner)``).

Each stream record is joined with the table's row for its key, read through the table's
*value getter* (:mod:`streamstate.dsl.value_getters`: the nearest store up the table's chain,
a source table without one materialized for it as Kafka materializes it, the
``filter``/``map_values`` steps below it computed on the fly). That store is connected to the
join processor, so the stream's and the table's source topics land in one sub-topology and must
be co-partitioned (Kafka's co-partition group), which ``StreamsApp.start()`` checks. A stream
whose key changed upstream is repartitioned first through ``<name>-repartition`` (the join's
``name``, else the stream's node name, as Kafka names it). A global table is read from its
global store by ``key_selector(key, value)``, without repartitioning.

A versioned table (``Materialized(versioned_retention=...)``, KIP-914) is read as of each
stream record's timestamp; ``grace=`` (KIP-923, Kafka's ``Joined.withGracePeriod``) holds stream
records in a time-ordered buffer (store ``<join name>-Buffer``) and joins them in timestamp
order once stream time has passed their timestamp by the grace period.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.app.topology import StoreSpec
from streamstate.dsl.join_repartition import relax_null_key_filters, repartition_for_join
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.stream_table_join_processors import (
    StreamTableJoinProcessor,
    TimeOrderedJoinBuffer,
)
from streamstate.dsl.value_getters import global_view, value_getter_supplier
from streamstate.dsl.windows import Duration, to_millis
from streamstate.errors import TopologyError
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.serde_slot import SerdeSlot
from streamstate.serde import Serde

if TYPE_CHECKING:
    from streamstate.dsl.stream import KStream
    from streamstate.dsl.table import GlobalKTable, KTable

__all__ = ["join_global", "join_table"]

_JOIN = "KSTREAM-JOIN-"
_LEFT_JOIN = "KSTREAM-LEFTJOIN-"


def join_table(
    stream: KStream,
    table: KTable,
    joiner: Callable[..., Any],
    *,
    left: bool,
    name: str | None = None,
    grace: Duration | None = None,
    with_key: bool = False,
    key_serde: Serde | None = None,
    value_serde: Serde | None = None,
    other_value_serde: Serde | None = None,
) -> KStream:
    """``stream.join(table, joiner)`` / ``left_join``: each stream record joined with the
    table's row of its key (``joiner(value, row)``, ``joiner(key, value, row)`` with
    ``with_key``); see the module doc. ``name`` names the join processor and its repartition
    topic; ``key_serde``/``value_serde`` are the repartition topic's (Kafka's ``Joined``);
    ``grace`` needs a versioned table."""
    from streamstate.dsl.stream import KStream  # noqa: PLC0415 - stream imports this module

    operation = "KStream.left_join" if left else "KStream.join"
    given = NameProvider.given(name, operation)
    builder = stream.builder
    del other_value_serde  # Kafka's Joined carries it; a lookup never serializes the row
    if table.windowed is not None:
        raise TopologyError(
            f"{operation}: joining a stream with a windowed table ({table.name}) is not "
            f"supported; join its to_stream() or an un-windowed table"
        )
    view = value_getter_supplier(table, operation)
    history_ms = view.history_ms
    grace_ms = None if grace is None else to_millis(grace, f"{operation}: grace")
    if grace_ms is not None:
        if grace_ms < 0:
            raise TopologyError(f"{operation}: grace must not be negative, not {grace_ms}")
        if not view.versioned:
            raise TopologyError(
                f"{operation}: KTable must be versioned to use a grace period in a stream "
                f"table join (give its Materialized a versioned_retention)"
            )
        if history_ms is not None and grace_ms > history_ms:
            raise TopologyError(
                f"{operation}: History retention must be at least grace period "
                f"({history_ms} ms < {grace_ms} ms)"
            )
    key = builder.slot(key_serde, "key", operation).or_else(stream.key_slot)
    value = builder.slot(value_serde, "value", operation).or_else(stream.value_slot)
    parent = stream.name
    if stream.repartition_required:
        parent = repartition_for_join(stream, given, key, value, keep_null_keys=left)
    if left:
        relax_null_key_filters(builder, parent)
    generated = builder.names.processor(_LEFT_JOIN if left else _JOIN)
    node = given or generated
    buffer: Callable[[ProcessorGraphContext], TimeOrderedJoinBuffer] | None = None
    buffer_store = f"{node}-Buffer"
    if grace_ms is not None:
        buffer = _buffer_opener(buffer_store, key, value, grace_ms)
    builder.topology.add_processor(
        node,
        lambda: StreamTableJoinProcessor(view, None, joiner, left, with_key, grace_ms, buffer),
        parent,
    )
    for store in view.stores:
        builder.topology.connect_store(store, node)
    if grace_ms is not None:
        builder.topology.add_store_spec(
            StoreSpec(buffer_store, persistent=True, logged=True, caching=False), node
        )
    return KStream(builder, node, key, builder.slot(None, "value", operation))


def join_global(
    stream: KStream,
    global_table: GlobalKTable,
    key_selector: Callable[[Any, Any], Any],
    joiner: Callable[..., Any],
    *,
    left: bool,
    name: str | None = None,
    with_key: bool = False,
) -> KStream:
    """``stream.join(global_table, key_selector, joiner)`` / ``left_join``: each stream record
    joined with the global table's row of ``key_selector(key, value)``; no repartitioning. A
    record whose selected key is ``None`` is dropped by an inner join and joined with ``None``
    by a left join, as in Kafka 4.4."""
    from streamstate.dsl.stream import KStream  # noqa: PLC0415 - stream imports this module
    from streamstate.dsl.table import GlobalKTable  # noqa: PLC0415 - table imports stream

    operation = "KStream.left_join" if left else "KStream.join"
    if not isinstance(global_table, GlobalKTable):
        raise TopologyError(f"{operation}: expects a GlobalKTable, not {global_table!r}")
    if not callable(joiner):
        raise TopologyError(f"{operation}: joiner must be a function, not {joiner!r}")
    builder = stream.builder
    if global_table.store_name not in builder.topology.global_stores:
        raise TopologyError(
            f"{operation}: the GlobalKTable of {global_table.topic!r} comes from another "
            f"StreamsBuilder"
        )
    given = NameProvider.given(name, operation)
    # Kafka names both the inner and the left global join KSTREAM-LEFTJOIN-<n>.
    generated = builder.names.processor(_LEFT_JOIN)
    node = given or generated
    if left:
        relax_null_key_filters(builder, stream.name)
    view = global_view(global_table)
    builder.topology.add_processor(
        node,
        lambda: StreamTableJoinProcessor(view, key_selector, joiner, left, with_key),
        stream.name,
    )
    return KStream(
        builder,
        node,
        stream.key_slot,
        builder.slot(None, "value", operation),
        repartition_required=stream.repartition_required,
    )


def _buffer_opener(
    name: str, key: SerdeSlot, value: SerdeSlot, grace_ms: int
) -> Callable[[ProcessorGraphContext], TimeOrderedJoinBuffer]:
    """How the join opens its grace-period buffer in a task (serialized with the stream's
    serdes, or the join's)."""
    key.use()
    value.use()

    def opener(context: ProcessorGraphContext) -> TimeOrderedJoinBuffer:
        inner = context.get_state_store(name)
        return TimeOrderedJoinBuffer(inner, name, key.get(), value.get(), grace_ms)

    return opener
