"""Windowed KStream-KStream joins: ``KStream.join`` / ``left_join`` / ``outer_join`` with
another ``KStream`` and :class:`~streamstate.dsl.windows.JoinWindows` (Kafka's
``KStreamImpl.doJoin`` and ``KStreamImplJoin``, Kafka 3.1+ semantics: the grace period is part
of the windows, and a left or outer join emits a record with ``None`` for the other side only
once its window has closed). What the processors do is in
:mod:`streamstate.dsl.stream_join_processors`; the stores are in
:mod:`streamstate.dsl.join_stores`.

The graph is Kafka's, with its names: a side whose key changed upstream is repartitioned
first (``<node>-repartition``, or ``<name>-left`` / ``<name>-right`` with a ``name``), then
``KSTREAM-WINDOWED-`` (twice), ``KSTREAM-JOINTHIS-`` or ``-OUTERTHIS-`` (outer join),
``KSTREAM-JOINOTHER-`` or ``-OUTEROTHER-`` (left and outer joins) and ``KSTREAM-MERGE-``
(``<name>-this-windowed``, ``-other-windowed``, ``-this-join`` / ``-outer-this-join``,
``-other-join`` / ``-outer-other-join`` and ``-merge`` with a ``name``). The stores are
``<join-this node>-store`` and ``<join-other node>-store`` (``<store_name>-this-join-store``
... with a ``store_name``), and for left and outer joins ``KSTREAM-OUTERSHARED-<n>-store``
(``<store_name>-left-shared-join-store`` / ``-outer-shared-join-store``), all logged to
``<application.id>-<store>-changelog`` unless ``logging_enabled=False``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.app.topology import StoreSpec
from streamstate.dsl.join_repartition import relax_null_key_filters, repartition_for_join
from streamstate.dsl.join_stores import JoinWindowStore, OuterJoinStore
from streamstate.dsl.materialized import materialized as as_materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.stores import StoreSerdes
from streamstate.dsl.stream_join_processors import (
    JoinSide,
    JoinWindowProcessor,
    StreamJoinProcessor,
    TimeTrackers,
)
from streamstate.dsl.stream_processors import PassThroughProcessor
from streamstate.dsl.windows import JoinWindows
from streamstate.errors import TopologyError

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.dsl.stream import KStream
    from streamstate.processor.context import ProcessorGraphContext
    from streamstate.processor.serde_slot import SerdeSlot
    from streamstate.serde import Serde

__all__ = ["DEFAULT_EMIT_INTERVAL_MS", "join_streams"]

DEFAULT_EMIT_INTERVAL_MS = 1000
"""How often, at most, a left or outer join emits its unmatched records (wall-clock ms):
Kafka's internal ``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``."""
# Kafka's windowstore.changelog.additional.retention.ms: a window changelog keeps a day more.
_CHANGELOG_EXTRA_RETENTION_MS = 86_400_000
_OPERATIONS = {"inner": "KStream.join", "left": "KStream.left_join", "outer": "KStream.outer_join"}


