"""The topology: what a :class:`~streamstate.StreamsApp` reads, keeps and writes.

A deliberately small, Pythonic subset of Kafka Streams' Processor API::

    topology = Topology()
    topology.add_store("counts")                        # logged to <app id>-counts-changelog
    topology.add_global_store("prices", topic="prices")  # a read-only copy of a whole topic

    @topology.processor(sources=["clicks"], stores=["counts"], sinks=["click-counts"])
    def count(ctx: ProcessorContext, record: StampedRecord) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send("click-counts", record.key, b"%d" % n)

Source topics must be co-partitioned (Kafka Streams' rule): partition ``p`` of every source topic
belongs to task ``p``, whose stores hold the state of that partition. Keys and values of stores
are ``bytes``; records reach the processor deserialized by the source's deserializers.

The same class builds processor graphs, Kafka's Processor API (``add_source``,
``add_processor``, ``add_sink``, ``add_repartition``, ``add_store(name, *processors)``); the
graph itself lives in ``streamstate.processor`` (see ``docs/topologies.md``). A topology is one
form or the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from streamstate.errors import TopologyError
from streamstate.processor.description import (
    NodeDescription,
    SubtopologyDescription,
    TopologyDescription,
    java_set_order,
    order_nodes,
)
from streamstate.processor.graph import (
    GraphBuilder,
    Node,
    ProcessorGraph,
    SinkNode,
    SourceNode,
    TaskId,
)

if TYPE_CHECKING:
    from streamstate.app.context import ProcessorContext
    from streamstate.records import StampedRecord

__all__ = ["GlobalStoreSpec", "Processor", "StoreSpec", "Topology", "TopologyError"]

Processor = Callable[["ProcessorContext", "StampedRecord"], None]


@dataclass(frozen=True)
class StoreSpec:
    """A key-value store of each task: ``persistent`` (fjall, under ``state.dir``) or in
    memory; ``logged`` stores write every change to ``<application.id>-<name>-changelog``;
    ``caching`` ones keep writes in a record cache until the commit
    (``streamstate.state.caching``)."""

    name: str
    persistent: bool = True
    logged: bool = True
    caching: bool = False
    # A DSL store (streamstate.dsl.stores): values start with their record's timestamp, which
    # the changelog records carry; ``typed(view)`` makes its typed read-only facade over a
    # byte store's reads (interactive queries, the TopologyTestDriver).
    timestamped: bool = False
    typed: Callable[[Any], Any] | None = field(default=None, compare=False)
    # The changelog topic's configs (window and session stores: compact,delete with a
    # retention, as Kafka creates windowed changelogs); None: compacted.
    changelog_config: Mapping[str, str] | None = None

    def changelog_topic(self, application_id: str) -> str:
        """Kafka Streams' changelog topic name for this store."""
        return f"{application_id}-{self.name}-changelog"


@dataclass(frozen=True)
class GlobalStoreSpec:
    """A store holding every partition of ``topic`` (key and value bytes, a ``None`` value
    deletes), read-only to processors and queries, kept up to date by the global thread."""

    name: str
    topic: str
    # A GlobalKTable's (streamstate.dsl): the node names Kafka gives it, and its typed facade.
    source_name: str | None = None
    processor_name: str | None = None
    typed: Callable[[Any], Any] | None = field(default=None, compare=False)


@dataclass
class _ProcessorNode:
    function: Processor
    sources: tuple[str, ...]
    stores: tuple[str, ...]
    sinks: tuple[str, ...]
    key_deserializer: Any
    value_deserializer: Any


