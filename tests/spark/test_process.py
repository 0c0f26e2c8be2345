"""``streamstate.spark.process`` on the real broker and a real local Spark.

The click-count example's processor runs on Spark's streaming Kafka source, stopped and
restarted from its checkpoint midway, and must give exactly the counts a ``StreamsApp`` gives on
the same input; its output goes through Spark's own Kafka sink. With changelog rows, a
``StreamsApp`` with the same ``application.id`` takes the state over and continues the counts.
"""

from __future__ import annotations

import collections
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from tests.spark._queues import arrow_batches_of, read_all

from streamstate import StreamsApp, Topology
from streamstate.examples.click_counts import count_clicks
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import hand_over, process

USERS = 25


def _topology(clicks: str, users: str) -> Topology:
    """The example app's topology (``streamstate/examples/click_counts.py``) over the given
    topics, with the example's own processor function."""
    topology = Topology()
    topology.add_store("counts")
    topology.add_global_store("users", topic=users)
    topology.processor(sources=[clicks], stores=["counts", "users"], sinks=["click-counts"])(
        count_clicks
    )
    return topology


def _keys(start: int, count: int) -> list[bytes]:
    return [b"user-%d" % ((i * 7) % USERS) for i in range(start, start + count)]


def _topics(kafka: KafkaTestCluster, partitions: int) -> tuple[str, str, str]:
    clicks = kafka.create_topic(partitions=partitions)
    users = kafka.create_topic(partitions=2)
    out = kafka.create_topic(partitions=2)
    if "click-counts" not in kafka.admin.list_topics(timeout=30).topics:
        kafka.create_topic("click-counts", partitions=2)
    # Users 0-19 have a name; 20-24 fall back to their key, as in the example.
    kafka.produce(users, [(b"user-%d" % u, b"name-%d" % u) for u in range(20)])
    return clicks, users, out


