"""``FetchControl.lags`` on a real broker: the lag of a partition the consumer has handed no record
of yet, which KIP-695 idling waits on.

Before, such a partition's lag was known only from an end-of-partition event; librdkafka queues
that event behind the records already fetched for the other partitions, and a stream thread that
takes one record per poll (back-pressure) reached it only after draining them. A task over two
co-partitioned sources, one of them empty, then waited with records buffered and polled without
blocking: measured on 300k records, 11 s and 10 CPU s instead of 3.5 s and 1.7 CPU s, about
900k loops where its task was not ready. The lag of such a partition is known as soon as a fetch
response is: an empty log has no lag, and a partition the group committed offsets for starts at
the committed offset.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import wait_until

from streamstate.app.fetch_control import FetchControl
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition


def _consumer(kafka: KafkaTestCluster, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def _fetched(consumer: Consumer, tp: KafkaTopicPartition) -> bool:
    """Whether a fetch response for ``tp`` has arrived (its watermarks are cached). librdkafka
    fetches in its own threads: the test never polls, so no record is handed over and the
    consumer's position stays unknown, as for a partition behind others in the poll queue."""
    _, high = consumer.get_watermark_offsets(tp, cached=True)
    return bool(high >= 0)


def test_an_empty_partition_has_no_lag_once_fetched(kafka: KafkaTestCluster) -> None:
    full, empty = kafka.create_topic(), kafka.create_topic()
    kafka.produce(full, [(b"k", b"v")] * 50)
    consumer = _consumer(kafka, f"lags-{uuid.uuid4().hex[:8]}")
    try:
        consumer.assign([KafkaTopicPartition(full, 0, 0), KafkaTopicPartition(empty, 0, 0)])
        fetch = FetchControl(consumer, 1_000, name="test")
        # No end-of-partition event is handed over: the lag must come from the fetch itself.
        wait_until(lambda: _fetched(consumer, KafkaTopicPartition(empty, 0)), "a fetch of it")
        assert fetch.lags([TopicPartition(empty, 0)]) == {TopicPartition(empty, 0): 0}
    finally:
        consumer.close()


def test_a_partition_starts_at_its_committed_offset(kafka: KafkaTestCluster) -> None:
    caught_up, behind = kafka.create_topic(), kafka.create_topic()
    kafka.produce(caught_up, [(b"k", b"v")] * 10)
    kafka.produce(behind, [(b"k", b"v")] * 10)
    group = f"lags-{uuid.uuid4().hex[:8]}"
    committer = _consumer(kafka, group)
    committer.commit(
        offsets=[KafkaTopicPartition(caught_up, 0, 10), KafkaTopicPartition(behind, 0, 4)],
        asynchronous=False,
    )
    committer.close()
    consumer = _consumer(kafka, group)
    try:
        consumer.assign([KafkaTopicPartition(caught_up, 0, 10), KafkaTopicPartition(behind, 0, 4)])
        fetch = FetchControl(consumer, 1_000, name="test")
        fetch.starting_at({(caught_up, 0): 10, (behind, 0): 4})
        for topic in (caught_up, behind):
            wait_until(lambda t=topic: _fetched(consumer, KafkaTopicPartition(t, 0)), "a fetch")
        lags = fetch.lags([TopicPartition(caught_up, 0), TopicPartition(behind, 0)])
        assert lags == {TopicPartition(caught_up, 0): 0, TopicPartition(behind, 0): 6}
    finally:
        consumer.close()
