"""What a join does to the streams it reads: repartitioning a re-keyed stream (Kafka's
``KStreamImpl.repartitionForJoin``) and letting records without a key reach a left join
(Kafka's ``NULL_KEY_RELAXED_JOIN`` label).

Shared by the stream-table and stream-stream joins, which both need their stream side
co-partitioned with the other side and both join a record without a key when they are left
(or outer) joins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamstate.processor.graph import SinkNode, SourceNode
from streamstate.processor.serde_slot import SerdeSlot

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.dsl.stream import KStream

__all__ = ["relax_null_key_filters", "repartition_for_join"]


def repartition_for_join(
    stream: KStream,
    given: str | None,
    key: SerdeSlot,
    value: SerdeSlot,
    *,
    keep_null_keys: bool,
) -> str:
    """The source node of ``stream``'s repartition for a join: ``<name>-repartition``, named
    after the join's ``given`` name, else the stream's node. An unnamed join of a stream that
    was repartitioned for a join before reuses that topic (Kafka's ``repartitionNode``; Kafka
    burns the names again all the same)."""
    builder = stream.builder
    if given is None and stream.join_repartition is not None:
        for prefix in ("KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-"):
            builder.names.processor(prefix)
        return stream.join_repartition
    source = builder.repartition(
        stream.name,
        given or stream.name,
        key,
        value,
        keep_null_keys=keep_null_keys,
        copartition=True,
    )
    stream.join_repartition = source
    return source


def relax_null_key_filters(builder: StreamsBuilder, node: str) -> None:
    """Lets records without a key through every repartition topic upstream of ``node``, the
    parent of a left join: the join joins them. A processor downstream that cannot take a null
    key (an aggregation, a table) still drops and counts it. The graph is only read: each
    repartition's filter reads its :class:`~streamstate.dsl.stream_processors.NullKeyPolicy`
    when a task creates it."""
    nodes = builder.topology.nodes
    writers = {n.topic: n.name for n in nodes.values() if isinstance(n, SinkNode)}
    stack, seen = [node], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        found = nodes[name]
        if isinstance(found, SourceNode):
            # Up through a repartition topic to the sink that writes it.
            stack += [writers[t] for t in found.topics if found.internal and t in writers]
            continue
        policy = builder.null_key_policies.get(name)
        if policy is not None:
            policy.keep = True
        stack += list(found.parents)
