"""Spark streaming: ``stamp`` vs ``from_json``, and ``process`` vs hand-written
``applyInPandasWithState``, each pair in the same streaming query shape on one Spark session.

Every round is a fresh streaming query over a topic of the real broker: Spark's Kafka source
from the earliest offsets, ``Trigger.AvailableNow`` with ``maxOffsetsPerTrigger`` set to a
quarter of the topic (four micro-batches, so state carries between them; quick: two), the
``noop`` sink.
Each query also observes how many rows it produced, and the round checks that number.

(a) ``stamp`` (JSON value → struct, timestamp from a JSON field, drop metrics observed; with
the ``partition_time`` column and its state, and with ``partition_time=False``: stateless) vs
``from_json`` + column expressions (the key decoded with ``conv(hex(key))``, the timestamp read
from the struct; no admission rules: Spark has none). 1M records (quick: 50k), 2 partitions.

(b) ``process`` with a click-count processor (count per user in a store, ``ctx.send`` of the
running count) vs the same count hand-written: ``groupBy(key).applyInPandasWithState`` keeping
the count per user in Spark's state and emitting the running count of each click. 400k clicks
over 5,000 users (quick: 20k over 250), 2 partitions. Without streamstate's fix for PySpark
4.0's ``applyInPandasWithState`` reader (``streamstate.spark._pyspark_compat``) the
hand-written version fails on this pyarrow, so it runs with the fix too.

In full mode each benchmark runs one warm-up query first (the first streaming query of a
session pays for starting Kafka consumers and Python workers), then times three rounds; quick
mode times one round without warm-up, a smoke run whose figures are not comparable.
"""

from __future__ import annotations

import json
import struct
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest
from benches._common import QUICK, size
from confluent_kafka import Producer
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from streamstate import Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import JsonDeserializer, LongDeserializer
from streamstate.spark import _pyspark_compat, process, stamp
from streamstate.timestamps import JsonFieldTimestampExtractor

STAMP_N = size(1_000_000)
PROCESS_N = size(400_000)
USERS = size(5_000)
PARTITIONS = 2
ROUNDS = 1 if QUICK else 3
# Quick mode (CI) keeps the suite short: streaming queries pay a fixed cost per micro-batch and
# per query, which small inputs cannot amortize anyway.
WARMUP = 0 if QUICK else 1
MICRO_BATCHES = 2 if QUICK else 4
VALUE_DDL = "id bigint, meta struct<ts: bigint, source: string>, tags array<string>, score double"


def _produce(servers: str, topic: str, records: Iterator[tuple[bytes, bytes]]) -> None:
    producer = Producer(
        {"bootstrap.servers": servers, "linger.ms": 50, "queue.buffering.max.messages": 1_000_000}
    )
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise RuntimeError(f"records to {topic!r} were not delivered")


def _event(i: int) -> tuple[bytes, bytes]:
    ts = 1_700_000_000_000 + i * 10 - (500 if i % 7 == 0 else 0)
    doc = {"id": i, "meta": {"ts": ts, "source": f"s{i % 13}"}, "tags": ["a", f"t{i % 5}"]}
    return struct.pack(">q", i), json.dumps({**doc, "score": i / 4}).encode()


def _click(i: int) -> tuple[bytes, bytes]:
    return b"user-%d" % ((i * 7919) % USERS), b"click"


