"""KIP-695 on Spark for processor graphs: a DSL stream-table join run by ``process`` waits for
a lagging co-partitioned table partition, as a ``StreamsApp`` and the ``TopologyTestDriver`` do.

Both topics are written before the query starts and read with ``maxOffsetsPerTrigger`` of
:data:`BUDGET`. Spark's Kafka source splits that budget over the partitions by their lag (at
least one offset each): each micro-batch of the start holds one record of each table partition
and six of each stream partition, so by construction a stream record reaches a task while table
records of earlier timestamps are still on the broker (checked in the first micro-batch's
offsets). A ``StreamsApp`` (``max.task.idle.ms`` 0) processes both in timestamp order, so each
click joins the table as it was at the click's time; so must ``process``, also when the query
is stopped and restarted from its checkpoint mid-way (while records are held). With
``max.task.idle.ms`` -1 (never wait) the same input joins otherwise, which shows the scenario
does test the waiting.

And a graph task resuming from a checkpoint written before graphs waited (its queues' state
without the KIP-695 fields) carries on, waiting from then on.
"""

from __future__ import annotations

import collections
import datetime
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from tests.apps import wait_until
from tests.integration.test_streams_app import new_app
from tests.spark._group_state import GroupState
from tests.spark._queues import read_all

from streamstate import Serdes, StreamsApp, StreamsBuilder, Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import BytesDeserializer
from streamstate.spark import hand_over, process
from streamstate.spark._chunks import read_chunk, to_chunks
from streamstate.spark._graph import graph_task
from streamstate.spark._idling import EndOffsets
from streamstate.testing import TopologyTestDriver

S = Serdes.String()
TABLE, STREAM = 10, 60  # records per partition of each topic
BUDGET = 14  # maxOffsetsPerTrigger: 2 x (10 + 60) records in at least ten micro-batches
# An hour ago: the app's output topic keeps its records (retention goes by timestamps).
BASE = (int(time.time() * 1000) // 60_000 - 60) * 60_000
# The queue state a graph task kept before graphs waited (KIP-695 fields absent).
OLD_QUEUE_FIELDS = {"topic", "partition", "partition_time", "last_offset", "dropped"}


def program(stream: str, table: str, out: str) -> Topology:
    """Clicks joined with the table of their key's latest value (an inner join)."""
    builder = StreamsBuilder()
    names = builder.table(table, key_serde=S, value_serde=S, materialized="table-store")
    builder.stream(stream, key_serde=S, value_serde=S).join(
        names, lambda click, name: f"{click}@{name}"
    ).to(out, key_serde=S, value_serde=S)
    return builder.build()


def _key(partition: int, n: int) -> str:
    return f"{'ab'[partition]}{n}"


def table_data() -> list[dict[str, Any]]:
    """Per partition, ten updates of five keys at 50, 150, ..., 950 ms."""
    return [
        {"key": _key(p, j % 5), "value": f"t{j}", "timestamp": BASE + 50 + 100 * j, "partition": p}
        for p in (0, 1)
        for j in range(TABLE)
    ]


def stream_data() -> list[dict[str, Any]]:
    """Per partition, sixty clicks of the same five keys at 500, 520, ..., 1680 ms: later than
    the table's first half, interleaved with its second (no two at the same time)."""
    return [
        {"key": _key(p, i % 5), "value": f"s{i}", "timestamp": BASE + 500 + 20 * i, "partition": p}
        for p in (0, 1)
        for i in range(STREAM)
    ]


Seq = dict[bytes, list[tuple[bytes, int]]]


def _sequences(records: list[tuple[bytes, bytes, int]]) -> Seq:
    """Each key's output records in order (what one and two partitions keep comparable)."""
    out: Seq = collections.defaultdict(list)
    for key, value, ts in records:
        out[key].append((value, ts))
    return dict(out)


def _driver_output(stream: str, table: str, out: str) -> Seq:
    """The TopologyTestDriver, every record piped in timestamp order."""
    with TopologyTestDriver(program(stream, table, out), {"application.id": "idle-dsl"}) as d:
        inputs = {
            topic: d.create_input_topic(topic, S.serializer, S.serializer)
            for topic in (stream, table)
        }
        tagged = [(r, table) for r in table_data()] + [(r, stream) for r in stream_data()]
        for r, topic in sorted(tagged, key=lambda rt: rt[0]["timestamp"]):
            inputs[topic].pipe_input(r["key"], r["value"], r["timestamp"])
        read = d.create_output_topic(out, BytesDeserializer(), BytesDeserializer())
        return _sequences([(r.key, r.value, r.timestamp or 0) for r in read.read_records_to_list()])


def _topics(kafka: KafkaTestCluster) -> tuple[str, str, str]:
    stream, table = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    kafka.produce(table, table_data())
    kafka.produce(stream, stream_data())
    return stream, table, kafka.create_topic(partitions=2)


def _query(
    spark: Any,
    kafka: KafkaTestCluster,
    topics: tuple[str, str, str],
    config: dict[str, Any],
    checkpoint: Path,
    *,
    collected: list[Any],
    **trigger: Any,
) -> Any:
    stream, table, out = topics
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", f"{stream},{table}")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", BUDGET)
        .load()
    )

    def keep(batch: Any, _batch_id: int) -> None:
        collected.extend(batch.collect())

    return (
        process(raw, program(stream, table, out), config)
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )


