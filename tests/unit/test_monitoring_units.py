"""``streamstate.monitoring`` without a broker: Kafka's names made Prometheus names as the JMX
exporter makes them, the type of each metric, the exposition of each kind, and the collisions a
registry or a collector refuses."""

from __future__ import annotations

import socket
import sys
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import streamstate.monitoring
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.metrics import RestoreMetrics
from streamstate.monitoring import (
    KafkaMetric,
    PrometheusExporter,
    StreamsCollector,
    kafka_metrics,
    label_name,
    prometheus_name,
)
from streamstate.monitoring import prometheus as prometheus_module
from streamstate.monitoring.kafka_metrics import GAUGE_TOTALS, metric_type, task_id_text
from streamstate.processor.graph import TaskId
from streamstate.records import TopicPartition


@pytest.mark.parametrize(
    ("domain", "group", "name", "expected"),
    [
        (
            "kafka.streams",
            "stream-thread-metrics",
            "process-rate",
            "kafka_streams_stream_thread_metrics_process_rate",
        ),
        (
            "kafka.streams",
            "stream-thread-metrics",
            "process-total",
            "kafka_streams_stream_thread_metrics_process_total",
        ),
        (
            "kafka.streams",
            "stream-task-metrics",
            "restore-remaining-records-total",
            "kafka_streams_stream_task_metrics_restore_remaining_records_total",
        ),
        ("kafka.streams", "stream-metrics", "state", "kafka_streams_stream_metrics_state"),
        (
            "kafka.streams",
            "stream-metrics",
            "alive-stream-threads",
            "kafka_streams_stream_metrics_alive_stream_threads",
        ),
        (
            "kafka.consumer",
            "consumer-fetch-manager-metrics",
            "records-lag",
            "kafka_consumer_consumer_fetch_manager_metrics_records_lag",
        ),
        # The JMX exporter's safeName: any run of unsafe characters (and of "_") is one "_".
        (
            "kafka.streams",
            "stream-state-metrics",
            "put--latency.avg",
            ("kafka_streams_stream_state_metrics_put_latency_avg"),
        ),
        ("kafka.streams", "my__group", "x/y", "kafka_streams_my_group_x_y"),
    ],
)
def test_kafka_names_become_the_jmx_exporters_names(
    domain: str, group: str, name: str, expected: str
) -> None:
    assert prometheus_name(domain, group, name) == expected


@pytest.mark.parametrize(
    ("tag", "label"),
    [
        ("client-id", "client_id"),
        ("thread-id", "thread_id"),
        ("task-id", "task_id"),
        ("rocksdb-state-id", "rocksdb_state_id"),
        ("topic", "topic"),
    ],
)
def test_kafka_tags_become_labels(tag: str, label: str) -> None:
    assert label_name(tag) == label


@pytest.mark.parametrize(
    ("name", "value", "kind"),
    [
        ("process-total", 1.0, "counter"),
        ("commit-total", 0.0, "counter"),
        ("dropped-records-total", 3.0, "counter"),
        ("restore-total", 3.0, "counter"),
        ("blocked-time-ns-total", 3.0, "counter"),
        # A *-total that goes down is a gauge, as Kafka records it (a value or a signed sum).
        ("restore-remaining-records-total", 5.0, "gauge"),
        ("cache-size-bytes-total", 5.0, "gauge"),
        ("input-buffer-bytes-total", 5.0, "gauge"),
        ("process-rate", 1.5, "gauge"),
        ("commit-latency-avg", 1.5, "gauge"),
        ("commit-latency-max", 1.5, "gauge"),
        ("records-lag", 7.0, "gauge"),
        ("alive-stream-threads", 1.0, "gauge"),
        ("state", "RUNNING", "state"),
    ],
)
def test_the_type_of_each_metric(name: str, value: float | str, kind: str) -> None:
    assert metric_type(name, value) == kind
    assert KafkaMetric(name, "stream-thread-metrics", {}, value).kind == kind


def test_every_gauge_total_is_named_total() -> None:
    assert all(name.endswith("-total") for name in GAUGE_TOTALS)


