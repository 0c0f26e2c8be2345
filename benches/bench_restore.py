"""Restoring a changelog from the real broker: ``streamstate restore`` against its ceiling and
against a plain-Python restore loop, side by side in one run.

The changelog: 2M records on one partition (quick mode: 100k), 100-byte values over 100k
distinct keys. Every contender reads it with the same consumer settings
(:func:`streamstate.changelog.restore_consumer_config`):

* ``ceiling``: a bare confluent-kafka ``consume`` loop that does nothing with the records;
  nothing that reads through confluent-kafka can be faster.
* ``streamstate``: :func:`streamstate.topic_restore.restore_topic`, the code of
  ``streamstate restore`` (StoreChangelogReader, ``process_next`` in Rust, fjall store,
  checkpoints every 5 s and at the end).
* ``python-put-loop``: the same consume loop calling ``store.put`` per record into the same
  persistent store, which is what restoring through the store's Python API costs.

Each round starts from an empty state directory; the store contents are checked after each.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from benches._changelog import DISTINCT_KEYS, consume_changelog, key, produce_changelog, value
from benches._common import size

from streamstate import PersistentKeyValueStore
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import restore_topic, store_directory

N = size(2_000_000)
ROUNDS = 3


@pytest.fixture(scope="module")
def changelog(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(f"bench-restore-{uuid.uuid4().hex[:8]}", partitions=1)
    produce_changelog(kafka.bootstrap_servers, topic, N, partitions=1)
    return topic


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-restore-") as d:
        yield Path(d)


def _check(directory: Path, name: str) -> None:
    with PersistentKeyValueStore(name, directory) as store:
        assert store.approximate_num_entries() >= min(N, DISTINCT_KEYS) // 2
        last = N - 1
        assert store.get(key(last)) == value(last)


@pytest.mark.benchmark(group="restore-2M")
def bench_ceiling_bare_consume_loop(benchmark, kafka: KafkaTestCluster, changelog: str) -> None:
    def run() -> int:
        return consume_changelog(kafka.bootstrap_servers, changelog, lambda batch: None)

    assert benchmark.pedantic(run, rounds=ROUNDS, iterations=1) == N


@pytest.mark.benchmark(group="restore-2M")
def bench_streamstate_restore(
    benchmark, kafka: KafkaTestCluster, changelog: str, state_dir: Path
) -> None:
    def setup() -> None:
        shutil.rmtree(state_dir / "s", ignore_errors=True)

    def run() -> int:
        results = restore_topic(kafka.bootstrap_servers, changelog, state_dir, store_name="s")
        return results[0].restored

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    _check(store_directory(state_dir, "s", 0), "s")


@pytest.mark.benchmark(group="restore-2M")
def bench_python_put_loop(
    benchmark, kafka: KafkaTestCluster, changelog: str, state_dir: Path
) -> None:
    directory = state_dir / "py"

    def setup() -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def run() -> int:
        with PersistentKeyValueStore("py", directory) as store:
            put = store.put

            def apply(batch) -> None:  # type: ignore[no-untyped-def]
                for message in batch:
                    k = message.key()
                    if k is not None:
                        put(k, message.value())

            return consume_changelog(kafka.bootstrap_servers, changelog, apply)

    assert benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1) == N
    _check(directory, "py")
