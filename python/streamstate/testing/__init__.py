"""A real local Kafka for demos and tests: the broker and the test-cluster helpers.

Shipped with the library because ``streamstate kafka`` and the tour (``streamstate demo``) use
it; the library itself never imports this package. Modules: ``broker`` (``LocalKafka``: resolve
Kafka's jars with Maven, run one KRaft broker+controller JVM detached, stop it) and ``cluster``
(``KafkaTestCluster``: create topics, produce, cut logs, read offsets, make consumers).
"""

from __future__ import annotations

from streamstate.testing.broker import KAFKA_VERSION, LocalKafka, LocalKafkaError, resolve_kafka
from streamstate.testing.cluster import KafkaTestCluster

__all__ = ["KAFKA_VERSION", "KafkaTestCluster", "LocalKafka", "LocalKafkaError", "resolve_kafka"]
