"""Benchmark settings: a guard against timing a debug build (sizes: ``benches/_common.py``), and
the real broker and Spark session the restore benchmarks use."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from streamstate import _core
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(autouse=True)
def _release_build_only(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("benchmark_disable"):
        return  # plain test runs execute each benchmark body once, as a correctness check
    if _core.build_profile() != "release":
        pytest.fail("benchmarks need a release build of the extension: run `make build`")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTestCluster]:
    """The real broker for the restore benchmarks (``STREAMSTATE_BOOTSTRAP_SERVERS`` to reuse
    a running one), as in the tests."""
    cluster = KafkaTestCluster.from_env_or_start(tmp_path_factory.mktemp("kafka"))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local Spark session (``local[2]``) with Spark's Kafka connector."""
    # Two shuffle partitions: the benches' topics have two partitions (their figures assume it).
    session = local_session(app_name="streamstate-benches", shuffle_partitions=2)
    try:
        yield session
    finally:
        session.stop()
