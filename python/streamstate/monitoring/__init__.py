"""Monitoring: a running app's metrics for a monitoring system, under Kafka Streams' names.

``kafka_metrics(app)`` reads them as Kafka's ``MetricName``\\ s (group, tags, description,
value); ``PrometheusExporter(app, port=...)`` serves them to Prometheus, named as Kafka's JMX
metrics reach Prometheus through the JMX exporter
(``kafka_streams_stream_thread_metrics_process_total{thread_id="..."}``), and
``StreamsCollector(app)`` is the collector behind it, for a registry of your own. The Prometheus
part needs the ``prometheus`` extra (``pip install 'streamstate[prometheus]'``); it is imported
on first use, so ``kafka_metrics`` works without it. See ``docs/runtime.md``, "Monitoring".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamstate.monitoring.kafka_metrics import KafkaMetric, kafka_metrics

if TYPE_CHECKING:
    from streamstate.monitoring.prometheus import (
        PrometheusExporter,
        StreamsCollector,
        label_name,
        prometheus_name,
    )

__all__ = [
    "KafkaMetric",
    "PrometheusExporter",
    "StreamsCollector",
    "kafka_metrics",
    "label_name",
    "prometheus_name",
]

_PROMETHEUS = frozenset({"PrometheusExporter", "StreamsCollector", "label_name", "prometheus_name"})


def __getattr__(name: str) -> Any:
    """The Prometheus names, imported on first use (they need ``prometheus_client``)."""
    if name in _PROMETHEUS:
        from streamstate.monitoring import prometheus  # noqa: PLC0415 - the optional extra

        return getattr(prometheus, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
