"""The streams runtime on the real broker: counts, failover, queries (KIP-216), global stores
(KIP-406), errors. Every expected state is computed from what the test produced."""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import TIMEOUT, wait_until

from streamstate import (
    InvalidStateStorePartitionError,
    StateStoreMigratedError,
    StateStoreNotAvailableError,
    StreamsError,
    StreamsNotStartedError,
    StreamsRebalancingError,
    UnknownStateStoreError,
)
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.coordinator import ConsumerCoordinator, MemberState
from streamstate.app.task import decode_partition_time
from streamstate.kafka_local import KafkaTestCluster


def counting_topology(source: str, sink: str | None = None) -> Topology:
    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"], sinks=[sink] if sink else [])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        if sink:
            ctx.send(sink, record.key, b"%d" % n)

    return topology


def local_counts(app: StreamsApp) -> dict[bytes, int]:
    try:
        return {k: int(v) for k, v in app.store("counts").all()}
    except (StreamsRebalancingError, StateStoreMigratedError):
        return {}


def new_app(
    apps: list[StreamsApp],
    kafka: KafkaTestCluster,
    topology: Topology,
    state_dir: Path,
    app_id: str,
    **config: Any,
) -> StreamsApp:
    app = StreamsApp(
        topology,
        {
            "application.id": app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(state_dir),
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            **config,
        },
    )
    apps.append(app)
    return app


def produce_keys(
    kafka: KafkaTestCluster, topic: str, n: int, keys: int, seed: int = 0
) -> collections.Counter[bytes]:
    records = [(b"key-%04d" % ((i * 31 + seed) % keys), b"v") for i in range(n)]
    kafka.produce(topic, records)
    return collections.Counter(k for k, _ in records)


def test_a_stateful_count_over_100k_records_ends_exactly_right_and_survives_a_restart(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=4)
    sink = kafka.create_topic(partitions=4)
    expected = produce_keys(kafka, source, 100_000, keys=1_000)
    app_id = f"count-{uuid.uuid4().hex[:8]}"
    app = new_app(apps, kafka, counting_topology(source, sink), tmp_path / "a", app_id)
    app.start()
    wait_until(lambda: sum(local_counts(app).values()) == 100_000, "100k records counted")
    assert local_counts(app) == expected
    assert app.store("counts").approximate_num_entries() == 1_000
    assert app.close(30)
    assert app.state is State.NOT_RUNNING

    # A new instance with an empty state directory restores every store from the changelogs,
    # and the committed offsets keep it from counting anything twice.
    more = produce_keys(kafka, source, 5_000, keys=1_000, seed=7)
    again = new_app(apps, kafka, counting_topology(source, sink), tmp_path / "b", app_id)
    restored: list[tuple[str, int]] = []
    again.set_state_listener(lambda new, old: restored.append((old.value, new.value)))
    again.start()
    wait_until(lambda: sum(local_counts(again).values()) == 105_000, "105k records counted")
    assert local_counts(again) == expected + more
    assert ("REBALANCING", "RESTORING") in restored
    consumer = kafka.consumer()
    consumer.subscribe([sink])
    last: dict[bytes, int] = {}
    deadline = time.monotonic() + 60
    while len(last) < 1_000 or sum(last.values()) < 105_000:
        assert time.monotonic() < deadline, "the sink did not receive every count"
        for m in consumer.consume(5000, 1.0):
            if m.error() is None:
                last[m.key()] = max(last.get(m.key(), 0), int(m.value()))
    assert last == dict(expected + more)


def test_two_instances_share_the_tasks_and_one_takes_over_when_the_other_stops(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=4)
    app_id = f"pair-{uuid.uuid4().hex[:8]}"
    a = new_app(apps, kafka, counting_topology(source), tmp_path / "a", app_id)
    b = new_app(apps, kafka, counting_topology(source), tmp_path / "b", app_id)
    a.start()
    assert a.wait_for_state(State.RUNNING, TIMEOUT)
    b.start()
    expected = produce_keys(kafka, source, 20_000, keys=400)

    def both() -> dict[bytes, int]:
        merged = collections.Counter(local_counts(a))
        merged.update(local_counts(b))
        return dict(merged)

    wait_until(
        lambda: a.state is State.RUNNING and b.state is State.RUNNING and both() == expected,
        "both instances running with every record counted once",
    )
    assert local_counts(a) and local_counts(b), "each instance should own some tasks"
    b_tasks = {p for t in b._threads for p in t.active_tasks()}
    assert b_tasks and b.close(30)

    # a restores b's tasks from their changelogs and answers for every key.
    wait_until(lambda: local_counts(a) == expected, "a to answer for every key")
    assert {p for t in a._threads for p in t.active_tasks()} == {0, 1, 2, 3}
    more = produce_keys(kafka, source, 4_000, keys=400, seed=3)
    wait_until(lambda: local_counts(a) == expected + more, "a to count the new records")
    partition = sorted(b_tasks)[0]
    assert a.store("counts", partition=partition).approximate_num_entries() > 0


