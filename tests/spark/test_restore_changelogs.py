"""``streamstate.spark.restore_changelogs`` on a real local Spark session and the real broker.

Both Spark feeds must write exactly what the local runner (``restore_topic``, the code behind
``streamstate restore``) writes: the same store contents and the same checkpoint per partition.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamstate import OffsetCheckpoint, PersistentKeyValueStore, StreamsError
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import restore_changelogs
from streamstate.topic_restore import CHECKPOINT_FILE, restore_topic, store_directory

PARTITIONS = 4


def snapshot(state_dir: Path, name: str) -> dict[int, tuple[dict[bytes, bytes], dict]]:
    """Every partition's store contents and checkpoint."""
    out = {}
    for p in range(PARTITIONS):
        directory = store_directory(state_dir, name, p)
        with PersistentKeyValueStore(name, directory) as store:
            data = dict(store.all())
        out[p] = (data, OffsetCheckpoint(directory / CHECKPOINT_FILE).read())
    return out


@pytest.fixture(scope="module")
def changelog(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(partitions=PARTITIONS)
    for p in range(PARTITIONS):
        entries: list[tuple[bytes | None, bytes | None]] = []
        for i in range(2_000 + 500 * p):
            key = b"k%03d" % ((i * 13 + p) % 300)
            if i % 9 == 4:
                entries.append((key, None))
            elif i % 97 == 0:
                entries.append((None, b"null key"))
            else:
                entries.append((key, b"p%d-v%d" % (p, i)))
        kafka.produce(topic, entries, partition=p)
    return topic


@pytest.mark.parametrize("feed", ["consumer", "kafka_source"])
def test_spark_writes_the_same_stores_as_the_local_runner(
    kafka: KafkaTestCluster, spark, changelog: str, tmp_path: Path, feed: str
) -> None:
    local_dir, spark_dir = tmp_path / "local", tmp_path / "spark"
    local = restore_topic(kafka.bootstrap_servers, changelog, local_dir, store_name="s")

    rows = restore_changelogs(
        spark,
        bootstrap_servers=kafka.bootstrap_servers,
        topic=changelog,
        state_dir=spark_dir,
        store_name="s",
        feed=feed,
    )

    expected = snapshot(local_dir, "s")
    assert snapshot(spark_dir, "s") == expected
    assert all(len(data) > 100 for data, _ in expected.values())
    strip = [(r.partition, r.start_offset, r.end_offset, r.restored) for r in local]
    assert [
        (r["partition"], r["start_offset"], r["end_offset"], r["restored"]) for r in rows
    ] == strip
    assert set(rows[0]) == {"partition", "start_offset", "end_offset", "restored", "seconds"}


@pytest.mark.parametrize("feed", ["consumer", "kafka_source"])
def test_spark_resumes_from_the_checkpoints(
    kafka: KafkaTestCluster, spark, tmp_path: Path, feed: str
) -> None:
    topic = kafka.create_topic(partitions=2)
    kafka.produce(topic, [(b"a", b"1"), (b"b", b"2")], partition=0)
    kafka.produce(topic, [(b"c", b"3")], partition=1)
    first = restore_changelogs(
        spark, bootstrap_servers=kafka.bootstrap_servers, topic=topic, state_dir=tmp_path, feed=feed
    )
    assert [r["restored"] for r in first] == [2, 1]
    kafka.produce(topic, [(b"a", None), (b"d", b"4")], partition=0)

    second = restore_changelogs(
        spark,
        bootstrap_servers=kafka.bootstrap_servers,
        topic=topic,
        state_dir=tmp_path,
        partitions=[0, 1],
        feed=feed,
    )

    assert [(r["start_offset"], r["end_offset"], r["restored"]) for r in second] == [
        (2, 4, 2),
        (1, 1, 0),
    ]
    with PersistentKeyValueStore(topic, store_directory(tmp_path, topic, 0)) as store:
        assert dict(store.all()) == {b"b": b"2", b"d": b"4"}


def test_unknown_partitions_and_feeds_are_refused(
    kafka: KafkaTestCluster, spark, changelog: str, tmp_path: Path
) -> None:
    with pytest.raises(StreamsError, match="has partitions 0,1,2,3, not 9"):
        restore_changelogs(
            spark,
            bootstrap_servers=kafka.bootstrap_servers,
            topic=changelog,
            state_dir=tmp_path,
            partitions=[9],
        )
    with pytest.raises(ValueError, match="feed must be one of"):
        restore_changelogs(
            spark,
            bootstrap_servers=kafka.bootstrap_servers,
            topic=changelog,
            state_dir=tmp_path,
            feed="carrier-pigeon",
        )


def test_the_cli_spark_runner_prints_the_same_report(
    kafka: KafkaTestCluster, changelog: str, tmp_path: Path
) -> None:
    local = restore_topic(kafka.bootstrap_servers, changelog, tmp_path / "local")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamstate",
            "restore",
            "--bootstrap-servers",
            kafka.bootstrap_servers,
            "--topic",
            changelog,
            "--state-dir",
            str(tmp_path / "spark"),
            "--runner",
            "spark",
            "--spark-master",
            "local[2]",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["total_restored"] == sum(r.restored for r in local)
    assert [p["restored"] for p in report["partitions"]] == [r.restored for r in local]
    assert snapshot(tmp_path / "spark", changelog) == snapshot(tmp_path / "local", changelog)
