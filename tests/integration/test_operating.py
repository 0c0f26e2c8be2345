"""Operating an app as a new user does (issue 25), on the real broker: metrics read from any
thread, sink records the broker refuses, a dead bootstrap address, and the restore listener of
partitions with nothing to restore. Each test failed before its fix."""

from __future__ import annotations

import gc
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.apps import TIMEOUT, app_behind_owned_consumer, new_app, wait_until

from streamstate import Processor, StreamsError, StreamThreadExceptionResponse
from streamstate.app import State, StreamsApp, Topology, streams_app
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.state import topic_restore
from streamstate.state.restorer import StateRestoreListener
from streamstate.state.stores import PersistentKeyValueStore

# --- metrics() from another thread -----------------------------------------------------------


def test_metrics_never_touch_the_stream_threads_consumer(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app, source, proxy = app_behind_owned_consumer(apps, kafka, tmp_path)
    # The lags the thread publishes once it has polled through the proxy: nothing left to read.
    wait_until(lambda: app.metrics()["records-lag"] == {source: {0: 0, 1: 0}}, "zero lag")

    # The stream thread parked inside consume(): metrics() from here returns all the same,
    # since it reads only what the thread published.
    proxy.park.set()
    assert proxy.parked.wait(TIMEOUT)
    try:
        done: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: done.append(app.metrics()))
        reader.start()
        reader.join(TIMEOUT)
        assert done, "metrics() did not return while the stream thread was in consume()"
        assert done[0]["records-lag"] == {source: {0: 0, 1: 0}}
        assert done[0]["process-total"] == 20
    finally:
        proxy.release.set()
    assert proxy.foreign_calls == []
    assert app.close(30)


# --- sink records the broker refuses ---------------------------------------------------------

HOUR_MS = 3_600_000


def _read(kafka: KafkaTestCluster, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    """The values of ``topic``'s committed records, once ``count`` are there (or the timeout)."""
    consumer = kafka.consumer(isolation_level="read_committed")
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.5):
            if message.error() is None:
                values.append(message.value())
    return values


def _refused_record_app(
    kafka: KafkaTestCluster,
    apps: list[StreamsApp],
    tmp: Path,
    *,
    guarantee: str,
    handler: str,
    name: str = "default.production.exception.handler",
) -> tuple[StreamsApp, str]:
    """An app that sends each of three input records to a sink whose broker refuses a
    timestamp a minute ahead: the second one an hour ahead. ``name`` is the handler's config
    name (Kafka 4's, or the deprecated ``default.`` form)."""
    source = kafka.create_topic()
    sink = kafka.create_topic(config={"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    kafka.produce(source, [(b"k", b"a", now), (b"k", b"bad", now), (b"k", b"c", now)])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        ahead = HOUR_MS if record.value == b"bad" else 0
        ctx.send(sink, record.key, record.value, timestamp=record.timestamp + ahead)

    app = new_app(
        apps,
        kafka,
        topology,
        tmp,
        **{"processing.guarantee": guarantee, name: handler},
    )
    return app, sink


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_continue_drops_only_the_refused_sink_record(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], guarantee: str
) -> None:
    app, sink = _refused_record_app(kafka, apps, tmp_path, guarantee=guarantee, handler="continue")
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: app.metrics()["dropped-records-total"] == 1, "the refused record dropped")
    assert _read(kafka, sink, 2) == [b"a", b"c"]
    wait_until(lambda: app.metrics()["commit-total"] > 0, "a commit")
    assert app.state is State.RUNNING
    (thread,) = app._threads
    assert thread.metrics.transactions_aborted == 0
    assert app.close(30)


