"""A DSL program on Spark (``streamstate.spark.process`` over a processor graph), on the real
broker and a real local Spark, run three ways with the same input: the ``TopologyTestDriver``,
a ``StreamsApp`` and Spark (a streaming run over the users, then restarted from its
checkpoint over the clicks in several micro-batches; ``process`` is streaming-only, as
``applyInPandasWithState`` is); every way must give the same output records and
the same final store contents. And what Spark cannot run is refused at ``process(...)``.

The program: clicks (``user -> page``) counted per user, counted per user and 1-minute window
(grace 10 s, ``suppress(until_window_closes)``), and joined with the users table (co-partitioned).

Premises made to hold by construction:

* The driver has one partition per topic, so one stream time; the app and Spark have two
  tasks, each with its partition's stream time. Users 0-2 are produced to partition 0 and
  users 3-5 to partition 1, and every click of user ``k`` has a twin of user ``k + 3`` with the
  same timestamp, piped to the driver right after it: each task's stream time at each of its
  records is the driver's, so windows close (and late records drop) at the same records.
* A stream-table join reads the table as it is when the click arrives: the table is loaded
  first everywhere (the app's store holds every user, Spark's streaming query has run over
  the users before any click exists).
* Several micro-batches: ``maxOffsetsPerTrigger`` of 25 over 120 clicks, checked in the
  query's progress.
"""

from __future__ import annotations

import collections
import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.apps import wait_until
from tests.integration.test_streams_app import new_app

from streamstate import (
    BufferConfig,
    JoinWindows,
    Materialized,
    Processor,
    PunctuationType,
    Serdes,
    StreamsApp,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    TopologyError,
)
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import BytesDeserializer
from streamstate.spark import hand_over, process
from streamstate.testing import TopologyTestDriver

S = Serdes.String()
# A minute boundary an hour ago: the window store's changelog deletes records older than its
# retention (a day more than the windows'), by their timestamps.
BASE = (int(time.time() * 1000) // 60_000 - 60) * 60_000
OUTPUTS = ("counts", "windows", "joined")
# The suppression buffer is a logged store too (what it still holds is its final content).
STORES = ("counts", "per-minute", "users-store", "KTABLE-SUPPRESS-STATE-STORE-0000000008")
TIMESTAMPED = STORES[:3]


def program(clicks: str, users: str, out: dict[str, str]) -> Topology:
    """The DSL program (see the module doc); ``out`` names its three sink topics."""
    builder = StreamsBuilder()
    stream = builder.stream(clicks, key_serde=S, value_serde=S)
    table = builder.table(users, key_serde=S, value_serde=S, materialized="users-store")
    (
        stream.group_by_key()
        .count(materialized=Materialized("counts", caching=False))
        .to_stream()
        .to(out["counts"], value_serde=Serdes.Long())
    )
    (
        stream.group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000))
        .count(materialized=Materialized("per-minute", caching=False))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to(out["windows"], value_serde=Serdes.Long())
    )
    stream.join(table, lambda page, name: f"{page}@{name}").to(
        out["joined"], key_serde=S, value_serde=S
    )
    return builder.build()


