"""``app.metadata_for_local_threads()`` (Kafka's ``metadataForLocalThreads``) on the real broker.

A count over 4 partitions fed a known number of records per partition (3, 5, 7, 9): once
everything is processed and committed, each task reports exactly the offsets the test
produced and the group committed (committed = records per partition, the highest polled = one
less), its idling start, and each thread its clients' ids; under the classic protocol with two
stream threads, and under the streams protocol with two instances (one of two threads) and a
standby of every task on the other instance. Read from another thread the whole time.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import wait_until
from tests.integration.test_streams_app import new_app
from tests.standby_support import count_topology

from streamstate import (
    Serdes,
    State,
    StreamsApp,
    TaskId,
    TaskMetadata,
    ThreadMetadata,
)
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition

STRING = Serdes.String()
LONG = Serdes.Long()
PER_PARTITION = {0: 3, 1: 5, 2: 7, 3: 9}


def _produce(kafka: KafkaTestCluster, source: str) -> None:
    for partition, n in PER_PARTITION.items():
        kafka.produce(
            source, [(f"k{partition}-{i}".encode(), b"x") for i in range(n)], partition=partition
        )


def _expected_active(source: str, partition: int) -> tuple[TaskId, frozenset[TopicPartition]]:
    return TaskId(0, partition), frozenset({TopicPartition(source, partition)})


def _group_committed(kafka: KafkaTestCluster, app_id: str, source: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": app_id})
    try:
        tps = [KafkaTopicPartition(source, p) for p in PER_PARTITION]
        return {c.partition: c.offset for c in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


def _settled(apps: list[StreamsApp], source: str) -> bool:
    """Every task has committed every record of its partition."""
    tasks = [t for app in apps for th in app.metadata_for_local_threads() for t in th.active_tasks]
    committed = {tp.partition: o for t in tasks for tp, o in t.committed_offsets.items()}
    return len(tasks) == 4 and committed == PER_PARTITION


class _Reader:
    """Calls ``metadata_for_local_threads`` in a loop from its own thread, keeping failures."""

    def __init__(self, apps: list[StreamsApp]) -> None:
        self.errors: list[BaseException] = []
        self.calls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(apps,), daemon=True)
        self._thread.start()

    def _run(self, apps: list[StreamsApp]) -> None:
        while not self._stop.is_set():
            for app in apps:
                try:
                    for thread in app.metadata_for_local_threads():
                        hash(thread)
                        repr(thread)
                    self.calls += 1
                except BaseException as exc:
                    self.errors.append(exc)
            time.sleep(0.001)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _check_active_task(task: TaskMetadata, source: str, started_ms: int) -> None:
    partition = next(iter(task.topic_partitions)).partition
    assert (task.task_id, task.topic_partitions) == _expected_active(source, partition)
    tp = TopicPartition(source, partition)
    assert task.committed_offsets == {tp: PER_PARTITION[partition]}
    assert task.end_offsets == {tp: PER_PARTITION[partition] - 1}
    # Caught up with nothing buffered: not processable since some moment of this test.
    idle = task.time_current_idling_started
    assert idle is not None
    assert started_ms <= idle <= int(time.time() * 1000)


def test_classic_two_threads_report_their_tasks_offsets_and_clients(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"tm-classic-{uuid.uuid4().hex[:8]}"
    app = new_app(
        apps,
        kafka,
        count_topology(source, sink),
        tmp_path,
        app_id,
        **{"num.stream.threads": 2, "client.id": "tm-client"},
    )
    assert app.metadata_for_local_threads() == set()  # no thread before start()
    started_ms = int(time.time() * 1000)
    reader = _Reader([app])
    app.start()

    def placed() -> bool:
        # Both threads hold their final tasks before any record: a task that moved after
        # committing would start over at -1 (a new task, as in Kafka).
        threads = app.metadata_for_local_threads()
        return (
            app.state is State.RUNNING
            and len(threads) == 2
            and all(len(t.active_tasks) == 2 and t.thread_state == "RUNNING" for t in threads)
        )

    wait_until(placed, "two tasks on each thread")
    _produce(kafka, source)
    wait_until(lambda: _settled([app], source), "every record committed")
    assert placed()
    reader.stop()
    assert not reader.errors, reader.errors
    assert reader.calls > 0

    threads = app.metadata_for_local_threads()
    assert {t.thread_name for t in threads} == {
        "tm-client-StreamThread-1",
        "tm-client-StreamThread-2",
    }
    for thread in threads:
        name = thread.thread_name
        assert thread.thread_state == "RUNNING"
        assert thread.main_consumer_client_id == f"{name}-consumer"
        assert thread.restore_consumer_client_id == f"{name}-restore-consumer"
        assert thread.producer_client_ids == {f"{name}-producer"}
        assert thread.admin_client_id == "tm-client-admin"
        assert thread.standby_tasks == frozenset()
        for task in thread.active_tasks:
            _check_active_task(task, source, started_ms)
    # Both threads run tasks, and the four tasks are all there.
    assert all(t.active_tasks for t in threads)
    ids = sorted(task.task_id for t in threads for task in t.active_tasks)
    assert ids == [TaskId(0, p) for p in range(4)]
    # What the tasks report is what the group committed on the broker.
    assert _group_committed(kafka, app_id, source) == PER_PARTITION
    # Value objects: equal snapshots compare and hash equal; repr names the fields.
    again = app.metadata_for_local_threads()
    assert again == threads and {hash(t) for t in again} == {hash(t) for t in threads}
    one = next(iter(threads))
    assert isinstance(one, ThreadMetadata)
    assert repr(one).startswith(f"ThreadMetadata(thread_name={one.thread_name!r}")
    assert "TaskMetadata(task_id=0_" in repr(one)
    assert app.close(30)
    assert app.metadata_for_local_threads() == set()  # every thread DEAD


def test_streams_protocol_reports_active_and_standby_tasks_over_two_instances(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"tm-streams-{uuid.uuid4().hex[:8]}"
    base = {"group.protocol": "streams", "num.standby.replicas": 1}
    a = new_app(
        apps,
        kafka,
        count_topology(source, sink),
        tmp_path / "a",
        app_id,
        **base,
        **{"num.stream.threads": 2, "client.id": "tm-a"},
    )
    b = new_app(
        apps,
        kafka,
        count_topology(source, sink),
        tmp_path / "b",
        app_id,
        **base,
        **{"client.id": "tm-b"},
    )
    started_ms = int(time.time() * 1000)
    reader = _Reader([a, b])
    a.start()
    b.start()

    def active_ids(app: StreamsApp) -> set[TaskId]:
        return {t.task_id for th in app.metadata_for_local_threads() for t in th.active_tasks}

    def standby_ids(app: StreamsApp) -> set[TaskId]:
        return {t.task_id for th in app.metadata_for_local_threads() for t in th.standby_tasks}

    def split_with_standbys() -> bool:
        ids_a, ids_b = active_ids(a), active_ids(b)
        return (
            len(ids_a) + len(ids_b) == 4
            and bool(ids_a)
            and bool(ids_b)
            and standby_ids(a) == ids_b
            and standby_ids(b) == ids_a
            and a.state is State.RUNNING
            and b.state is State.RUNNING
        )

    wait_until(split_with_standbys, "tasks split, each standby on the other instance")
    _produce(kafka, source)
    wait_until(lambda: _settled([a, b], source), "every record committed")
    wait_until(split_with_standbys, "still split after processing")
    reader.stop()
    assert not reader.errors, reader.errors

    for app, client in ((a, "tm-a"), (b, "tm-b")):
        threads = app.metadata_for_local_threads()
        count = 2 if app is a else 1
        assert {t.thread_name for t in threads} == {
            f"{client}-StreamThread-{i + 1}" for i in range(count)
        }
        for thread in threads:
            assert thread.admin_client_id == f"{client}-admin"
            assert thread.main_consumer_client_id == f"{thread.thread_name}-consumer"
            for task in thread.active_tasks:
                _check_active_task(task, source, started_ms)
            for task in thread.standby_tasks:
                # A standby reports its input partitions only, as Kafka's StandbyTask.
                partition = task.task_id.partition
                assert task.topic_partitions == {TopicPartition(source, partition)}
                assert task.committed_offsets == {}
                assert task.end_offsets == {}
                assert task.time_current_idling_started is None
