"""``streamstate.kafka_local``: the local broker and its test helpers, documented in
:mod:`streamstate.testing` and :mod:`streamstate.cli.kafka`, where they live; this path keeps
working."""

from __future__ import annotations

from streamstate.cli.kafka import main
from streamstate.testing.broker import (
    KAFKA_VERSION,
    LocalKafka,
    LocalKafkaError,
    cache_dir,
    resolve_kafka,
)
from streamstate.testing.cluster import KafkaTestCluster

__all__ = [
    "KAFKA_VERSION",
    "KafkaTestCluster",
    "LocalKafka",
    "LocalKafkaError",
    "cache_dir",
    "main",
    "resolve_kafka",
]

if __name__ == "__main__":
    raise SystemExit(main())