def test_queries_raise_the_kip216_error_for_each_state(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    app = new_app(
        apps, kafka, counting_topology(source), tmp_path / "a", f"iq-{uuid.uuid4().hex[:8]}"
    )
    counts = app.store("counts")  # obtained before start: checked again on every call
    with pytest.raises(StreamsNotStartedError):
        counts.get(b"k")
    seen: dict[str, type[Exception] | None] = {}

    def on_change(new: State, old: State) -> None:
        try:
            counts.approximate_num_entries()
            seen[new.value] = None
        except Exception as exc:
            seen.setdefault(new.value, type(exc))

    app.set_state_listener(on_change)
    expected = produce_keys(kafka, source, 1_000, keys=10)
    app.start()
    wait_until(lambda: local_counts(app) == expected, "the counts")
    assert seen["REBALANCING"] is StreamsRebalancingError
    assert seen["RESTORING"] is StreamsRebalancingError
    assert counts.get(b"key-0001") == b"%d" % expected[b"key-0001"]
    with pytest.raises(UnknownStateStoreError):
        app.store("no-such-store").get(b"k")
    with pytest.raises(InvalidStateStorePartitionError) as info:
        app.store("counts", partition=7).get(b"k")
    assert info.value.partition == 7
    assert app.close(30)
    assert seen["PENDING_SHUTDOWN"] is StateStoreNotAvailableError
    with pytest.raises(StateStoreNotAvailableError):
        counts.get(b"key-0001")


def test_a_store_whose_task_moved_away_raises_migrated(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    app_id = f"moved-{uuid.uuid4().hex[:8]}"
    a = new_app(apps, kafka, counting_topology(source), tmp_path / "a", app_id)
    b = new_app(apps, kafka, counting_topology(source), tmp_path / "b", app_id)
    expected = produce_keys(kafka, source, 500, keys=5)
    a.start()
    wait_until(lambda: local_counts(a) == expected, "a to count")
    b.start()
    assert b.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: a.state is State.RUNNING, "a to settle")
    owner, other = (a, b) if any(t.active_tasks() for t in a._threads) else (b, a)
    wait_until(lambda: local_counts(owner) == expected, "the owner to answer")
    with pytest.raises(StateStoreMigratedError):
        other.store("counts").get(b"key-0001")


def test_a_failing_processor_moves_the_client_to_error(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"])
    def explode(ctx: Any, record: Any) -> None:
        if record.value == b"boom":
            raise RuntimeError("cannot handle boom")
        ctx.store("counts").put(record.key, record.value)

    kafka.produce(source, [(b"a", b"fine"), (b"b", b"boom")])
    app = new_app(apps, kafka, topology, tmp_path, f"err-{uuid.uuid4().hex[:8]}")
    states: list[str] = []
    app.set_state_listener(lambda new, old: states.append(new.value))
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    assert states[-2:] == ["PENDING_ERROR", "ERROR"]
    error = app.fatal_error
    assert isinstance(error, StreamsError)
    assert (error.topic, error.partition, error.offset) == (source, 0, 1)
    assert "cannot handle boom" in str(error)
    with pytest.raises(StateStoreNotAvailableError):
        app.store("counts").get(b"a")
    assert app.close(10)
    assert app.state is State.ERROR


# --- global stores (KIP-406) ------------------------------------------------------------------


def global_topology(source: str, global_topic: str) -> Topology:
    topology = Topology().add_store("enriched").add_global_store("prices", topic=global_topic)

    @topology.processor(sources=[source], stores=["enriched", "prices"])
    def enrich(ctx: Any, record: Any) -> None:
        price = ctx.store("prices").get(record.key) or b"?"
        ctx.store("enriched").put(record.key, price)

    return topology


def test_a_global_store_bootstraps_before_running_and_is_joined(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, prices = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    kafka.produce(prices, [(b"p%d" % i, b"%d" % (i * 10)) for i in range(50)])
    kafka.produce(prices, [(b"p3", None)])
    kafka.produce(source, [(b"p%d" % i, b"order") for i in range(5)])
    app = new_app(
        apps, kafka, global_topology(source, prices), tmp_path, f"g-{uuid.uuid4().hex[:8]}"
    )
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    assert app._global is not None and app._global.bootstrapped.is_set()
    assert app.store("prices").approximate_num_entries() == 49
    wait_until(lambda: len(list(app.store("enriched").all())) == 5, "5 orders enriched")
    assert dict(app.store("enriched").all()) == {
        b"p0": b"0",
        b"p1": b"10",
        b"p2": b"20",
        b"p3": b"?",
        b"p4": b"40",
    }


@pytest.mark.parametrize("checkpointed", [False, True], ids=["empty-topic", "at-checkpoint"])
def test_a_global_store_follows_its_topic_when_the_bootstrap_had_nothing_to_restore(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], checkpointed: bool
) -> None:
    # Nothing to restore (an empty topic, or a checkpoint at its end) completes a partition
    # before the bootstrap assigns it; records produced later must still reach the store.
    source, prices = kafka.create_topic(partitions=1), kafka.create_topic(partitions=2)
    app_id = f"gfollow-{uuid.uuid4().hex[:8]}"
    if checkpointed:
        kafka.produce(prices, [(b"p0", b"0")], partition=0)
        first = new_app(apps, kafka, global_topology(source, prices), tmp_path, app_id)
        first.start()
        assert first.wait_for_state(State.RUNNING, TIMEOUT)
        assert first.close(30)
    app = new_app(apps, kafka, global_topology(source, prices), tmp_path, app_id)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    kafka.produce(prices, [(b"p1", b"10")], partition=0)
    kafka.produce(prices, [(b"p2", b"20")], partition=1)
    wait_until(
        lambda: app.store("prices").get(b"p1") == b"10" and app.store("prices").get(b"p2") == b"20",
        "the records produced after the bootstrap reached the global store",
    )


def test_a_global_store_rebuilds_itself_on_an_invalid_offset_while_running(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, prices = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    kafka.produce(prices, [(b"old-%d" % i, b"1") for i in range(50)])
    app = new_app(
        apps, kafka, global_topology(source, prices), tmp_path, f"kip406-{uuid.uuid4().hex[:8]}"
    )
    transitions: list[tuple[str, str]] = []
    during: list[object] = []
    rebuilt = threading.Event()
    armed = threading.Event()  # set once the records were deleted under the global thread

    def on_change(new: State, old: State) -> None:
        transitions.append((old.value, new.value))
        if new is State.RESTORING and armed.is_set():
            try:
                during.append(app.store("prices").get(b"old-1"))
            except Exception as exc:
                during.append(type(exc))
        if old is State.RESTORING and new is State.RUNNING and during:
            rebuilt.set()

    app.set_state_listener(on_change)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    assert app.store("prices").approximate_num_entries() == 50
    assert app._global is not None
    app._global._pause_fetching()
    time.sleep(0.5)
    kafka.produce(prices, [(b"new-%d" % i, b"2") for i in range(100)])
    low = kafka.delete_records(prices, 0, 100)  # the thread still stands at offset 50
    assert low == 100
    with caplog.at_level(logging.WARNING, logger="streamstate.app"):
        armed.set()
        app._global._resume_fetching()
        assert rebuilt.wait(TIMEOUT), transitions
    # The rebuild goes into a fresh store: meanwhile queries answer from the old contents.
    assert during == [b"1"]
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    assert dict(app.store("prices").all()) == {b"new-%d" % i: b"2" for i in range(50, 100)}
    warning = next(r.getMessage() for r in caplog.records if "KIP-406" in r.getMessage())
    assert f"topic {prices!r} partition 0" in warning and "offset 50" in warning
    assert app.fatal_error is None


def test_a_global_store_whose_checkpoint_fell_out_of_the_log_is_rebuilt_on_start(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, prices = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    kafka.produce(prices, [(b"a", b"1"), (b"b", b"2")])
    app_id = f"kip406b-{uuid.uuid4().hex[:8]}"
    first = new_app(apps, kafka, global_topology(source, prices), tmp_path, app_id)
    first.start()
    assert first.wait_for_state(State.RUNNING, TIMEOUT)
    assert first.close(30)
    kafka.produce(prices, [(b"c", b"3"), (b"d", b"4"), (b"e", b"5")])
    kafka.delete_records(prices, 0, 3)  # the checkpoint says 1: offset 2 is gone

    second = new_app(apps, kafka, global_topology(source, prices), tmp_path, app_id)
    second.start()
    assert second.wait_for_state(State.RUNNING, TIMEOUT)
    assert dict(second.store("prices").all()) == {b"d": b"4", b"e": b"5"}


def test_commits_carry_the_partition_time_and_a_new_instance_restores_it(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    kafka.produce(
        source, [(b"a", b"1", 5_000), (b"b", b"2", 9_000), (b"c", b"3", 7_000)], partition=1
    )
    kafka.produce(source, [(b"d", b"4", 3_000)], partition=0)
    app_id = f"ptime-{uuid.uuid4().hex[:8]}"
    app = new_app(apps, kafka, counting_topology(source), tmp_path / "a", app_id)
    app.start()
    wait_until(lambda: sum(local_counts(app).values()) == 4, "4 records counted")
    assert app.close(30)
    probe = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": app_id})
    try:
        committed = probe.committed(
            [KafkaTopicPartition(source, 0), KafkaTopicPartition(source, 1)], timeout=30
        )
    finally:
        probe.close()
    assert [(c.offset, decode_partition_time(c.metadata)) for c in committed] == [
        (1, 3_000),
        (3, 9_000),
    ]

    again = new_app(apps, kafka, counting_topology(source), tmp_path / "b", app_id)
    again.start()
    assert again.wait_for_state(State.RUNNING, TIMEOUT)
    task = again._threads[0].active_tasks()[1]
    assert task.group.partition_time(task.partitions[0]) == 9_000


def test_the_coordinator_follows_join_rejoin_and_leave(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(partitions=2)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"coord-{uuid.uuid4().hex[:8]}",
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    events: list[tuple[str, list[int]]] = []
    coordinator = ConsumerCoordinator(
        consumer,
        [topic],
        on_assigned=lambda ps: events.append(("assigned", sorted(p.partition for p in ps))),
        on_revoked=lambda ps: events.append(("revoked", sorted(p.partition for p in ps))),
        on_lost=lambda ps: events.append(("lost", sorted(p.partition for p in ps))),
    )
    try:
        assert coordinator.state is MemberState.UNJOINED
        coordinator.subscribe()
        assert coordinator.state is MemberState.REBALANCING
        deadline = time.monotonic() + TIMEOUT
        while coordinator.state is not MemberState.STABLE:
            assert time.monotonic() < deadline
            consumer.poll(0.2)
        assert coordinator.generation == 1
        assert coordinator.member_id
        assert coordinator.assignment == {(topic, 0), (topic, 1)}
        assert events == [("assigned", [0, 1])]
        coordinator.request_rejoin()
        coordinator.maybe_rejoin()
        deadline = time.monotonic() + TIMEOUT
        while coordinator.generation < 2:
            assert time.monotonic() < deadline
            consumer.poll(0.2)
        assert coordinator.state is MemberState.STABLE
        assert ("revoked", [0, 1]) in events and events[-1] == ("assigned", [0, 1])
        coordinator.leave()
        assert coordinator.state is MemberState.UNJOINED
    finally:
        consumer.close()


def test_two_stream_threads_split_the_tasks_and_count_exactly(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=4)
    expected = produce_keys(kafka, source, 8_000, keys=200)
    app = new_app(
        apps,
        kafka,
        counting_topology(source),
        tmp_path,
        f"threads-{uuid.uuid4().hex[:8]}",
        **{"num.stream.threads": 2},
    )
    app.start()
    # The first thread to join may take every task and count everything before the second one
    # joins: the split comes with the rebalance the second thread's join triggers (and the
    # moved tasks' stores restore before they can be queried again).
    wait_until(
        lambda: all(t.active_tasks() for t in app._threads) and local_counts(app) == expected,
        "both threads to own tasks and the counts to be complete",
    )
    owned = [set(t.active_tasks()) for t in app._threads]
    assert len(owned) == 2 and all(owned), owned
    assert owned[0] | owned[1] == {0, 1, 2, 3} and not owned[0] & owned[1]


def test_co_partitioned_sources_are_processed_in_timestamp_order_with_max_task_idle(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    left, right = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    order: list[tuple[str, int]] = []
    topology = Topology()

    @topology.processor(sources=[left, right])
    def record_order(ctx: Any, record: Any) -> None:
        order.append(("L" if record.topic == left else "R", record.timestamp))

    kafka.produce(left, [(b"k", b"1", 10), (b"k", b"3", 30), (b"k", b"5", 50)])
    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        f"idle-{uuid.uuid4().hex[:8]}",
        **{"max.task.idle.ms": 3000},
    )
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    time.sleep(1.0)
    assert order == [], "records were processed while the other partition was empty and idle"
    kafka.produce(right, [(b"k", b"2", 20), (b"k", b"4", 40)])
    wait_until(lambda: len(order) == 5, "all five records")
    assert order == [("L", 10), ("R", 20), ("L", 30), ("R", 40), ("L", 50)]
