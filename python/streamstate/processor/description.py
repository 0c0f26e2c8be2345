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

Nodes of a sub-topology, and the predecessors and successors of each node, are ordered as Kafka
orders them: the node with the most nodes below it first (sources lead), ties by name. (Kafka
sorts a node's successors by the sub-tree sizes they had when each was connected, edges being
connected in its HashMap's order; the final sizes used here may give another order only where
a successor was connected before the nodes below it.) Internal topics are shown without the
application id, as in Kafka. Global stores follow the sub-topologies as ``Sub-topology: N for
global store (will not generate tasks)``, without the empty line that ends a sub-topology, as in
Kafka; they are numbered after the sub-topologies, whose ids are the task ids (Kafka numbers a
global store among the sub-topologies, in the order the nodes were added). A ``GlobalKTable``'s
store shows Kafka's node names; a global store of the Processor API, declared by store and topic
only, a source ``<store>-source`` and a processor ``<store>-processor``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["NodeDescription", "SubtopologyDescription", "TopologyDescription"]


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
    child), then by name."""
    sizes: dict[str, int] = {}

    def size(name: str) -> int:
        if name not in sizes:
            sizes[name] = 1 + sum(size(kid) for kid in children.get(name, ()))
        return sizes[name]

    def key(name: str) -> tuple[int, str]:
        return -size(name), name

    ordered = (
        replace(
            node,
            predecessors=tuple(sorted(node.predecessors, key=key)),
            successors=tuple(sorted(node.successors, key=key)),
        )
        for node in nodes
    )
    return tuple(sorted(ordered, key=lambda n: key(n.name)))
