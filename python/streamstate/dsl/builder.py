"""``StreamsBuilder``: where a DSL program starts, and what compiles it into a
:class:`~streamstate.Topology` (Kafka's ``StreamsBuilder`` and ``InternalStreamsBuilder``).

Every operation adds its processor nodes, stores and internal topics to the builder's topology
as it is written, named by the builder's :class:`~streamstate.dsl.naming.NameProvider`, so
nodes are added in the order Kafka adds them and sub-topologies are numbered as Kafka numbers
them. What an operation learns only later (a table whose old values a later ``group_by``
needs; a store a later ``group_by`` forces) is read by the processors when a task makes them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamstate.app.topology import GlobalStoreSpec, StoreSpec, Topology
from streamstate.dsl.materialized import Materialized
from streamstate.dsl.materialized import materialized as as_materialized
from streamstate.dsl.naming import NameProvider
from streamstate.dsl.stores import StoreSerdes, TimestampedKeyValueStore
from streamstate.dsl.stream_processors import NullKeyPolicy, RepartitionFilterProcessor
from streamstate.dsl.table_processors import TableSourceProcessor, TableState
from streamstate.dsl.versioned_store import VersionedStoreOpener
from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import SerdeSlot, SlotDeserializer, SlotSerializer
from streamstate.serde import Serde

if TYPE_CHECKING:
    from streamstate.dsl.stream import KStream
    from streamstate.dsl.table import GlobalKTable, KTable

__all__ = ["StreamsBuilder"]

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")
_CHANGELOG_EXTRA_RETENTION_MS = 86_400_000


class StreamsBuilder:
    """Builds a topology from DSL operations; :meth:`build` returns it."""

    def __init__(self) -> None:
        """An empty program."""
        self.topology = Topology()
        self.names = NameProvider()
        # Stores for process(), added with add_state_store, join the topology when a process()
        # names them.
        self.declared_stores: dict[str, StoreSpec] = {}
        # Each repartition filter's null-key policy, by the filter's node name: a left join
        # added later relaxes the ones upstream of it (dsl/join_repartition.py).
        self.null_key_policies: dict[str, NullKeyPolicy] = {}

    # -- what users call ------------------------------------------------------------------------

    def stream(
        self,
        topics: str | Sequence[str],
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        timestamp_extractor: Any = None,
    ) -> KStream:
        """A stream of the records of ``topics`` (a name or a list)."""
        from streamstate.dsl.stream import KStream  # noqa: PLC0415 - stream builds on this

        names = [topics] if isinstance(topics, str) else list(topics)
        name = self.names.processor("KSTREAM-SOURCE-")
        key_slot = self.slot(key_serde, "key", f"stream({names})")
        value_slot = self.slot(value_serde, "value", f"stream({names})")
        self.topology.add_source(
            name,
            *names,
            key_deserializer=SlotDeserializer(key_slot),
            value_deserializer=SlotDeserializer(value_slot),
            timestamp_extractor=timestamp_extractor,
        )
        return KStream(self, name, key_slot, value_slot)

    def table(
        self,
        topic: str,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """A table of ``topic``'s latest value per key (a ``None`` value deletes the key)."""
        from streamstate.dsl.table import KTable  # noqa: PLC0415 - table builds on this

        operation = f"table({topic!r})"
        mat = as_materialized(materialized, operation)
        store = mat.name or self.names.store(f"{topic}-")
        key_slot = self.slot(mat.key_serde or key_serde, "key", operation)
        value_slot = self.slot(mat.value_serde or value_serde, "value", operation)
        source = self.names.processor("KSTREAM-SOURCE-")
        self.topology.add_source(
            source,
            topic,
            key_deserializer=SlotDeserializer(key_slot),
            value_deserializer=SlotDeserializer(value_slot),
        )
        name = self.names.processor("KTABLE-SOURCE-")
        state = TableState(store=None)
        opener = self.table_store_opener(
            store, mat, key_slot, value_slot, state=state, operation=operation
        )
        self.topology.add_processor(name, lambda: TableSourceProcessor(state, opener), source)
        table = KTable(self, name, key_slot, value_slot, state, source_topic=topic)
        table.pending_store = (store, mat, opener)
        if mat.name is not None or state.versioned:
            table.materialize()
        return table

    def global_table(
        self,
        topic: str,
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        materialized: Materialized | str | None = None,
    ) -> GlobalKTable:
        """A table of every partition of ``topic``, on every instance (a global store)."""
        from streamstate.dsl.table import GlobalKTable  # noqa: PLC0415 - table builds on this

        operation = f"global_table({topic!r})"
        mat = as_materialized(materialized, operation)
        store = mat.name or self.names.store(f"{topic}-")
        key_slot = self.slot(mat.key_serde or key_serde, "key", operation)
        value_slot = self.slot(mat.value_serde or value_serde, "value", operation)
        source = self.names.processor("KSTREAM-SOURCE-")
        processor = self.names.processor("KTABLE-SOURCE-")

        def typed(view: Any) -> Any:
            return _RawTableView(view, key_slot, value_slot, store)

        self.topology.add_global_store_spec(GlobalStoreSpec(store, topic, source, processor, typed))
        return GlobalKTable(store, topic, key_slot, value_slot)

    def add_state_store(
        self,
        name: str,
        *,
        persistent: bool = True,
        logged: bool = True,
        caching: bool = False,
    ) -> StreamsBuilder:
        """A key-value store of bytes for processors added with ``KStream.process(factory,
        name)`` (the Processor API's store); returns the builder."""
        self.declared_stores[name] = StoreSpec(name, persistent, logged, caching)
        return self

    def build(self) -> Topology:
        """The topology; raises :class:`TopologyError` if it cannot run."""
        for name in self.declared_stores:
            if name not in self.topology.stores:
                raise TopologyError(
                    f"add_state_store({name!r}): no process() uses the store",
                    store_name=name,
                )
        self.topology.validate()
        return self.topology

    # -- what the operations share --------------------------------------------------------------

    def slot(self, serde: Serde | None, role: str, operation: str) -> SerdeSlot:
        """A serde slot the app fills with its default when ``serde`` is ``None``."""
        slot = SerdeSlot(serde, role, operation)
        self.topology._serde_slots.append(slot)
        return slot

    def kv_store_opener(
        self, name: str, key_slot: SerdeSlot, value_slot: SerdeSlot
    ) -> Callable[[Any], TimestampedKeyValueStore]:
        """How a processor (or a query) opens the timestamped store ``name``."""
        key_slot.use()
        value_slot.use()

        def opener(inner: Any) -> TimestampedKeyValueStore:
            return TimestampedKeyValueStore(
                inner, StoreSerdes(name, key_slot.get(), value_slot.get())
            )

        return opener

    def table_store_opener(
        self,
        name: str,
        mat: Materialized,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        *,
        state: TableState,
        operation: str,
    ) -> Callable[[Any], Any]:
        """The opener of a source table's store (``table``, ``to_table``): a versioned store
        when ``mat`` has a ``versioned_retention`` (``state`` is then marked versioned), else
        a timestamped one."""
        retention = mat.versioned_retention_ms(operation)
        if retention is None:
            return self.kv_store_opener(name, key_slot, value_slot)
        state.versioned = True
        return VersionedStoreOpener(name, key_slot, value_slot, retention)

    def add_store(
        self,
        name: str,
        mat: Materialized,
        typed: Callable[[Any], Any],
        *processors: str,
        retention_ms: int | None = None,
    ) -> None:
        """Adds a DSL store (a name used twice is a :class:`TopologyError`); a window or
        session store gives its ``retention_ms``, which its changelog keeps plus a day (Kafka's
        ``windowstore.changelog.additional.retention.ms``). A versioned store (``typed`` a
        :class:`VersionedStoreOpener`) is never cached, as Kafka disallows caching for them."""
        if name in self.topology.stores or name in self.topology.global_stores:
            raise TopologyError(
                f"a store named {name!r} already exists: give each Materialized its own name",
                store_name=name,
            )
        if isinstance(typed, VersionedStoreOpener):
            # Kafka logs "Not enabling caching for store ... as versioned stores do not support
            # caching" and builds the store without a cache.
            self.topology.add_store_spec(
                StoreSpec(
                    name,
                    persistent=mat.persistent,
                    logged=mat.logged,
                    caching=False,
                    timestamped=True,
                    typed=typed,
                    changelog_config=typed.changelog_config(),
                ),
                *processors,
            )
            return
        if mat.versioned_retention is not None:
            raise TopologyError(
                f"store {name!r}: Materialized(versioned_retention=...) makes a versioned store "
                f"for tables (builder.table, KStream.to_table, KTable.filter/filter_not/"
                f"map_values), not for aggregations",
                store_name=name,
            )
        spec = StoreSpec(
            name,
            persistent=mat.persistent,
            logged=mat.logged,
            caching=mat.caching,
            timestamped=True,
            typed=typed,
            changelog_config=(
                None
                if retention_ms is None
                else {
                    "cleanup.policy": "compact,delete",
                    "retention.ms": str(retention_ms + _CHANGELOG_EXTRA_RETENTION_MS),
                }
            ),
        )
        self.topology.add_store_spec(spec, *processors)

    def add_aggregation(
        self,
        node: str,
        factory: Callable[[], Any],
        parent: str,
        slots: tuple[SerdeSlot, SerdeSlot],
        *,
        state: TableState,
        store: tuple[str, Materialized, Callable[[Any], Any]],
        retention_ms: int | None = None,
    ) -> KTable:
        """Adds an aggregation's processor under ``parent`` and its store; returns its table
        (keyed and valued by ``slots``)."""
        from streamstate.dsl.table import KTable  # noqa: PLC0415 - table builds on this

        self.topology.add_processor(node, factory, parent)
        table = KTable(self, node, slots[0], slots[1], state)
        table.pending_store = store
        self.add_store(store[0], store[1], store[2], node, retention_ms=retention_ms)
        return table

    def repartition(
        self,
        parent: str,
        prefix: str,
        key_slot: SerdeSlot,
        value_slot: SerdeSlot,
        *,
        partitions: int | None = None,
        null_key_filter: bool = True,
        keep_null_keys: bool = False,
        copartition: bool = False,
        value_wrap: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None,
        topic_named: bool | None = None,
    ) -> str:
        """Adds a repartition topic ``<prefix>-repartition`` under ``parent`` with Kafka's
        node names; returns the name of its source node. ``keep_null_keys``: its filter passes
        records without a key too (Kafka's, when a left join follows: it joins them);
        ``copartition``: sized as the other source topics of the sub-topology reading it (a
        join's, Kafka's co-partition group), not as the writer's."""
        base = prefix.removesuffix("-repartition")
        topic = f"{base}-repartition"
        gen_sink = self.names.processor("KSTREAM-SINK-")
        gen_filter = self.names.processor("KSTREAM-FILTER-") if null_key_filter else ""
        gen_source = self.names.processor("KSTREAM-SOURCE-")
        if topic_named is None:
            topic_named = not _GENERATED.fullmatch(base)
        if not topic_named:
            sink, filter_name, source = gen_sink, gen_filter, gen_source
        else:
            sink, filter_name, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
        if null_key_filter:
            policy = NullKeyPolicy(keep=keep_null_keys)
            self.null_key_policies[filter_name] = policy
            self.topology.add_processor(
                filter_name, functools.partial(RepartitionFilterProcessor, policy), parent
            )
            parent = filter_name
        value_ser: Any = SlotSerializer(value_slot)
        value_de: Any = SlotDeserializer(value_slot)
        if value_wrap is not None:
            value_ser, value_de = value_wrap[0](value_ser), value_wrap[1](value_de)
        self.topology.add_internal_repartition(
            base,
            parent,
            (SlotSerializer(key_slot), value_ser, SlotDeserializer(key_slot), value_de),
            sink_name=sink,
            source_name=source,
            partitions=partitions,
            copartition=copartition,
        )
        return source


class _RawTableView:
    """A global table's typed reads: its store holds the topic's bytes as they are."""

    def __init__(self, inner: Any, key_slot: SerdeSlot, value_slot: SerdeSlot, name: str):
        self.inner = inner
        self.name = name
        self._key = key_slot
        self._value = value_slot

    def get(self, key: Any) -> Any:
        raw = self.inner.get(self._key.get().serializer.serialize(self.name, key))
        return None if raw is None else self._value.get().deserializer.deserialize(self.name, raw)

    def all(self) -> Any:
        de_key = self._key.get().deserializer.deserialize
        de_value = self._value.get().deserializer.deserialize
        for key, value in self.inner.all():
            yield de_key(self.name, key), de_value(self.name, value)

    def approximate_num_entries(self) -> int:
        return int(self.inner.approximate_num_entries())