def _to_the_end(spark: Any, kafka: KafkaTestCluster, topics: Any, config: Any, cp: Path) -> Any:
    """Runs (or resumes) the query until it has read both topics; returns what it gave."""
    collected: list[Any] = []
    query = _query(spark, kafka, topics, config, cp, collected=collected, availableNow=True)
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    return collected, query


def _spark_output(rows: list[Any]) -> Seq:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    records = []
    for row in rows:
        ts = row.timestamp
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=datetime.timezone.utc)
        millis = (ts - epoch) // datetime.timedelta(milliseconds=1)
        records.append((bytes(row.key), bytes(row.value), millis))
    return _sequences(records)


def _offsets(progress: Any, topic: str) -> dict[int, int]:
    """Where a micro-batch left the source in ``topic``, per partition."""
    end = progress.sources[0].endOffset
    offsets = json.loads(end) if isinstance(end, str) else end
    return {int(p): int(o) for p, o in offsets[topic].items()}


def _premise(first: Any, stream: str, table: str) -> None:
    """The first micro-batch read part of each partition, and stream records later than table
    records it did not read (by construction: BUDGET split by lag)."""
    read_table, read_stream = _offsets(first, table), _offsets(first, stream)
    for p in (0, 1):
        assert 0 < read_table[p] < TABLE, read_table
        assert 0 < read_stream[p] < STREAM, read_stream
        latest_click = BASE + 500 + 20 * (read_stream[p] - 1)
        earliest_unread_update = BASE + 50 + 100 * read_table[p]
        assert latest_click > earliest_unread_update, (read_table, read_stream)


def _config(name: str, kafka: KafkaTestCluster, **more: Any) -> dict[str, Any]:
    return {
        "application.id": f"{name}-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
        **more,
    }


