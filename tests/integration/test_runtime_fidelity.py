"""The stream thread against Kafka Streams 3.x/4.x on the real broker: back-pressure, murmur2
sinks, KIP-695 idling, what a commit carries, leaving the group, the exception handlers and the
metrics. Each expectation is computed from what the test produced."""

from __future__ import annotations

import base64
import struct
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import TIMEOUT, new_app, wait_until

from streamstate import StreamsError, StreamThreadExceptionResponse
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.key_metadata import murmur2
from streamstate.app.task import decode_partition_time
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import IntegerDeserializer


def committed(kafka: KafkaTestCluster, group: str, topic: str, partitions: int) -> list[Any]:
    probe = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        return list(
            probe.committed([KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=30)
        )
    finally:
        probe.close()


def read_all(kafka: KafkaTestCluster, topic: str, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < count and time.monotonic() < deadline:
            out.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
    finally:
        consumer.close()
    return out


# --- back-pressure ---------------------------------------------------------------------------


def test_a_slow_processor_holds_a_partition_whose_queue_is_full(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    n, limit = 30_000, 200
    kafka.produce(source, [(b"k", b"%d" % i) for i in range(n)])
    seen: list[int] = []
    largest = [0]
    holder: list[StreamsApp] = []
    topology = Topology()

    @topology.processor(sources=[source])
    def slow(ctx: Any, record: Any) -> None:
        seen.append(record.offset)
        if record.offset % 100 == 0:
            time.sleep(0.01)
            task = holder[0]._threads[0].tasks[0]
            largest[0] = max(largest[0], task.queue_size(task.partitions[0]))

    app = new_app(apps, kafka, topology, tmp_path, **{"buffered.records.per.partition": limit})
    holder.append(app)
    app.start()
    wait_until(lambda: len(seen) >= n, "every record processed")
    assert sorted(set(seen)) == list(range(n))
    # A held partition takes nothing more in bulk: its queue holds at most what the poll that
    # crossed the limit brought (5,000 records per consume call); while it is held, a poll
    # takes one record and a loop processes up to 1,000.
    assert largest[0] <= limit + 5_000, largest[0]


# --- sinks partition like the Java producer --------------------------------------------------


def test_java_murmur2_matches_kafkas_published_values() -> None:
    # Kafka's UtilsTest.testMurmur2 pairs.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_sink_records_land_on_the_partition_the_java_producer_picks(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=1), kafka.create_topic(partitions=8)
    keys = [b"user-%d" % i for i in range(200)]
    kafka.produce(source, [(k, b"v") for k in keys])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        ctx.send(sink, record.key, record.value)

    new_app(apps, kafka, topology, tmp_path).start()
    out = read_all(kafka, sink, len(keys))
    assert sorted(m.key() for m in out) == sorted(keys)
    wrong = [m.key() for m in out if m.partition() != (murmur2(m.key()) & 0x7FFFFFFF) % 8]
    assert wrong == []


# --- KIP-695 idling --------------------------------------------------------------------------


def test_preloaded_co_partitioned_sources_are_processed_in_timestamp_order(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    left, right = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    n = 1_000
    kafka.produce(left, [(b"k", b"L", 2 * i + 1) for i in range(n)])
    # The right partition in one-record batches of 1 kB: each small fetch brings one or two of
    # them, and many of the left's.
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "batch.size": 1_200, "linger.ms": 0}
    )
    for i in range(n):
        producer.produce(right, b"R" * 1_000, b"k", timestamp=2 * i + 2)
    assert producer.flush(30) == 0
    order: list[int] = []
    topology = Topology()

    @topology.processor(sources=[left, right])
    def record_order(ctx: Any, record: Any) -> None:
        order.append(record.timestamp)

    # Small fetches: the right partition arrives in many small pieces and runs dry while the
    # left one has plenty; max.task.idle.ms=0 must still wait for it (its lag is > 0).
    new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        **{"max.task.idle.ms": 0, "consumer.max.partition.fetch.bytes": 2048},
    ).start()
    wait_until(lambda: len(order) >= 2 * n, "every record processed")
    assert order == sorted(order)
    assert order == list(range(1, 2 * n + 1))


# --- what a commit carries -------------------------------------------------------------------


def test_trailing_dropped_records_leave_no_lag_behind(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    good = [(b"k", struct.pack(">i", i), 1_000 + i) for i in range(10)]
    bad = [(b"k", b"not an int", 2_000 + i) for i in range(5)]
    kafka.produce(source, good + bad)
    seen: list[int] = []
    topology = Topology()

    @topology.processor(sources=[source], value_deserializer=IntegerDeserializer())
    def keep(ctx: Any, record: Any) -> None:
        seen.append(record.value)

    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        **{"default.deserialization.exception.handler": "continue"},
    )
    app.start()
    group = app.config.application_id
    wait_until(lambda: len(seen) == 10, "the ten good records")
    wait_until(
        lambda: committed(kafka, group, source, 1)[0].offset == 15,
        "the commit past the five dropped records (the consumer's position)",
    )
    (c,) = committed(kafka, group, source, 1)
    # Partition time: the highest timestamp processed; dropped records never count.
    assert decode_partition_time(c.metadata) == 1_009
    assert app.metrics()["dropped-records-total"] == 5


def test_the_committed_partition_time_is_the_highest_processed_not_buffered(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    n = 4_000
    kafka.produce(source, [(b"k", b"v", 10_000 + i) for i in range(n)])
    reached, release = threading.Event(), threading.Event()
    topology = Topology()

    @topology.processor(sources=[source])
    def hold(ctx: Any, record: Any) -> None:
        if record.offset == 10:
            reached.set()
            release.wait(TIMEOUT)

    app = new_app(apps, kafka, topology, tmp_path, **{"commit.interval.ms": 600_000})
    app.start()
    assert reached.wait(TIMEOUT)
    closing = threading.Thread(target=app.close, args=(60,))
    closing.start()
    wait_until(lambda: app.state is State.PENDING_SHUTDOWN, "the close to begin")
    release.set()
    closing.join(TIMEOUT)
    assert app.state is State.NOT_RUNNING
    (c,) = committed(kafka, app.config.application_id, source, 1)
    # Records were buffered beyond the last one processed; the commit names the head record
    # and the time of the record just before it, the last processed.
    assert 10 < c.offset < n
    assert decode_partition_time(c.metadata) == 10_000 + c.offset - 1


def test_commit_metadata_written_by_kafka_3_restores_the_partition_time(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"v", 5)])
    topology = Topology()

    @topology.processor(sources=[source])
    def nothing(ctx: Any, record: Any) -> None:
        pass

    app = new_app(apps, kafka, topology, tmp_path)
    group = app.config.application_id
    # What Kafka Streams 3.x commits: version byte 2, the partition time, processor metadata.
    v2 = base64.b64encode(b"\x02" + struct.pack(">q", 77_000) + b"\x00\x00\x00\x00").decode()
    writer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        writer.commit(offsets=[KafkaTopicPartition(source, 0, 0, metadata=v2)], asynchronous=False)
    finally:
        writer.close()
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    task = app._threads[0].active_tasks()[0]
    assert task.group.partition_time(task.partitions[0]) == 77_000


