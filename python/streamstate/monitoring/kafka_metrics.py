"""A running app's metrics as Kafka's ``MetricName``\\ s: name, group, tags, description, value.

This is the per-thread and per-task view of what :meth:`StreamsApp.metrics()
<streamstate.StreamsApp.metrics>` sums: the same sensors (``app/metrics.py``), read where Kafka
Streams reports them (``KafkaStreams#metrics()`` in Java), so that a monitoring system sees
Kafka's groups and tags:

- ``stream-metrics`` (tag ``client-id``): ``state``, ``alive-stream-threads``;
- ``stream-thread-metrics`` (``thread-id``): ``process-total``, ``process-rate``,
  ``poll-records-avg``, ``commit-total``, ``commit-latency-avg``, ``commit-latency-max``;
- ``stream-task-metrics`` (``thread-id``, ``task-id``): ``dropped-records-total``,
  ``restore-total``, ``restore-rate``, ``restore-remaining-records-total``;
- ``consumer-fetch-manager-metrics`` (``client-id``, ``topic``, ``partition``; JMX domain
  ``kafka.consumer``): ``records-lag``.

Reading never touches a Kafka client: every value is a snapshot the stream threads keep (the lags
each thread publishes once per loop), behind locks held for a copy at most, so a scrape returns
at once while a stream thread is busy in a long ``consume()`` or ``process()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamstate.app.state import State
from streamstate.app.stream_thread import ThreadState

if TYPE_CHECKING:
    from streamstate.app.streams_app import StreamsApp

__all__ = [
    "CLIENT_LEVEL_GROUP",
    "CONSUMER_FETCH_GROUP",
    "GAUGE_TOTALS",
    "STATES",
    "TASK_LEVEL_GROUP",
    "THREAD_LEVEL_GROUP",
    "KafkaMetric",
    "kafka_metrics",
    "metric_type",
    "task_id_text",
]

CLIENT_LEVEL_GROUP = "stream-metrics"
"""Kafka Streams' client-level group (``kafka.streams:type=stream-metrics,client-id=...``)."""
THREAD_LEVEL_GROUP = "stream-thread-metrics"
"""Kafka Streams' thread-level group (``...,thread-id=...``)."""
TASK_LEVEL_GROUP = "stream-task-metrics"
"""Kafka Streams' task-level group (``...,thread-id=...,task-id=...``)."""
CONSUMER_FETCH_GROUP = "consumer-fetch-manager-metrics"
"""The consumer's fetch group, where Kafka reports ``records-lag`` (JMX domain
``kafka.consumer``)."""
STATES = tuple(s.value for s in State)
"""Every value of the client ``state`` metric (:class:`~streamstate.State`)."""

GAUGE_TOTALS = frozenset(
    {"restore-remaining-records-total", "cache-size-bytes-total", "input-buffer-bytes-total"}
)
"""Kafka metrics named ``*-total`` that go down as well as up (Kafka records them as a value or
a sum of negative steps), hence gauges, not counters."""

# Kafka's descriptions (ThreadMetrics, TaskMetrics, ClientMetrics, FetchMetricsRegistry).
_DESCRIPTIONS = {
    (CLIENT_LEVEL_GROUP, "state"): "The state of the Kafka Streams client",
    (CLIENT_LEVEL_GROUP, "alive-stream-threads"): (
        "The current number of alive stream threads that are running or participating in rebalance"
    ),
    (THREAD_LEVEL_GROUP, "process-total"): "The total number of calls to process",
    (THREAD_LEVEL_GROUP, "process-rate"): "The average per-second number of calls to process",
    (THREAD_LEVEL_GROUP, "poll-records-avg"): (
        "The average number of records polled from consumer within an iteration"
    ),
    (THREAD_LEVEL_GROUP, "commit-total"): "The total number of calls to commit",
    (THREAD_LEVEL_GROUP, "commit-latency-avg"): "The average commit latency",
    (THREAD_LEVEL_GROUP, "commit-latency-max"): "The maximum commit latency",
    (TASK_LEVEL_GROUP, "dropped-records-total"): "The total number of dropped records",
    (TASK_LEVEL_GROUP, "restore-total"): "The total number of records restored",
    (TASK_LEVEL_GROUP, "restore-rate"): "The average number of records restored per second",
    (TASK_LEVEL_GROUP, "restore-remaining-records-total"): (
        "The total number of records remaining to be restored"
    ),
    (CONSUMER_FETCH_GROUP, "records-lag"): "The latest lag of the partition",
}


