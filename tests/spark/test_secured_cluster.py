"""``process`` and ``hand_over`` on a cluster that lets only authenticated clients in.

The module starts its own broker with a SASL_PLAINTEXT (PLAIN) listener beside the PLAINTEXT
one the test itself produces and checks through. The app config gives the SASL listener only,
with the connection settings once, without a prefix (as Kafka Streams takes them): every client
streamstate opens on Spark — the global-store copies in the Spark tasks, the admin client
creating the changelog topics, the consumer ``hand_over`` commits with — must use them.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from pyspark.sql import functions as F
from tests.spark._queues import read_all
from tests.spark.test_process import _keys, _name, _topics, _topology

from streamstate.kafka_local import KafkaTestCluster, LocalKafka
from streamstate.spark import hand_over, process, restore_changelogs

SECURE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": LocalKafka.SASL_USER,
    "sasl.password": LocalKafka.SASL_PASSWORD,
}


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of the module's own with a SASL_PLAINTEXT listener."""
    kafka = LocalKafka(tmp_path_factory.mktemp("secure-kafka"), secure_listeners=True)
    kafka.start(fresh=True)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def plain(secure_broker: LocalKafka) -> Iterator[KafkaTestCluster]:
    """The test's own client of ``secure_broker``, on its PLAINTEXT listener."""
    with KafkaTestCluster(secure_broker.start()) as cluster:
        yield cluster


def _spark_sasl(sasl: str) -> dict[str, str]:
    """Spark's Kafka source and sink options for the SASL listener."""
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{LocalKafka.SASL_USER}" password="{LocalKafka.SASL_PASSWORD}";'
    )
    return {
        "kafka.bootstrap.servers": sasl,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": jaas,
    }


def test_process_with_a_global_store_and_hand_over_through_the_sasl_listener_only(
    secure_broker: LocalKafka, plain: KafkaTestCluster, spark: Any, tmp_path: Path
) -> None:
    sasl = secure_broker.sasl_plaintext_servers
    assert sasl is not None and sasl != plain.bootstrap_servers
    clicks, users, out = _topics(plain, partitions=2)
    topology = _topology(clicks, users)
    config = {"application.id": f"sasl-{uuid.uuid4().hex[:6]}", "bootstrap.servers": sasl}
    config.update(SECURE)
    keys = _keys(0, 120)
    plain.produce(clicks, [(k, b"click") for k in keys])

    options = _spark_sasl(sasl)
    raw = (
        spark.readStream.format("kafka")
        .options(**options)
        .option("subscribe", clicks)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 50)
        .load()
    )
    rows = process(raw, topology, config, changelog=True).withColumn(
        "topic", F.when(F.col("topic") == "click-counts", F.lit(out)).otherwise(F.col("topic"))
    )
    checkpoint = tmp_path / "cp"
    query = (
        rows.writeStream.format("kafka")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()

    # The global store was read in the Spark tasks: each click carries the user's name.
    sent: dict[bytes, list[bytes]] = collections.defaultdict(list)
    for message in sorted(read_all(plain, out), key=lambda m: (m.partition(), m.offset())):
        sent[message.key()].append(message.value())
    counts = collections.Counter(keys)
    assert {k: len(v) for k, v in sent.items()} == counts
    for key, values in sent.items():
        assert values == [_name(key) + b"=%d" % n for n in range(1, counts[key] + 1)]
    # The changelog topic was created (admin client) and written.
    changelog = f"{config['application.id']}-counts-changelog"
    assert sum(plain.end_offsets(changelog).values()) == len(keys)

    committed = hand_over(spark, str(checkpoint), config)
    ends = {(clicks, p): n for p, n in plain.end_offsets(clicks).items()}
    assert committed == ends
    consumer = plain.consumer(group_id=config["application.id"])
    found = consumer.committed([TopicPartition(clicks, p) for p in (0, 1)], timeout=30)
    assert {(clicks, tp.partition): tp.offset for tp in found} == ends

    # restore_changelogs rebuilds the store from the changelog through the SASL listener too.
    results = restore_changelogs(
        spark,
        bootstrap_servers=sasl,
        topic=changelog,
        state_dir=tmp_path / "restored",
        store_name="counts",
        client_config=config,
    )
    assert sum(int(r["restored"]) for r in results) == len(keys)
