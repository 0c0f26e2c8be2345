"""A stream-table join (an enrichment) through ``StreamsApp`` on the real broker, over 4
partitions, exact: orders keyed by order id are re-keyed by customer (a repartition through
``<app>-enrich-repartition``) and joined with the customers table; and the same under
``exactly_once_v2`` across a SIGKILL of the app mid-stream and a restart, read committed; and
an app joining topics that are not co-partitioned fails to start, naming both.

A stream-table join reads the table as it is when the order arrives, so the premise of an exact
result is that the table is complete first: the customers are produced and loaded (the store
holds them all, or, in the child process, the app has committed past every customer) before any
order is produced."""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import start_app_child, wait_until
from tests.integration.test_dsl_app import BASE, assert_same_records, read_all
from tests.integration.test_streams_app import new_app

from streamstate import Serdes, StreamsApp, StreamsBuilder, Topology, TopologyError
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
CUSTOMERS = 400


def enrichment_topology(orders: str, customers: str, out: str, pace_s: float = 0.0) -> Topology:
    """Orders (``order id -> "customer:amount"``) re-keyed by customer and joined with the
    customers table (``customer -> name``): ``customer -> "order:amount:name"``; orders of
    unknown customers are dropped (an inner join). ``pace_s``: seconds each join takes (the
    child that is SIGKILLed is slowed down so that the kill lands mid-stream by construction)."""

    def joiner(order: str, name: str) -> str:
        if pace_s:
            time.sleep(pace_s)
        return f"{order}:{name}"

    builder = StreamsBuilder()
    table = builder.table(
        customers, key_serde=STRING, value_serde=STRING, materialized="customers-store"
    )
    (
        builder.stream(orders, key_serde=STRING, value_serde=STRING)
        .select_key(lambda _order, value: value.split(":")[0])
        .join(
            table,
            joiner,
            name="enrich",
            key_serde=STRING,  # the repartition topic's (Kafka's Joined.with)
            value_serde=STRING,
        )
        .to(out, key_serde=STRING, value_serde=STRING)
    )
    return builder.build()


def make_data(
    count: int, seed: int
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]], collections.Counter[Any]]:
    """Customers (every other one known), orders, and the expected output as a multiset of
    ``(customer, value, timestamp)``: each result keeps its order's timestamp."""
    rng = random.Random(seed)
    customers = [(f"c{i}", f"name-{i}", BASE) for i in range(0, CUSTOMERS, 2)]
    names = {c: n for c, n, _ in customers}
    orders = []
    expected: collections.Counter[Any] = collections.Counter()
    for i in range(count):
        customer = f"c{rng.randrange(CUSTOMERS)}"
        value = f"{customer}:o{i}:{rng.randrange(1000)}"
        orders.append((f"o{i}", value, BASE + 1 + i))
        if customer in names:
            expected[(customer, f"{value}:{names[customer]}", BASE + 1 + i)] += 1
    return customers, orders, expected


