"""A versioned table (``Materialized(versioned_retention=...)``, KIP-889) through ``StreamsApp`` on
the real broker: queried as of past times (each partition by its own observed stream time), its
changelog configured as Kafka configures a versioned store's, and its history restored from the
changelog by a new instance with an empty state directory."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import ConfigResource, ResourceType
from tests.apps import wait_until
from tests.integration.test_streams_app import new_app

from streamstate import Materialized, Serdes, StreamsApp, StreamsBuilder
from streamstate.dsl.versioned_store import VersionedRecord
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
MINUTE = 60_000
# Event time starts here, not at 0: a record produced with timestamp 0 is stamped with the
# wall-clock time by the producer.
BASE = 1_700_000_000_000
RETENTION = 10 * MINUTE

# Partition 0: k1 gets an out-of-order version, then k2 moves the partition's stream time to
# BASE + 20 min, so k1's history before BASE + 10 min is past the retention. Partition 1 stays
# at BASE + 2 min: its history is all queryable (a query must use each partition's own time).
RECORDS = [
    {"key": "k1", "value": "v1", "timestamp": BASE, "partition": 0},
    {"key": "k1", "value": "v2", "timestamp": BASE + 10 * MINUTE, "partition": 0},
    {"key": "k1", "value": "v0", "timestamp": BASE + 5 * MINUTE, "partition": 0},
    {"key": "k2", "value": "x", "timestamp": BASE + 20 * MINUTE, "partition": 0},
    {"key": "k3", "value": "a", "timestamp": BASE, "partition": 1},
    {"key": "k3", "value": "b", "timestamp": BASE + 2 * MINUTE, "partition": 1},
    {"key": "k3", "value": "c", "timestamp": BASE + MINUTE, "partition": 1},
]

QUERIES: dict[tuple[str, int | None], VersionedRecord | None] = {
    ("k1", None): VersionedRecord("v2", BASE + 10 * MINUTE),
    ("k1", BASE + 10 * MINUTE): VersionedRecord("v2", BASE + 10 * MINUTE),
    ("k1", BASE + 7 * MINUTE): None,  # older than partition 0's stream time - retention
    ("k2", BASE + 30 * MINUTE): VersionedRecord("x", BASE + 20 * MINUTE),
    ("k3", None): VersionedRecord("b", BASE + 2 * MINUTE),
    ("k3", BASE + 90_000): VersionedRecord("c", BASE + MINUTE, BASE + 2 * MINUTE),
    ("k3", BASE + 30_000): VersionedRecord("a", BASE, BASE + MINUTE),
    ("k3", BASE - 1): None,
}


def topology(source: str) -> Any:
    builder = StreamsBuilder()
    builder.table(
        source,
        key_serde=STRING,
        value_serde=STRING,
        materialized=Materialized("prices", versioned_retention=RETENTION),
    )
    return builder.build()


def answers(app: StreamsApp) -> dict[tuple[str, int | None], Any]:
    try:
        store = app.store("prices")
        return {(key, at): store.get(key, at) for key, at in QUERIES}
    except Exception:  # restoring or rebalancing: nothing to read yet
        return {}


def test_a_versioned_table_answers_as_of_queries_and_restores_its_history(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, RECORDS)
    app_id = f"dsl-versioned-{uuid.uuid4().hex[:8]}"

    first = new_app(apps, kafka, topology(source), tmp_path / "a", app_id)
    first.start()
    wait_until(lambda: answers(first) == QUERIES, "the versioned table's answers")
    first.close()

    resource = ConfigResource(ResourceType.TOPIC, f"{app_id}-prices-changelog")
    config = kafka.admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["cleanup.policy"].value == "compact"
    assert config["min.compaction.lag.ms"].value == str(RETENTION + 86_400_000)

    # A new instance with an empty state directory restores the history (and each
    # partition's observed stream time) from the changelog alone.
    second = new_app(apps, kafka, topology(source), tmp_path / "b", app_id)
    second.start()
    wait_until(lambda: answers(second) == QUERIES, "the restored table's answers")
