"""``ThreadMetadata`` and ``TaskMetadata``: what each local stream thread runs now (Kafka's
``KafkaStreams.metadataForLocalThreads()``).

As in Kafka's ``StreamThread.updateThreadMetadata``: an active task reports, per input
partition, the offset it last committed (``-1`` until its first commit in this run: an offset
committed by an earlier run or another instance is not reported) and the highest offset polled
(``-1`` until a record arrived), and since when (epoch ms) it has not been processable
(``None``: it is; Kafka's ``timeCurrentIdlingStarted``). A standby task reports its input
partitions only (empty offsets, no idling), as Kafka's ``StandbyTask`` does. The thread state
is the stream thread's (``streamstate.app.stream_thread.ThreadState``: ``CREATED``,
``REBALANCING``, ``RESTORING``, ``RUNNING``, ``PENDING_SHUTDOWN``, ``DEAD``), not Kafka's
``StreamThread.State`` names.

The values are immutable and hashable (offsets are read-only mappings that compare equal to
dicts), so a snapshot can be kept, compared and put in sets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from streamstate.app.standby_task import group_task_id
from streamstate.app.task_assignment import TaskPartitions
from streamstate.app.topology import Topology
from streamstate.processor.graph import TaskId
from streamstate.records import TopicPartition

__all__ = ["TaskMetadata", "ThreadMetadata", "task_id_of", "thread_metadata"]


def _frozen(offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
    return MappingProxyType(dict(offsets))


@dataclass(frozen=True)
class TaskMetadata:
    """One task of a local stream thread (Kafka's ``TaskMetadata``): its id, input partitions,
    the offsets it last committed and the highest it polled per partition (``-1``: none yet),
    and since when (epoch ms) it has not been processable (``None``: it is)."""

    task_id: TaskId
    topic_partitions: frozenset[TopicPartition]
    committed_offsets: Mapping[TopicPartition, int]
    end_offsets: Mapping[TopicPartition, int]
    time_current_idling_started: int | None = None

    def __post_init__(self) -> None:
        """Freezes the offsets (read-only mappings)."""
        object.__setattr__(self, "topic_partitions", frozenset(self.topic_partitions))
        object.__setattr__(self, "committed_offsets", _frozen(self.committed_offsets))
        object.__setattr__(self, "end_offsets", _frozen(self.end_offsets))

    def __hash__(self) -> int:
        """Over every field (the offsets as sets of pairs)."""
        return hash(
            (
                self.task_id,
                self.topic_partitions,
                frozenset(self.committed_offsets.items()),
                frozenset(self.end_offsets.items()),
                self.time_current_idling_started,
            )
        )

    def __repr__(self) -> str:
        """``TaskMetadata(task_id=0_1, topic_partitions=[...], committed_offsets={...}, ...)``."""
        return (
            f"TaskMetadata(task_id={self.task_id}, "
            f"topic_partitions={sorted(self.topic_partitions)}, "
            f"committed_offsets={dict(sorted(self.committed_offsets.items()))}, "
            f"end_offsets={dict(sorted(self.end_offsets.items()))}, "
            f"time_current_idling_started={self.time_current_idling_started})"
        )


@dataclass(frozen=True)
class ThreadMetadata:
    """One local stream thread (Kafka's ``ThreadMetadata``): its name and state, its active and
    standby tasks, and the client ids of its main consumer, restore consumer, producers and
    the client's admin client."""

    thread_name: str
    thread_state: str
    active_tasks: frozenset[TaskMetadata]
    standby_tasks: frozenset[TaskMetadata]
    main_consumer_client_id: str
    restore_consumer_client_id: str
    producer_client_ids: frozenset[str]
    admin_client_id: str

    def __repr__(self) -> str:
        """The fields, the tasks sorted by id."""
        return (
            f"ThreadMetadata(thread_name={self.thread_name!r}, "
            f"thread_state={self.thread_state!r}, "
            f"active_tasks={sorted(self.active_tasks, key=lambda t: t.task_id)}, "
            f"standby_tasks={sorted(self.standby_tasks, key=lambda t: t.task_id)}, "
            f"main_consumer_client_id={self.main_consumer_client_id!r}, "
            f"restore_consumer_client_id={self.restore_consumer_client_id!r}, "
            f"producer_client_ids={sorted(self.producer_client_ids)}, "
            f"admin_client_id={self.admin_client_id!r})"
        )


def task_id_of(task_id: Any) -> TaskId:
    """A stream thread's task id as a :class:`~streamstate.TaskId` (the one-function form's
    partition ``p`` is task ``0_p``, as its state directory and the streams group name it)."""
    if isinstance(task_id, TaskId):
        return task_id
    group = group_task_id(task_id)
    return TaskId(int(group.subtopology_id), group.partition)


def thread_metadata(thread: Any, topology: Topology, admin_client_id: str) -> ThreadMetadata:
    """A snapshot of stream thread ``thread`` (of the bound ``topology``); safe from any thread:
    it reads copies the stream thread publishes under its locks, and a task's offsets are
    single dict reads."""
    name = thread.name
    active = frozenset(_active(task) for task in thread.active_tasks().values())
    standby = frozenset(
        _standby(task_id, TaskPartitions(topology)) for task_id in thread.standbys.task_ids
    )
    return ThreadMetadata(
        thread_name=name,
        thread_state=thread.state.value,
        active_tasks=active,
        standby_tasks=standby,
        main_consumer_client_id=f"{name}-consumer",
        restore_consumer_client_id=f"{name}-restore-consumer",
        producer_client_ids=frozenset({f"{name}-producer"}),
        admin_client_id=admin_client_id,
    )


def _active(task: Any) -> TaskMetadata:
    return TaskMetadata(
        task_id_of(task.task_id),
        frozenset(task.partitions),
        dict(task.committed_offsets),
        dict(task.end_offsets),
        task.idling_since,
    )


def _standby(task_id: Any, partitions: TaskPartitions) -> TaskMetadata:
    group = group_task_id(task_id)
    tps: Iterable[tuple[str, int]] = partitions.partitions([group])
    return TaskMetadata(
        task_id_of(task_id), frozenset(TopicPartition(t, p) for t, p in tps), {}, {}, None
    )
