"""The Kafka clients streamstate opens on Spark reach a secured cluster with the app config's
connection settings (``security.protocol``, ``sasl.*``, ``ssl.*``), not ``bootstrap.servers``
alone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamstate.app.config import StreamsConfig
from streamstate.spark import _global_stores
from streamstate.spark._global_stores import GlobalStoreCopies
from streamstate.spark._hand_over import commit_consumer_config

SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "app",
    "sasl.password": "secret",
}
CONFIG = {"application.id": "app", "bootstrap.servers": "127.0.0.1:9094", **SASL}


def test_hand_over_commits_with_the_connection_settings() -> None:
    cfg = StreamsConfig.from_mapping({**CONFIG, "consumer.ssl.ca.location": "/etc/ca.pem"})
    config = commit_consumer_config(cfg)
    assert config == {
        **SASL,
        "ssl.ca.location": "/etc/ca.pem",
        "bootstrap.servers": "127.0.0.1:9094",
        "group.id": "app",
        "enable.auto.commit": False,
    }


class _Opened(Exception):
    pass


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The configurations of the clients the global-store copies open (none is opened)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    class Consumer:
        def __init__(self, config: dict[str, Any]) -> None:
            seen.append(("consumer", config))

    def topic_partitions(servers: str, topic: str, **kwargs: Any) -> list[int]:
        seen.append(("metadata", {"bootstrap.servers": servers, **kwargs["client_config"]}))
        raise _Opened

    monkeypatch.setattr(_global_stores, "Consumer", Consumer)
    monkeypatch.setattr(_global_stores, "topic_partitions", topic_partitions)
    monkeypatch.setattr(GlobalStoreCopies, "_by_cluster", {})
    yield seen


def test_global_store_copies_read_with_the_connection_settings(
    opened: list[tuple[str, dict[str, Any]]],
) -> None:
    cfg = StreamsConfig.from_mapping(CONFIG)
    copies = GlobalStoreCopies.for_servers(cfg.bootstrap_servers, cfg.overrides["global.consumer."])
    with pytest.raises(_Opened):
        copies.caught_up("users", "users-topic")
    (_, consumer), (_, metadata) = opened
    for config in (consumer, metadata):
        assert {k: config.get(k) for k in SASL} == SASL
        assert config["bootstrap.servers"] == "127.0.0.1:9094"


def test_other_credentials_get_copies_of_their_own(
    opened: list[tuple[str, dict[str, Any]]],
) -> None:
    servers = "127.0.0.1:9094"
    first = GlobalStoreCopies.for_servers(servers, SASL)
    assert GlobalStoreCopies.for_servers(servers, dict(SASL)) is first
    assert GlobalStoreCopies.for_servers(servers, {**SASL, "sasl.username": "other"}) is not first
    assert GlobalStoreCopies.for_servers(servers) is not first