# --- leaving the group -----------------------------------------------------------------------


def group_members(kafka: KafkaTestCluster, group: str) -> list[Any]:
    (future,) = kafka.admin.describe_consumer_groups([group]).values()
    return list(future.result(timeout=30).members)


@pytest.mark.parametrize("static", [False, True])
def test_close_leaves_the_group_unless_the_member_is_static(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], static: bool
) -> None:
    source = kafka.create_topic(partitions=2)
    topology = Topology()

    @topology.processor(sources=[source])
    def nothing(ctx: Any, record: Any) -> None:
        pass

    extra = {"group.instance.id": "member-a"} if static else {}
    # A session far longer than the test's wait: only a LeaveGroup removes the member in time.
    app = new_app(apps, kafka, topology, tmp_path, **{"session.timeout.ms": 120_000, **extra})
    group = app.config.application_id
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    assert len(group_members(kafka, group)) == 1
    assert app.close(30)
    if static:
        time.sleep(3)  # give a (wrongly sent) LeaveGroup time to land
        assert [m.group_instance_id for m in group_members(kafka, group)] == ["member-a"]
    else:
        wait_until(lambda: group_members(kafka, group) == [], "the member to leave", 30)


# --- exception handlers ----------------------------------------------------------------------


def test_the_processing_exception_handler_drops_and_counts_failed_records(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"boom" if i % 10 == 3 else b"ok") for i in range(100)])
    seen: list[int] = []
    topology = Topology()

    @topology.processor(sources=[source])
    def fragile(ctx: Any, record: Any) -> None:
        if record.value == b"boom":
            raise ValueError("boom")
        seen.append(record.offset)

    app = new_app(apps, kafka, topology, tmp_path, **{"processing.exception.handler": "continue"})
    app.start()
    wait_until(lambda: len(seen) == 90, "the 90 good records")
    wait_until(lambda: app.metrics()["dropped-records-total"] == 10, "ten drops counted")
    assert seen == [i for i in range(100) if i % 10 != 3]
    assert app.state is State.RUNNING


