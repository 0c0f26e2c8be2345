"""The foreign-key table-table join (KIP-213): Kafka's ``KTable.join/leftJoin(other,
foreignKeyExtractor, joiner[, TableJoined][, Materialized])``, built as
``KTableImpl.doJoinOnForeignKey`` builds it.

Each left row names a right key (its *foreign key*, ``extractor(value)`` or, with
``extractor_with_key=True``, ``extractor(key, value)``). The left side sends a subscription,
keyed by the foreign key, through ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic``
to the right table's partition of that key, where it is kept in the subscription store
(``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>``, keyed by (foreign key, primary key)). A
subscription is answered with the right value at once, and again every time the right row
changes; answers go back, keyed by the primary key, through
``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic`` to the left row's own partition, where
the row's current value is joined with them. An answer to a row that changed since (the hash
of its value differs) is dropped, so a row whose foreign key changes quickly never shows a
result of an old key. The result is a table (``KTABLE-FK-JOIN-OUTPUT-<n>``), materialized when
given a name or when a later operation needs its values.

Both internal topics are partitioned as the tables they serve: the subscription topic has the
right table's partition count, the response topic the left table's, so the two tables need not
be co-partitioned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.dsl.foreign_key_processors import (
    ForeignTableJoinProcessor,
    ResponseJoinProcessor,
    SubscriptionJoinProcessor,
    SubscriptionReceiveProcessor,
    SubscriptionSendProcessor,
    SubscriptionStoreView,
)
from streamstate.dsl.materialized import Materialized, materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.stores import StoreSerdes, TimestampedKeyValueStore
from streamstate.dsl.subscription import (
    ResponseDeserializer,
    ResponseSerializer,
    SubscriptionDeserializer,
    SubscriptionSerializer,
)
from streamstate.dsl.table_processors import TableSourceProcessor, TableState
from streamstate.dsl.value_getters import ValueGetterSupplier, value_getter_supplier
from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import SlotDeserializer, SlotSerializer

if TYPE_CHECKING:
    from streamstate.dsl.table import KTable

__all__ = ["join_foreign_key"]

_REGISTRATION = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-"
_RESPONSE = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-"
_PROCESSOR = "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-"
_RESOLVER = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-"
_STORE = "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-"
_OUTPUT = "KTABLE-FK-JOIN-OUTPUT-"
_SINK = "KTABLE-SINK-"
_SOURCE = "KTABLE-SOURCE-"
_TOPIC_SUFFIX = "-topic"


def join_foreign_key(
    table: KTable,
    other: KTable,
    extractor: Callable[..., Any],
    joiner: Callable[[Any, Any], Any],
    *,
    left: bool,
    materialized: Materialized | str | None = None,
    name: str | None = None,
    extractor_with_key: bool = False,
    **unknown: Any,
) -> KTable:
    """``table`` joined with ``other`` on ``extractor``'s foreign key; see the module doc.
    ``left``: a row whose foreign key has no right row (or is ``None``) is joined with
    ``None``; an inner join forwards nothing for it (a tombstone when it had a result)."""
    operation = "KTable.left_join" if left else "KTable.join"
    if unknown:
        # Kafka's TableJoined partitioners are not supported: a custom partitioner of either
        # table's topic is a producer's, which streamstate's sinks do not take either.
        raise TopologyError(
            f"{operation}: a foreign-key join takes materialized=, name= and "
            f"extractor_with_key=, not {', '.join(sorted(unknown))}"
        )
    mat = _as_materialized(materialized, operation)
    given = NameProvider.given(name, operation)
    builder = table.builder
    names = builder.names
    topology = builder.topology

    def named(suffix: str, prefix: str) -> str:
        # Kafka's NamedInternal.suffixWithOrElseGet: a given name still burns the index.
        generated = names.processor(prefix)
        return generated if given is None else f"{given}{suffix}"

    # Old values of both sides, as Kafka's enableSendingOldValues(true): the left side's tell
    # which foreign key a row leaves; on the right side it materializes a source table, whose
    # store the subscription join reads.
    other.state.enable_send_old_values()
    table.state.enable_send_old_values()
    right_view = _readable(other, operation)

    registration = named("-subscription-registration", _REGISTRATION)
    # The topic's name without the application id; the serdes' pseudo topics derive from it.
    registration_topic = f"{registration}{_TOPIC_SUFFIX}"
    send = named("-subscription-registration-processor", _REGISTRATION)
    topology.add_processor(
        send,
        lambda: SubscriptionSendProcessor(
            extractor,
            extractor_with_key,
            left,
            (other.key_slot, table.value_slot),
            registration_topic,
            versioned=table.state.output_versioned(),
        ),
        table.name,
    )
    sink = named("-subscription-registration-sink", _SINK)
    source = named("-subscription-registration-source", _SOURCE)
    pk_topic = f"{registration_topic}-pk"
    topology.add_internal_repartition(
        registration,
        send,
        (
            SlotSerializer(other.key_slot),
            SubscriptionSerializer(SlotSerializer(table.key_slot), pk_topic),
            SlotDeserializer(other.key_slot),
            SubscriptionDeserializer(SlotDeserializer(table.key_slot), pk_topic),
        ),
        sink_name=sink,
        source_name=source,
        suffix=_TOPIC_SUFFIX,
        copartition=True,
    )
    store = named("-subscription-store", _STORE)
    keys = (other.key_slot, table.key_slot)
    receive = named("-subscription-receive", _PROCESSOR)
    topology.add_processor(
        receive, lambda: SubscriptionReceiveProcessor(store, keys, registration_topic), source
    )
    join_foreign = named("-subscription-join-foreign", _PROCESSOR)
    topology.add_processor(join_foreign, lambda: SubscriptionJoinProcessor(right_view), receive)
    for name_ in right_view.stores:
        topology.connect_store(name_, join_foreign)
    foreign_join = named("-foreign-join-subscription", _PROCESSOR)
    topology.add_processor(
        foreign_join,
        lambda: ForeignTableJoinProcessor(
            store, keys, registration_topic, other.state.output_versioned()
        ),
        other.name,
    )
    builder.add_store(
        store,
        Materialized(caching=False),
        lambda view: SubscriptionStoreView(view, table.key_slot, store),
        receive,
        foreign_join,
    )

    response = named("-subscription-response", _RESPONSE)
    response_sink = named("-subscription-response-sink", _SINK)
    response_source = named("-subscription-response-source", _SOURCE)
    topology.add_internal_repartition(
        response,
        [join_foreign, foreign_join],
        (
            SlotSerializer(table.key_slot),
            ResponseSerializer(SlotSerializer(other.value_slot)),
            SlotDeserializer(table.key_slot),
            ResponseDeserializer(SlotDeserializer(other.value_slot)),
        ),
        sink_name=response_sink,
        source_name=response_source,
        suffix=_TOPIC_SUFFIX,
        # Back to the partition of the left row that subscribed (Kafka's default response
        # partitioner: the subscription's primary partition).
        partitioner=lambda _key, value: value.primary_partition,
        copartition=True,
    )
    left_view = _readable(table, operation)
    resolver = named("-subscription-response-resolver", _RESOLVER)
    topology.add_processor(
        resolver,
        lambda: ResponseJoinProcessor(
            left_view, table.value_slot, joiner, left, registration_topic
        ),
        response_source,
    )
    for name_ in left_view.stores:
        topology.connect_store(name_, resolver)

    result = named("-result", _OUTPUT)
    # Kafka's MaterializedInternal names the result's store even when it is not kept.
    store_name = mat.name or names.store(_OUTPUT)
    key_slot = builder.slot(mat.key_serde, "key", operation).or_else(table.key_slot)
    value_slot = builder.slot(mat.value_serde, "value", operation)
    state = TableState()

    def opener(inner: Any) -> TimestampedKeyValueStore:
        return TimestampedKeyValueStore(
            inner, StoreSerdes(store_name, key_slot.get(), value_slot.get())
        )

    topology.add_processor(result, lambda: TableSourceProcessor(state, opener), resolver)
    from streamstate.dsl.table import KTable  # noqa: PLC0415 - table imports the joins

    joined = KTable(builder, result, key_slot, value_slot, state)
    joined.pending_store = (store_name, mat, opener)
    kafka_materialize = joined.materialize

    def materialize() -> None:
        # The result's serdes are needed (a default one at the latest) only once it keeps a
        # store: the joiner's values are not serialized otherwise.
        key_slot.use()
        value_slot.use()
        kafka_materialize()

    joined.materialize = materialize  # type: ignore[method-assign]
    state.materializer = materialize
    if mat.name is not None:
        joined.materialize()
    return joined


def _as_materialized(value: Any, operation: str) -> Materialized:
    mat = materialized(value, operation)
    if mat.versioned_retention is not None:
        raise TopologyError(
            f"{operation}: a foreign-key join's result is not kept in a versioned store"
        )
    return mat


def _readable(table: KTable, operation: str) -> ValueGetterSupplier:
    """``table``'s value getter, which a foreign-key join reads; a windowed table has keys no
    foreign key names."""
    if table.windowed is not None:
        raise TopologyError(f"{operation}: a windowed table cannot take part in a foreign-key join")
    return value_getter_supplier(table, operation)
