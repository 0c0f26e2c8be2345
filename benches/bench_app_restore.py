"""Restoring inside a :class:`~streamstate.StreamsApp` (the state updater, KIP-869) against
``streamstate restore`` of the same changelog, side by side in one run.

The changelog: 1M records on one partition (quick mode: 50k), 100-byte values over 100k
distinct keys (``benches/_changelog.py``), written as the changelog of store ``counts`` of one
application id. Each round starts from an empty state directory:

* ``streamstate-restore``: :func:`streamstate.topic_restore.restore_topic` (the code of
  ``streamstate restore``) restores the changelog into a persistent store.
* ``app-start-to-running``: a ``StreamsApp`` whose one task owns that store, timed from
  ``start()`` until the client is ``RUNNING``: joining the group (the broker's initial rebalance
  delay is 0, as in the tests), then the state updater restoring the store. Its source topic is
  empty, so nothing is processed.

Both stores' contents are checked after each round. The target is an app at >= 0.9x the speed
of ``streamstate restore`` (the group join is the difference).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from benches._changelog import DISTINCT_KEYS, key, produce_changelog, value
from benches._common import size

from streamstate import PersistentKeyValueStore
from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import restore_topic, store_directory

N = size(1_000_000)
ROUNDS = 3
_APP_ID = f"bench-app-restore-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def source(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(f"bench-app-source-{uuid.uuid4().hex[:8]}", partitions=1)
    # Not compacted: the log cleaner would otherwise shrink it between rounds, and the two
    # contenders must restore the very same records.
    changelog = kafka.create_topic(f"{_APP_ID}-counts-changelog", partitions=1)
    produce_changelog(kafka.bootstrap_servers, changelog, N, partitions=1)
    return topic


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-app-restore-") as d:
        yield Path(d)


def _expected_entries() -> int:
    return min(N, DISTINCT_KEYS)


@pytest.mark.benchmark(group="app-restore")
def bench_streamstate_restore(
    benchmark, kafka: KafkaTestCluster, source: str, state_dir: Path
) -> None:
    changelog = f"{_APP_ID}-counts-changelog"

    def setup() -> None:
        shutil.rmtree(state_dir / "s", ignore_errors=True)

    def run() -> int:
        results = restore_topic(kafka.bootstrap_servers, changelog, state_dir, store_name="s")
        return results[0].restored

    assert benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1) == N
    with PersistentKeyValueStore("s", store_directory(state_dir, "s", 0)) as store:
        assert store.get(key(N - 1)) == value(N - 1)


@pytest.mark.benchmark(group="app-restore")
def bench_app_start_to_running(
    benchmark, kafka: KafkaTestCluster, source: str, state_dir: Path
) -> None:
    topology = Topology().add_store("counts")

    @topology.processor(sources=[source], stores=["counts"])
    def never(ctx: object, record: object) -> None:
        raise AssertionError("the source topic is empty")

    apps: list[StreamsApp] = []

    def setup() -> None:
        for app in apps:
            app.close(60)
        shutil.rmtree(state_dir / _APP_ID, ignore_errors=True)
        apps.append(
            StreamsApp(
                topology,
                {
                    "application.id": _APP_ID,
                    "bootstrap.servers": kafka.bootstrap_servers,
                    "state.dir": str(state_dir),
                },
            )
        )

    def run() -> None:
        app = apps[-1]
        app.start()
        assert app.wait_for_state(State.RUNNING, 600), app.state

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    try:
        counts = apps[-1].store("counts")
        assert counts.get(key(N - 1)) == value(N - 1)
        assert counts.approximate_num_entries() >= _expected_entries() // 2
    finally:
        for app in apps:
            app.close(60)