def join_streams(
    stream: KStream,
    other: KStream,
    joiner: Callable[..., Any],
    windows: JoinWindows,
    *,
    kind: str,
    key_serde: Serde | None = None,
    value_serde: Serde | None = None,
    other_value_serde: Serde | None = None,
    name: str | None = None,
    store_name: str | None = None,
    logging_enabled: bool = True,
    persistent: bool = True,
    with_key: bool = False,
    emit_interval_ms: int = DEFAULT_EMIT_INTERVAL_MS,
    **more: Any,
) -> KStream:
    """``stream.<kind>_join(other, joiner, windows, ...)``: ``joiner(value, other_value)``
    for each pair of records of one key at most ``windows.before_ms`` / ``after_ms`` apart
    (``None`` for the missing side of a left or outer join, once the record's window has
    closed). Options (Kafka's ``StreamJoined``):

    - ``key_serde`` / ``value_serde`` / ``other_value_serde``: the stores' and repartition
      topics' serdes (``StreamJoined.with``; by default the streams');
    - ``name``: the processors' base name (``withName``); ``store_name``: the stores'
      (``withStoreName``); ``logging_enabled=False``: no changelogs (``withLoggingDisabled``);
    - ``persistent=False``: the stores in memory (in-memory ``withDslStoreSuppliers``; records
      still expire by segment, as in the persistent stores);
    - ``with_key=True``: ``joiner(key, value, other_value)`` (``ValueJoinerWithKey``; the key
      is ``None`` for a record without one, joined by a left or outer join);
    - ``emit_interval_ms``: see :data:`DEFAULT_EMIT_INTERVAL_MS`.
    """
    from streamstate.dsl.stream import KStream  # noqa: PLC0415 - stream imports the joins

    operation = _OPERATIONS.get(kind)
    if operation is None:
        raise TopologyError(f"join_streams: kind is 'inner', 'left' or 'outer', not {kind!r}")
    if more:
        raise TopologyError(
            f"{operation}: a KStream-KStream join takes no option {sorted(more)} (it takes "
            f"key_serde, value_serde, other_value_serde, name, store_name, logging_enabled, "
            f"persistent, with_key and emit_interval_ms)"
        )
    if not isinstance(windows, JoinWindows):
        raise TopologyError(
            f"{operation}: a KStream-KStream join takes JoinWindows (JoinWindows."
            f"of_time_difference_and_grace(...)), not {type(windows).__name__}"
        )
    if isinstance(emit_interval_ms, bool) or not isinstance(emit_interval_ms, int):
        raise TopologyError(f"{operation}: emit_interval_ms is int ms, not {emit_interval_ms!r}")
    given = NameProvider.given(name, operation)
    if store_name is not None:
        store_name = as_materialized(store_name, operation).name
    builder = stream.builder
    names = builder.names
    left_outer, right_outer = kind != "inner", kind == "outer"
    key = builder.slot(key_serde, "key", operation)
    this_value = builder.slot(value_serde, "value", operation).or_else(stream.value_slot)
    other_value = builder.slot(other_value_serde, "value", operation).or_else(other.value_slot)
    store_key = key.or_else(stream.key_slot)

    # Kafka's doJoin: a side whose key changed is repartitioned first (Kafka's
    # repartitionForJoin, shared with the stream-table join: an unnamed join of a stream
    # repartitioned for a join before reuses that topic), into as many partitions as the other
    # side has (Kafka's co-partition group). Before a left or outer join, records without a key
    # pass every repartition topic upstream: the join joins them with None.
    this_node, other_node = stream.name, other.name
    if stream.repartition_required:
        this_node = repartition_for_join(
            stream,
            f"{given}-left" if given else None,
            store_key,
            this_value,
            keep_null_keys=left_outer,
        )
    if other.repartition_required:
        other_node = repartition_for_join(
            other,
            f"{given}-right" if given else None,
            key.or_else(other.key_slot),
            other_value,
            keep_null_keys=left_outer,
        )
    if left_outer:
        relax_null_key_filters(builder, this_node)
        relax_null_key_filters(builder, other_node)

    # Kafka's KStreamImplJoin.join: the names, in the order it numbers them.
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    this_windowed = names.processor("KSTREAM-WINDOWED-")
    other_windowed = names.processor("KSTREAM-WINDOWED-")
    join_this_generated = names.processor(
        "KSTREAM-OUTERTHIS-" if right_outer else "KSTREAM-JOINTHIS-"
    )
    join_other_generated = names.processor(
        "KSTREAM-OUTEROTHER-" if left_outer else "KSTREAM-JOINOTHER-"
    )
    merge = names.processor("KSTREAM-MERGE-")
    if given is not None:
        this_windowed, other_windowed = f"{given}-this-windowed", f"{given}-other-windowed"
        join_this, join_other = f"{given}{this_suffix}", f"{given}{other_suffix}"
        merge = f"{given}-merge"
    else:
        join_this, join_other = join_this_generated, join_other_generated
    if store_name is None:
        this_store, other_store = f"{join_this_generated}-store", f"{join_other_generated}-store"
        digits = join_this_generated[-10:]
        outer_store = f"KSTREAM-OUTERSHARED-{digits}-store"
    else:
        this_store = f"{store_name}{this_suffix}-store"
        other_store = f"{store_name}{other_suffix}-store"
        shared = "-outer-shared-join" if right_outer else "-left-shared-join"
        outer_store = f"{store_name}{shared}-store"

    for store in (
        (this_store, other_store, outer_store) if left_outer else (this_store, other_store)
    ):
        _check_new(builder, store)  # before anything is added: a refused join adds nothing

    retention = windows.size() + windows.grace_ms
    size = windows.size()
    open_this = _window_store(this_store, store_key, this_value, retention, size)
    open_other = _window_store(other_store, store_key, other_value, retention, size)
    open_outer = None
    if left_outer:
        open_outer = _outer_store(outer_store, store_key, this_value, other_value)
    trackers = TimeTrackers(emit_interval_ms)
    keyed = joiner if with_key else lambda _key, left, right: joiner(left, right)

    def sides(left: bool) -> JoinSide:
        return JoinSide(
            left=left,
            outer=left_outer if left else right_outer,
            before_ms=windows.before_ms,
            after_ms=windows.after_ms,
            grace_ms=windows.grace_ms,
            joiner=keyed,
            other_store=open_other if left else open_this,
            outer_store=open_outer,
            trackers=trackers,
        )

    this_side, other_side = sides(True), sides(False)
    topology = builder.topology
    topology.add_processor(this_windowed, lambda: JoinWindowProcessor(open_this), this_node)
    topology.add_processor(other_windowed, lambda: JoinWindowProcessor(open_other), other_node)
    topology.add_processor(join_this, lambda: StreamJoinProcessor(this_side), this_windowed)
    topology.add_processor(join_other, lambda: StreamJoinProcessor(other_side), other_windowed)
    topology.add_processor(merge, PassThroughProcessor, join_this, join_other)
    window_config = {
        # Every record is kept (duplicates retained): nothing to compact, as Kafka says.
        "cleanup.policy": "delete",
        "retention.ms": str(retention + _CHANGELOG_EXTRA_RETENTION_MS),
    }
    for store, (first, second), typed in (
        (this_store, (this_windowed, join_other), open_this.typed),
        (other_store, (other_windowed, join_this), open_other.typed),
    ):
        topology.add_store_spec(
            StoreSpec(
                store,
                persistent=persistent,
                logged=logging_enabled,
                timestamped=True,
                typed=typed,
                changelog_config=window_config,
            ),
            first,
            second,
        )
    if open_outer is not None:
        spec = StoreSpec(
            outer_store, persistent=persistent, logged=logging_enabled, typed=open_outer.typed
        )
        topology.add_store_spec(spec, join_this, join_other)
    # Kafka gives the result the StreamJoined key serde only, and no value serde.
    return KStream(builder, merge, key, builder.slot(None, "value", operation))


