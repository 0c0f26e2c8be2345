"""Fixtures for tests that need a real Kafka broker.

One broker serves the whole test session: it is started fresh in a temporary instance directory
(first use resolves the Kafka jars with Maven; see ``streamstate.kafka_local``) and stopped at the
end. Set ``STREAMSTATE_BOOTSTRAP_SERVERS`` to run against an already running broker instead.
Every test in this directory is marked ``integration``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streamstate.kafka_local import KafkaTestCluster

_HERE = Path(__file__).parent.resolve()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests under tests/integration (and only those) ``integration``."""
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


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
