"""``streamstate restore`` against topics that are missing or were re-created, on real brokers.

A restore must never create a topic: this file starts a second broker with Kafka's own default,
``auto.create.topics.enable=true`` (the session broker has it off), where a metadata request
that allows auto-creation would create the topic it names. And a changelog deleted and created
again with fewer records must not leave the old store behind its old checkpoint.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streamstate import OffsetCheckpoint, PersistentKeyValueStore, StreamsError, TopicPartition
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import CHECKPOINT_FILE, restore_topic, store_directory


@pytest.fixture(scope="module")
def auto_create_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    cluster = KafkaTestCluster.start_local(
        tmp_path_factory.mktemp("kafka-auto-create"),
        heap_mb=384,
        properties={"auto.create.topics.enable": "true"},
    )
    try:
        yield cluster
    finally:
        cluster.close()


def topic_exists(kafka: KafkaTestCluster, topic: str) -> bool:
    # All topics (no topic named): this request itself can never create one.
    return topic in kafka.admin.list_topics(timeout=10).topics


def test_the_broker_really_auto_creates_topics(auto_create_kafka: KafkaTestCluster) -> None:
    # The premise of the tests below: a metadata request that allows creation creates.
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": auto_create_kafka.bootstrap_servers})
    producer.list_topics(topic=topic, timeout=10)
    deadline = time.monotonic() + 30
    while not topic_exists(auto_create_kafka, topic) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic_exists(auto_create_kafka, topic)


def test_restoring_a_missing_topic_is_an_error_and_creates_nothing(
    auto_create_kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    typo = f"chnagelog-{uuid.uuid4().hex[:8]}"
    with pytest.raises(StreamsError, match="does not exist") as info:
        restore_topic(auto_create_kafka.bootstrap_servers, typo, tmp_path)
    assert info.value.topic == typo
    time.sleep(1.0)  # an auto-creation, had one been triggered, would show by now
    assert not topic_exists(auto_create_kafka, typo)


def test_the_cli_exits_non_zero_naming_the_missing_topic(
    auto_create_kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    typo = f"chnagelog-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamstate",
            "restore",
            "--bootstrap-servers",
            auto_create_kafka.bootstrap_servers,
            "--topic",
            typo,
            "--state-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode != 0
    assert typo in done.stderr and "does not exist" in done.stderr
    assert "restored" not in done.stdout
    assert not topic_exists(auto_create_kafka, typo)


def recreate(kafka: KafkaTestCluster, topic: str, partitions: int) -> None:
    kafka.admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            kafka.create_topic(topic, partitions=partitions)
            return
        except Exception:  # still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_changelog_deleted_and_recreated_with_fewer_records_is_rebuilt(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    topic = kafka.create_topic(partitions=1)
    kafka.produce(topic, [(b"old-%03d" % i, b"o") for i in range(500)], partition=0)
    restore_topic(kafka.bootstrap_servers, topic, tmp_path)
    recreate(kafka, topic, 1)
    new = [(b"new-%02d" % i, b"n") for i in range(20)]
    kafka.produce(topic, new, partition=0)

    results = restore_topic(kafka.bootstrap_servers, topic, tmp_path)

    directory = store_directory(tmp_path, topic, 0)
    with PersistentKeyValueStore(topic, directory) as store:
        assert dict(store.all()) == dict(new)
    assert (results[0].start_offset, results[0].end_offset, results[0].restored) == (0, 20, 20)
    checkpoint = OffsetCheckpoint(directory / CHECKPOINT_FILE).read()
    assert checkpoint == {TopicPartition(topic, 0): 19}