@pytest.mark.parametrize("handler", ["continue", "fail"])
def test_the_production_exception_handler_decides_on_a_refused_sink_record(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], handler: str
) -> None:
    source = kafka.create_topic(partitions=1)
    small = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k%d" % i, b"x" * (2_000 if i == 5 else 10)) for i in range(20)])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[small])
    def forward(ctx: Any, record: Any) -> None:
        ctx.send(small, record.key, record.value)

    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        # The producer refuses the one record over its limit (the broker would refuse the whole
        # batch holding it).
        **{"default.production.exception.handler": handler, "producer.message.max.bytes": 1500},
    )
    app.start()
    if handler == "fail":
        assert app.wait_for_state(State.ERROR, TIMEOUT)
        assert small in str(app.fatal_error)
        return
    wait_until(lambda: app.metrics()["dropped-records-total"] == 1, "the refused record")
    out = read_all(kafka, small, 19)
    assert sorted(m.key() for m in out) == sorted(b"k%d" % i for i in range(20) if i != 5)
    assert app.state is State.RUNNING


def test_replace_thread_keeps_the_client_running_after_a_processor_failure(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, [(b"k%d" % i, b"v") for i in range(200)])
    failed: list[int] = []
    seen: set[tuple[int, int]] = set()
    topology = Topology()

    @topology.processor(sources=[source])
    def fails_once(ctx: Any, record: Any) -> None:
        if not failed and record.offset == 20:
            failed.append(record.partition)
            raise RuntimeError("transient")
        seen.add((record.partition, record.offset))

    app = new_app(apps, kafka, topology, tmp_path)
    handled: list[BaseException] = []

    def replace(exc: BaseException) -> StreamThreadExceptionResponse:
        handled.append(exc)
        return StreamThreadExceptionResponse.REPLACE_THREAD

    app.set_uncaught_exception_handler(replace)
    states: list[State] = []
    app.set_state_listener(lambda new, old: states.append(new))
    app.start()
    expected = {(m.partition(), m.offset()) for m in read_all(kafka, source, 200)}
    wait_until(lambda: seen >= expected, "every record processed by the replacement")
    wait_until(lambda: app.state is State.RUNNING, "the client running again")
    assert len(handled) == 1 and "transient" in str(handled[0])
    assert app.threads_replaced == 1
    assert State.ERROR not in states and State.PENDING_ERROR not in states


# --- metrics ---------------------------------------------------------------------------------


