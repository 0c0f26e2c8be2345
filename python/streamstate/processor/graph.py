"""The processor graph: nodes, their edges, sub-topologies and internal topics.

:class:`GraphBuilder` checks each ``add_*`` call as Kafka's ``InternalTopologyBuilder`` does
(names are unique, parents must already exist, so a graph can only grow downstream and the one
cycle that can be written, a node naming itself as its parent, is refused); :meth:`build` then
makes the immutable :class:`ProcessorGraph` the runtime runs:

* **sub-topologies**: the nodes connected by edges or by a shared store form one sub-topology
  (Kafka's node groups); a repartition topic is *not* an edge, so it splits the graph. They are
  numbered in the order their first node was added. Task ``<subtopology>_<partition>`` runs
  partition ``partition`` of every source topic of its sub-topology.
* **internal topics**: ``add_repartition(name, ...)`` adds a sink node ``<name>-repartition-sink``
  writing the topic ``<name>-repartition`` and a source node ``name`` reading it;
  the running app prefixes the topic with its ``application.id``
  (``<application.id>-<name>-repartition``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from streamstate.errors import TopologyError
from streamstate.processor.serde_slot import unwrap
from streamstate.serde import BytesDeserializer, BytesSerializer

if TYPE_CHECKING:
    from streamstate.processor.processor import Processor

__all__ = [
    "GraphBuilder",
    "ProcessorGraph",
    "ProcessorNode",
    "RepartitionSpec",
    "SinkNode",
    "SourceNode",
    "Subtopology",
    "TaskId",
]

ProcessorFactory = Callable[[], "Processor"]


class TaskId(NamedTuple):
    """A task of a processor graph: its sub-topology and partition, printed ``0_1`` as in
    Kafka (and naming the task's state directory so)."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"


@dataclass(frozen=True)
class SourceNode:
    """Reads ``topics`` (internal ones without the application id) and deserializes them."""

    name: str
    topics: tuple[str, ...]
    key_deserializer: Any
    value_deserializer: Any
    timestamp_extractor: Any = None
    internal: bool = False


@dataclass(frozen=True)
class ProcessorNode:
    """Runs a :class:`~streamstate.Processor` made by ``factory()`` (one per task)."""

    name: str
    factory: ProcessorFactory
    parents: tuple[str, ...]


@dataclass(frozen=True)
class SinkNode:
    """Serializes what its parents forward and writes it to ``topic``."""

    name: str
    topic: str
    parents: tuple[str, ...]
    key_serializer: Any
    value_serializer: Any
    internal: bool = False
    # ``partitioner(key, value) -> partition | None`` (None: the producer's murmur2 of the
    # key); the DSL's foreign-key join sends each response back to its row's partition.
    partitioner: Callable[[Any, Any], int | None] | None = None


@dataclass(frozen=True)
class RepartitionSpec:
    """A repartition topic: ``partitions`` (``None``: as many as the writing sub-topology's
    source topics, the most of them)."""

    name: str
    partitions: int | None
    sink: str | None = None  # the sink node's name when not the default
    suffix: str = "-repartition"  # Kafka's foreign-key join topics end with "-topic"
    # Sized as the other source topics of the sub-topology reading it (Kafka's
    # copartitionSources), not as the writer's: a foreign-key join's subscription topic has
    # the right table's partition count, its response topic the left table's.
    copartition: bool = False

    @property
    def topic(self) -> str:
        """The topic's name without the application id."""
        return f"{self.name}{self.suffix}"

    @property
    def sink_name(self) -> str:
        """The name of the sink node that writes it."""
        return self.sink or f"{self.name}-repartition-sink"


Node = SourceNode | ProcessorNode | SinkNode


@dataclass(frozen=True)
class Subtopology:
    """One connected part of the graph: its ``nodes`` (names, in the order added), its
    ``sources`` (source node names), their ``source_topics``, the ``stores`` its processors
    use, and the repartition topics it writes (``repartition_sinks``, repartition names)."""

    id: int
    nodes: tuple[str, ...]
    sources: tuple[str, ...]
    source_topics: tuple[str, ...]
    stores: tuple[str, ...]
    repartition_sinks: tuple[str, ...]


@dataclass
class GraphBuilder:
    """The nodes and store connections as they are added, checked one call at a time."""

    nodes: dict[str, Node] = field(default_factory=dict)
    repartitions: dict[str, RepartitionSpec] = field(default_factory=dict)
    # store name -> the processors connected to it, in the order connected
    store_users: dict[str, list[str]] = field(default_factory=dict)
    _topic_owner: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def add_source(
        self,
        name: str,
        topics: Sequence[str],
        key_deserializer: Any,
        value_deserializer: Any,
        timestamp_extractor: Any,
        *,
        internal: bool = False,
    ) -> None:
        """Adds a source node over ``topics``."""
        self._check_name(name)
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise TopologyError(
                    f"source {name!r}: a topic is a non-empty string, not {topic!r}"
                )
            owner = self._topic_owner.get(topic)
            if owner is not None:
                raise TopologyError(
                    f"topic {topic!r} is already read by source {owner!r}; a topic has one "
                    f"source node",
                    topic=topic,
                )
        for topic in topics:
            self._topic_owner[topic] = name
        self.nodes[name] = SourceNode(
            name,
            tuple(topics),
            key_deserializer if key_deserializer is not None else BytesDeserializer(),
            value_deserializer if value_deserializer is not None else BytesDeserializer(),
            timestamp_extractor,
            internal,
        )

    def add_processor(self, name: str, factory: ProcessorFactory, parents: Sequence[str]) -> None:
        """Adds a processor node under ``parents``."""
        self._check_name(name)
        if not callable(factory):
            raise TopologyError(
                f"processor {name!r}: the factory must be a Processor subclass or a callable "
                f"returning a new Processor, not {factory!r}"
            )
        self._check_parents(name, parents)
        self.nodes[name] = ProcessorNode(name, factory, tuple(parents))

    def add_sink(
        self,
        name: str,
        topic: str,
        parents: Sequence[str],
        key_serializer: Any,
        value_serializer: Any,
        *,
        internal: bool = False,
        partitioner: Callable[[Any, Any], int | None] | None = None,
    ) -> None:
        """Adds a sink node writing ``topic`` under ``parents`` (to the partition
        ``partitioner(key, value)`` names, when given and not ``None``)."""
        self._check_name(name)
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"sink {name!r}: the topic is a non-empty string, not {topic!r}")
        self._check_parents(name, parents)
        self.nodes[name] = SinkNode(
            name,
            topic,
            tuple(parents),
            key_serializer if key_serializer is not None else BytesSerializer(),
            value_serializer if value_serializer is not None else BytesSerializer(),
            internal,
            partitioner,
        )

    def add_repartition(
        self,
        name: str,
        parents: Sequence[str],
        partitions: int | None,
        serdes: tuple[Any, Any, Any, Any],
        *,
        sink_name: str | None = None,
        source_name: str | None = None,
        suffix: str = "-repartition",
        partitioner: Callable[[Any, Any], int | None] | None = None,
        copartition: bool = False,
    ) -> None:
        """Adds the sink and the source of repartition topic ``<name>-repartition`` (nodes
        ``<name>-repartition-sink`` and ``name`` unless named, as the DSL names them);
        ``suffix``, ``partitioner`` and ``copartition``: see :class:`RepartitionSpec` and
        :class:`SinkNode`."""
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise TopologyError(f"repartition {name!r}: partitions must be >= 1, not {partitions}")
        spec = RepartitionSpec(name, partitions, sink_name, suffix, copartition)
        if name in self.repartitions:
            raise TopologyError(f"a repartition topic {spec.topic!r} is already added")
        source_name = source_name or name
        self._check_name(source_name)
        self._check_name(spec.sink_name)
        self._check_parents(spec.sink_name, parents)
        key_ser, value_ser, key_de, value_de = serdes
        self.add_sink(
            spec.sink_name,
            spec.topic,
            parents,
            key_ser,
            value_ser,
            internal=True,
            partitioner=partitioner,
        )
        self.add_source(source_name, [spec.topic], key_de, value_de, None, internal=True)
        self.repartitions[name] = spec

    def connect_store(self, store: str, processors: Sequence[str]) -> None:
        """Connects ``store`` to each of ``processors`` (which must be processor nodes)."""
        users = self.store_users.setdefault(store, [])
        for name in processors:
            node = self.nodes.get(name)
            if node is None:
                raise TopologyError(
                    f"store {store!r}: processor {name!r} is not added yet (add processors "
                    f"before the stores they use)",
                    store_name=store,
                )
            if not isinstance(node, ProcessorNode):
                raise TopologyError(
                    f"store {store!r}: {name!r} is a {type(node).__name__}, only processors "
                    f"use stores",
                    store_name=store,
                )
            if name not in users:
                users.append(name)

    def _check_name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"a node name is a non-empty string, not {name!r}")
        if name in self.nodes:
            raise TopologyError(f"a node named {name!r} is already added")

    def _check_parents(self, name: str, parents: Sequence[str]) -> None:
        if isinstance(parents, str):
            parents = [parents]
        if not parents:
            raise TopologyError(f"{name!r} needs at least one parent")
        for parent in parents:
            if parent == name:
                raise TopologyError(
                    f"a cycle: {name!r} cannot be its own parent (a graph only grows "
                    f"downstream: parents must be added before their children)"
                )
            node = self.nodes.get(parent)
            if node is None:
                raise TopologyError(
                    f"unknown parent {parent!r} of {name!r}: add it first (known nodes: "
                    f"{sorted(self.nodes)})"
                )
            if isinstance(node, SinkNode):
                raise TopologyError(f"{name!r}: sink {parent!r} cannot be a parent")

    # -- build ----------------------------------------------------------------------------------

    def build(self, stores: Sequence[str], global_stores: dict[str, str]) -> ProcessorGraph:
        """The immutable graph; ``stores`` are the task stores added, ``global_stores`` maps
        global store names to their topics. Raises :class:`TopologyError`."""
        if not any(isinstance(n, SourceNode) for n in self.nodes.values()):
            raise TopologyError("the topology has no source: add one with add_source()")
        for store in stores:
            if not self.store_users.get(store):
                raise TopologyError(
                    f"store {store!r} is connected to no processor: name its processors in "
                    f"add_store({store!r}, *processor_names)",
                    store_name=store,
                )
        clash = set(self._topic_owner) & set(global_stores.values())
        if clash:
            raise TopologyError(
                f"topics {sorted(clash)} are both a source and a global store topic"
            )
        children: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in self.nodes.values():
            if not isinstance(node, SourceNode):
                for parent in node.parents:
                    children[parent].append(node.name)
        _check_acyclic(children)
        return ProcessorGraph(
            dict(self.nodes),
            {k: tuple(v) for k, v in children.items()},
            dict(self.repartitions),
            {k: tuple(v) for k, v in self.store_users.items()},
            dict(global_stores),
        )