def users_data() -> list[dict[str, Any]]:
    """Users 0, 1, 3, 4 have a name (2 and 5 are unknown to the join)."""
    return [
        {"key": f"u{k}", "value": f"name-{k}", "timestamp": BASE, "partition": k // 3}
        for k in (0, 1, 3, 4)
    ]


def clicks_data() -> list[dict[str, Any]]:
    """60 clicks of users 0-2 over 7 minutes, every 10th 75 s behind (late: its window
    has closed), each followed by its twin of user ``k + 3`` in partition 1."""
    records = []
    for i in range(60):
        k = (i * 5) % 3
        ts = BASE + 1_000 + i * 7_000 - (75_000 if i % 10 == 9 else 0)
        for user in (k, k + 3):
            records.append(
                {"key": f"u{user}", "value": f"p{i}", "timestamp": ts, "partition": user // 3}
            )
    return records


Seq = dict[str, dict[bytes, list[tuple[bytes | None, int]]]]


def _sequences(records: list[tuple[str, bytes, bytes | None, int]]) -> Seq:
    """Per output ("counts", ...) or changelog ("changelog:<store>") topic label, each key's
    records in order: what partitioning keeps comparable between one and two partitions."""
    out: Seq = collections.defaultdict(lambda: collections.defaultdict(list))
    for label, key, value, ts in records:
        out[label][key].append((value, ts))
    return {label: dict(keys) for label, keys in out.items()}


def _final(seq: Seq) -> dict[str, dict[bytes, tuple[bytes | None, int]]]:
    """Each store's final contents, replayed from its changelog (a tombstone deletes), with
    the timestamps of the DSL's timestamped stores (the suppression buffer's changelog records
    get the producer's clock, which differs between the three ways)."""
    final: dict[str, dict[bytes, tuple[bytes | None, int]]] = {}
    for label, keys in seq.items():
        if label.startswith("changelog:"):
            timed = label.removeprefix("changelog:") in TIMESTAMPED
            final[label] = {
                k: (v[-1][0], v[-1][1] if timed else 0) for k, v in keys.items() if v[-1][0]
            }
    return final


def _labels(app_id: str, out: dict[str, str]) -> dict[str, str]:
    labels = {topic: name for name, topic in out.items()}
    labels.update({f"{app_id}-{s}-changelog": f"changelog:{s}" for s in STORES})
    return labels


def _driver_run(topology: Topology, out: dict[str, str], clicks: str, users: str) -> Any:
    driver = TopologyTestDriver(topology, {"application.id": "dsl-driver"})
    users_in = driver.create_input_topic(users, S.serializer, S.serializer)
    clicks_in = driver.create_input_topic(clicks, S.serializer, S.serializer)
    for r in users_data():
        users_in.pipe_input(r["key"], r["value"], r["timestamp"])
    for r in clicks_data():
        clicks_in.pipe_input(r["key"], r["value"], r["timestamp"])
    records: list[tuple[str, bytes, bytes | None, int]] = []
    for topic, label in _labels("dsl-driver", out).items():
        read = driver.create_output_topic(topic, BytesDeserializer(), BytesDeserializer())
        records += [(label, r.key, r.value, r.timestamp or 0) for r in read.read_records_to_list()]
    return driver, _sequences(records)


def _broker_records(kafka: KafkaTestCluster, labels: dict[str, str]) -> Seq:
    records = []
    for topic, label in labels.items():
        total = sum(kafka.end_offsets(topic).values())
        consumer = kafka.consumer()
        consumer.subscribe([topic])
        got: list[Any] = []

        def done(consumer: Any = consumer, got: list[Any] = got, total: int = total) -> bool:
            got.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
            return len(got) >= total

        wait_until(done, f"every record of {topic}")
        consumer.close()
        got.sort(key=lambda m: (m.partition(), m.offset()))
        records += [(label, m.key(), m.value(), m.timestamp()[1]) for m in got]
    return _sequences(records)


def _spark_records(rows: list[Any], labels: dict[str, str]) -> Seq:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    records = []
    for row in rows:
        ts = row.timestamp
        millis = -1  # a changelog record with no timestamp of its own (see _final)
        if ts is not None:
            if ts.tzinfo is None:
                ts = ts.replace(tzinfo=datetime.timezone.utc)
            millis = (ts - epoch) // datetime.timedelta(milliseconds=1)
        value = None if row.value is None else bytes(row.value)
        records.append((labels[row.topic], bytes(row.key), value, millis))
    return _sequences(records)


def _stream(spark: Any, kafka: KafkaTestCluster, topics: str, topology: Topology, **kw: Any) -> Any:
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topics)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 25)
        .load()
    )
    return process(raw, topology, kw["config"], changelog=True, stores=kw["stores"])


def _run_streaming(spark: Any, rows_df: Any, checkpoint: Path, collected: list[Any]) -> int:
    """Runs the query until the available records are processed; returns the number of
    micro-batches that had input."""

    def keep(batch: Any, _batch_id: int) -> None:
        collected.extend(batch.collect())

    query = (
        rows_df.writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)


