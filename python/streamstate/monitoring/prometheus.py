"""Kafka Streams' metrics on a Prometheus endpoint, named as Kafka's JMX metrics reach Prometheus.

Kafka Streams reports its metrics over JMX, and its users scrape them with the Prometheus JMX
exporter, whose default naming turns the MBean ``kafka.streams:type=stream-thread-metrics,
thread-id=T`` and its attribute ``process-rate`` into
``kafka_streams_stream_thread_metrics_process_rate{thread_id="T"}``: ``<domain>_<type>_<name>``
with every character Prometheus does not allow made ``_``, and the other MBean keys as labels.
:func:`prometheus_name` and :func:`label_name` do the same, so dashboards and alerts written for
a Java Kafka Streams app read a streamstate app unchanged.

Types: a ``*-total`` that only grows is a counter (its exposed name keeps the ``_total``
suffix), everything else a gauge (:func:`streamstate.monitoring.kafka_metrics.metric_type`); the
client ``state``, a string in Kafka (which the JMX exporter drops), is exposed the Prometheus way
for an enum: one sample per state, labelled ``state``, 1 for the current one and 0 for the rest.

:class:`StreamsCollector` reads the apps at scrape time (:func:`kafka_metrics`, which touches no
Kafka client); :class:`PrometheusExporter` serves it over HTTP.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

try:
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        "streamstate.monitoring.prometheus needs prometheus_client: "
        "pip install 'streamstate[prometheus]'",
        name=exc.name,
    ) from exc

from streamstate.monitoring.kafka_metrics import (
    CLIENT_LEVEL_GROUP,
    CONSUMER_FETCH_GROUP,
    STATES,
    TASK_LEVEL_GROUP,
    THREAD_LEVEL_GROUP,
    KafkaMetric,
    kafka_metrics,
)

if TYPE_CHECKING:
    from streamstate.app.streams_app import StreamsApp

__all__ = [
    "PrometheusExporter",
    "StreamsCollector",
    "label_name",
    "prometheus_name",
]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]+")
_REPEATED = re.compile(r"__+")

# Every metric the collector may expose, so that a registry can refuse a second collector that
# would expose the same names (prometheus_client checks describe() at register time).
_EXPORTED: tuple[tuple[str, str, str], ...] = (
    ("kafka.streams", CLIENT_LEVEL_GROUP, "state"),
    ("kafka.streams", CLIENT_LEVEL_GROUP, "alive-stream-threads"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "process-total"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "process-rate"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "poll-records-avg"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "commit-total"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "commit-latency-avg"),
    ("kafka.streams", THREAD_LEVEL_GROUP, "commit-latency-max"),
    ("kafka.streams", TASK_LEVEL_GROUP, "dropped-records-total"),
    ("kafka.streams", TASK_LEVEL_GROUP, "restore-total"),
    ("kafka.streams", TASK_LEVEL_GROUP, "restore-rate"),
    ("kafka.streams", TASK_LEVEL_GROUP, "restore-remaining-records-total"),
    ("kafka.consumer", CONSUMER_FETCH_GROUP, "records-lag"),
)


def _safe(text: str) -> str:
    # The JMX exporter's safeName: each run of characters Prometheus does not allow becomes one
    # "_", and runs of "_" collapse.
    return _REPEATED.sub("_", _UNSAFE.sub("_", text))


def prometheus_name(domain: str, group: str, name: str) -> str:
    """The Prometheus name of Kafka's metric ``name`` in ``group`` under the JMX ``domain``, as
    the JMX exporter's default rule makes it: ``prometheus_name("kafka.streams",
    "stream-thread-metrics", "process-rate")`` is
    ``"kafka_streams_stream_thread_metrics_process_rate"``."""
    return _safe(f"{domain}_{group}_{name}")


def label_name(tag: str) -> str:
    """The Prometheus label of Kafka's tag ``tag``: ``"thread-id"`` is ``"thread_id"``."""
    return _safe(tag)


_Family = CounterMetricFamily | GaugeMetricFamily


