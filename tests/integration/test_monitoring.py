"""The Prometheus endpoint of ``streamstate.monitoring`` scraped as Prometheus does, on the real
broker: Kafka Streams' names (as the JMX exporter makes them), tags and types; counters that
move by exactly the records processed, dropped and restored; a scrape that returns while the
stream thread is parked in ``consume()`` or stuck in a processor; and apps of one process that
never mix their series."""

from __future__ import annotations

import struct
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from tests.apps import TIMEOUT, app_behind_owned_consumer, new_app, wait_until

from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.monitoring import PrometheusExporter
from streamstate.serde import IntegerDeserializer

PROCESS_TOTAL = "kafka_streams_stream_thread_metrics_process_total"
DROPPED_TOTAL = "kafka_streams_stream_task_metrics_dropped_records_total"
RESTORE_TOTAL = "kafka_streams_stream_task_metrics_restore_total"
REMAINING = "kafka_streams_stream_task_metrics_restore_remaining_records_total"
RECORDS_LAG = "kafka_consumer_consumer_fetch_manager_metrics_records_lag"
STATE = "kafka_streams_stream_metrics_state"


class Scrape:
    """One scrape of an endpoint, parsed by prometheus_client's own parser."""

    def __init__(self, url: str) -> None:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            assert response.status == 200
            self.text = response.read().decode()
        self.families = {f.name: f for f in text_string_to_metric_families(self.text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def values(self, name: str, **labels: str) -> list[float]:
        """The values of the samples named ``name`` whose labels include ``labels``."""
        return [
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The value of the one sample named ``name`` with ``labels``."""
        (value,) = self.values(name, **labels)
        return value


def exporter_of(*apps: StreamsApp, registry: CollectorRegistry | None = None) -> PrometheusExporter:
    return PrometheusExporter(*apps, port=0, addr="127.0.0.1", registry=registry)


def test_a_scrape_has_kafkas_names_tags_types_and_exact_counts(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, [(b"k", struct.pack(">i", i)) for i in range(30)], partition=0)
    kafka.produce(source, [(b"k", struct.pack(">i", i)) for i in range(20)], partition=1)
    kafka.produce(source, [(b"k", b"not an int")] * 3, partition=1)
    seen: list[int] = []
    topology = Topology()

    @topology.processor(sources=[source], value_deserializer=IntegerDeserializer())
    def keep(ctx: Any, record: Any) -> None:
        seen.append(record.value)

    app = new_app(
        apps, kafka, topology, tmp_path, **{"default.deserialization.exception.handler": "continue"}
    )
    client = app.config.client_id
    thread = f"{client}-StreamThread-1"
    with exporter_of(app) as exporter:
        assert Scrape(exporter.url).value(STATE, client_id=client, state="CREATED") == 1.0
        app.start()
        assert app.wait_for_state(State.RUNNING, TIMEOUT)
        wait_until(lambda: len(seen) == 50, "every good record processed")
        consumer = f"{thread}-consumer"
        wait_until(
            lambda: Scrape(exporter.url).values(RECORDS_LAG, client_id=consumer) == [0.0, 0.0],
            "both partitions' lags published as 0",
        )
        wait_until(
            lambda: Scrape(exporter.url).value(PROCESS_TOTAL, thread_id=thread) >= 50,
            "the processed batch recorded",
        )
        wait_until(
            lambda: (
                Scrape(exporter.url).value(
                    "kafka_streams_stream_thread_metrics_commit_total", thread_id=thread
                )
                > 0
            ),
            "a commit",
        )
        scrape = Scrape(exporter.url)

        # The client: its state as an enum, its live threads.
        states = {s.labels["state"]: s.value for s in scrape.families[STATE].samples}
        assert states == {s.value: float(s is State.RUNNING) for s in State}
        assert {s.labels["client_id"] for s in scrape.families[STATE].samples} == {client}
        alive = "kafka_streams_stream_metrics_alive_stream_threads"
        assert scrape.value(alive, client_id=client) == 1.0
        # The thread: process-total is a counter that counted the 50 records processed exactly
        # (the 3 undeserializable ones were dropped, not processed), with Kafka's help text.
        family = scrape.families["kafka_streams_stream_thread_metrics_process"]
        assert family.type == "counter"
        assert family.documentation == "The total number of calls to process"
        assert scrape.value(PROCESS_TOTAL, thread_id=thread) == 50.0
        assert scrape.families["kafka_streams_stream_thread_metrics_process_rate"].type == "gauge"
        for name in ("poll_records_avg", "commit_latency_avg", "commit_latency_max"):
            assert scrape.value(f"kafka_streams_stream_thread_metrics_{name}", thread_id=thread) > 0
        # The tasks: Kafka's task ids, each task's drops.
        assert scrape.families["kafka_streams_stream_task_metrics_dropped_records"].type == (
            "counter"
        )
        assert scrape.value(DROPPED_TOTAL, thread_id=thread, task_id="0_0") == 0.0
        assert scrape.value(DROPPED_TOTAL, thread_id=thread, task_id="0_1") == 3.0
        # The consumer's lag per partition, under the consumer's client id.
        lags = {s.labels["partition"]: s for s in scrape.families[RECORDS_LAG].samples}
        assert set(lags) == {"0", "1"}
        assert {s.labels["topic"] for s in lags.values()} == {source}
        # What app.metrics() sums is what the endpoint shows.
        summed = app.metrics()
        assert summed["process-total"] == 50
        assert summed["dropped-records-total"] == 3

        # Seven more records move the counter by exactly seven.
        kafka.produce(source, [(b"k", struct.pack(">i", i)) for i in range(7)], partition=0)
        wait_until(lambda: len(seen) == 57, "the seven new records processed")
        wait_until(
            lambda: Scrape(exporter.url).value(PROCESS_TOTAL, thread_id=thread) >= 57,
            "the new batch recorded",
        )
        assert Scrape(exporter.url).value(PROCESS_TOTAL, thread_id=thread) == 57.0
        assert app.close(30)
        assert Scrape(exporter.url).value(STATE, client_id=client, state="NOT_RUNNING") == 1.0


def test_a_scrape_returns_while_the_stream_thread_is_parked_in_consume(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    app, source, proxy = app_behind_owned_consumer(apps, kafka, tmp_path)
    (thread,) = app._threads
    with exporter_of(app) as exporter:
        wait_until(
            lambda: Scrape(exporter.url).values(RECORDS_LAG, topic=source) == [0.0, 0.0],
            "the lags published through the proxy",
        )
        proxy.park.set()
        assert proxy.parked.wait(TIMEOUT)
        try:
            # The stream thread sits inside consume(): the scrape (urlopen fails after TIMEOUT)
            # reads only what the thread published, and touches no client of it.
            scrape = Scrape(exporter.url)
            assert scrape.value(PROCESS_TOTAL, thread_id=thread.name) == 20.0
            assert scrape.values(RECORDS_LAG, topic=source) == [0.0, 0.0]
            assert scrape.value(STATE, state="RUNNING") == 1.0
        finally:
            proxy.release.set()
    assert proxy.foreign_calls == []
    assert app.close(30)


def test_a_scrape_returns_while_a_processor_holds_the_stream_thread(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    kafka.produce(source, [(b"k", b"v")] * 10)
    reached, release = threading.Event(), threading.Event()
    seen: list[int] = []
    topology = Topology()

    @topology.processor(sources=[source])
    def hold(ctx: Any, record: Any) -> None:
        if record.offset == 4:
            reached.set()
            release.wait(TIMEOUT)
        seen.append(record.offset)

    app = new_app(apps, kafka, topology, tmp_path)
    thread = f"{app.config.client_id}-StreamThread-1"
    with exporter_of(app) as exporter:
        app.start()
        assert reached.wait(TIMEOUT)
        try:
            # The stream thread is inside process(), mid-batch: the scrape returns, and the
            # counter has not counted the batch being processed.
            scrape = Scrape(exporter.url)
            assert scrape.value(PROCESS_TOTAL, thread_id=thread) < 5
            assert scrape.value(DROPPED_TOTAL, thread_id=thread, task_id="0_0") == 0.0
        finally:
            release.set()
        wait_until(lambda: len(seen) == 10, "every record processed")
        wait_until(
            lambda: Scrape(exporter.url).value(PROCESS_TOTAL, thread_id=thread) >= 10,
            "the batches recorded",
        )
        assert Scrape(exporter.url).value(PROCESS_TOTAL, thread_id=thread) == 10.0
    assert app.close(30)


def test_apps_of_one_process_keep_their_series_apart(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=4)
    kafka.produce(source, [(b"k%d" % i, b"v") for i in range(40)])
    seen: dict[str, list[tuple[int, int]]] = {}

    def counting(tag: str) -> Topology:
        topology = Topology()
        seen[tag] = []

        @topology.processor(sources=[source])
        def count(ctx: Any, record: Any) -> None:
            seen[tag].append((record.partition, record.offset))

        return topology

    # Two instances of one application (they split the partitions), told apart by client.id,
    # and an application of its own: each exporter has its own registry.
    app_id = f"mon-{uuid.uuid4().hex[:10]}"
    one = new_app(
        apps,
        kafka,
        counting("one"),
        tmp_path / "one",
        **{"application.id": app_id, "client.id": f"{app_id}-a"},
    )
    one_b = new_app(
        apps,
        kafka,
        counting("one_b"),
        tmp_path / "one_b",
        **{"application.id": app_id, "client.id": f"{app_id}-b"},
    )
    other = new_app(apps, kafka, counting("other"), tmp_path / "other")
    every = {(p, o) for p, n in kafka.end_offsets(source).items() for o in range(n)}
    assert len(every) == 40
    with exporter_of(one, one_b) as shared, exporter_of(other) as alone:
        for app in apps:
            app.start()
        wait_until(
            lambda: set(seen["one"]) | set(seen["one_b"]) == every and len(seen["other"]) == 40,
            "both applications through every record",
        )
        threads = {"one": f"{app_id}-a-StreamThread-1", "one_b": f"{app_id}-b-StreamThread-1"}

        def each_counted_its_own() -> bool:
            # A rebalance between the instances may hand a record to both (at-least-once):
            # each thread's counter must match what that instance processed, not the other's.
            scrape = Scrape(shared.url)
            return all(
                scrape.value(PROCESS_TOTAL, thread_id=thread) == len(seen[tag])
                for tag, thread in threads.items()
            )

        wait_until(each_counted_its_own, "each instance's batches recorded under its thread")
        scrape = Scrape(shared.url)
        assert {s.labels["thread_id"] for s in scrape.samples if s.name == PROCESS_TOTAL} == set(
            threads.values()
        )
        assert {s.labels["client_id"] for s in scrape.families[STATE].samples} == {
            f"{app_id}-a",
            f"{app_id}-b",
        }
        other_thread = f"{other.config.client_id}-StreamThread-1"
        wait_until(
            lambda: Scrape(alone.url).value(PROCESS_TOTAL, thread_id=other_thread) >= 40,
            "the other application's batches recorded",
        )
        alone_scrape = Scrape(alone.url)
        assert alone_scrape.value(PROCESS_TOTAL, thread_id=other_thread) == 40.0
        assert {s.labels["thread_id"] for s in alone_scrape.samples if s.name == PROCESS_TOTAL} == {
            other_thread
        }
        assert app_id not in alone_scrape.text


def test_restore_metrics_count_the_changelog_records_restored(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, [(b"k%d" % i, b"v") for i in range(30)])
    app_id = f"mon-{uuid.uuid4().hex[:10]}"

    def storing(seen: list[int]) -> Topology:
        topology = Topology().add_store("seen")

        @topology.processor(sources=[source], stores=["seen"])
        def put(ctx: Any, record: Any) -> None:
            ctx.store("seen").put(record.key, record.value)
            seen.append(record.offset)

        return topology

    first_seen: list[int] = []
    first = new_app(apps, kafka, storing(first_seen), tmp_path, **{"application.id": app_id})
    first.start()
    wait_until(lambda: len(first_seen) == 30, "every record stored")
    assert first.close(30)
    changelog = f"{app_id}-seen-changelog"
    per_partition = kafka.end_offsets(changelog)
    assert sum(per_partition.values()) == 30
    first.clean_up()  # the next start restores every store from its changelog

    second = new_app(apps, kafka, storing([]), tmp_path, **{"application.id": app_id})
    thread = f"{second.config.client_id}-StreamThread-1"
    with exporter_of(second) as exporter:
        second.start()
        assert second.wait_for_state(State.RUNNING, TIMEOUT)

        def restored() -> dict[str, float]:
            scrape = Scrape(exporter.url)
            return {
                s.labels["task_id"]: s.value
                for s in scrape.samples
                if s.name == RESTORE_TOTAL and s.labels["thread_id"] == thread
            }

        wait_until(lambda: len(restored()) == 2, "both tasks reported")
        assert restored() == {f"0_{p}": float(n) for p, n in per_partition.items()}
        scrape = Scrape(exporter.url)
        assert scrape.families["kafka_streams_stream_task_metrics_restore"].type == "counter"
        assert scrape.families[REMAINING].type == "gauge"
        assert scrape.values(REMAINING, thread_id=thread) == [0.0, 0.0]