@pytest.mark.parametrize("stores", ["spark", "local"])
def test_a_dsl_program_gives_the_same_output_and_stores_on_spark_the_driver_and_an_app(
    kafka: KafkaTestCluster, spark: Any, tmp_path: Path, apps: list[StreamsApp], stores: str
) -> None:
    """``stores="local"``: the stores on the executor's disk; its changelog trails the
    checkpoint by each task's last micro-batch, which ``hand_over`` sends to the broker."""
    clicks, users = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    out = {name: kafka.create_topic(partitions=2) for name in OUTPUTS}
    topology = program(clicks, users, out)
    driver, expected = _driver_run(program(clicks, users, out), out, clicks, users)

    # The premises: windows were emitted, late clicks dropped, both join outcomes happened.
    assert len(expected["windows"]) == 6 * 6  # six users, six closed minutes
    assert driver.metrics()["dropped-records-total"] == 12  # the late clicks
    assert 0 < sum(len(v) for v in expected["joined"].values()) < 120

    # A StreamsApp on the broker, the table loaded before any click exists.
    kafka.produce(users, users_data())
    app_id = f"dsl-app-{uuid.uuid4().hex[:6]}"
    app = new_app(apps, kafka, topology, tmp_path / "app", app_id)
    app.start()

    def loaded() -> bool:
        try:
            return sum(1 for _ in app.store("users-store").all()) == 4
        except Exception:  # not queryable until its task runs
            return False

    wait_until(loaded, "the users table loaded")

    # Spark streaming: a first run over the users alone (no click exists yet).
    spark_id = f"dsl-spark-{uuid.uuid4().hex[:6]}"
    config = {
        "application.id": spark_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(tmp_path / "spark-state"),
    }
    streamed: list[Any] = []
    rows_df = _stream(
        spark,
        kafka,
        f"{clicks},{users}",
        program(clicks, users, out),
        config=config,
        stores=stores,
    )
    _run_streaming(spark, rows_df, tmp_path / "cp", streamed)

    kafka.produce(clicks, clicks_data())
    # A restart from the checkpoint over every click, in several micro-batches.
    batches = _run_streaming(spark, rows_df, tmp_path / "cp", streamed)
    assert batches >= 2, f"{batches} micro-batches with input"

    app_labels = _labels(app_id, out)

    def app_done() -> bool:
        return sum(kafka.end_offsets(out["counts"]).values()) >= 120

    wait_until(app_done, "the app's counts of every click")
    # The app has processed every click (its counts are out): its stores are final.
    app_stores = {
        name: sorted(map(repr, app.store(name).all())) for name in ("counts", "per-minute")
    }
    from_app = _broker_records(kafka, app_labels)

    from_stream = _spark_records(streamed, _labels(spark_id, out))
    if stores == "local":
        hand_over(spark, str(tmp_path / "cp"), config)
        changelogs = {t: n for t, n in _labels(spark_id, out).items() if n.startswith("changelog:")}
        for label, keys in _broker_records(kafka, changelogs).items():
            for key, records in keys.items():
                from_stream.setdefault(label, {}).setdefault(key, []).extend(records)

    for name in OUTPUTS:
        assert from_app[name] == expected[name], name
        assert from_stream[name] == expected[name], name
    final = _final(expected)
    assert set(final) == {f"changelog:{s}" for s in STORES}
    assert _final(from_app) == final
    assert _final(from_stream) == final
    # The stores themselves, as queries read them: the app's and the driver's.
    assert app_stores == {
        "counts": sorted(map(repr, driver.get_key_value_store("counts").all())),
        "per-minute": sorted(map(repr, driver.get_window_store("per-minute").all())),
    }
    driver.close()


# -- what Spark cannot run ----------------------------------------------------------------------


class _Ticking(Processor):
    def init(self, context: Any) -> None:
        context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, lambda _now: None)

    def process(self, record: Any) -> None:
        pass


def _refused(spark: Any, topology: Topology) -> str:
    df = spark.read.format("kafka").option("kafka.bootstrap.servers", "localhost:1")
    df = df.option("subscribe", "never-read").load()
    with pytest.raises(TopologyError) as caught:
        process(df, topology, {"application.id": "refused", "bootstrap.servers": "localhost:1"})
    return str(caught.value)


def test_spark_refuses_a_repartition_at_process(spark: Any) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde=S, value_serde=S)
        .select_key(lambda _k, page: page)
        .group_by_key(key_serde=S, value_serde=S)
        .count()
        .to_stream()
        .to("out", key_serde=S, value_serde=Serdes.Long())
    )
    message = _refused(spark, builder.build())
    assert "repartition" in message
    assert "group by key instead, or run it in a StreamsApp" in message


def test_spark_refuses_wall_clock_punctuation_at_process(spark: Any) -> None:
    topology = Topology()
    topology.add_source("in", "clicks")
    topology.add_processor("ticking", _Ticking, "in")
    message = _refused(spark, topology)
    assert "('ticking', 'wall-clock')" in message


def test_spark_refuses_a_stream_stream_join_and_global_tables_at_process(spark: Any) -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.join(right, lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(1000)).to(
        "out", key_serde=S, value_serde=S
    )
    assert "stream-stream joins" in _refused(spark, builder.build())

    builder = StreamsBuilder()
    table = builder.global_table("users", key_serde=S, value_serde=S)
    builder.stream("clicks", key_serde=S, value_serde=S).join(
        table, lambda k, _v: k, lambda a, b: a + b
    ).to("out", key_serde=S, value_serde=S)
    assert "global stores" in _refused(spark, builder.build())