def test_descriptions_are_kafkas() -> None:
    metric = KafkaMetric("process-total", "stream-thread-metrics", {"thread-id": "t"}, 1.0)
    assert metric.description == "The total number of calls to process"
    lag = KafkaMetric("records-lag", "consumer-fetch-manager-metrics", {}, 0.0)
    assert lag.description == "The latest lag of the partition"
    given = KafkaMetric("process-total", "stream-thread-metrics", {}, 1.0, description="mine")
    assert given.description == "mine"


def test_task_ids_are_kafkas() -> None:
    assert task_id_text(3) == "0_3"  # a single-processor topology's task of partition 3
    assert task_id_text(TaskId(2, 5)) == "2_5"


def _app(client_id: str | None = None, app_id: str = "mon-unit") -> StreamsApp:
    topology = Topology()
    topology.processor(sources=["in"])(lambda ctx, record: None)
    config: dict[str, Any] = {"application.id": app_id, "bootstrap.servers": "127.0.0.1:1"}
    if client_id is not None:
        config["client.id"] = client_id
    return StreamsApp(topology, config)


def _families(registry: CollectorRegistry) -> dict[str, Any]:
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_a_created_app_shows_its_state_and_no_threads() -> None:
    app = _app()
    assert [(m.name, m.value) for m in kafka_metrics(app)] == [
        ("state", "CREATED"),
        ("alive-stream-threads", 0.0),
    ]
    registry = CollectorRegistry()
    registry.register(StreamsCollector(app))
    families = _families(registry)
    assert set(families) == {
        "kafka_streams_stream_metrics_state",
        "kafka_streams_stream_metrics_alive_stream_threads",
    }
    state = families["kafka_streams_stream_metrics_state"]
    assert state.type == "gauge"
    assert state.documentation == "The state of the Kafka Streams client"
    assert {s.labels["state"]: s.value for s in state.samples} == {
        s.value: float(s is State.CREATED) for s in State
    }
    assert {s.labels["client_id"] for s in state.samples} == {"mon-unit"}


def test_each_kind_is_exposed_with_its_type_labels_and_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread = {"thread-id": "c-StreamThread-1"}
    fixed = [
        KafkaMetric("state", "stream-metrics", {"client-id": "c"}, "RUNNING"),
        KafkaMetric("process-total", "stream-thread-metrics", thread, 12.0),
        KafkaMetric("process-rate", "stream-thread-metrics", thread, 2.5),
        KafkaMetric(
            "restore-remaining-records-total",
            "stream-task-metrics",
            {**thread, "task-id": "0_1"},
            4.0,
        ),
        KafkaMetric(
            "records-lag",
            "consumer-fetch-manager-metrics",
            {"client-id": "c-StreamThread-1-consumer", "topic": "in", "partition": "1"},
            9.0,
            domain="kafka.consumer",
        ),
    ]
    monkeypatch.setattr(prometheus_module, "kafka_metrics", lambda app: fixed)
    registry = CollectorRegistry()
    registry.register(StreamsCollector(_app()))
    text = generate_latest(registry).decode()
    assert "# TYPE kafka_streams_stream_thread_metrics_process_total counter" in text
    assert (
        'kafka_streams_stream_thread_metrics_process_total{thread_id="c-StreamThread-1"} 12.0'
        in (text)
    )
    assert "# TYPE kafka_streams_stream_thread_metrics_process_rate gauge" in text
    assert "# TYPE kafka_streams_stream_task_metrics_restore_remaining_records_total gauge" in text
    assert (
        "kafka_streams_stream_task_metrics_restore_remaining_records_total"
        '{task_id="0_1",thread_id="c-StreamThread-1"} 4.0'
    ) in text
    assert (
        "kafka_consumer_consumer_fetch_manager_metrics_records_lag"
        '{client_id="c-StreamThread-1-consumer",partition="1",topic="in"} 9.0'
    ) in text
    assert 'kafka_streams_stream_metrics_state{client_id="c",state="RUNNING"} 1.0' in text
    assert 'kafka_streams_stream_metrics_state{client_id="c",state="ERROR"} 0.0' in text
    assert "# HELP kafka_streams_stream_thread_metrics_process_rate " in text
    assert "The average per-second number of calls to process" in text
    # Nothing else: no _created samples, no families of metrics not read.
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert len(samples) == 4 + len(State)