def _check_acyclic(children: dict[str, list[str]]) -> None:
    # Parents must exist when a node is added, so no cycle can be built; this guards the rule.
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for child in children[name]:
            if state.get(child) == 1:
                raise TopologyError(f"a cycle: {' -> '.join([*path, name, child])}")
            if child not in state:
                visit(child, [*path, name])
        state[name] = 2

    for name in children:
        if name not in state:
            visit(name, [])


class ProcessorGraph:
    """A checked graph: nodes, children, sub-topologies, stores and repartition topics."""

    def __init__(
        self,
        nodes: dict[str, Node],
        children: dict[str, tuple[str, ...]],
        repartitions: dict[str, RepartitionSpec],
        store_users: dict[str, tuple[str, ...]],
        global_stores: dict[str, str],
    ) -> None:
        """Made by :meth:`GraphBuilder.build`."""
        self.nodes = nodes
        self.children = children
        self.repartitions = repartitions
        self.store_users = store_users
        self.global_stores = global_stores
        self.processor_stores: dict[str, tuple[str, ...]] = {}
        for store, users in store_users.items():
            for user in users:
                self.processor_stores[user] = (*self.processor_stores.get(user, ()), store)
        self.subtopologies = self._group()
        self._subtopology_of_topic = {
            topic: sub.id for sub in self.subtopologies for topic in sub.source_topics
        }
        self._internal_topics = {spec.topic for spec in repartitions.values()}

    def _group(self) -> list[Subtopology]:
        # Union-find over edges and shared stores (Kafka's QuickUnion of node groups).
        root: dict[str, str] = {name: name for name in self.nodes}

        def find(name: str) -> str:
            while root[name] != name:
                root[name] = root[root[name]]
                name = root[name]
            return name

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                root[rb] = ra

        for name, kids in self.children.items():
            for kid in kids:
                union(name, kid)
        for users in self.store_users.values():
            for other in users[1:]:
                union(users[0], other)
        groups: dict[str, list[str]] = {}
        for name in self.nodes:  # insertion order: the first node added numbers the group
            groups.setdefault(find(name), []).append(name)
        subtopologies = []
        for index, members in enumerate(groups.values()):
            sources = [n for n in members if isinstance(self.nodes[n], SourceNode)]
            topics = [t for n in sources for t in self.nodes[n].topics]  # type: ignore[union-attr]
            stores = [
                s for s, users in self.store_users.items() if any(u in members for u in users)
            ]
            sinks = [spec.name for spec in self.repartitions.values() if spec.sink_name in members]
            subtopologies.append(
                Subtopology(
                    index,
                    tuple(members),
                    tuple(sources),
                    tuple(topics),
                    tuple(stores),
                    tuple(sinks),
                )
            )
        return subtopologies

    # -- topics ---------------------------------------------------------------------------------

    def is_internal(self, topic: str) -> bool:
        """Whether ``topic`` (undecorated) is a repartition topic of this graph."""
        return topic in self._internal_topics

    def decorate(self, topic: str, application_id: str | None) -> str:
        """The topic's name on the broker: internal topics get the application id prefix."""
        if application_id is not None and topic in self._internal_topics:
            return f"{application_id}-{topic}"
        return topic

    def source_topics(self, application_id: str | None) -> tuple[str, ...]:
        """Every source topic, internal ones decorated when ``application_id`` is given."""
        return tuple(
            self.decorate(t, application_id)
            for sub in self.subtopologies
            for t in sub.source_topics
        )

    def task_sources(
        self, subtopology: Subtopology, application_id: str | None
    ) -> list[tuple[str, Any, Any, Any]]:
        """What a task of ``subtopology`` reads: per source topic (named for the application),
        its key and value deserializers and timestamp extractor (``None``: the app's)."""
        return [
            (
                self.decorate(topic, application_id),
                unwrap(n.key_deserializer),
                unwrap(n.value_deserializer),
                n.timestamp_extractor,
            )
            for n in (self.nodes[name] for name in subtopology.sources)
            if isinstance(n, SourceNode)
            for topic in n.topics
        ]

    def user_topics(self) -> tuple[str, ...]:
        """The source topics that are not repartition topics."""
        return tuple(
            t for sub in self.subtopologies for t in sub.source_topics if not self.is_internal(t)
        )

    def repartition_topics(self, application_id: str | None) -> tuple[str, ...]:
        """The repartition topics, named for ``application_id`` when given."""
        return tuple(self.decorate(s.topic, application_id) for s in self.repartitions.values())

    def subtopology_of(self, topic: str, application_id: str | None) -> int:
        """The sub-topology reading ``topic`` (a decorated name for internal topics)."""
        if application_id is not None:
            prefix = f"{application_id}-"
            if topic.startswith(prefix) and topic[len(prefix) :] in self._internal_topics:
                topic = topic[len(prefix) :]
        return self._subtopology_of_topic[topic]

    def repartition_partitions(self, source_partitions: dict[str, int]) -> dict[str, int]:
        """The partition count of each repartition topic (by repartition name): the one given,
        or the most partitions among the source topics of the sub-topology writing it.
        ``source_partitions`` maps every user source topic to its partition count."""
        known: dict[str, int] = dict(source_partitions)
        result: dict[str, int] = {}
        pending = dict(self.repartitions)
        while pending:
            progressed = False
            for name, spec in list(pending.items()):
                writer = next(s for s in self.subtopologies if name in s.repartition_sinks)
                peers = self._copartition_peers(spec, pending)
                if spec.partitions is not None:
                    count: int | None = spec.partitions
                elif peers:
                    count = max(known[t] for t in peers) if all(t in known for t in peers) else None
                elif all(t in known for t in writer.source_topics):
                    count = max(known[t] for t in writer.source_topics)
                else:
                    count = None
                if count is not None:
                    result[name] = count
                    known[spec.topic] = count
                    del pending[name]
                    progressed = True
            if not progressed:  # cannot happen in a graph built downstream; guards the loop
                raise TopologyError(f"cannot size repartition topics {sorted(pending)}")
        return result

    def _copartition_peers(
        self, spec: RepartitionSpec, pending: dict[str, RepartitionSpec]
    ) -> list[str]:
        """The topics a ``copartition`` topic is sized after: the other source topics of the
        sub-topology reading it, but not other copartitioned topics still unsized (two of
        them read together would wait for each other)."""
        if not spec.copartition:
            return []
        waiting = {s.topic for s in pending.values() if s.copartition}
        reader = self._subtopology_of_topic[spec.topic]
        return [
            t
            for t in self.subtopologies[reader].source_topics
            if t != spec.topic and t not in waiting
        ]