@dataclass
class Topology:
    """Source topics, one processor, its stores and sinks, and global stores."""

    _stores: dict[str, StoreSpec] = field(default_factory=dict)
    _global_stores: dict[str, GlobalStoreSpec] = field(default_factory=dict)
    _processor: _ProcessorNode | None = None
    _graph: GraphBuilder = field(default_factory=GraphBuilder)
    _application_id: str | None = None
    _built: ProcessorGraph | None = field(default=None, repr=False, compare=False)
    # The DSL's serdes left to default.key.serde / default.value.serde (bind fills them).
    _serde_slots: list[Any] = field(default_factory=list, repr=False, compare=False)

    def add_store(
        self,
        name: str,
        *processor_names: str,
        persistent: bool = True,
        logged: bool = True,
        caching: bool = False,
    ) -> Topology:
        """Adds a key-value store; returns the topology. In the one-function form every task
        has one of each store; in a graph, ``processor_names`` connects the store to those
        processors (which must be added already), and the tasks of their sub-topology have
        one. ``caching`` puts Kafka's record cache in front of it: the store and its changelog
        get the latest value of each key once per commit."""
        self._built = None
        self._check_new_name(name)
        if processor_names:
            self._graph.connect_store(name, processor_names)
        self._stores[name] = StoreSpec(name, persistent, logged, caching)
        return self

    # -- the processor graph (Kafka's Processor API) --------------------------------------------

    def add_source(
        self,
        name: str,
        *topics: str,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """Adds a source node reading ``topics``; records reach its children deserialized
        (``BytesDeserializer`` by default) and stamped by ``timestamp_extractor`` (the app's
        ``default.timestamp.extractor`` by default). Returns the topology."""
        self._built = None
        self._graph.add_source(
            name, topics, key_deserializer, value_deserializer, timestamp_extractor
        )
        return self

    def add_processor(self, name: str, factory: Any, *parent_names: str) -> Topology:
        """Adds a processor node under ``parent_names`` (added before it). ``factory()``
        returns a new :class:`~streamstate.Processor` (one per task); a ``Processor`` subclass
        is its own factory. Returns the topology."""
        self._built = None
        self._graph.add_processor(name, factory, parent_names)
        return self

    def add_sink(
        self,
        name: str,
        topic: str,
        *parent_names: str,
        key_serializer: Any = None,
        value_serializer: Any = None,
    ) -> Topology:
        """Adds a sink node writing what ``parent_names`` forward to ``topic``, serialized
        (``BytesSerializer`` by default), partitioned by the murmur2 hash of the serialized
        key as Java's producer does, with the record's timestamp and headers. Returns the
        topology."""
        self._built = None
        self._graph.add_sink(name, topic, parent_names, key_serializer, value_serializer)
        return self

    def add_repartition(
        self,
        name: str,
        *parent_names: str,
        partitions: int | None = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ) -> Topology:
        """Adds a repartition topic ``<application.id>-<name>-repartition``: what
        ``parent_names`` forward is written to it (serialized, partitioned by the murmur2 hash
        of the serialized key) and read back by a source node called ``name``, the start of a
        new sub-topology; add its children with ``name`` as their parent. ``partitions``
        defaults to the most partitions among the writing sub-topology's source topics. The app
        creates the topic (or checks an existing one's partition count) and deletes what every
        task has committed past. Returns the topology."""
        self._built = None
        self._graph.add_repartition(
            name,
            parent_names,
            partitions,
            (key_serializer, value_serializer, key_deserializer, value_deserializer),
        )
        return self

    def add_store_spec(self, spec: StoreSpec, *processor_names: str) -> Topology:
        """Adds the store ``spec`` (the DSL's stores: timestamped, with a typed facade),
        connected to ``processor_names``; returns the topology."""
        self._built = None
        self._check_new_name(spec.name)
        if processor_names:
            self._graph.connect_store(spec.name, processor_names)
        self._stores[spec.name] = spec
        return self

    def connect_store(self, name: str, *processor_names: str) -> Topology:
        """Connects the existing store ``name`` to more processors; returns the topology."""
        self._built = None
        if name not in self._stores:
            raise TopologyError(f"no store named {name!r} to connect", store_name=name)
        self._graph.connect_store(name, processor_names)
        return self

    def add_internal_repartition(
        self,
        name: str,
        parent: str | Sequence[str],
        serdes: tuple[Any, Any, Any, Any],
        *,
        sink_name: str,
        source_name: str,
        partitions: int | None = None,
        **options: Any,
    ) -> Topology:
        """A repartition topic ``<name>-repartition`` with the DSL's node names (``options``:
        ``suffix``, ``partitioner``, ``copartition`` of ``GraphBuilder.add_repartition``, for
        the foreign-key join's topics)."""
        self._built = None
        parents = [parent] if isinstance(parent, str) else list(parent)
        self._graph.add_repartition(
            name,
            parents,
            partitions,
            serdes,
            sink_name=sink_name,
            source_name=source_name,
            **options,
        )
        return self

    @property
    def is_graph(self) -> bool:
        """Whether this is a processor graph (``add_source`` was called)."""
        return bool(self._graph)

    def graph(self) -> ProcessorGraph:
        """The checked processor graph; raises :class:`TopologyError`."""
        if self._processor is not None:
            raise TopologyError(
                "a topology is either one function (@topology.processor) or a graph "
                "(add_source/add_processor/add_sink), not both"
            )
        if self._built is None:
            self._built = self._graph.build(
                list(self._stores), {g.name: g.topic for g in self._global_stores.values()}
            )
        return self._built

    def validate(self) -> None:
        """Checks that the topology can run; raises :class:`TopologyError`."""
        if self.is_graph:
            self.graph()
        else:
            self.node()

    def bind(
        self,
        application_id: str,
        default_key_serde: Any = None,
        default_value_serde: Any = None,
    ) -> Topology:
        """This topology as the app ``application_id`` runs it: internal topic names get the
        application id (a copy; the topology itself is unchanged), and the DSL's operations
        given no serde take the defaults (:class:`TopologyError` naming the operation when
        there is none)."""
        for slot in self._serde_slots:
            slot.resolve(default_key_serde if slot.role == "key" else default_value_serde)
        return dataclasses.replace(self, _application_id=application_id)

    def task_id(self, topic: str, partition: int) -> Any:
        """The task that runs ``topic``/``partition``: the partition in the one-function form,
        ``TaskId(subtopology, partition)`` in a graph."""
        if not self._graph:
            return partition
        return TaskId(self.graph().subtopology_of(topic, self._application_id), partition)

    def describe(self) -> TopologyDescription:
        """The sub-topologies, nodes and stores, printable as Kafka's ``TopologyDescription``."""
        subs: list[SubtopologyDescription] = []
        if self.is_graph:
            graph = self.graph()
            for sub in graph.subtopologies:
                nodes = []
                for name in sub.nodes:
                    node = graph.nodes[name]
                    kids = graph.children[name]
                    if isinstance(node, SourceNode):
                        nodes.append(NodeDescription("Source", name, node.topics, successors=kids))
                    elif isinstance(node, SinkNode):
                        nodes.append(
                            NodeDescription("Sink", name, (node.topic,), predecessors=node.parents)
                        )
                    else:
                        stores = java_set_order(graph.processor_stores.get(name, ()))
                        nodes.append(
                            NodeDescription("Processor", name, (), stores, node.parents, kids)
                        )
                subs.append(SubtopologyDescription(sub.id, order_nodes(nodes, graph.children)))
        elif self._processor is not None:
            function = self._processor.function
            name = getattr(function, "__name__", "processor")
            source = f"{name}-source"
            nodes = [
                NodeDescription("Source", source, self._processor.sources, successors=(name,)),
                NodeDescription(
                    "Processor", name, (), tuple(sorted(self._processor.stores)), (source,)
                ),
            ]
            subs.append(SubtopologyDescription(0, tuple(nodes)))
        globals_ = []
        for offset, spec in enumerate(self._global_stores.values()):
            source = spec.source_name or f"{spec.name}-source"
            processor = spec.processor_name or f"{spec.name}-processor"
            nodes = [
                NodeDescription("Source", source, (spec.topic,), successors=(processor,)),
                NodeDescription("Processor", processor, (), (spec.name,), (source,)),
            ]
            globals_.append(SubtopologyDescription(len(subs) + offset, tuple(nodes), True))
        return TopologyDescription(tuple(subs), tuple(globals_))

    def add_global_store(self, name: str, *, topic: str) -> Topology:
        """Adds a global store over every partition of ``topic``; returns the topology."""
        return self.add_global_store_spec(GlobalStoreSpec(name, topic))

    def add_global_store_spec(self, spec: GlobalStoreSpec) -> Topology:
        """Adds the global store ``spec``; returns the topology."""
        self._built = None
        self._check_new_name(spec.name)
        self._global_stores[spec.name] = spec
        return self

    def processor(
        self,
        *,
        sources: Sequence[str],
        stores: Sequence[str] = (),
        sinks: Sequence[str] = (),
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ) -> Callable[[Processor], Processor]:
        """A decorator registering ``fn(ctx, record)`` as the processor of ``sources``.

        ``stores`` names the stores (task or global) it may use through ``ctx.store(name)``,
        ``sinks`` the topics it may ``ctx.send`` to. Deserializers default to the app's
        ``default.key.serde``/``default.value.serde`` equivalents (``BytesDeserializer``).
        """
        if isinstance(sources, str):
            raise TopologyError("sources is a list of topics, not a string")
        if not sources:
            raise TopologyError("a processor needs at least one source topic")

        def register(function: Processor) -> Processor:
            if self._processor is not None:
                raise TopologyError("this topology already has a processor")
            self._processor = _ProcessorNode(
                function,
                tuple(sources),
                tuple(stores),
                tuple(sinks),
                key_deserializer,
                value_deserializer,
            )
            return function

        return register

    # -- read by the runtime ------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, Node]:
        """The processor graph's nodes added so far (sources, processors, sinks), by name; a
        read-only view."""
        return MappingProxyType(self._graph.nodes)

    @property
    def stores(self) -> dict[str, StoreSpec]:
        """The task stores, by name."""
        return dict(self._stores)

    @property
    def global_stores(self) -> dict[str, GlobalStoreSpec]:
        """The global stores, by name."""
        return dict(self._global_stores)

    @property
    def source_topics(self) -> tuple[str, ...]:
        """The processor's source topics (in a graph: every source node's, internal topics
        named for the application once bound)."""
        if self._graph:
            return self.graph().source_topics(self._application_id)
        return self._processor.sources if self._processor is not None else ()

    @property
    def repartition_topics(self) -> frozenset[str]:
        """A graph's repartition topics (named for the application once bound)."""
        if not self._graph:
            return frozenset()
        return frozenset(self.graph().repartition_topics(self._application_id))

    def node(self) -> _ProcessorNode:
        """The processor, checked against the stores; raises :class:`TopologyError`."""
        if self._processor is None:
            raise TopologyError("the topology has no processor: decorate one with .processor()")
        for name in self._processor.stores:
            if name not in self._stores and name not in self._global_stores:
                raise TopologyError(f"the processor uses store {name!r}, which was never added")
        clash = set(self._processor.sources) & {g.topic for g in self._global_stores.values()}
        if clash:
            raise TopologyError(
                f"topics {sorted(clash)} are both a source and a global store topic"
            )
        return self._processor

    def _check_new_name(self, name: str) -> None:
        if not name or "/" in name or name in (".", ".."):
            raise TopologyError(f"a store name must be a plain directory name, not {name!r}")
        if name in self._stores or name in self._global_stores:
            raise TopologyError(f"a store named {name!r} already exists")
