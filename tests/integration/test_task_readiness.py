"""A task is RUNNING only once its stores are restored, and queries answer from RUNNING tasks.

Kafka's rule, on the real 4.4 broker (``group.protocol="streams"``): what the app reports (its
``state`` and each active task's ``restoring``) and what a query answers come from one flag,
set before a new task can be seen. Two instances of a count over 4 partitions; one leaves and
the other takes its two tasks, which must restore their changelogs. Two hooks hold the taking
instance at the two edges of that restoration, deterministically (no sleep, no race):

* the read of the new tasks' committed offsets (the round trip right after a task is created):
  the task must already say "restoring", the client must not be ``RUNNING``, and a query of its
  partition must raise ``StreamsRebalancingError``. Before the fix the task was published
  "not restoring" with an empty store, the client stayed ``RUNNING`` and the query answered
  nothing for a partition that holds 5,000 counts (a clean-clone CI run saw the other half of
  that window: RUNNING and not restoring, then ``StreamsRebalancingError``);
* the restore listener's ``on_restore_end`` (the stores are complete, not yet handed back):
  still "restoring" and the query still raises.

Once released, the first query after the client reports ``RUNNING`` with no task restoring
answers every count, without a retry.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import wait_until
from tests.standby_support import active_tasks, count_topology, wait_input_committed

from streamstate import State, StreamsApp
from streamstate.errors import StreamsRebalancingError
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

KEYS = 10_000
TIMEOUT = 120.0


class _HoldRestoreEnd(StateRestoreListener):
    """Holds the state updater in ``on_restore_end`` of ``partitions`` until released."""

    def __init__(self) -> None:
        self.partitions: set[int] = set()
        self.at = -1  # the partition held
        self.reached = threading.Event()
        self.release = threading.Event()

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        if tp.partition in self.partitions and total_restored > 0 and not self.reached.is_set():
            self.at = tp.partition
            self.reached.set()
            self.release.wait(TIMEOUT)


def _status(app: StreamsApp, partition: int) -> tuple[State, bool]:
    """The client's state and whether the active task of ``partition`` says it restores."""
    tasks = {t.partition: t for t in active_tasks(app).values()}
    return app.state, tasks[partition].restoring


def test_a_task_taken_over_is_restoring_until_its_store_answers(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    config: dict[str, Any] = {
        "application.id": f"ready-{uuid.uuid4().hex[:8]}",
        "bootstrap.servers": kafka.bootstrap_servers,
        "commit.interval.ms": 200,
        "group.protocol": "streams",
    }
    held = _HoldRestoreEnd()
    taker = StreamsApp(
        count_topology(source, sink),
        {**config, "state.dir": str(tmp_path / "taker")},
        restore_listener=held,
    )
    leaver = StreamsApp(count_topology(source, sink), {**config, "state.dir": str(tmp_path / "b")})
    apps.extend([taker, leaver])
    taker.start()
    wait_until(lambda: len(active_tasks(taker)) == 4, "the first instance's four tasks", TIMEOUT)
    leaver.start()
    wait_until(
        lambda: len(active_tasks(taker)) == 2 and len(active_tasks(leaver)) == 2,
        "the tasks split two and two",
        TIMEOUT,
    )
    kafka.produce(source, [(f"key-{i:05d}".encode(), b"x") for i in range(KEYS)])
    membership = wait_input_committed(taker, source, 4, KEYS, timeout=TIMEOUT)
    moved = sorted(t.partition for t in active_tasks(leaver).values())
    held.partitions = set(moved)

    # Hook 1: the taker's read of the moved tasks' committed offsets waits for the test.
    reached, release = threading.Event(), threading.Event()
    committed = membership.committed

    def hooked(partitions: list[KafkaTopicPartition], timeout: float = 30.0) -> Any:
        if {p.partition for p in partitions if p.topic == source} & set(moved):
            reached.set()
            release.wait(TIMEOUT)
        return committed(partitions, timeout)

    membership.committed = hooked  # type: ignore[method-assign]
    try:
        leaver.close()
        assert reached.wait(TIMEOUT), "the taker never created the moved tasks"
        created = [p for p in moved if p in {t.partition for t in active_tasks(taker).values()}]
        assert created, "the hook held the thread before it created a moved task"
        for partition in created:
            state, restoring = _status(taker, partition)
            assert restoring, f"task of partition {partition} shown before it restores"
            assert state is not State.RUNNING
            with pytest.raises(StreamsRebalancingError):
                dict(taker.store("counts", partition).all())
    finally:
        release.set()

    # Hook 2: the stores are restored, the updater has not handed the task back yet.
    assert held.reached.wait(TIMEOUT), "no moved task restored anything"
    try:
        state, restoring = _status(taker, held.at)
        assert restoring, "a task restored but not handed back shown as running"
        assert state is not State.RUNNING
        with pytest.raises(StreamsRebalancingError):
            dict(taker.store("counts", held.at).all())
    finally:
        held.release.set()

    wait_until(
        lambda: (
            taker.state is State.RUNNING
            and len(active_tasks(taker)) == 4
            and not any(t.restoring for t in active_tasks(taker).values())
        ),
        "the taker RUNNING every task",
        TIMEOUT,
    )
    # The status says every store answers: the first query of each does, with every count.
    counts: dict[str, int] = {}
    for partition in range(4):
        counts.update(dict(taker.store("counts", partition).all()))
    assert counts == {f"key-{i:05d}": 1 for i in range(KEYS)}
