"""Testing: topologies without a broker, and a real local Kafka for demos and tests.

``TopologyTestDriver`` (``driver``, with its ``TestInputTopic``, ``TestOutputTopic`` and
``TestRecord`` in ``topics``) runs any topology synchronously in one process, as Kafka's
``kafka-streams-test-utils`` does (``docs/testing.md``). The broker is shipped with the library
because ``streamstate kafka`` and the tour (``streamstate demo``) use it; the library itself
never imports this package. Modules: ``broker`` (``LocalKafka``: resolve Kafka's jars with
Maven, run one KRaft broker+controller JVM detached, stop it) and ``cluster``
(``KafkaTestCluster``: create topics, produce, cut logs, read offsets, make consumers).
"""

from __future__ import annotations

from streamstate.errors import NoSuchElementError
from streamstate.testing.broker import KAFKA_VERSION, LocalKafka, LocalKafkaError, resolve_kafka
from streamstate.testing.cluster import KafkaTestCluster
from streamstate.testing.driver import TopologyTestDriver
from streamstate.testing.topics import TestInputTopic, TestOutputTopic, TestRecord

__all__ = [
    "KAFKA_VERSION",
    "KafkaTestCluster",
    "LocalKafka",
    "LocalKafkaError",
    "NoSuchElementError",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "resolve_kafka",
]
