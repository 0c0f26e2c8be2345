"""Restoring an 8-partition changelog: the local runner against ``restore_changelogs`` on a
local Spark session (``local[2]``), with each of its two feeds, side by side in one run.

The changelog: 2M records over 8 partitions (quick mode: 100k), 100-byte values over 100k
distinct keys (``benches/_changelog.py``). Every round starts from an empty state directory, and
every contender must restore every record.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from benches._changelog import produce_changelog
from benches._common import size

from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import restore_changelogs
from streamstate.topic_restore import restore_topic

N = size(2_000_000)
PARTITIONS = 8
ROUNDS = 2


@pytest.fixture(scope="module")
def changelog(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(f"bench-spark-restore-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    produce_changelog(kafka.bootstrap_servers, topic, N, partitions=PARTITIONS)
    return topic


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-spark-restore-") as d:
        yield Path(d)


@pytest.mark.benchmark(group="restore-8-partitions")
def bench_local_runner(benchmark, kafka: KafkaTestCluster, changelog: str, state_dir: Path) -> None:
    def run() -> int:
        shutil.rmtree(state_dir, ignore_errors=True)
        return sum(r.restored for r in restore_topic(kafka.bootstrap_servers, changelog, state_dir))

    assert benchmark.pedantic(run, rounds=ROUNDS, iterations=1) == N


@pytest.mark.parametrize("feed", ["consumer", "kafka_source"])
@pytest.mark.benchmark(group="restore-8-partitions")
def bench_spark_local2(
    benchmark, kafka: KafkaTestCluster, spark, *, changelog: str, state_dir: Path, feed: str
) -> None:
    def run() -> int:
        shutil.rmtree(state_dir, ignore_errors=True)
        rows = restore_changelogs(
            spark,
            bootstrap_servers=kafka.bootstrap_servers,
            topic=changelog,
            state_dir=state_dir,
            feed=feed,
        )
        return sum(int(r["restored"]) for r in rows)

    assert benchmark.pedantic(run, rounds=ROUNDS, iterations=1) == N
