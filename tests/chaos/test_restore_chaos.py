"""Chaos around restoration, on the real broker, each bounded in time and ending in exact checks:

* a second instance joins while the first restores a large store: tasks move in the middle of
  their restoration, and at the end every key's value is exact (restored + counted), nothing
  lost, nothing counted twice;
* a global topic truncated (``delete_records``) under the global thread while processors read
  the global store: the store is rebuilt (KIP-406) and every read sees either the whole old
  contents or the whole new ones.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import apps as waiting

from streamstate import (
    StateRestoreListener,
    StateStoreMigratedError,
    StreamsRebalancingError,
    TopicPartition,
)
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.coordinator import MemberState
from streamstate.kafka_local import KafkaTestCluster

TIMEOUT = 120.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    waiting.wait_until(condition, what, TIMEOUT)


class HoldUntilRevoked(StateRestoreListener):
    """Holds the first batch of a restoration (the updater thread waits in the listener) until
    ``hold()`` turns false: the join of another member then lands in the middle of it. Records
    the partitions whose restoration was suspended."""

    def __init__(self) -> None:
        self.hold: Callable[[], bool] = lambda: False
        self.started = threading.Event()
        self.released = False
        self.suspended: list[int] = []

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        self.started.set()

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not self.released and self.hold() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.released = True  # once: later batches run freely

    def on_restore_suspended(
        self, tp: TopicPartition, store_name: str, total_restored: int
    ) -> None:
        self.suspended.append(tp.partition)


def test_a_member_joining_while_tasks_restore_loses_nothing(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app_id = f"chaos-join-{uuid.uuid4().hex[:8]}"
    # 15k changelog records per partition: more than one restore poll (10k records) holds, so
    # no partition can complete while the first batch is held.
    partitions, keys = 4, 20_000
    source = kafka.create_topic(partitions=partitions)
    changelog = kafka.create_topic(
        f"{app_id}-counts-changelog", partitions=partitions, config={"cleanup.policy": "compact"}
    )
    # The store's history, partitioned by key as the source is (murmur2 on both): each key is
    # written three times, the last value wins.
    restored = {b"key-%05d" % i: (i * 13) % 97 + 1 for i in range(keys)}
    for round_ in range(2):
        kafka.produce(changelog, [(k, b"%d" % (1000 + round_)) for k in restored])
    kafka.produce(changelog, [(k, b"%d" % v) for k, v in restored.items()])

    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        store.put(record.key, b"%d" % (int(store.get(record.key) or b"0") + 1))

    def new_app(directory: str, listener: StateRestoreListener | None = None) -> StreamsApp:
        app = StreamsApp(
            topology,
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": str(tmp_path / directory),
                "commit.interval.ms": 200,
                "session.timeout.ms": 6000,
            },
            restore_listener=listener,
        )
        apps.append(app)
        return app

    listener = HoldUntilRevoked()
    first = new_app("a", listener)
    # Held until the group takes partitions away from the first member (its revocation).
    listener.hold = lambda: first._threads[0].coordinator.state is MemberState.STABLE
    first.start()
    assert listener.started.wait(TIMEOUT)
    second = new_app("b")
    second.start()
    wait_until(lambda: bool(listener.suspended), "a task to move away mid-restore")

    def owned() -> list[set[int]]:
        return [
            {t for thread in app._threads for t in thread.active_tasks()} for app in (first, second)
        ]

    # The group settles (cooperative rebalancing takes more than one round): each instance
    # runs its share, every task restored. (Input only then: a commit racing a rebalance is
    # the stream thread's task-migration business, not this scenario's.)
    wait_until(
        lambda: (
            first.state is State.RUNNING
            and second.state is State.RUNNING
            and all(owned())
            and owned()[0] | owned()[1] == set(range(partitions))
            and not owned()[0] & owned()[1]
        ),
        "both instances to settle and finish restoring",
    )
    # Then input: every record must be counted once, over the restored values.
    inputs = [b"key-%05d" % ((i * 7) % keys) for i in range(6_000)]
    kafka.produce(source, [(k, b"x") for k in inputs])

    expected = dict(restored)
    for k in inputs:
        expected[k] += 1

    def merged() -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for app in (first, second):
            try:
                out.update({k: int(v) for k, v in app.store("counts").all()})
            except (StreamsRebalancingError, StateStoreMigratedError):
                return {}
        return out

    wait_until(
        lambda: (
            first.state is State.RUNNING and second.state is State.RUNNING and merged() == expected
        ),
        "both instances to hold exactly the restored values plus the new counts",
    )
    assert owned()[0] and owned()[1] and not owned()[0] & owned()[1]
    assert first.fatal_error is None and second.fatal_error is None


class SlowRebuild(StateRestoreListener):
    def __init__(self) -> None:
        self.armed = threading.Event()

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        if self.armed.is_set():
            time.sleep(0.1)


def test_a_global_topic_truncated_under_readers_is_seen_whole_old_or_whole_new(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, prices = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    old = {b"old-%04d" % i: b"1" for i in range(1_000)}
    kafka.produce(prices, list(old.items()))
    new_records = [(b"new-%04d" % i, b"2") for i in range(3_000)]
    new = dict(new_records[2_000:])  # what survives delete_records below
    reads: collections.Counter[str] = collections.Counter()
    app_box: list[StreamsApp] = []

    topology = Topology().add_global_store("prices", topic=prices)

    @topology.processor(sources=[source], stores=["prices"])
    def read(ctx: Any, record: Any) -> None:
        snapshot = dict(ctx.store("prices").all())
        rebuilding = app_box[0]._global is not None and app_box[0]._global.restoring
        kind = "old" if snapshot == old else "new" if snapshot == new else "other"
        reads[kind] += 1
        if rebuilding:
            reads["during-rebuild"] += 1

    listener = SlowRebuild()
    app = StreamsApp(
        topology,
        {
            "application.id": f"chaos-kip406-{uuid.uuid4().hex[:8]}",
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 200,
            # Small fetches, so the rebuild restores in many batches (slowed by the listener).
            "global.consumer.max.partition.fetch.bytes": 4096,
        },
        restore_listener=listener,
    )
    app_box.append(app)
    apps.append(app)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)

    stop = threading.Event()

    def feed() -> None:
        i = 0
        while not stop.is_set():
            kafka.produce(source, [(b"r%d" % i, b"x")])
            i += 1
            time.sleep(0.02)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        wait_until(lambda: reads["old"] > 5, "reads of the old contents")
        assert app._global is not None
        app._global._pause_fetching()
        time.sleep(0.5)
        kafka.produce(prices, new_records)
        assert kafka.delete_records(prices, 0, 1_000 + 2_000) == 3_000
        listener.armed.set()
        app._global._resume_fetching()
        wait_until(lambda: reads["new"] > 5, "reads of the rebuilt contents")
    finally:
        stop.set()
        feeder.join(10)
    assert reads["other"] == 0, reads
    assert reads["during-rebuild"] > 0, reads
    assert dict(app.store("prices").all()) == new
    assert app.fatal_error is None
