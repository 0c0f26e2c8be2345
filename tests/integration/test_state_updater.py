"""The state updater (KIP-869), task timeouts, corrupted tasks, state-directory locks and queries
during restoration, on the real broker. Expected contents are computed from what was produced."""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.apps import TIMEOUT, wait_until

from streamstate import (
    PersistentKeyValueStore,
    ProcessorStateError,
    StateRestoreListener,
    StreamsRebalancingError,
    TopicPartition,
    UnknownStateStoreError,
)
from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster


def counting_topology(source: str) -> Topology:
    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        store.put(record.key, b"%d" % (int(store.get(record.key) or b"0") + 1))

    return topology


def config(kafka: KafkaTestCluster, state_dir: Path, app_id: str, **more: Any) -> dict[str, Any]:
    return {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(state_dir),
        "commit.interval.ms": 200,
        "session.timeout.ms": 6000,
        **more,
    }


def counts_of(app: StreamsApp, partition: int | None = None) -> dict[bytes, int]:
    try:
        return {k: int(v) for k, v in app.store("counts", partition).all()}
    except StreamsRebalancingError:
        return {}


def changelog_topic(kafka: KafkaTestCluster, app_id: str, partitions: int) -> str:
    return kafka.create_topic(
        f"{app_id}-counts-changelog", partitions=partitions, config={"cleanup.policy": "compact"}
    )


class BlockPartitionOne(StateRestoreListener):
    """Holds the restoration of partition 1 (the updater thread waits in the listener) once
    partition 0 has finished restoring, until released."""

    def __init__(self) -> None:
        self.ended: set[int] = set()
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.batches: collections.Counter[int] = collections.Counter()

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.batches[tp.partition] += num_restored
        if tp.partition == 1 and 0 in self.ended and not self.release.is_set():
            self.blocked.set()
            assert self.release.wait(TIMEOUT)

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        self.ended.add(tp.partition)