def test_a_registry_takes_one_collector_of_streams_metrics() -> None:
    registry = CollectorRegistry()
    registry.register(StreamsCollector(_app("a")))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(StreamsCollector(_app("b")))


def test_one_collector_refuses_two_apps_with_one_client_id() -> None:
    with pytest.raises(ValueError, match=r"client\.id 'same'"):
        StreamsCollector(_app("same", "x"), _app("same", "y"))
    with pytest.raises(ValueError, match="at least one"):
        StreamsCollector()


def test_one_collector_over_two_apps_shows_both() -> None:
    registry = CollectorRegistry()
    registry.register(StreamsCollector(_app("a"), _app("b")))
    state = _families(registry)["kafka_streams_stream_metrics_state"]
    assert {s.labels["client_id"] for s in state.samples} == {"a", "b"}


def test_the_exporter_serves_and_closes() -> None:
    app = _app()
    registry = CollectorRegistry()
    exporter = PrometheusExporter(app, port=0, addr="127.0.0.1", registry=registry)
    try:
        assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics"
        with urllib.request.urlopen(exporter.url, timeout=30) as response:
            text = response.read().decode()
        assert 'kafka_streams_stream_metrics_state{client_id="mon-unit",state="CREATED"} 1.0' in (
            text
        )
    finally:
        exporter.close()
    exporter.close()  # idempotent
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", exporter.port), 5):
        pass
    # Closed, it left the registry: another exporter may serve the same registry.
    with PrometheusExporter(app, port=0, addr="127.0.0.1", registry=registry) as again:
        assert again.port > 0


def test_two_exporters_of_one_process_do_not_collide() -> None:
    app = _app()
    with (
        PrometheusExporter(app, port=0, addr="127.0.0.1") as one,
        PrometheusExporter(_app("other"), port=0, addr="127.0.0.1") as two,
    ):
        assert one.registry is not two.registry
        assert one.port != two.port


def test_a_port_in_use_fails_and_leaves_the_registry_as_it_was() -> None:
    app = _app()
    registry = CollectorRegistry()
    with PrometheusExporter(app, port=0, addr="127.0.0.1") as taken:
        with pytest.raises(OSError):
            PrometheusExporter(app, port=taken.port, addr="127.0.0.1", registry=registry)
    registry.register(StreamsCollector(app))  # nothing was left registered


def test_the_prometheus_names_load_on_first_use() -> None:
    assert streamstate.monitoring.PrometheusExporter is prometheus_module.PrometheusExporter
    assert streamstate.monitoring.prometheus_name is prometheus_module.prometheus_name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = streamstate.monitoring.no_such_name  # type: ignore[attr-defined]


def test_restore_counts_per_changelog_partition() -> None:
    # What the task-level restore metrics sum over a task's changelog partitions.
    restore = RestoreMetrics()
    a, b = TopicPartition("app-s-changelog", 0), TopicPartition("app-s-changelog", 1)
    restore.on_restore_start(a, "s", 0, 10)
    restore.on_batch_restored(a, "s", 3, 4)
    restore.on_restore_start(b, "s", 5, 7)
    assert {tp: (total, left) for tp, (total, _, left) in restore.partitions().items()} == {
        a: (4, 6),
        b: (0, 2),
    }
    restore.on_batch_restored(a, "s", 9, 6)
    restore.on_restore_end(a, "s", 10)
    restore.on_restore_suspended(b, "s", 0)
    parts = restore.partitions()
    assert {tp: (total, left) for tp, (total, _, left) in parts.items()} == {a: (10, 0)}
    assert parts[a][1] > 0  # records per second over the window
    assert restore.remaining() == {"s": 0}


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # not installed
    monkeypatch.delitem(sys.modules, "streamstate.monitoring.prometheus")
    monkeypatch.delattr(streamstate.monitoring, "prometheus")
    assert kafka_metrics(_app())[0].value == "CREATED"  # needs no extra
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'streamstate\[prometheus\]'"):
        _ = streamstate.monitoring.PrometheusExporter
