"""``hand_over``: lets a ``StreamsApp`` continue where a ``process`` query stopped.

The query's changelog rows give the app its stores back (it restores them as after any move of
its tasks); what it still needs is *where* to continue. Spark never commits offsets to Kafka:
its progress lives in the query's checkpoint, in each task's state. ``hand_over`` reads that
state (Spark's ``statestore`` data source, the last committed micro-batch) and commits, for the
consumer group ``application.id``, the offset after the last record each source partition
processed, with the partition time as commit metadata — what a ``StreamsApp`` commits itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException

from streamstate.app.config import StreamsConfig
from streamstate.app.task import encode_partition_time
from streamstate.clients.config import CONSUMER_PREFIX, connection_settings, producer_config
from streamstate.clients.kafka_errors import error_text
from streamstate.errors import StreamsError
from streamstate.records import NOT_KNOWN, TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["commit_consumer_config", "hand_over"]


def hand_over(
    spark: SparkSession, checkpoint_location: str, config: Mapping[str, Any]
) -> dict[tuple[str, int], int]:
    """Commits the offsets a stopped ``process`` query has processed for ``application.id``.

    ``checkpoint_location`` is the query's; ``config`` the ``StreamsApp``'s (``application.id``,
    ``bootstrap.servers`` and the main consumer's connection settings, ``security.protocol``,
    ``sasl.*``, ``ssl.*``, are used). No member of the group may be running: Kafka refuses
    commits from outside an active group. Returns ``{(topic, partition): offset committed}``;
    a partition the query has read nothing of is left as it is.
    """
    cfg = StreamsConfig.from_mapping(config)
    state = spark.read.format("statestore").load(checkpoint_location)
    queues = _state_column(state.schema, "queues")
    if queues is None:
        raise StreamsError(
            f"{checkpoint_location} is not the checkpoint of a streamstate.spark.process query "
            f"(its state has no record queues: {state.schema.simpleString()})"
        )
    delta = _state_column(state.schema, "delta")
    if delta is not None:
        _send_deltas(cfg, state.select("key.partition", delta).collect())
    offsets: list[TopicPartition] = []
    committed: dict[tuple[str, int], int] = {}
    for row in state.select(queues).collect():
        for queue in json.loads(row[0] or "[]"):
            if queue["last_offset"] < 0:
                continue
            topic, partition = str(queue["topic"]), int(queue["partition"])
            # Records held for a lagging co-partitioned source (KIP-695) are not processed:
            # the app reads them again.
            held_from = queue.get("held_from")
            next_offset = int(queue["last_offset"]) + 1 if held_from is None else int(held_from)
            partition_time = int(queue["partition_time"])
            metadata = encode_partition_time(partition_time if partition_time >= 0 else NOT_KNOWN)
            offsets.append(TopicPartition(topic, partition, next_offset, metadata=metadata))
            committed[(topic, partition)] = next_offset
    if not offsets:
        return committed
    consumer = Consumer(commit_consumer_config(cfg))
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        raise StreamsError(
            f"could not commit the offsets of {cfg.application_id!r}: {exc}; is an instance of "
            f"the app running? Stop it first"
        ) from exc
    finally:
        consumer.close()
    return committed


def _state_column(schema: StructType, field: str) -> str | None:
    """Where the task state's ``field`` is in the ``statestore`` source's rows: Spark 4.0
    nests the state of ``applyInPandasWithState`` as ``value.groupState``."""
    from pyspark.sql.types import StructType

    value = schema["value"].dataType if "value" in schema.fieldNames() else None
    if not isinstance(value, StructType):
        return None
    if field in value.fieldNames():
        return f"value.{field}"
    nested = value["groupState"].dataType if "groupState" in value.fieldNames() else None
    if isinstance(nested, StructType) and field in nested.fieldNames():
        return f"value.groupState.{field}"
    return None


def _send_deltas(cfg: StreamsConfig, rows: list[Any]) -> None:
    """Sends each task's last micro-batch of writes to its stores' changelogs (a
    ``stores="local"`` query's changelog trails its checkpoint by that micro-batch, see
    ``_local_stores.py``), so the app restores what the query committed. Sent again by a
    second ``hand_over``, they are the same values: a restore converges. ``producer.*``
    settings of the app's config apply; a record the brokers refuse fails the hand-over
    (before any offset is committed) naming its topic and partition."""
    from confluent_kafka import Producer

    from streamstate.spark._local_stores import LocalStores

    producer = Producer(
        producer_config(
            cfg.bootstrap_servers,
            client_id=f"{cfg.application_id}-hand-over",
            overrides=cfg.overrides,
        )
    )
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    try:
        for partition, delta in rows:
            for topic, key, value, timestamp in LocalStores.changelog_rows_of(delta):
                while True:
                    try:
                        producer.produce(
                            topic,
                            value=value,
                            key=key,
                            partition=int(partition),
                            timestamp=timestamp or 0,
                            on_delivery=delivered,
                        )
                        break
                    except BufferError:  # the producer's queue is full: let it drain
                        producer.poll(0.1)
                    except KafkaException as exc:
                        # Refused at once (a partition the producer's metadata lacks) rather
                        # than in a delivery report: the same failure, reported the same way.
                        failed.append(f"{topic}[{partition}]: {error_text(exc)}")
                        break
                producer.poll(0)
        left = producer.flush(60)
    finally:
        # Closed now, not by the garbage collector: it would keep reconnecting meanwhile.
        # Purged first: close() waits for every queued record, without a timeout.
        producer.purge()
        producer.close()
    if left or failed:
        raise StreamsError(
            f"hand_over could not send the changelog records of the query's last micro-batch "
            f"to {cfg.bootstrap_servers}: {left} undelivered after 60 s, refused: "
            f"{failed[:5]}{' ...' if len(failed) > 5 else ''}; no offset was committed"
        )


def commit_consumer_config(cfg: StreamsConfig) -> dict[str, Any]:
    """The consumer ``hand_over`` commits with: the group ``application.id``, reached with the
    connection settings (``security.protocol``, ``sasl.*``, ``ssl.*``) of the app's main
    consumer, which commits for that group when the app runs: a secured cluster's listener
    accepts nothing less."""
    return {
        **connection_settings(cfg.overrides.get(CONSUMER_PREFIX, {})),
        "bootstrap.servers": cfg.bootstrap_servers,
        "group.id": cfg.application_id,
        "enable.auto.commit": False,
    }
