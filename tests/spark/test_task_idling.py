"""KIP-695 on Spark: a task of ``process`` waits for a co-partitioned source that has lag.

Both sources are written before the query starts and read with a small ``maxOffsetsPerTrigger``.
Spark's Kafka source splits that budget over the partitions by their lag (at least one offset
each), so each micro-batch holds a few records of the low-rate ``right`` source and many of
``left``: by construction, ``right`` runs dry in every micro-batch while the broker has more of
it. A ``StreamsApp`` (``max.task.idle.ms`` 0) waits for it and processes both in timestamp
order; so must ``process``. With ``max.task.idle.ms`` -1 (never wait) the same input is seen out
of order, which shows the scenario does test the waiting.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from tests.spark._queues import read_all

from streamstate import Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import hand_over, process

LEFT, RIGHT = 60, 10  # records per partition of each source


def _order_topology(left: str, right: str) -> Topology:
    topology = Topology()
    topology.add_store("seen", persistent=False, logged=False)

    @topology.processor(sources=[left, right], stores=["seen"], sinks=["order"])
    def record_order(ctx: Any, record: Any) -> None:
        seen = ctx.store("seen")
        n = int(seen.get(b"n") or b"0") + 1
        seen.put(b"n", b"%d" % n)
        ctx.send("order", record.key, b"%d:%d:%d" % (ctx.task_id, n, record.timestamp))

    return topology


def _topics(kafka: KafkaTestCluster) -> tuple[str, str]:
    left, right = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    # Interleaved timestamps: left 1000, 1010, ...; right 1005, 1015, ... (a tenth as many).
    for topic, count, shift in ((left, LEFT, 0), (right, RIGHT, 5)):
        kafka.produce(
            topic,
            [
                {"key": b"k", "value": b"v", "partition": p, "timestamp": 1_000 + 10 * i + shift}
                for p in (0, 1)
                for i in range(count)
            ],
        )
    return left, right


def _run(
    spark: Any,
    kafka: KafkaTestCluster,
    sources: tuple[str, str],
    config: dict[str, Any],
    checkpoint: Path,
) -> tuple[dict[int, list[int]], Any]:
    """Runs the order-recording processor to the sources' end; the timestamps each task saw,
    in the order it saw them, and the query."""
    left, right = sources
    out = kafka.create_topic(partitions=1)
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", f"{left},{right}")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 2 * (LEFT + RIGHT) // 10)
        .load()
    )
    rows = process(raw, _order_topology(left, right), config).withColumn("topic", F.lit(out))
    query = (
        rows.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    seen: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for message in read_all(kafka, out):
        task, n, ts = (int(x) for x in message.value().split(b":"))
        seen[task].append((n, ts))
    return {task: [ts for _, ts in sorted(pairs)] for task, pairs in seen.items()}, query


def _premise(query: Any) -> None:
    """Every micro-batch with input took only part of the sources."""
    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    assert len(sizes) >= RIGHT and max(sizes) < 2 * (LEFT + RIGHT), sizes


def test_a_task_waits_for_a_lagging_co_partitioned_source_as_kafka_streams(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    left, right = sources = _topics(kafka)
    config = {
        "application.id": f"idle-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
    }
    seen, query = _run(spark, kafka, sources, config, tmp_path / "cp")
    _premise(query)
    assert sorted(seen) == [0, 1]
    for task, timestamps in seen.items():
        assert len(timestamps) == LEFT + RIGHT, task  # every record once, none left held
        assert timestamps == sorted(timestamps), task  # Kafka's order across both sources
    # Nothing held at the end: hand_over commits every partition's end.
    committed = hand_over(spark, str(tmp_path / "cp"), config)
    ends = {(t, p): n for t in (left, right) for p, n in kafka.end_offsets(t).items()}
    assert committed == ends


def test_without_idling_the_same_input_is_seen_out_of_order(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    sources = _topics(kafka)
    config = {
        "application.id": f"no-idle-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
        "max.task.idle.ms": -1,
    }
    seen, query = _run(spark, kafka, sources, config, tmp_path / "cp")
    _premise(query)
    for task, timestamps in seen.items():
        assert len(timestamps) == LEFT + RIGHT, task
        assert timestamps != sorted(timestamps), task