def _run_on_spark(
    spark: Any,
    kafka: KafkaTestCluster,
    topology: Topology,
    config: dict[str, Any],
    *,
    source: str,
    out: str,
    checkpoint: Path,
    changelog: bool = False,
    stores: str = "spark",
) -> Any:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 60)
        .load()
    )
    rows = process(raw, topology, config, changelog=changelog, stores=stores)
    # The processor sends to "click-counts"; this test keeps each run's output apart.
    redirected = rows.withColumn(
        "topic", F.when(F.col("topic") == "click-counts", F.lit(out)).otherwise(F.col("topic"))
    )
    query = (
        redirected.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return query


def _app_counts(app: StreamsApp, total: int) -> dict[bytes, int]:
    """The app's counts once they add up to ``total`` clicks."""
    deadline = time.monotonic() + 120
    while True:
        try:
            counts = {k: int(v) for k, v in app.store("counts").all()}
        except Exception:  # still rebalancing or restoring
            counts = {}
        if sum(counts.values()) >= total:
            return counts
        assert time.monotonic() < deadline, f"the app counted {sum(counts.values())} of {total}"
        time.sleep(0.3)


def _name(key: bytes) -> bytes:
    user = int(key.split(b"-")[1])
    return b"name-%d" % user if user < 20 else key


def test_click_counts_on_spark_streams_equal_a_streams_app(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    clicks, users, out = _topics(kafka, partitions=3)
    topology = _topology(clicks, users)
    spark_config = {
        "application.id": f"spark-clicks-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
    }
    where = {"source": clicks, "out": out, "checkpoint": tmp_path / "cp"}
    first, second = _keys(0, 150), _keys(150, 100)
    kafka.produce(clicks, [(k, b"click") for k in first])
    runs = [_run_on_spark(spark, kafka, topology, spark_config, **where)]
    # The global store changes between the runs: the second run's tasks catch their copy up.
    kafka.produce(users, [(b"user-1", b"renamed-1")])
    kafka.produce(clicks, [(k, b"click") for k in second])
    runs.append(_run_on_spark(spark, kafka, topology, spark_config, **where))
    assert sum(1 for q in runs for p in q.recentProgress if p.numInputRows) >= 3

    app = StreamsApp(
        topology,
        {
            "application.id": f"app-clicks-{uuid.uuid4().hex[:6]}",
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp_path / "app"),
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
        },
    )
    app.start()
    try:
        app_counts = _app_counts(app, 250)
    finally:
        app.close(60)
    assert app_counts == collections.Counter(first + second)

    # Spark's output, through Spark's Kafka sink: per user "name=1" ... "name=n", once each,
    # in order; n is the StreamsApp's count; user-1's name as the global store had it.
    sent: dict[bytes, list[bytes]] = collections.defaultdict(list)
    for message in sorted(read_all(kafka, out), key=lambda m: (m.partition(), m.offset())):
        sent[message.key()].append(message.value())
    spark_counts = {key: len(values) for key, values in sent.items()}
    assert spark_counts == app_counts
    renamed_from = collections.Counter(first)[b"user-1"] + 1
    for key, values in sent.items():
        names = [
            b"renamed-1" if key == b"user-1" and n >= renamed_from else _name(key)
            for n in range(1, app_counts[key] + 1)
        ]
        assert values == [name + b"=%d" % n for n, name in enumerate(names, start=1)]


@pytest.mark.parametrize("stores", ["spark", "local"])
def test_a_streams_app_takes_the_state_over_from_process_and_continues(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path, stores: str
) -> None:
    """``stores="local"``: the query's changelog trails its checkpoint by each task's last
    micro-batch of writes, which ``hand_over`` sends."""
    clicks, users, out = _topics(kafka, partitions=2)
    topology = _topology(clicks, users)
    config = {
        "application.id": f"handover-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(tmp_path / "app"),
        "commit.interval.ms": 200,
        "session.timeout.ms": 6000,
    }
    on_spark = _keys(0, 120)
    kafka.produce(clicks, [(k, b"click") for k in on_spark])
    checkpoint = tmp_path / "cp"
    query = _run_on_spark(
        spark,
        kafka,
        topology,
        config,
        source=clicks,
        out=out,
        checkpoint=checkpoint,
        changelog=True,
        stores=stores,
    )
    changelog = f"{config['application.id']}-counts-changelog"
    logged = sum(kafka.end_offsets(changelog).values())
    if stores == "spark":
        assert logged == 120  # one write per click
    else:
        # The premise: several micro-batches (60 records each), and the last one's writes are
        # in the checkpoint only (one per key written).
        assert sum(1 for p in query.recentProgress if p.numInputRows) >= 2
        assert 0 < logged < 120

    committed = hand_over(spark, str(checkpoint), config)
    assert committed == {(clicks, p): n for p, n in kafka.end_offsets(clicks).items()}

    after = _keys(120, 80)
    kafka.produce(clicks, [(k, b"click") for k in after])
    app = StreamsApp(topology, config)
    app.start()
    try:
        counts = _app_counts(app, 200)
    finally:
        app.close(60)
    # Restored from the changelog Spark wrote, then continued from Spark's offsets: no click
    # counted twice, none missed.
    assert counts == collections.Counter(on_spark + after)


def test_a_task_reads_partition_p_of_every_source_in_timestamp_order(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    """Two co-partitioned sources: task p merges partition p of both by timestamp, as a
    StreamsApp's PartitionGroup does, with its records split over several Arrow batches."""
    left, right = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    out = kafka.create_topic(partitions=1)
    # Record timestamps interleave the two topics: left has even ms, right odd ms.
    for topic, parity in ((left, 0), (right, 1)):
        kafka.produce(
            topic,
            [
                {
                    "key": b"k%d" % (i % 3),
                    "value": topic.encode(),
                    "partition": i % 2,
                    "timestamp": 1_000 + 2 * i + parity,
                }
                for i in range(40)
            ],
        )
    topology = Topology()
    topology.add_store("seen", persistent=False, logged=False)

    @topology.processor(sources=[left, right], stores=["seen"], sinks=["order"])
    def record_order(ctx: Any, record: Any) -> None:
        seen = ctx.store("seen")
        n = int(seen.get(b"n") or b"0") + 1
        seen.put(b"n", b"%d" % n)
        ctx.send(
            "order",
            record.key,
            b"%d:%d:%d" % (ctx.task_id, n, record.timestamp),
            headers=[("task", b"%d" % ctx.task_id), ("source", record.topic.encode())],
        )

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", f"{left},{right}")
        .option("startingOffsets", "earliest")
        .load()
    )
    config = {"application.id": "order-test", "bootstrap.servers": kafka.bootstrap_servers}
    rows = process(raw, topology, config).withColumn("topic", F.lit(out))
    with arrow_batches_of(spark, 7):
        query = (
            rows.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    by_task: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for message in read_all(kafka, out):
        task, n, ts = (int(x) for x in message.value().split(b":"))
        by_task[task].append((n, ts))
        # ctx.send's headers reach Spark's Kafka sink as the headers column.
        headers = message.headers()
        assert headers is not None and [k for k, _ in headers] == ["task", "source"]
        assert headers[0][1] == b"%d" % task
        assert headers[1][1] in (left.encode(), right.encode())
    assert sorted(by_task) == [0, 1]
    for task, seen in by_task.items():
        seen.sort()
        assert [n for n, _ in seen] == list(range(1, 41))  # 20 records of each source
        timestamps = [ts for _, ts in seen]
        assert timestamps == sorted(timestamps), task  # merged in timestamp order
        assert {ts % 2 for ts in timestamps} == {0, 1}
