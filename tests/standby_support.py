"""What the standby and failover tests and ``benches/bench_failover.py`` share: the count they
run (a DSL ``group_by_key().count()`` into the store ``counts``, so its changelog is
``<application.id>-counts-changelog``), a restore listener that counts what was restored, the
tasks an app runs as active and as standby, and the wait for every input record committed."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import wait_until

from streamstate import Serdes, StreamsApp, StreamsBuilder
from streamstate.app.streams_membership import StreamsMembership
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

STRING = Serdes.String()
LONG = Serdes.Long()


def count_topology(source: str, sink: str) -> Any:
    """``stream(source).group_by_key().count("counts").to_stream().to(sink)``, string keys
    and values in, long counts out."""
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=STRING, value_serde=STRING)
        .group_by_key()
        .count(materialized="counts")
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    return builder.build()


class Restored(StateRestoreListener):
    """Counts the changelog records restored, per changelog partition."""

    def __init__(self) -> None:
        self.records: dict[TopicPartition, int] = {}

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        """Adds ``num_restored`` to ``tp``'s count."""
        self.records[tp] = self.records.get(tp, 0) + num_restored


def active_tasks(app: StreamsApp) -> dict[Any, Any]:
    """The app's active tasks by task id, over its stream threads."""
    return {tid: task for t in app._threads for tid, task in t.active_tasks().items()}


def standby_tasks(app: StreamsApp) -> set[Any]:
    """The ids of the app's standby tasks, over its stream threads."""
    return {tid for t in app._threads for tid in t.standbys.task_ids}


def wait_input_committed(
    app: StreamsApp,
    topic: str,
    partitions: int,
    records: int,
    *,
    timeout: float,
    interval: float = 0.1,
) -> StreamsMembership:
    """Waits until the group of ``app`` (``group.protocol=streams``) has committed all the
    ``records`` produced to ``topic`` (its ``partitions`` committed offsets sum to ``records``:
    the topic held nothing before), read through the streams-group membership of the app's
    first stream thread (its consumer is in no group); returns that membership."""
    membership = app._threads[0].coordinator
    assert isinstance(membership, StreamsMembership)
    inputs = [KafkaTopicPartition(topic, p) for p in range(partitions)]
    wait_until(
        lambda: sum(max(c.offset, 0) for c in membership.committed(inputs)) == records,
        "every input record committed",
        timeout,
        interval,
    )
    return membership