def _timing(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_enable")) or not config.getoption("benchmark_disable")


@pytest.fixture(scope="module")
def events(kafka: KafkaTestCluster, request: pytest.FixtureRequest) -> tuple[str, int]:
    n = STAMP_N if _timing(request.config) else 300
    topic = kafka.create_topic(f"bench-events-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    _produce(kafka.bootstrap_servers, topic, (_event(i) for i in range(n)))
    return topic, n


@pytest.fixture(scope="module")
def clicks(kafka: KafkaTestCluster, request: pytest.FixtureRequest) -> tuple[str, int]:
    n = PROCESS_N if _timing(request.config) else 300
    topic = kafka.create_topic(f"bench-clicks-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    _produce(kafka.bootstrap_servers, topic, (_click(i) for i in range(n)))
    return topic, n


def _source(spark: Any, kafka: KafkaTestCluster, topic: str, n: int) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max(1, n // MICRO_BATCHES))
        .load()
    )


def run_to_end(out: Any, checkpoint: str) -> Any:
    """Runs the streaming DataFrame ``out`` into the ``noop`` sink to the end of its input
    (``Trigger.AvailableNow``) from ``checkpoint``, observing the rows it produces as
    ``bench_rows``; the finished query (raises if it failed)."""
    query = (
        out.observe("bench_rows", F.count(F.lit(1)).alias("rows"))
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return query


def _run(build: Callable[[], Any]) -> int:
    """Runs the query ``build()`` returns to the end of its topic; the rows it produced."""
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as checkpoint:
        query = run_to_end(build(), checkpoint)
        return sum(
            int(p.observedMetrics["bench_rows"]["rows"])
            for p in query.recentProgress
            if "bench_rows" in p.observedMetrics
        )


def _time(benchmark: Any, build: Callable[[int], Any], n: int, implementation: str) -> None:
    """Times the query ``build(n)`` (after a warm-up run in full mode); every round must
    produce n rows."""
    benchmark.extra_info.update(rows=n, users=USERS, implementation=implementation)
    rows = benchmark.pedantic(
        _run, args=(lambda: build(n),), rounds=ROUNDS, warmup_rounds=WARMUP, iterations=1
    )
    assert rows == n


# ---------------------------------------------------------------------------------------
# (a) stamp vs from_json
# ---------------------------------------------------------------------------------------

GROUP_STAMP = (
    f"streaming stamp vs from_json (Kafka source, AvailableNow, {MICRO_BATCHES} micro-batches)"
)


def _stamp_query(
    spark: Any, kafka: KafkaTestCluster, topic: str, n: int, *, partition_time: bool = True
) -> Any:
    return stamp(
        _source(spark, kafka, topic, n),
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=JsonFieldTimestampExtractor("meta.ts"),
        value_schema=VALUE_DDL,
        partition_time=partition_time,
    )


def _stateless_stamp_query(spark: Any, kafka: KafkaTestCluster, topic: str, n: int) -> Any:
    """The same columns as the ``from_json`` query: no ``partition_time``, so no state."""
    return _stamp_query(spark, kafka, topic, n, partition_time=False)


def _from_json_query(spark: Any, kafka: KafkaTestCluster, topic: str, n: int) -> Any:
    return (
        _source(spark, kafka, topic, n)
        .select(
            "topic",
            "partition",
            "offset",
            F.conv(F.hex("key"), 16, 10).cast("bigint").alias("key"),
            F.from_json(F.col("value").cast("string"), VALUE_DDL).alias("value"),
        )
        .select("*", F.col("value.meta.ts").alias("timestamp"))
    )


@pytest.mark.benchmark(group=GROUP_STAMP)
@pytest.mark.parametrize(
    "implementation",
    [
        "streamstate.spark.stamp (streaming)",
        "streamstate.spark.stamp (streaming, partition_time=False)",
        "from_json + column expressions",
    ],
)
def bench_streaming_stamp(
    benchmark: Any, kafka: KafkaTestCluster, spark: Any, events: Any, implementation: str
) -> None:
    build = {
        "streamstate.spark.stamp (streaming)": _stamp_query,
        "streamstate.spark.stamp (streaming, partition_time=False)": _stateless_stamp_query,
        "from_json + column expressions": _from_json_query,
    }[implementation]
    _time(benchmark, lambda n: build(spark, kafka, events[0], n), events[1], implementation)


# ---------------------------------------------------------------------------------------
# (b) process vs hand-written applyInPandasWithState
# ---------------------------------------------------------------------------------------

GROUP_PROCESS = (
    "click counts on Spark streams: process vs applyInPandasWithState "
    f"({MICRO_BATCHES} micro-batches)"
)


def _click_topology(topic: str) -> Topology:
    topology = Topology()
    topology.add_store("counts", persistent=False, logged=False)

    # Defined here, not at module level, so that Spark's workers get it by value (they cannot
    # import the benchmark module).
    @topology.processor(sources=[topic], stores=["counts"], sinks=["counts-out"])
    def count_click(ctx: Any, record: Any) -> None:
        """One more click for the user; emit the running count."""
        counts = ctx.store("counts")
        n = int(counts.get(record.key) or b"0") + 1
        counts.put(record.key, b"%d" % n)
        ctx.send("counts-out", record.key, b"%d" % n)

    return topology


def _process_query(spark: Any, kafka: KafkaTestCluster, topic: str, n: int) -> Any:
    config = {"application.id": "bench-process", "bootstrap.servers": kafka.bootstrap_servers}
    return process(_source(spark, kafka, topic, n), _click_topology(topic), config)


def _hand_written_query(spark: Any, kafka: KafkaTestCluster, topic: str, n: int) -> Any:
    def count_by_hand(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        """The same count against Spark's own API: the state is the user's count."""
        # PySpark 4.0 cannot read several rows per group under this pyarrow without the fix
        # streamstate installs in its workers; the baseline needs it too.
        assert _pyspark_compat.install()
        count = state.get[0] if state.exists else 0
        for frame in frames:
            n = len(frame)
            values = [b"%d" % c for c in range(count + 1, count + n + 1)]
            count += n
            yield pd.DataFrame({"topic": "counts-out", "key": [key[0]] * n, "value": values})
        state.update((count,))

    return (
        _source(spark, kafka, topic, n)
        .select("key", "value")
        .groupBy("key")
        .applyInPandasWithState(
            count_by_hand,
            "topic string, key binary, value binary",
            "count bigint",
            "append",
            GroupStateTimeout.NoTimeout,
        )
    )


@pytest.mark.benchmark(group=GROUP_PROCESS)
@pytest.mark.parametrize("implementation", ["streamstate.spark.process", "applyInPandasWithState"])
def bench_streaming_process(
    benchmark: Any, kafka: KafkaTestCluster, spark: Any, clicks: Any, implementation: str
) -> None:
    build = _process_query if implementation.startswith("streamstate") else _hand_written_query
    _time(benchmark, lambda n: build(spark, kafka, clicks[0], n), clicks[1], implementation)
