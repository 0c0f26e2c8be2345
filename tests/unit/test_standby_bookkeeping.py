"""The bookkeeping of standby and warm-up tasks (``app/standby_task.py``) and their place in
a streams group member's assignments (``app/streams_membership.py``), without a broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.config import StreamsConfig
from streamstate.app.standby_task import StandbyTasks
from streamstate.app.streams_group import HeartbeatResult, TaskId, Tasks
from streamstate.app.streams_membership import StreamsMembership
from streamstate.app.task_state import restore_start_offsets
from streamstate.errors import ProcessorStateError
from streamstate.records import TopicPartition
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.stores import InMemoryKeyValueStore


class _Task:
    """What StandbyTasks uses of a StreamTask: one in-memory store and its changelog."""

    def __init__(self, task_id: int, directory: Path, producer: Any, stateful: bool = True):
        self.task_id = task_id
        self.stores = {"s": InMemoryKeyValueStore("s")} if stateful else {}
        self.changelogs = {"s": TopicPartition("app-s-changelog", task_id)} if stateful else {}
        self.checkpoint_file = OffsetCheckpoint(directory / f"{task_id}.checkpoint")
        self.changelog_offsets: dict[TopicPartition, int] = {}
        self._producer = producer
        self.checkpoints = 0
        self.closed = False

    def apply_committed(self) -> None:
        self.checkpoints += 1

    def close(self) -> None:
        self.closed = True


class _Consumer:
    def __init__(self) -> None:
        self.assigned: set[tuple[str, int]] = set()
        self.starts: dict[tuple[str, int], int] = {}

    def incremental_assign(self, parts: list[KafkaTopicPartition]) -> None:
        for p in parts:
            self.assigned.add((p.topic, p.partition))
            self.starts[(p.topic, p.partition)] = p.offset

    def incremental_unassign(self, parts: list[KafkaTopicPartition]) -> None:
        self.assigned -= {(p.topic, p.partition) for p in parts}

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def close(self) -> None:
        pass


@pytest.fixture
def standbys(tmp_path: Path) -> Any:
    producer = object()
    made: dict[int, _Task] = {}
    locked: set[int] = set()

    def make(task_id: int) -> _Task:
        if task_id in locked:
            raise ProcessorStateError("store 's' is already open")
        made[task_id] = _Task(task_id, tmp_path, producer, stateful=task_id != 9)
        return made[task_id]

    consumer = _Consumer()
    tasks = StandbyTasks("t", make, lambda: consumer, commit_interval_ms=100)  # type: ignore[arg-type,return-value]
    yield tasks, made, locked, consumer, producer
    tasks.close()


def test_standbys_open_from_their_checkpoint_and_close_when_no_longer_given(
    standbys: Any, tmp_path: Path
) -> None:
    tasks, made, _, consumer, _ = standbys
    OffsetCheckpoint(tmp_path / "1.checkpoint").write({TopicPartition("app-s-changelog", 1): 41})
    tasks.update({0, 1})
    assert tasks.task_ids == {0, 1}
    assert consumer.assigned == {("app-s-changelog", 0), ("app-s-changelog", 1)}
    # An in-memory store replays from the beginning; the checkpoint only counts for a
    # persistent store.
    assert tasks.positions() == {
        TopicPartition("app-s-changelog", 0): 0,
        TopicPartition("app-s-changelog", 1): 0,
    }
    assert tasks.task_offsets() == {0: 0, 1: 0}
    tasks.update({1})
    assert tasks.task_ids == {1}
    assert made[0].closed and made[0].checkpoints == 1  # checkpointed, then closed
    assert consumer.assigned == {("app-s-changelog", 1)}


def test_a_standby_made_active_is_handed_over_with_its_stores_open(standbys: Any) -> None:
    tasks, made, _, consumer, producer = standbys
    tasks.update({2, 3})
    task = tasks.take(2, producer)
    assert task is made[2] and not task.closed and task.checkpoints == 1
    assert tasks.task_ids == {3}
    assert ("app-s-changelog", 2) not in consumer.assigned
    assert tasks.take(2, producer) is None  # no longer a standby
    # A standby made with a producer since replaced is closed: the caller opens it anew.
    assert tasks.take(3, object()) is None
    assert made[3].closed


def test_a_locked_standby_opens_once_its_directory_is_free_and_stateless_ones_never(
    standbys: Any,
) -> None:
    tasks, made, locked, _, _ = standbys
    locked.add(4)
    tasks.update({4, 9})
    assert tasks.task_ids == set()
    assert made[9].closed  # a stateless task has nothing to keep warm
    tasks.tick()
    assert tasks.task_ids == set()
    locked.clear()
    tasks.tick()
    assert tasks.task_ids == {4}


class _Partitions:
    def partitions(self, tasks: Any) -> list[tuple[str, int]]:
        return sorted(("src", t.partition) for t in tasks)


def _membership(calls: dict[str, list[Any]], standbys: bool = True) -> StreamsMembership:
    def record(name: str) -> Any:
        return lambda parts: calls.setdefault(name, []).append(sorted(p.partition for p in parts))

    member = type("M", (), {"member_epoch": 3, "member_id": "m"})()
    consumer = type("C", (), {"incremental_unassign": lambda self, parts: None})()
    return StreamsMembership(
        member,  # type: ignore[arg-type]
        consumer,  # type: ignore[arg-type]
        _Partitions(),  # type: ignore[arg-type]
        name="t",
        on_assigned=record("assigned"),
        on_revoked=record("revoked"),
        on_lost=record("lost"),
        on_standby=record("standby") if standbys else None,
    )


def _result(active: set[int], standby: set[int], warmup: set[int]) -> HeartbeatResult:
    def ids(ps: set[int]) -> frozenset[TaskId]:
        return frozenset(TaskId("0", p) for p in ps)

    target = Tasks(ids(active), ids(standby), ids(warmup))
    return HeartbeatResult(3, target, Tasks(), Tasks(), False, (), 1000, False, None)


def test_an_assignment_hands_standbys_and_warmups_over_after_the_active_tasks() -> None:
    calls: dict[str, list[Any]] = {}
    membership = _membership(calls)
    membership._pending = _result({0}, {1}, {2})
    membership.maybe_rejoin()
    assert calls == {"assigned": [[0]], "standby": [[1, 2]]}
    # Reported as owned, each kind as given (Kafka's StreamsMembershipManager reports them).
    assert membership.owned == _result({0}, {1}, {2}).target
    # A standby made active: the active tasks first (the thread takes its stores over).
    membership._pending = _result({0, 1}, set(), {2})
    membership.maybe_rejoin()
    assert calls["assigned"][-1] == [1] and calls["standby"][-1] == [2]
    assert "revoked" not in calls


def test_a_change_of_standbys_alone_is_an_assignment_to_apply() -> None:
    owned = _result({0}, {1}, set()).target
    assert _membership({})._differs(_result({0}, {2}, set()).target, owned)
    assert not _membership({})._differs(owned, owned)
    # Without a standby runner only the active tasks count (the broker keeps offering them).
    assert not _membership({}, standbys=False)._differs(_result({0}, {2}, set()).target, owned)


def test_num_standby_replicas_is_for_the_streams_protocol() -> None:
    base = {"application.id": "a", "bootstrap.servers": "b:9092"}
    streams = {**base, "group.protocol": "streams"}
    assert (
        StreamsConfig.from_mapping({**streams, "num.standby.replicas": 2}).num_standby_replicas == 2
    )
    assert StreamsConfig.from_mapping(streams).num_standby_replicas is None  # group's own
    assert StreamsConfig.from_mapping({**base, "num.standby.replicas": 0}).num_standby_replicas == 0
    with pytest.raises(ValueError, match=r"num\.standby\.replicas=1 needs group\.protocol=streams"):
        StreamsConfig.from_mapping({**base, "num.standby.replicas": 1})
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        StreamsConfig.from_mapping({**streams, "num.standby.replicas": -1})


def test_a_standby_made_active_restores_from_its_replay_even_in_memory(tmp_path: Path) -> None:
    task = _Task(5, tmp_path, None)
    tp = TopicPartition("app-s-changelog", 5)
    task.stores["s"].put(b"k", b"v")
    task.changelog_offsets[tp] = 99  # where the standby's replay stood
    assert restore_start_offsets(task) == {"s": 99}  # type: ignore[arg-type]
    assert task.stores["s"].get(b"k") == b"v"  # not wiped
    # A new task of an in-memory store starts empty, from the beginning.
    fresh = _Task(6, tmp_path, None)
    fresh.stores["s"].put(b"k", b"v")
    assert restore_start_offsets(fresh) == {"s": None}  # type: ignore[arg-type]
    assert fresh.stores["s"].get(b"k") is None
