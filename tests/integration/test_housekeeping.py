"""Housekeeping on the real broker (issue 23, item 4): old task directories deleted by the state
cleaner, ``clean_up()``, the configs of internal topics, and existing internal topics with the
wrong partition count. Each test failed before its fix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from tests.apps import wait_until

from streamstate import StreamsError, TopologyError
from streamstate.app import State, StreamsApp, Topology
from streamstate.errors import InvalidStateStoreError
from streamstate.examples.word_count import word_count_topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.state.checkpoint import OffsetCheckpoint


def table_topology(source: str) -> Topology:
    """Upserts each record into the store ``table``; a null value deletes its key."""
    topology = Topology().add_store("table")

    @topology.processor(sources=[source], stores=["table"])
    def upsert(ctx: Any, record: Any) -> None:
        store = ctx.store("table")
        if record.value is None:
            store.delete(record.key)
        else:
            store.put(record.key, record.value)

    return topology


def new_app(
    apps: list[StreamsApp], topology: Topology, config: dict[str, Any], state_dir: Path
) -> StreamsApp:
    app = StreamsApp(
        topology,
        {**config, "state.dir": str(state_dir), "commit.interval.ms": 100},
    )
    apps.append(app)
    return app


def hosted(app: StreamsApp) -> set[int]:
    """The partitions of the tasks ``app`` runs (restored)."""
    return {
        task.partition
        for thread in app._threads
        for task in thread.active_tasks().values()
        if not task.restoring
    }


def lookup(app: StreamsApp, key: bytes, partition: int) -> bytes | None:
    try:
        value: bytes | None = app.store("table", partition).get(key)
    except InvalidStateStoreError:
        return b"<not queryable>"
    return value


def changelog(kafka: KafkaTestCluster, topic: str, partition: int) -> list[tuple[Any, Any]]:
    """Every record of ``topic``'s ``partition`` as the broker holds it now (compaction
    included): ``(key, value)`` pairs in offset order."""
    end = kafka.end_offsets(topic)[partition]
    consumer = kafka.consumer()
    consumer.assign([KafkaTopicPartition(topic, partition, OFFSET_BEGINNING)])
    records: list[tuple[Any, Any]] = []
    position = -1
    while position < end - 1:
        messages = consumer.consume(500, 1.0)
        if not messages:
            (tp,) = consumer.position([KafkaTopicPartition(topic, partition)])
            if tp.offset >= end:  # compaction gaps at the end
                break
            continue
        for message in messages:
            assert message.error() is None, message.error()
            records.append((message.key(), message.value()))
            position = message.offset()
    return records


@pytest.fixture
def fast_log_cleaner(kafka: KafkaTestCluster) -> Iterator[None]:
    """The brokers' log cleaner looks for work every 100 ms instead of every 15 s (a dynamic
    setting, removed afterwards), so compaction happens within seconds."""
    brokers = [str(b) for b in kafka.admin.list_topics(timeout=30).brokers]

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry("log.cleaner.backoff.ms", value, incremental_operation=op)
        resources = [
            ConfigResource(ResourceType.BROKER, b, incremental_configs=[entry]) for b in brokers
        ]
        for future in kafka.admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)

    alter(AlterConfigOpType.SET, "100")
    try:
        yield
    finally:
        alter(AlterConfigOpType.DELETE, None)


# --- old task directories --------------------------------------------------------------------


def test_a_task_back_after_its_tombstones_were_compacted_away_has_no_deleted_keys(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path, fast_log_cleaner: None
) -> None:
    """A (state.cleanup.delay.ms = 1 s) runs both tasks and checkpoints key ``k<p>``; B joins
    and takes task p; B deletes ``k<p>``; the broker compacts the put and the tombstone away;
    B leaves and task p comes back to A. Restoring from A's old checkpoint would bring ``k<p>``
    back (nothing after the checkpoint says it was deleted); Kafka's state cleaner deletes the
    task directory once unassigned for longer than the delay, so A restores from scratch."""
    source = kafka.create_topic(partitions=2)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    topic = f"{app_id}-table-changelog"
    # Compacts at once: every record rolls a segment, tombstones go at the next cleaning.
    kafka.create_topic(
        topic,
        partitions=2,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.0001",
            "delete.retention.ms": "0",
        },
    )
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "session.timeout.ms": 6000,
        "state.cleanup.delay.ms": 1000,
    }
    a = new_app(apps, table_topology(source), config, tmp_path / "a")
    a.start()
    kafka.produce(source, [(b"k0", b"v0")], partition=0)
    kafka.produce(source, [(b"k1", b"v1")], partition=1)
    app_dir = tmp_path / "a" / app_id
    wait_until(
        lambda: all(OffsetCheckpoint(app_dir / str(p) / ".checkpoint").read() for p in (0, 1)),
        "A's checkpoints of both tasks",
    )
    b = new_app(apps, table_topology(source), config, tmp_path / "b")
    b.start()
    wait_until(
        lambda: len(hosted(a)) == 1 and len(hosted(b)) == 1 and hosted(a) != hosted(b),
        "one task on each instance",
    )
    (p,) = hosted(b)
    key = b"k%d" % p
    kafka.produce(source, [(key, None)], partition=p)
    wait_until(lambda: lookup(b, key, p) is None, "B deleting the key")
    # Records after the tombstone roll its segment so that the cleaner may remove it.
    filler = iter(range(1_000_000))

    def compacted() -> bool:
        kafka.produce(source, [(b"filler", b"%d" % next(filler))], partition=p)
        return key not in {k for k, _ in changelog(kafka, topic, p)}

    wait_until(compacted, f"the broker compacting {key!r} and its tombstone away", interval=0.5)
    # The premise holds: the changelog no longer says the key was ever there or deleted.
    wait_until(lambda: not (app_dir / str(p)).exists(), "A's cleaner deleting task p's directory")
    b.close(30)
    wait_until(lambda: hosted(a) == {0, 1} and a.state is State.RUNNING, "A running both tasks")
    assert lookup(a, key, p) is None
    assert lookup(a, b"k%d" % (1 - p), 1 - p) == b"v%d" % (1 - p)
    assert lookup(a, b"filler", p) is not None


def test_the_cleaner_keeps_directories_of_tasks_this_instance_runs(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    """With a tiny delay the cleaner runs often; the directories of running tasks stay (and
    their stores keep answering), those of tasks no one runs here go.

    The unassigned directory is made once both tasks have processed their record (each
    partition's task on its own schedule: one record processed says nothing of the other), so
    the pass that deletes it is one that ran beside both running tasks."""
    source = kafka.create_topic(partitions=2)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    app_dir = tmp_path / app_id
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.cleanup.delay.ms": 50,
    }
    app = new_app(apps, table_topology(source), config, tmp_path)
    app.start()
    kafka.produce(source, [(b"a", b"1")], partition=0)
    kafka.produce(source, [(b"b", b"2")], partition=1)

    def both_processed() -> bool:
        return lookup(app, b"a", 0) == b"1" and lookup(app, b"b", 1) == b"2"

    wait_until(both_processed, "the app processing both partitions")
    stale = app_dir / "7"
    stale.mkdir()
    (stale / ".checkpoint").write_text("0\n0\n")
    wait_until(lambda: not stale.exists(), "the cleaner deleting the unassigned directory")
    assert (app_dir / "0").is_dir() and (app_dir / "1").is_dir()
    assert (app_dir / "kafka-streams-process-metadata").is_file()
    assert both_processed()


# --- clean_up() ------------------------------------------------------------------------------


def test_clean_up_deletes_local_state_only_while_not_running(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    source = kafka.create_topic(partitions=1)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    config = {"application.id": app_id, "bootstrap.servers": kafka.bootstrap_servers}
    app = new_app(apps, table_topology(source), config, tmp_path)
    app.clean_up()  # CREATED, nothing there yet: nothing to do
    app.start()
    kafka.produce(source, [(b"a", b"1")])
    wait_until(lambda: lookup(app, b"a", 0) == b"1", "the app processing")
    with pytest.raises(StreamsError, match="while it is running"):
        app.clean_up()
    assert (tmp_path / app_id / "0").is_dir()
    app.close(30)
    app.clean_up()
    assert not (tmp_path / app_id / "0").exists()
    # Restarted on the cleaned directory, the store is restored from the changelog.
    again = new_app(apps, table_topology(source), config, tmp_path)
    again.start()
    wait_until(lambda: lookup(again, b"a", 0) == b"1", "the store restored")
    with pytest.raises(StreamsError, match="while it is running"):
        again.clean_up()


# --- internal topics -------------------------------------------------------------------------


def topic_configs(kafka: KafkaTestCluster, topic: str) -> dict[str, tuple[str, bool]]:
    """``topic``'s configs as the broker describes them: ``{name: (value, set on the topic)}``."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    (future,) = kafka.admin.describe_configs([resource]).values()
    return {
        name: (entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        for name, entry in future.result(timeout=30).items()
    }


def test_topic_configs_reach_every_internal_topic(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    """``topic.*`` sets those configs on the changelog and the repartition topic the app
    creates, over the library's defaults (compaction, infinite retention), which stay;
    ``replication.factor`` is what the topics are created with."""
    source = kafka.create_topic(partitions=2)
    sink = kafka.create_topic(partitions=2)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "replication.factor": 1,
        "topic.min.insync.replicas": 1,
        "topic.max.message.bytes": "2000000",
        "topic.segment.ms": 3_600_000,
    }
    app = new_app(apps, word_count_topology(source, sink), config, tmp_path)
    app.start()
    wait_until(lambda: app.state is State.RUNNING, "RUNNING")
    changelog_topic = f"{app_id}-counts-changelog"
    repartition = f"{app_id}-words-repartition"
    for topic in (changelog_topic, repartition):
        configs = topic_configs(kafka, topic)
        assert configs["min.insync.replicas"] == ("1", True), topic
        assert configs["max.message.bytes"] == ("2000000", True), topic
        assert configs["segment.ms"] == ("3600000", True), topic
        metadata = kafka.admin.list_topics(topic, timeout=30).topics[topic]
        assert {len(p.replicas) for p in metadata.partitions.values()} == {1}
    assert topic_configs(kafka, changelog_topic)["cleanup.policy"] == ("compact", True)
    assert topic_configs(kafka, repartition)["cleanup.policy"] == ("delete", True)
    assert topic_configs(kafka, repartition)["retention.ms"] == ("-1", True)


def test_replication_factor_reaches_the_broker(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    """One broker cannot hold two replicas: the creation fails, naming the topic, so the
    setting reached the broker."""
    source = kafka.create_topic(partitions=1)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "replication.factor": 2,
    }
    app = new_app(apps, table_topology(source), config, tmp_path)
    with pytest.raises(StreamsError, match=f"{app_id}-table-changelog") as info:
        app.start()
    assert "replication" in str(info.value).lower()
    assert app.state is State.CREATED


def test_an_existing_changelog_with_the_wrong_partition_count_fails_start(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    source = kafka.create_topic(partitions=2)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    topic = kafka.create_topic(f"{app_id}-table-changelog", partitions=3)
    config = {"application.id": app_id, "bootstrap.servers": kafka.bootstrap_servers}
    app = new_app(apps, table_topology(source), config, tmp_path)
    with pytest.raises(TopologyError, match=f"{topic}.*3 partitions.*needs 2") as info:
        app.start()
    assert info.value.topic == topic
    # Not started: the directory is free for a fixed run.
    assert app.state is State.CREATED


def test_an_existing_dsl_changelog_with_the_wrong_partition_count_fails_start(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    source = kafka.create_topic(partitions=2)
    sink = kafka.create_topic(partitions=2)
    app_id = f"hk-{uuid.uuid4().hex[:10]}"
    topic = kafka.create_topic(f"{app_id}-counts-changelog", partitions=1)
    config = {"application.id": app_id, "bootstrap.servers": kafka.bootstrap_servers}
    app = new_app(apps, word_count_topology(source, sink), config, tmp_path)
    with pytest.raises(TopologyError, match=f"{topic}.*1 partitions.*needs 2"):
        app.start()
    assert not kafka.admin.list_topics(timeout=30).topics.get(f"{app_id}-words-repartition")