class _Opener:
    """Opens a join store for a processor (by name, from its context) or a query."""

    def __init__(self, name: str, typed: Callable[[Any], Any]) -> None:
        self.name = name
        self.typed = typed

    def __call__(self, context: ProcessorGraphContext) -> Any:
        return self.typed(context.get_state_store(self.name))


def _window_store(
    name: str, key: SerdeSlot, value: SerdeSlot, retention: int, size: int
) -> _Opener:
    key.use()
    value.use()

    def typed(inner: Any) -> JoinWindowStore:
        return JoinWindowStore(inner, StoreSerdes(name, key.get(), value.get()), retention, size)

    return _Opener(name, typed)


def _outer_store(name: str, key: SerdeSlot, left: SerdeSlot, right: SerdeSlot) -> _Opener:
    key.use()
    left.use()
    right.use()

    def typed(inner: Any) -> OuterJoinStore:
        serdes = StoreSerdes(name, key.get(), left.get())
        return OuterJoinStore(inner, serdes, left.get(), right.get())

    return _Opener(name, typed)


def _check_new(builder: StreamsBuilder, name: str) -> None:
    if name in builder.topology.stores or name in builder.topology.global_stores:
        raise TopologyError(
            f"a store named {name!r} already exists: give each join its own store_name",
            store_name=name,
        )