@dataclass(frozen=True)
class KafkaMetric:
    """One metric as Kafka names it: ``name`` within ``group`` for the ``tags`` (Kafka's
    ``MetricName``), its ``value`` now, and the JMX ``domain`` Kafka reports it under.

    ``value`` is a number, or a string for Kafka's string-valued metrics (the client ``state``).
    """

    name: str
    group: str
    tags: dict[str, str]
    value: float | str
    description: str = ""
    domain: str = "kafka.streams"
    kind: str = field(default="")

    def __post_init__(self) -> None:
        """Fills ``description`` (Kafka's) and ``kind`` (:func:`metric_type`) when not given."""
        if not self.description:
            object.__setattr__(self, "description", _DESCRIPTIONS.get((self.group, self.name), ""))
        if not self.kind:
            object.__setattr__(self, "kind", metric_type(self.name, self.value))


def metric_type(name: str, value: float | str = 0.0) -> str:
    """The monitoring type of a Kafka metric: ``"counter"`` for a ``*-total`` that only grows,
    ``"state"`` for a string-valued one, ``"gauge"`` for everything else (rates, averages,
    maxima, lags, and the ``*-total`` of :data:`GAUGE_TOTALS`)."""
    if isinstance(value, str):
        return "state"
    if name.endswith("-total") and name not in GAUGE_TOTALS:
        return "counter"
    return "gauge"


def task_id_text(task_id: Any) -> str:
    """Kafka's ``task-id`` tag, ``<subtopology>_<partition>``: a single-processor topology's
    tasks are numbered by partition and belong to sub-topology 0."""
    if isinstance(task_id, int):
        return f"0_{task_id}"
    return str(task_id)


def kafka_metrics(app: StreamsApp) -> list[KafkaMetric]:
    """``app``'s metrics now, one :class:`KafkaMetric` per Kafka ``MetricName``; safe to call
    from any thread at any moment (see the module doc)."""
    # The app's own threads and restore listener: the sensors StreamsApp.metrics() sums, read
    # here per thread and per task (StreamsApp has no public per-thread view of them).
    client = {"client-id": app.config.client_id}
    threads = list(app._threads)
    out = [
        KafkaMetric("state", CLIENT_LEVEL_GROUP, client, app.state.value),
        KafkaMetric(
            "alive-stream-threads",
            CLIENT_LEVEL_GROUP,
            client,
            float(sum(1 for t in threads if t.is_alive())),
        ),
    ]
    restored = app._restore_metrics.partitions()
    for thread in threads:
        m = thread.metrics
        tags = {"thread-id": thread.name}
        commits = m.commit_latency
        for name, value in (
            ("process-total", m.process.total),
            ("process-rate", m.process.rate()),
            ("poll-records-avg", m.poll_records.avg()),
            ("commit-total", float(commits.count)),
            ("commit-latency-avg", commits.avg()),
            ("commit-latency-max", commits.max),
        ):
            out.append(KafkaMetric(name, THREAD_LEVEL_GROUP, tags, value))
        for task_id, task in sorted(thread.active_tasks().items(), key=lambda kv: str(kv[0])):
            task_tags = {"thread-id": thread.name, "task-id": task_id_text(task_id)}
            out.append(
                KafkaMetric(
                    "dropped-records-total",
                    TASK_LEVEL_GROUP,
                    task_tags,
                    float(task.dropped_records()),
                )
            )
            changelogs = list(task.changelogs.values())
            if changelogs:
                total = rate = 0.0
                left = 0
                for tp in changelogs:
                    t, r, n = restored.get(tp, (0, 0.0, 0))
                    total, rate, left = total + t, rate + r, left + n
                for name, value in (
                    ("restore-total", total),
                    ("restore-rate", rate),
                    ("restore-remaining-records-total", float(left)),
                ):
                    out.append(KafkaMetric(name, TASK_LEVEL_GROUP, task_tags, value))
        if thread.state is not ThreadState.DEAD:
            consumer = {"client-id": f"{thread.name}-consumer"}
            lags = thread.fetch.published_lags()
            for tp in sorted(lags, key=lambda tp: (tp.topic, tp.partition)):
                out.append(
                    KafkaMetric(
                        "records-lag",
                        CONSUMER_FETCH_GROUP,
                        {**consumer, "topic": tp.topic, "partition": str(tp.partition)},
                        float(lags[tp]),
                        domain="kafka.consumer",
                    )
                )
    return out
