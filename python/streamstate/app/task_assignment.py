"""The topology as a streams group sees it, and tasks as the consumer reads them.

Under ``group.protocol="streams"`` (KIP-1071) the broker assigns *tasks*, ``(subtopology id,
partition)``, from the topology each member sends. :func:`group_topology` builds that topology
from a bound :class:`~streamstate.app.topology.Topology`: one sub-topology per sub-topology of
a processor graph (ids ``"0"``, ``"1"``..., as Kafka Streams numbers them, so a task id here is
the task id of the same program in Java), with its source topics, the repartition topics it
reads and writes, its stores' changelogs, and its source topics as one co-partition group when
there are several. The one-function form is sub-topology ``"0"``.

:class:`TaskPartitions` maps an assigned task to the partitions the consumer reads for it
(partition ``p`` of every source topic of the sub-topology, repartition topics included), and
back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamstate.app.internal_topics import CHANGELOG_TOPIC_CONFIG, internal_topic_config
from streamstate.app.streams_group import (
    CopartitionGroup,
    StreamsGroupTopology,
    Subtopology,
    TaskId,
    TopicInfo,
)
from streamstate.app.topology import Topology

__all__ = ["TaskPartitions", "group_topology", "subtopology_sources"]


def subtopology_sources(topology: Topology) -> dict[str, tuple[str, ...]]:
    """Each sub-topology's source topics (named for the application), by group sub-topology
    id; ``topology`` is bound (``Topology.bind``)."""
    app_id = topology._application_id
    if not topology.is_graph:
        return {"0": tuple(topology.source_topics)}
    graph = topology.graph()
    return {
        str(sub.id): tuple(graph.decorate(t, app_id) for t in sub.source_topics)
        for sub in graph.subtopologies
    }


def subtopology_stores(topology: Topology) -> dict[str, tuple[str, ...]]:
    """Each sub-topology's task stores, by group sub-topology id."""
    if not topology.is_graph:
        return {"0": tuple(topology.stores)}
    return {str(sub.id): tuple(sub.stores) for sub in topology.graph().subtopologies}


def group_topology(
    topology: Topology,
    topic_configs: Mapping[str, str],
    partition_counts: Mapping[str, int],
) -> StreamsGroupTopology:
    """The topology a member sends when it joins (see the module doc). ``partition_counts``
    gives the repartition topics' counts (``StreamsApp`` has created them already, so the
    broker finds them as the topology says); changelogs leave the count to the broker (it
    requires 0: as many as the sub-topology's largest source)."""
    app_id = topology._application_id
    assert app_id is not None, "the topology is bound"
    specs = topology.stores
    changelogs = {
        name: TopicInfo(
            spec.changelog_topic(app_id),
            configs=internal_topic_config(
                CHANGELOG_TOPIC_CONFIG, topic_configs, spec.changelog_config
            ),
        )
        for name, spec in specs.items()
        if spec.logged
    }
    subtopologies = []
    stores = subtopology_stores(topology)
    if not topology.is_graph:
        sources = tuple(topology.source_topics)
        subtopologies.append(
            Subtopology(
                "0",
                source_topics=sources,
                state_changelog_topics=tuple(changelogs[s] for s in stores["0"] if s in changelogs),
                copartition_groups=_copartition(sources, ()),
            )
        )
    else:
        graph = topology.graph()
        for sub in graph.subtopologies:
            user = tuple(t for t in sub.source_topics if not graph.is_internal(t))
            internal = tuple(
                graph.decorate(t, app_id) for t in sub.source_topics if graph.is_internal(t)
            )
            sinks = tuple(
                graph.decorate(graph.repartitions[name].topic, app_id)
                for name in sub.repartition_sinks
            )
            subtopologies.append(
                Subtopology(
                    str(sub.id),
                    source_topics=user,
                    state_changelog_topics=tuple(
                        changelogs[s] for s in sub.stores if s in changelogs
                    ),
                    repartition_sink_topics=sinks,
                    repartition_source_topics=tuple(
                        TopicInfo(t, partitions=partition_counts.get(t, 0)) for t in internal
                    ),
                    copartition_groups=_copartition(user, internal),
                )
            )
    return StreamsGroupTopology(tuple(subtopologies))


def _copartition(user: tuple[str, ...], internal: tuple[str, ...]) -> tuple[CopartitionGroup, ...]:
    # Partition p of every source of a sub-topology belongs to task p: they must all have the
    # same count, which the broker checks (INCORRECTLY_PARTITIONED_TOPICS otherwise).
    if len(user) + len(internal) < 2:
        return ()
    return (
        CopartitionGroup(
            source_topics=tuple(range(len(user))),
            repartition_source_topics=tuple(range(len(internal))),
        ),
    )


class TaskPartitions:
    """Tasks to the partitions the consumer reads for them (see the module doc)."""

    def __init__(self, topology: Topology) -> None:
        """``topology`` is bound (``Topology.bind``)."""
        self._sources = subtopology_sources(topology)

    def partitions(self, tasks: Iterable[TaskId]) -> list[tuple[str, int]]:
        """The ``(topic, partition)`` pairs of ``tasks``, sorted."""
        return sorted(
            (topic, task.partition)
            for task in tasks
            for topic in self._sources.get(task.subtopology_id, ())
        )

    def source_topics(self, subtopology_id: str) -> tuple[str, ...]:
        """The source topics of a sub-topology."""
        return self._sources.get(subtopology_id, ())