def test_a_restored_task_processes_and_answers_while_another_task_still_restores(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app_id = f"updater-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=2)
    changelog = changelog_topic(kafka, app_id, 2)
    kafka.produce(changelog, [(b"small-%d" % i, b"1") for i in range(5)], partition=0)
    large = 30_000
    kafka.produce(changelog, [(b"large-%05d" % i, b"7") for i in range(large)], partition=1)
    listener = BlockPartitionOne()
    app = StreamsApp(
        counting_topology(source),
        config(kafka, tmp_path, app_id),
        restore_listener=listener,
    )
    apps.append(app)
    with pytest.raises(UnknownStateStoreError):
        app.store("no-such-store").get(b"k")  # in every state, CREATED included
    app.start()
    assert listener.blocked.wait(TIMEOUT), "partition 1 never restored past partition 0's end"

    # Partition 1 is still restoring; task 0 was handed over and processes new input.
    kafka.produce(source, [(b"small-1", b"x"), (b"fresh", b"x")], partition=0)
    wait_until(
        lambda: (
            counts_of(app, 0)
            == {b"small-%d" % i: 1 for i in range(5)}
            | {
                b"small-1": 2,
                b"fresh": 1,
            }
        ),
        "task 0 to process while task 1 restores",
    )
    assert app.state is State.RESTORING
    with pytest.raises(StreamsRebalancingError, match="partition 1 is being restored"):
        app.store("counts", partition=1).get(b"large-00001")
    with pytest.raises(StreamsRebalancingError):
        app.store("counts").get(b"small-1")  # every partition: one of them restores
    with pytest.raises(UnknownStateStoreError):
        app.store("no-such-store").get(b"k")

    listener.release.set()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    assert counts_of(app, 1) == {b"large-%05d" % i: 7 for i in range(large)}
    assert listener.batches[1] == large
    assert app.fatal_error is None


class PauseOnStart(StateRestoreListener):
    def __init__(self) -> None:
        self.app: StreamsApp | None = None

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        assert self.app is not None
        # Nothing will ever be fetched again: the restoration stalls.
        self.app._threads[0].updater._pause_fetching()


def test_a_restore_without_progress_fails_the_task_after_task_timeout_ms(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app_id = f"stall-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    changelog = changelog_topic(kafka, app_id, 1)
    kafka.produce(changelog, [(b"k%d" % i, b"1") for i in range(50_000)], partition=0)
    listener = PauseOnStart()
    app = StreamsApp(
        counting_topology(source),
        config(
            kafka,
            tmp_path,
            app_id,
            **{"task.timeout.ms": 3000, "restore.consumer.max.partition.fetch.bytes": 1024},
        ),
        restore_listener=listener,
    )
    listener.app = app
    apps.append(app)
    with caplog.at_level(logging.WARNING, logger="streamstate.app"):
        app.start()
        assert app.wait_for_state(State.ERROR, TIMEOUT)
    assert isinstance(app.fatal_error, ProcessorStateError)
    assert "task.timeout.ms (3000 ms)" in str(app.fatal_error)
    assert app.fatal_error.topic == changelog and app.fatal_error.partition == 0
    warnings = [r.getMessage() for r in caplog.records if "made no progress" in r.getMessage()]
    assert warnings and "retrying until task.timeout.ms" in warnings[0]


def recreate(kafka: KafkaTestCluster, topic: str, partitions: int) -> None:
    kafka.admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            kafka.create_topic(topic, partitions=partitions, config={"cleanup.policy": "compact"})
            return
        except Exception:  # still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_until_counted(
    apps: list[StreamsApp], kafka: KafkaTestCluster, cfg: dict[str, Any], source: str, want: Any
) -> StreamsApp:
    app = StreamsApp(counting_topology(source), cfg)
    apps.append(app)
    app.start()
    wait_until(lambda: counts_of(app) == want, "the counts")
    return app


def test_a_changelog_recreated_with_fewer_records_rebuilds_the_task_store(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app_id = f"recreated-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"old-%03d" % i, b"x") for i in range(300)])
    cfg = config(kafka, tmp_path, app_id)
    first = run_until_counted(apps, kafka, cfg, source, {b"old-%03d" % i: 1 for i in range(300)})
    assert first.close(30)
    # An application reset that kept the local state: the changelog starts over, shorter.
    changelog = f"{app_id}-counts-changelog"
    recreate(kafka, changelog, 1)
    kafka.produce(changelog, [(b"new-%02d" % i, b"5") for i in range(20)], partition=0)

    second = StreamsApp(counting_topology(source), cfg)
    apps.append(second)
    second.start()
    assert second.wait_for_state(State.RUNNING, TIMEOUT)
    assert counts_of(second) == {b"new-%02d" % i: 5 for i in range(20)}
    assert second.fatal_error is None


def test_a_corrupt_task_checkpoint_wipes_and_restores_the_task(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app_id = f"corrupt-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k%d" % (i % 40), b"x") for i in range(400)])
    cfg = config(kafka, tmp_path, app_id)
    want = {b"k%d" % i: 10 for i in range(40)}
    first = run_until_counted(apps, kafka, cfg, source, want)
    assert first.close(30)
    checkpoint = tmp_path / app_id / "0" / ".checkpoint"
    assert checkpoint.exists()
    checkpoint.write_text("0\n1\nnot a checkpoint\n")
    # A stray key the changelog never had: only a wipe removes it.
    with PersistentKeyValueStore("counts", tmp_path / app_id / "0" / "counts") as store:
        store.put(b"stray", b"99")

    second = StreamsApp(counting_topology(source), cfg)
    apps.append(second)
    second.start()
    assert second.wait_for_state(State.RUNNING, TIMEOUT)
    assert counts_of(second) == want
    assert second.fatal_error is None


def test_a_second_client_on_the_same_state_directory_is_refused_at_start(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app_id = f"twice-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    cfg = config(kafka, tmp_path, app_id)
    first = StreamsApp(counting_topology(source), cfg)
    apps.append(first)
    first.start()
    second = StreamsApp(counting_topology(source), cfg)
    with pytest.raises(
        ProcessorStateError, match="is in use by another streamstate client"
    ) as info:
        second.start()
    assert str(tmp_path / app_id) in str(info.value)
    assert second.state is State.CREATED
    assert first.wait_for_state(State.RUNNING, TIMEOUT)
    assert first.close(30)
    # Once the first has closed, the directory is free again.
    third = StreamsApp(counting_topology(source), cfg)
    apps.append(third)
    third.start()
    assert third.wait_for_state(State.RUNNING, TIMEOUT)


def test_a_task_whose_store_is_still_held_waits_for_it_instead_of_failing(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app_id = f"held-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k%d" % (i % 10), b"x") for i in range(100)])
    # As when the thread that ran the task before has not closed it yet.
    held = PersistentKeyValueStore("counts", tmp_path / app_id / "0" / "counts")
    app = StreamsApp(counting_topology(source), config(kafka, tmp_path, app_id))
    apps.append(app)
    with caplog.at_level(logging.WARNING, logger="streamstate.app"):
        app.start()
        wait_until(
            lambda: any(
                "could not open the stores of task 0" in r.getMessage() for r in caplog.records
            ),
            "the retry warning",
        )
    time.sleep(1.0)  # several retries
    assert app.state is State.RESTORING
    with pytest.raises(StreamsRebalancingError):
        app.store("counts", partition=0).get(b"k1")
    held.close()
    wait_until(lambda: counts_of(app) == {b"k%d" % i: 10 for i in range(10)}, "the counts")
    assert app.state is State.RUNNING
    assert app.fatal_error is None