def _family(metric: KafkaMetric, labels: list[str]) -> _Family:
    name = prometheus_name(metric.domain, metric.group, metric.name)
    if metric.kind == "counter":
        # prometheus_client takes the "_total" off the family name and puts it on the sample.
        return CounterMetricFamily(name, metric.description, labels=labels)
    return GaugeMetricFamily(name, metric.description, labels=labels)


class StreamsCollector(Collector):
    """A Prometheus collector of ``apps``' Kafka Streams metrics, read at every scrape.

    Register it in a ``prometheus_client.CollectorRegistry`` (or the default ``REGISTRY``) to
    serve it from an endpoint of your own (``prometheus_client.make_wsgi_app(registry)``).
    The apps' series are told apart by their tags (``client_id``, ``thread_id``), which come
    from each app's ``client.id`` (by default its ``application.id``): two apps with the same
    ``client.id`` would expose the same series, so they are refused (``ValueError``); give
    each its own ``client.id``, or its own collector in its own registry. A registry takes one
    collector of Kafka Streams metrics (a second one raises ``ValueError`` at ``register``).
    """

    def __init__(self, *apps: StreamsApp) -> None:
        """Reads ``apps`` (at least one) at each :meth:`collect`."""
        if not apps:
            raise ValueError("StreamsCollector needs at least one StreamsApp")
        seen: set[str] = set()
        for app in apps:
            client_id = app.config.client_id
            if client_id in seen:
                raise ValueError(
                    f"two apps with client.id {client_id!r} would expose the same series: give "
                    "each its own client.id, or each its own registry"
                )
            seen.add(client_id)
        self.apps = tuple(apps)

    def describe(self) -> Iterable[Metric]:
        """Every family this collector may expose (samples omitted), so that a registry
        refuses a second collector of the same names."""
        for domain, group, name in _EXPORTED:
            yield _family(KafkaMetric(name, group, {}, 0.0, domain=domain), [])

    def collect(self) -> Iterable[Metric]:
        """The apps' metrics now, one family per Prometheus name (:func:`kafka_metrics`)."""
        families: dict[str, _Family] = {}
        for app in self.apps:
            for metric in kafka_metrics(app):
                labels = [label_name(tag) for tag in metric.tags]
                values = list(metric.tags.values())
                if metric.kind == "state":
                    labels.append(label_name(metric.name))
                name = prometheus_name(metric.domain, metric.group, metric.name)
                family = families.get(name)
                if family is None:
                    family = families[name] = _family(metric, labels)
                if isinstance(metric.value, str):
                    for state in STATES:
                        family.add_metric([*values, state], 1.0 if state == metric.value else 0.0)
                else:
                    family.add_metric(values, metric.value)
        return list(families.values())


class PrometheusExporter:
    """Serves ``apps``' Kafka Streams metrics for Prometheus to scrape, at
    ``http://<addr>:<port>/metrics`` (any path answers), from a daemon thread of its own.

    ``port=0`` takes a free port (:attr:`port` says which). ``registry``: the
    ``prometheus_client.CollectorRegistry`` to add the :class:`StreamsCollector` to and to
    serve, with whatever else is registered there (your own metrics, the process collector of
    ``prometheus_client.REGISTRY``); by default a registry of its own, so that two exporters in
    one process never collide. ``addr`` is where to listen (all interfaces by default, as
    ``prometheus_client`` and the JMX exporter do). Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        *apps: StreamsApp,
        port: int,
        addr: str = "0.0.0.0",
        registry: CollectorRegistry | None = None,
    ) -> None:
        """Starts serving at once."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self.collector = StreamsCollector(*apps)
        self.registry.register(self.collector)
        try:
            self._server, self._thread = start_http_server(port, addr, registry=self.registry)
        except BaseException:
            self.registry.unregister(self.collector)
            raise
        self._closed = threading.Event()

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://<host>:<port>/metrics``, with ``127.0.0.1`` for an ``addr`` of all
        interfaces."""
        host = str(self._server.server_address[0])
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stops serving and takes the collector out of the registry; idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self.registry.unregister(self.collector)

    def __enter__(self) -> PrometheusExporter:
        """Returns itself (already serving)."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Closes it."""
        self.close()