def test_at_least_once_sends_again_alone_what_the_broker_refused_with_its_batch(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # A compacted topic refuses a record without a key (INVALID_RECORD), which no check before
    # the send can know of; librdkafka fails the whole produce batch with it.
    source = kafka.create_topic()
    sink = kafka.create_topic(config={"cleanup.policy": "compact"})
    kafka.produce(source, [(b"a", b"1"), (b"-", b"2"), (b"c", b"3")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        ctx.send(sink, None if record.key == b"-" else record.key, record.value)

    app = new_app(apps, kafka, topology, tmp_path, **{"production.exception.handler": "continue"})
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: app.metrics()["dropped-records-total"] == 1, "the refused record dropped")
    assert _read(kafka, sink, 2) == [b"1", b"3"]
    wait_until(lambda: app.metrics()["commit-total"] > 0, "a commit")
    assert app.state is State.RUNNING
    assert app.close(30)


def test_fail_names_the_sink_topic_and_the_brokers_error(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app, sink = _refused_record_app(
        kafka,
        apps,
        tmp_path,
        guarantee="exactly_once_v2",
        handler="fail",
        name="production.exception.handler",
    )
    failures: list[BaseException] = []

    def shut_down(exc: BaseException) -> StreamThreadExceptionResponse:
        failures.append(exc)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    app.set_uncaught_exception_handler(shut_down)
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    (failure,) = failures
    assert sink in str(failure) and "INVALID_TIMESTAMP" in str(failure)
    assert "the processor failed" not in str(failure)
    assert _read(kafka, sink, 1, timeout=3) == []


def test_exactly_once_fail_on_a_refused_batch_names_it_not_the_next_send(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # A refusal no check before the send can know of (a null key on a compacted topic) leaves
    # the transaction abortable: a processor graph's next send then fails inside the processor
    # (_STATE). The error the app reports is the broker's refusal, naming the topic.
    source = kafka.create_topic()
    sink = kafka.create_topic(config={"cleanup.policy": "compact"})
    producer: list[Any] = []

    class Forward(Processor):
        def init(self, context: Any) -> None:
            self.context = context

        def process(self, record: Any) -> None:
            bad = record.key == b"-"
            self.context.forward(record.with_key(None) if bad else record)
            if bad:
                # The premise: the broker has refused the batch before the next record is sent.
                producer[0].flush(30)

    topology = Topology()
    topology.add_source("in", source)
    topology.add_processor("forward", Forward, "in")
    topology.add_sink("out", sink, "forward")
    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        **{"processing.guarantee": "exactly_once_v2", "production.exception.handler": "fail"},
    )
    failures: list[BaseException] = []

    def shut_down(exc: BaseException) -> StreamThreadExceptionResponse:
        failures.append(exc)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    app.set_uncaught_exception_handler(shut_down)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    producer.append(app._threads[0].producer)
    kafka.produce(source, [(b"-" if i == 5 else b"k%d" % i, b"v") for i in range(20)])
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    (failure,) = failures
    assert sink in str(failure) and "INVALID_RECORD" in str(failure), failure
    assert "the processor failed" not in str(failure)


# --- a dead bootstrap address ----------------------------------------------------------------


def _dead_address() -> str:
    """An address where nothing listens: a port bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_start_against_a_dead_address_is_one_clear_error(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams_app, "METADATA_TIMEOUT_S", 3.0)
    servers = _dead_address()
    topology = Topology()

    @topology.processor(sources=["clicks"])
    def ignore(ctx: Any, record: Any) -> None:
        pass

    app = StreamsApp(
        topology,
        {
            "application.id": "dead-address",
            "bootstrap.servers": servers,
            "state.dir": str(tmp_path),
        },
    )
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="streamstate.librdkafka"):
        with pytest.raises(StreamsError, match=f"bootstrap.servers={servers}"):
            app.start()
    assert time.monotonic() - started < 3.0 + 10.0
    # librdkafka printed nothing itself ("%3|<time>|FAIL|..." lines); its lines reached
    # logging, each facility's repeats at DEBUG.
    assert "Connection refused" not in capfd.readouterr().err
    refused = [r for r in caplog.records if "Connection refused" in r.getMessage()]
    assert refused, "librdkafka's lines did not reach logging"
    assert sum(r.levelno > logging.DEBUG for r in refused) == 1
    app.close(5)


def test_restore_topic_against_a_dead_address_is_one_clear_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topic_restore, "METADATA_TIMEOUT_S", 3.0)
    servers = _dead_address()
    started = time.monotonic()
    with pytest.raises(StreamsError, match=servers):
        topic_restore.restore_topic(servers, "changelog", tmp_path)
    assert time.monotonic() - started < 3.0 + 10.0
    assert "Connection refused" not in capfd.readouterr().err


# --- streamstate query on an app's state directory -------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamstate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )


def test_query_reads_a_stopped_apps_state_directory(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    placed = kafka.produce(source, [(b"k%d" % i, b"%d" % i) for i in range(10)])
    topology = Topology().add_store("totals")

    @topology.processor(sources=[source], stores=["totals"])
    def total(ctx: Any, record: Any) -> None:
        store = ctx.store("totals")
        store.put(record.key, b"%d" % (int(store.get(record.key) or b"0") + int(record.value)))

    app = new_app(apps, kafka, topology, tmp_path)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: app.metrics()["process-total"] == 10, "every record processed")
    assert app.close(30)

    app_dir = str(tmp_path / app.config.application_id)
    listed = _cli("query", "--state-dir", app_dir, "--store", "totals", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted((e["key"], e["value"]) for e in json.loads(listed.stdout)) == sorted(
        (f"k{i}", str(i)) for i in range(10)
    )
    partition_of_k3 = placed[3][0]
    one = _cli(
        "query", "--state-dir", app_dir, "--store", "totals", "--key", "k3",
        "--partition", str(partition_of_k3),
    )  # fmt: skip
    assert (one.returncode, one.stdout) == (0, "k3\t3\n")
    elsewhere = _cli(
        "query", "--state-dir", app_dir, "--store", "totals", "--key", "k3",
        "--partition", str(1 - partition_of_k3),
    )  # fmt: skip
    assert elsewhere.returncode == 1
    # state.dir itself (not the app's directory): one line saying which directory to give.
    parent = _cli("query", "--state-dir", str(tmp_path), "--store", "totals", "--all")
    assert parent.returncode == 1
    assert "state.dir/<application.id>" in parent.stderr
    assert len(parent.stderr.strip().splitlines()) == 1


def test_query_reads_a_graph_apps_task_directories(tmp_path: Path) -> None:
    # A processor graph's tasks are <subtopology>_<partition>: the store of sub-topology 1.
    for partition, key in ((0, b"a"), (1, b"b")):
        with PersistentKeyValueStore("counts", tmp_path / f"1_{partition}" / "counts") as store:
            store.put(key, b"%d" % partition)
    (tmp_path / "0_0").mkdir()  # a task of the other sub-topology, without the store
    listed = _cli("query", "--state-dir", str(tmp_path), "--store", "counts", "--all")
    assert (listed.returncode, listed.stdout) == (0, "a\t0\nb\t1\n")
    one = _cli(
        "query", "--state-dir", str(tmp_path), "--store", "counts", "--key", "b",
        "--partition", "1",
    )  # fmt: skip
    assert (one.returncode, one.stdout) == (0, "b\t1\n")


# --- the restore listener of partitions with nothing to restore -------------------------------


class _Heard(StateRestoreListener):
    """Every restore listener call, per changelog partition."""

    def __init__(self) -> None:
        self.calls: dict[int, list[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def _add(self, tp: TopicPartition, *call: Any) -> None:
        with self._lock:
            self.calls.setdefault(tp.partition, []).append(call)

    def on_restore_start(self, tp: TopicPartition, store: str, start: int, end: int) -> None:
        self._add(tp, "start", store, start, end)

    def on_batch_restored(self, tp: TopicPartition, store: str, end: int, count: int) -> None:
        self._add(tp, "batch", store, count)

    def on_restore_end(self, tp: TopicPartition, store: str, total: int) -> None:
        self._add(tp, "end", store, total)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_nothing_to_restore_is_heard_as_start_then_end_with_no_records(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], guarantee: str
) -> None:
    # Kafka's StoreChangelogReader announces every active changelog (onRestoreStart in
    # prepareChangelogs) and completes it (onRestoreEnd) even when nothing is to restore.
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, [(b"k%d" % i, b"v") for i in range(5)], partition=0)
    topology = Topology().add_store("seen")

    @topology.processor(sources=[source], stores=["seen"])
    def remember(ctx: Any, record: Any) -> None:
        ctx.store("seen").put(record.key, record.value)

    first = new_app(apps, kafka, topology, tmp_path, **{"processing.guarantee": guarantee})
    first.start()
    assert first.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: first.metrics()["process-total"] == 5, "every record processed")
    assert first.close(30)  # a clean close: each checkpoint at its changelog's end

    heard = _Heard()
    again = StreamsApp(
        topology,
        {
            "application.id": first.config.application_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp_path),
            "processing.guarantee": guarantee,
            "session.timeout.ms": 6000,
        },
        restore_listener=heard,
    )
    apps.append(again)
    again.start()
    assert again.wait_for_state(State.RUNNING, TIMEOUT)
    # Partition 0's changelog holds the five writes, all checkpointed; partition 1's is empty.
    for partition in (0, 1):
        calls = heard.calls.get(partition, [])
        assert [c[0] for c in calls] == ["start", "end"], (partition, calls)
        (_, _, start, end), (_, _, total) = calls
        assert start <= end and total == 0, (partition, calls)
    assert heard.calls[1][0][2:] == (0, 0)
    assert again.close(30)


# --- admin clients let go at close ------------------------------------------------------------


def _admin_clients() -> int:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    return sum(isinstance(o, AdminClient) for o in gc.get_objects())


def test_a_closed_app_keeps_no_admin_client_alive(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # A stream thread's admin clients (the sink topics' timestamp limits, the repartition
    # purge) lived as long as the app object: after the broker went away they kept reconnecting
    # and logging "Connection refused" until the garbage collector found the app.
    source, sink = kafka.create_topic(), kafka.create_topic()
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        ctx.send(sink, record.key, record.value)

    before = _admin_clients()
    # gc.get_objects() cannot see frozen objects: without python.gc.freeze every admin client
    # of the process stays countable.
    app = new_app(apps, kafka, topology, tmp_path, **{"python.gc.freeze": False})
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    kafka.produce(source, [(b"k", b"v")])
    assert _read(kafka, sink, 1) == [b"v"]
    # The premise: sending to the sink made the thread an admin client of its own.
    assert _admin_clients() > before
    assert app.close(30)
    assert _admin_clients() == before
