"""Shared fixtures: one real Kafka broker and one real local Spark session per test run (per
worker process under pytest-xdist).

The broker is started fresh in a temporary instance directory (first use resolves the Kafka jars
with Maven; see ``streamstate.kafka_local``) and stopped at the end; set
``STREAMSTATE_BOOTSTRAP_SERVERS`` to use an already running broker instead. The Spark session is
``local[2]`` with Spark's own Kafka connector (fetched with Maven; see
``streamstate.spark.local_session``). Both start lazily, only for tests that ask for them.

Tests under ``tests/integration`` are marked ``integration``, those under ``tests/spark``
``spark`` and those under ``tests/chaos`` ``chaos``, so ``-m "not spark"`` and the like select
suites.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamstate.app import StreamsApp

_HERE = Path(__file__).parent.resolve()
_SUITE_MARKERS = {
    _HERE / "integration": pytest.mark.integration,
    _HERE / "spark": pytest.mark.spark,
    _HERE / "chaos": pytest.mark.chaos,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the marker of the suite directory it lives in."""
    for item in items:
        parents = Path(item.path).resolve().parents
        for directory, marker in _SUITE_MARKERS.items():
            if directory in parents:
                item.add_marker(marker)


# Under pytest-xdist (``make test-python``, two workers: ``-n 2 --dist loadfile``) a worker has
# its own broker and Spark session (the session fixtures below) and runs whole units of work: a
# test module, as ``loadfile`` makes it (its module fixtures and its tests' order as in a serial
# run), except that tests/chaos is one unit, so that no two scenarios (SIGKILL loops, broker
# restarts, scale-out) share the 2 cores, and tests/spark one, so that one worker alone starts a
# Spark JVM (``local[2]``: both cores). xdist's own ``loadgroup`` cannot say this: it tags node
# ids through an attribute pytest 9 no longer reads.
_ONE_UNIT = ("tests/chaos/", "tests/spark/")  # node ids start at the rootdir, pyproject.toml's


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with tests/chaos and tests/spark each one unit of work."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # noqa: PLC0415 (only when xdist runs)

    class SuiteScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", maxsplit=1)[0]
            return next((unit for unit in _ONE_UNIT if path.startswith(unit)), path)

    return SuiteScheduling(config, log)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """The session's broker, with client helpers (see ``KafkaTestCluster``)."""
    cluster = KafkaTestCluster.from_env_or_start(tmp_path_factory.mktemp("kafka"))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(autouse=True)
def _close_test_consumers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close the consumers a test made with ``kafka.consumer()`` when that test ends."""
    yield
    if "kafka" in request.fixturenames:
        cluster = request.getfixturevalue("kafka")
        if isinstance(cluster, KafkaTestCluster):
            cluster.close_consumers()


@pytest.fixture
def apps() -> Iterator[list[StreamsApp]]:
    """The apps a test made, each closed at the end even when the test fails."""
    made: list[StreamsApp] = []
    yield made
    for app in made:
        app.close(30)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local Spark session (``local[2]``) with Spark's Kafka connector."""
    # Two shuffle partitions: the suites' topics have two partitions or fewer, and Spark's 200
    # would schedule ~200 mostly empty tasks per stateful micro-batch on 2 cores.
    session = local_session(app_name="streamstate-tests", shuffle_partitions=2)
    try:
        yield session
    finally:
        session.stop()