def test_a_dsl_join_waits_for_a_lagging_table_as_a_streams_app_and_the_driver(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    topics = stream, table, out = _topics(kafka)
    expected = _driver_output(stream, table, out)
    # The premise of the comparison: every key has a value before the first click, so every
    # click joins, and each of the ten updates is the one some click sees.
    joined = sum(len(v) for v in expected.values())
    assert joined == 2 * STREAM
    assert {v.split(b"@")[1] for seq in expected.values() for v, _ in seq} == {
        f"t{j}".encode() for j in range(TABLE)
    }

    app = new_app(
        apps,
        kafka,
        program(stream, table, out),
        tmp_path / "app",
        _config("app", kafka)["application.id"],
    )
    app.start()
    wait_until(lambda: sum(kafka.end_offsets(out).values()) >= joined, "the app's joins")
    from_app = _sequences([(m.key(), m.value(), m.timestamp()[1]) for m in read_all(kafka, out)])

    config = _config("idle-graph", kafka)
    rows, query = _to_the_end(spark, kafka, topics, config, tmp_path / "cp")
    progress = [p for p in query.recentProgress if p.numInputRows]
    _premise(progress[0], stream, table)
    assert len(progress) > 1, len(progress)

    assert from_app == expected
    assert _spark_output(rows) == expected
    # Nothing held at the end: hand_over commits every partition's end.
    committed = hand_over(spark, str(tmp_path / "cp"), config)
    ends = {(t, p): n for t in (stream, table) for p, n in kafka.end_offsets(t).items()}
    assert committed == ends


def test_without_idling_the_dsl_join_sees_the_table_late(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    topics = stream, table, out = _topics(kafka)
    config = _config("no-idle-graph", kafka, **{"max.task.idle.ms": -1})
    rows, query = _to_the_end(spark, kafka, topics, config, tmp_path / "cp")
    _premise(next(p for p in query.recentProgress if p.numInputRows), stream, table)
    got, expected = _spark_output(rows), _driver_output(stream, table, out)
    assert got != expected
    # Clicks that reached the task before their key's first update found no value: dropped.
    assert sum(map(len, got.values())) < sum(map(len, expected.values()))


def test_a_restart_mid_way_with_held_records_gives_the_same_joins(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    topics = stream, table, out = _topics(kafka)
    config = _config("idle-restart", kafka)
    cp = tmp_path / "cp"
    # One micro-batch (the next trigger is an hour away), then stopped between micro-batches.
    collected: list[Any] = []
    query = _query(spark, kafka, topics, config, cp, collected=collected, processingTime="1 hour")
    wait_until(lambda: query.lastProgress is not None, "the first micro-batch", timeout=300)
    query.stop()
    assert query.exception() is None, query.exception()
    (first,) = [p for p in query.recentProgress if p.numInputRows]
    _premise(first, stream, table)
    read_table = _offsets(first, table)
    # Every update read is earlier than every click (the first click is at 500 ms): each task
    # processed its updates, then its table partition ran dry with lag and it held its clicks.
    # Nothing joined yet, and hand_over commits each stream partition's first held offset (a
    # StreamsApp would read them again).
    assert max(read_table.values()) <= 5, read_table
    assert collected == []
    assert hand_over(spark, str(cp), config) == {
        **{(table, p): read_table[p] for p in (0, 1)},
        **{(stream, p): 0 for p in (0, 1)},
    }

    rows, _ = _to_the_end(spark, kafka, topics, config, cp)
    assert _spark_output(collected + rows) == _driver_output(stream, table, out)


# -- a checkpoint written before graph tasks waited ---------------------------------------------


def _frames(rows: list[tuple[str, int, str, str, int]]) -> list[Any]:
    """Spark's Kafka source rows of partition 0 (topic, offset, key, value, timestamp ms),
    packed as ``process`` packs them for the grouped operator."""
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([r[2].encode() for r in rows], pa.binary()),
            "value": pa.array([r[3].encode() for r in rows], pa.binary()),
            "topic": pa.array([r[0] for r in rows], pa.string()),
            "partition": pa.array([0] * len(rows), pa.int32()),
            "offset": pa.array([r[1] for r in rows], pa.int64()),
            "timestamp": pa.array([r[4] * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
        }
    )
    return [pa.Table.from_batches(list(to_chunks([batch]))).to_pandas()]


def _joined(frames: Any) -> list[str]:
    return [
        row["value"].decode()
        for frame in frames
        for chunk in frame["chunk"]
        if chunk is not None
        for batch in read_chunk(chunk)
        for row in batch.to_pylist()
    ]


def test_a_graph_task_resumes_from_state_kept_before_graphs_waited(
    kafka: KafkaTestCluster,
) -> None:
    stream, table = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    kafka.produce(table, [("k", "t0", 100), ("k", "t1", 300)])
    kafka.produce(stream, [("k", "s0", 200), ("k", "s1", 400)])
    topology = program(stream, table, "out")
    state = GroupState()
    # What the task kept before this change (graphs never waited): written here with
    # max.task.idle.ms -1, which keeps no KIP-695 field, as that code did.
    old = graph_task(topology, _config("resume", kafka, **{"max.task.idle.ms": -1}), False)
    first = [(table, 0, "k", "t0", 100), (stream, 0, "k", "s0", 200)]
    assert _joined(old.run((0,), _frames(first), state)) == ["s0@t0"]
    assert {field for q in json.loads(state.get[1]) for field in q} == OLD_QUEUE_FIELDS

    task = graph_task(topology, _config("resume", kafka), False)
    try:
        # The click at 400 arrives alone while the update at 300 is on the broker: held.
        assert _joined(task.run((0,), _frames([(stream, 1, "k", "s1", 400)]), state)) == []
        held = {q["topic"]: q.get("held_from") for q in json.loads(state.get[1])}
        assert held == {stream: 1, table: None}
        # The update comes: the held click joins it, as in a StreamsApp.
        assert _joined(task.run((0,), _frames([(table, 1, "k", "t1", 300)]), state)) == ["s1@t1"]
    finally:
        EndOffsets.close_all()  # the task read the end offsets from this (the test's) process
