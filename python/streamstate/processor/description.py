"""``TopologyDescription``: a topology's sub-topologies, nodes and stores, printed as Kafka
Streams' ``TopologyDescription.toString()`` prints them::

    Topologies:
       Sub-topology: 0
        Source: lines (topics: [text])
          --> split
        Processor: split (stores: [])
          --> words-repartition-sink
          <-- lines
        Sink: words-repartition-sink (topic: words-repartition)
          <-- split

Nodes of a sub-topology are ordered as Kafka orders them: the node with the most nodes below it
first (sources lead), ties by name. The predecessors and successors of each node are ordered as
Kafka's ``describeSubtopology`` leaves them: by the sub-tree sizes they had when each edge was
connected, edges being connected node by node in the order of Java's ``HashMap`` of the node
names (names in one hash bucket taken by name here, by insertion order in Kafka). A processor's
stores are listed in the order of Java's ``HashSet`` of their names. Internal topics are shown
without the application id, as in Kafka. Global stores follow the sub-topologies as
``Sub-topology: N for global store (will not generate tasks)``, without the empty line that ends
a sub-topology, as in Kafka; they are numbered after the sub-topologies, whose ids are the task
ids (Kafka numbers a global store among the sub-topologies, in the order the nodes were added).
A ``GlobalKTable``'s store shows Kafka's node names; a global store of the Processor API,
declared by store and topic only, a source ``<store>-source`` and a processor
``<store>-processor``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "NodeDescription",
    "SubtopologyDescription",
    "TopologyDescription",
    "java_set_order",
]


@dataclass(frozen=True)
class NodeDescription:
    """One node: ``kind`` (``"Source"``, ``"Processor"`` or ``"Sink"``), ``name``, its
    ``topics`` (a source's; a sink's one topic), ``stores`` (a processor's), and the names of
    its ``predecessors`` and ``successors``."""

    kind: str
    name: str
    topics: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()

    def __str__(self) -> str:
        after = ", ".join(self.successors) or "none"
        before = ", ".join(self.predecessors) or "none"
        if self.kind == "Source":
            return f"Source: {self.name} (topics: [{', '.join(self.topics)}])\n      --> {after}"
        if self.kind == "Sink":
            return f"Sink: {self.name} (topic: {self.topics[0]})\n      <-- {before}"
        return (
            f"Processor: {self.name} (stores: [{', '.join(self.stores)}])\n"
            f"      --> {after}\n      <-- {before}"
        )


@dataclass(frozen=True)
class SubtopologyDescription:
    """A sub-topology's ``id`` and its ``nodes``; ``global_store`` for a global store's."""

    id: int
    nodes: tuple[NodeDescription, ...]
    global_store: bool = False

    def __str__(self) -> str:
        if self.global_store:
            head = f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
        else:
            head = f"Sub-topology: {self.id}\n"
        return head + "".join(f"    {node}\n" for node in self.nodes)


@dataclass(frozen=True)
class TopologyDescription:
    """What :meth:`Topology.describe <streamstate.Topology.describe>` returns: the
    ``subtopologies`` and ``global_stores`` (each a :class:`SubtopologyDescription`)."""

    subtopologies: tuple[SubtopologyDescription, ...]
    global_stores: tuple[SubtopologyDescription, ...] = ()

    def __str__(self) -> str:
        # Kafka ends a sub-topology with an empty line, a global store's without one.
        parts = [f"  {sub}\n" for sub in self.subtopologies]
        parts += [f"  {store}" for store in self.global_stores]
        return "Topologies:\n " + "".join(parts)


def order_nodes(
    nodes: list[NodeDescription], children: dict[str, tuple[str, ...]]
) -> tuple[NodeDescription, ...]:
    """Kafka's node order, of a sub-topology's nodes and of each node's predecessors and
    successors: larger sub-tree first (a node counts itself and, again, every node below each
    child), then by name. A node's predecessors and successors are ordered as Kafka's
    ``describeSubtopology`` orders them: edges are connected node by node in its ``HashMap``'s
    order, each predecessor with the sub-tree sizes of that moment (so the first parent of a
    node with two, e.g. a merge, comes first)."""
    sizes: dict[str, int] = {}

    def size(name: str) -> int:
        if name not in sizes:
            sizes[name] = 1 + sum(size(kid) for kid in children.get(name, ()))
        return sizes[name]

    def key(name: str) -> tuple[int, str]:
        return -size(name), name

    predecessors, successors = _connect(nodes)
    ordered = (
        replace(node, predecessors=predecessors[node.name], successors=successors[node.name])
        for node in nodes
    )
    return tuple(sorted(ordered, key=lambda n: key(n.name)))


def _java_hash(name: str) -> int:
    """Java's ``HashMap.hash(name)``: ``String.hashCode`` spread (``h ^ h >>> 16``)."""
    h = 0
    raw = name.encode("utf-16-be")  # Java hashes UTF-16 code units
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_set_order(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` in the order a Java ``HashSet`` of them iterates (how Kafka lists a
    processor's stores): by hash bucket, then in the order they were added."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2
    return tuple(sorted(names, key=lambda name: _java_hash(name) & (capacity - 1)))


def _connect(
    nodes: list[NodeDescription],
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """Kafka's ``describeSubtopology``: each node, in ``HashMap`` order, adds its
    predecessors (in the order they were declared) to its ``TreeSet`` of predecessors and
    itself to theirs of successors, then grows their sub-tree sizes; a ``TreeSet`` keeps the
    order its elements had when inserted."""
    capacity = 16
    while len(nodes) > capacity * 3 // 4:
        capacity *= 2
    by_bucket = sorted(nodes, key=lambda n: (_java_hash(n.name) & (capacity - 1), n.name))
    size = {node.name: 1 for node in nodes}
    preds: dict[str, list[str]] = {node.name: [] for node in nodes}
    succs: dict[str, list[str]] = {node.name: [] for node in nodes}

    def insert(into: list[str], name: str) -> None:
        for i, there in enumerate(into):
            if (-size[name], name) < (-size[there], there):
                into.insert(i, name)
                return
        into.append(name)

    def grow(name: str, delta: int) -> None:
        size[name] += delta
        for parent in preds[name]:
            grow(parent, delta)

    for node in by_bucket:
        for parent in node.predecessors:
            if parent not in size:
                continue
            insert(preds[node.name], parent)
            insert(succs[parent], node.name)
            grow(parent, size[node.name])
    return (
        {name: tuple(found) for name, found in preds.items()},
        {name: tuple(found) for name, found in succs.items()},
    )
