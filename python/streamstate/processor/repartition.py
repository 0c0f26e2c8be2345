"""Repartition topics: their partition counts, the co-partitioning check, and the purge.

* :func:`plan_internal_topics` (at ``StreamsApp.start()``): each repartition topic gets the
  partition count given to ``add_repartition`` or the most partitions among the source topics of
  the sub-topology writing it (Kafka's ``RepartitionTopics``); an existing one must have that
  count. The source topics of each sub-topology must then have equal partition counts (Kafka's
  ``CopartitionedTopicsEnforcer``): task ``<subtopology>_<p>`` reads partition ``p`` of each.
  A store's changelog gets its sub-topology's partition count.
* :class:`RepartitionPurger` (after each commit of a stream thread): records of repartition
  topics below the committed offsets are deleted with the admin client's ``delete_records``,
  as Kafka Streams does, so the topic does not grow without bound (it is created with
  ``retention.ms=-1``). A purge still under way when the next commit comes is not repeated;
  a failed purge is logged and the next commit's purge covers it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from streamstate.errors import TopologyError
from streamstate.processor.graph import ProcessorGraph

__all__ = ["InternalTopics", "RepartitionPurger", "plan_internal_topics"]

_log = logging.getLogger("streamstate.app")

REPARTITION_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1"}
"""Kafka Streams' settings of a repartition topic: kept until purged."""


@dataclass(frozen=True)
class InternalTopics:
    """What the app must create: ``repartitions`` (topic name on the broker -> partitions, only
    the missing ones) and the partition count of each store's changelog (``changelogs``,
    by store name)."""

    repartitions: dict[str, int]
    changelogs: dict[str, int]


def plan_internal_topics(
    graph: ProcessorGraph, application_id: str, existing: Mapping[str, int]
) -> InternalTopics:
    """Sizes the internal topics of ``graph`` and checks co-partitioning; ``existing`` maps
    every topic on the broker to its partition count (user source topics must be there).
    Raises :class:`TopologyError` naming the topics and their counts."""
    user = {
        t: existing[t]
        for sub in graph.subtopologies
        for t in sub.source_topics
        if not graph.is_internal(t)
    }
    counts = graph.repartition_partitions(user)
    missing: dict[str, int] = {}
    for name, partitions in counts.items():
        topic = graph.decorate(graph.repartitions[name].topic, application_id)
        found = existing.get(topic)
        if found is None:
            missing[topic] = partitions
        elif found != partitions:
            raise TopologyError(
                f"repartition topic {topic!r} exists with {found} partitions, but the topology "
                f"needs {partitions}: delete it (with the app stopped) or give "
                f"add_repartition({name!r}, ..., partitions={found})",
                topic=topic,
            )
    known = dict(user)
    known.update({graph.repartitions[n].topic: c for n, c in counts.items()})
    changelogs: dict[str, int] = {}
    for sub in graph.subtopologies:
        sizes = {t: known[t] for t in sub.source_topics}
        if len(set(sizes.values())) > 1:
            shown = ", ".join(
                f"{graph.decorate(t, application_id)}: {c}" for t, c in sorted(sizes.items())
            )
            raise TopologyError(
                f"the source topics of sub-topology {sub.id} are not co-partitioned "
                f"({shown} partitions): task {sub.id}_p reads partition p of each, so they "
                f"need the same partition count (repartition one of them)"
            )
        for store in sub.stores:
            changelogs[store] = max(sizes.values())
    return InternalTopics(missing, changelogs)


class RepartitionPurger:
    """Deletes what a stream thread committed past in repartition ``topics`` (broker names)."""

    def __init__(self, admin: AdminClient | None, topics: frozenset[str]) -> None:
        """``admin`` may be ``None`` when there are no ``topics``."""
        self._admin = admin
        self._topics = topics
        self._pending: dict[KafkaTopicPartition, Future[object]] = {}

    def close(self) -> None:
        """Lets go of the admin client (librdkafka destroys it with its last reference)."""
        self._admin = None
        self._pending = {}

    def purge(self, committed: list[KafkaTopicPartition]) -> None:
        """Asks the broker to delete the records below each committed offset of a repartition
        partition in ``committed`` (does not wait)."""
        if self._admin is None or not self._topics:
            return
        for tp, future in list(self._pending.items()):
            if not future.done():
                return  # the previous purge is under way; the next commit covers this one
            exc = future.exception()
            if exc is not None:
                _log.warning(
                    "purging repartition topic %s partition %d failed: %s",
                    tp.topic,
                    tp.partition,
                    exc,
                )
        self._pending = {}
        wanted = [
            KafkaTopicPartition(o.topic, o.partition, o.offset)
            for o in committed
            if o.topic in self._topics and o.offset > 0
        ]
        if wanted:
            self._pending = self._admin.delete_records(wanted, request_timeout=30)