def test_metrics_report_processing_commits_lag_and_restoration(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    n = 1_000
    kafka.produce(source, [(b"k%d" % (i % 50), b"v") for i in range(n)])
    topology = Topology().add_store("counts", persistent=False)

    @topology.processor(sources=[source], stores=["counts"])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        store.put(record.key, b"%d" % (int(store.get(record.key) or b"0") + 1))

    app = new_app(apps, kafka, topology, tmp_path)
    group = app.config.application_id
    app.start()
    wait_until(lambda: app.metrics()["process-total"] == n, "every record counted")
    wait_until(lambda: app.metrics()["commit-total"] > 0, "a commit")
    m = app.metrics()
    assert m["state"] == "RUNNING" and m["alive-stream-threads"] == 1
    assert m["process-rate"] > 0 and m["poll-records-avg"] > 0
    assert m["commit-latency-avg"] > 0 and m["dropped-records-total"] == 0
    wait_until(lambda: app.metrics()["records-lag"] == {source: {0: 0, 1: 0}}, "zero lag")
    assert app.close(30)

    # An in-memory store restores its whole changelog on every start.
    again = StreamsApp(topology, {**dict(app_config(app)), "application.id": group})
    apps.append(again)
    again.start()
    assert again.wait_for_state(State.RUNNING, TIMEOUT)
    m = again.metrics()
    assert m["restore-remaining-records-total"] == {"counts": 0}
    assert m["restore-rate"]["counts"] > 0


def app_config(app: StreamsApp) -> dict[str, Any]:
    return {
        "application.id": app.config.application_id,
        "bootstrap.servers": app.config.bootstrap_servers,
        "state.dir": str(app.config.state_dir),
        "commit.interval.ms": 200,
        "session.timeout.ms": 6000,
    }


def test_close_closes_every_kafka_client_of_the_app(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # A client left to the garbage collector keeps reconnecting, and logging, once its brokers
    # are gone (the tour printed librdkafka FAIL lines after "tour passed").
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"v")])
    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"])
    def keep(ctx: Any, record: Any) -> None:
        ctx.store("counts").put(record.key, record.value)

    app = new_app(apps, kafka, topology, tmp_path)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    thread = app._threads[0]
    assert app.close(30)
    for client in (thread.producer, thread.consumer):
        with pytest.raises(RuntimeError, match="closed"):
            client.poll(0)
    # The restore consumer may be the changelog fetch in Rust, which has no poll().
    with pytest.raises(RuntimeError, match="closed"):
        thread.updater.restore_consumer.assignment()


def _raise(exc: BaseException) -> StreamThreadExceptionResponse:
    raise RuntimeError("the handler itself fails")


@pytest.mark.parametrize(
    "handler",
    [
        lambda exc: StreamThreadExceptionResponse.SHUTDOWN_CLIENT,
        lambda exc: StreamThreadExceptionResponse.SHUTDOWN_APPLICATION,
        _raise,
        None,
    ],
    ids=["shutdown-client", "shutdown-application", "failing-handler", "no-handler"],
)
def test_every_other_answer_of_the_uncaught_exception_handler_closes_the_client_to_error(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    handler: Callable[[BaseException], StreamThreadExceptionResponse] | None,
) -> None:
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"boom")])
    topology = Topology()

    @topology.processor(sources=[source])
    def explode(ctx: Any, record: Any) -> None:
        raise RuntimeError("boom")

    app = new_app(apps, kafka, topology, tmp_path)
    app.set_uncaught_exception_handler(handler)
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    assert "boom" in str(app.fatal_error)
    assert app.threads_replaced == 0
    with pytest.raises(StreamsError, match="before start"):
        app.set_uncaught_exception_handler(None)


def test_a_processing_handler_callable_sees_the_failed_record_and_decides(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"skip"), (b"k", b"ok"), (b"k", b"fatal")])
    told: list[tuple[str | None, int | None, int | None, str]] = []
    topology = Topology()

    @topology.processor(sources=[source])
    def fragile(ctx: Any, record: Any) -> None:
        if record.value != b"ok":
            raise ValueError(record.value.decode())

    def decide(context: Any) -> str:
        told.append((context.topic, context.partition, context.offset, str(context.exception)))
        return "continue" if str(context.exception) == "skip" else "fail"

    app = new_app(apps, kafka, topology, tmp_path, **{"processing.exception.handler": decide})
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    assert told == [(source, 0, 0, "skip"), (source, 0, 2, "fatal")]
    error = app.fatal_error
    assert isinstance(error, StreamsError) and (error.topic, error.offset) == (source, 2)