def test_an_enrichment_joins_every_order_exactly_over_four_partitions(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    orders_topic, customers_topic, out = (kafka.create_topic(partitions=4) for _ in range(3))
    customers, orders, expected = make_data(8_000, seed=3)
    kafka.produce(customers_topic, customers)
    app_id = f"dsl-join-{uuid.uuid4().hex[:8]}"
    app = new_app(
        apps, kafka, enrichment_topology(orders_topic, customers_topic, out), tmp_path, app_id
    )
    app.start()

    def loaded() -> bool:
        try:
            return sum(1 for _ in app.store("customers-store").all()) == len(customers)
        except Exception:  # the store is not queryable until its task runs
            return False

    wait_until(loaded, "the customers table holding every customer")
    kafka.produce(orders_topic, orders)
    total = sum(expected.values())
    records = read_all(
        kafka,
        out,
        STRING.deserializer,
        STRING.deserializer,
        until=lambda rs: len(rs) >= total,
        what="every enriched order",
    )
    assert_same_records(records, expected)
    # Every order went through the join's repartition topic.
    assert sum(kafka.end_offsets(f"{app_id}-enrich-repartition").values()) == len(orders)


def test_an_enrichment_under_exactly_once_joins_every_order_once_across_a_sigkill(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    orders_topic, customers_topic, out = (kafka.create_topic(partitions=4) for _ in range(3))
    customers, orders, expected = make_data(40_000, seed=4)
    kafka.produce(customers_topic, customers)
    app_id = f"dsl-join-eos-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(state_dir),
        "session.timeout.ms": 6000,
        "commit.interval.ms": 200,
        "processing.guarantee": "exactly_once_v2",
    }
    child = start_app_child(
        "from tests.integration.test_dsl_join_app import enrichment_topology",
        # 0.5 ms per join: the ~20k joins take 10 s or more, and the kill comes 5,000 orders
        # after the first commit, so it cannot come after the last one.
        f"enrichment_topology({orders_topic!r}, {customers_topic!r}, {out!r}, pace_s=0.0005)",
        config,
    )
    try:
        _wait_committed(kafka, app_id, customers_topic, len(customers), "every customer")
        kafka.produce(orders_topic, orders)
        _kill_mid_stream(kafka, child, app_id, orders_topic, len(orders))
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait(30)

    app = new_app(
        apps,
        kafka,
        enrichment_topology(orders_topic, customers_topic, out),
        state_dir,
        app_id,
        **{"processing.guarantee": "exactly_once_v2"},
    )
    app.start()
    # Once every order is committed, every result is in the output, read committed: an order
    # enriched twice (a repeated transaction) would be there too.
    _wait_committed(kafka, app_id, orders_topic, len(orders), "every order")
    total = sum(expected.values())
    quiet: list[int] = []

    def settled(records: list[Any]) -> bool:
        quiet.append(len(records))
        return len(records) >= total and quiet[-3:] == [len(records)] * 3

    records = read_all(
        kafka,
        out,
        STRING.deserializer,
        STRING.deserializer,
        until=settled,
        what="every enriched order, read committed",
    )
    assert_same_records(records, expected)


def _committed(kafka: KafkaTestCluster, app_id: str, topic: str) -> int:
    offsets = kafka.consumer(**{"group.id": app_id})
    try:
        inputs = [KafkaTopicPartition(topic, p) for p in kafka.partitions(topic)]
        try:
            positions = offsets.committed(inputs, timeout=10)
        except KafkaException:  # the group's coordinator is not known yet
            return 0
        return sum(max(tp.offset, 0) for tp in positions)
    finally:
        offsets.close()


def _wait_committed(kafka: KafkaTestCluster, app_id: str, topic: str, n: int, what: str) -> None:
    wait_until(lambda: _committed(kafka, app_id, topic) >= n, f"the app committing {what}")


def _kill_mid_stream(
    kafka: KafkaTestCluster, child: subprocess.Popen[bytes], app_id: str, orders: str, n: int
) -> None:
    """SIGKILLs the app once it has committed some orders and then sent 5,000 more through
    its repartition topic, so the kill leaves an open transaction in every topic it writes.
    Fails if every order was committed by then (the kill must land mid-stream)."""
    wait_until(lambda: _committed(kafka, app_id, orders) > 0, "the app committing some orders")
    repartition = f"{app_id}-enrich-repartition"
    seen = sum(kafka.end_offsets(repartition).values())
    wait_until(
        lambda: sum(kafka.end_offsets(repartition).values()) >= seen + 5_000,
        "more orders through the repartition topic",
        interval=0.02,
    )
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert _committed(kafka, app_id, orders) < n, "the kill should land mid-stream"


def test_an_app_joining_topics_that_are_not_co_partitioned_fails_to_start_naming_both(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    orders_topic, out = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    customers_topic = kafka.create_topic(partitions=2)
    builder = StreamsBuilder()
    table = builder.table(customers_topic, key_serde=STRING, value_serde=STRING)
    (
        builder.stream(orders_topic, key_serde=STRING, value_serde=STRING)
        .join(table, lambda order, name: f"{order}:{name}")
        .to(out, value_serde=STRING)
    )
    app_id = f"dsl-join-copart-{uuid.uuid4().hex[:8]}"
    app = new_app(apps, kafka, builder.build(), tmp_path, app_id)
    with pytest.raises(TopologyError, match="not co-partitioned") as failure:
        app.start()
    assert f"{orders_topic}: 4" in str(failure.value)
    assert f"{customers_topic}: 2" in str(failure.value)
