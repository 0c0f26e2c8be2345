"""A ``StreamsApp`` on a cluster that only lets authenticated clients in: the connection
settings given once, without a prefix (as Kafka Streams takes them), must reach every client the
app opens — the admin client creating its changelog, the stream thread's consumer and producer,
its restore consumer, the global thread's consumers.

The module starts its own broker with a SASL_PLAINTEXT (PLAIN) listener beside the PLAINTEXT
one the test itself produces through.
"""

from __future__ import annotations

import collections
import uuid
from pathlib import Path

from tests.apps import wait_until
from tests.integration.test_streams_app import counting_topology, local_counts
from tests.secure_support import sasl_settings

from streamstate.app import State, StreamsApp
from streamstate.kafka_local import KafkaTestCluster, LocalKafka
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener


class Restored(StateRestoreListener):
    """Counts the records restored per store."""

    def __init__(self) -> None:
        self.records: collections.Counter[str] = collections.Counter()

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.records[store_name] += num_restored


def test_connection_settings_without_a_prefix_reach_every_client_of_the_app(
    secure_broker: LocalKafka,
    secure_cluster: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None
    source = secure_cluster.create_topic(partitions=2)
    sink = secure_cluster.create_topic(partitions=2)
    names = secure_cluster.create_topic(partitions=1)
    secure_cluster.produce(names, [(b"key-%03d" % i, b"name-%d" % i) for i in range(10)])
    records = [(b"key-%03d" % (i % 25), b"v") for i in range(1_000)]
    secure_cluster.produce(source, records)
    expected = dict(collections.Counter(k for k, _ in records))
    secure = sasl_settings()  # PLAIN, as the broker's user
    app_id = f"secure-{uuid.uuid4().hex[:8]}"

    def secure_app(state_dir: Path) -> StreamsApp:
        topology = counting_topology(source, sink).add_global_store("names", topic=names)
        # Every client of the app connects through the SASL listener only.
        app = StreamsApp(
            topology,
            {
                "application.id": app_id,
                "bootstrap.servers": sasl,
                "state.dir": str(state_dir),
                "commit.interval.ms": 200,
                "session.timeout.ms": 6000,
                **secure,
            },
        )
        apps.append(app)
        return app

    first = secure_app(tmp_path / "a")
    first.start()
    wait_until(lambda: local_counts(first) == expected, "every record counted over SASL")
    assert first.store("names").get(b"key-003") == b"name-3"
    assert first.close(30)
    # A new instance with an empty state directory restores the changelog (and the global
    # store) through the SASL listener.
    restored = Restored()
    second = secure_app(tmp_path / "b")
    second.set_global_state_restore_listener(restored)
    second.start()
    assert second.wait_for_state(State.RUNNING, 90)
    assert local_counts(second) == expected
    assert restored.records["counts"] >= len(expected)
    assert second.store("names").get(b"key-009") == b"name-9"
