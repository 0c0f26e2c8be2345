"""A joiner that changes the table row it is given, through ``StreamsApp`` on the real broker,
with the row still dirty in the table's record cache: in Kafka each join reads its own copy of
the row (the cache holds bytes), so the change reaches neither the next join nor the store and
its changelog. Before the fix the join was handed the cache's own object: the second order saw
the first one's change, and the changed row was flushed to the changelog.

The premise (the row is dirty when the orders are joined) holds by construction: everything is
produced before the app starts, the row's timestamp is older than the orders' (so it is
processed first), and the commit interval is longer than the test; the app's close is its first
commit."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.integration.test_dsl_app import BASE, read_all
from tests.integration.test_streams_app import new_app

from streamstate import Serdes, StreamsApp, StreamsBuilder, Topology
from streamstate.kafka_local import KafkaTestCluster

JSON = Serdes.Json()
ORDERS = 3


def bumping_joiner(order: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """Changes the row it is given in place."""
    user["n"] += 1
    user.setdefault("orders", []).append(order["i"])
    return {**order, **user}


def topology(users: str, orders: str, out: str) -> Topology:
    builder = StreamsBuilder()
    table = builder.table(
        users, key_serde=Serdes.String(), value_serde=JSON, materialized="users-store"
    )
    stream = builder.stream(orders, key_serde=Serdes.String(), value_serde=JSON)
    stream.join(table, bumping_joiner).to(out, value_serde=JSON)
    return builder.build()


def test_a_joiner_changing_a_dirty_row_changes_neither_the_next_join_nor_the_changelog(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    users, orders, out = (kafka.create_topic(partitions=1) for _ in range(3))
    kafka.produce(users, [("k", json.dumps({"n": 1}), BASE)])
    kafka.produce(orders, [("k", json.dumps({"i": i}), BASE + 1 + i) for i in range(ORDERS)])
    app_id = f"private-rows-{uuid.uuid4().hex[:8]}"
    app = new_app(
        apps,
        kafka,
        topology(users, orders, out),
        tmp_path,
        app_id,
        **{"commit.interval.ms": 600_000},
    )
    app.start()
    records = read_all(
        kafka,
        out,
        Serdes.String().deserializer,
        JSON.deserializer,
        until=lambda rs: len(rs) >= ORDERS,
        what="every joined order",
    )
    assert records == [("k", {"i": i, "n": 2, "orders": [i]}, BASE + 1 + i) for i in range(ORDERS)]
    app.close(30)
    changelog = read_all(
        kafka,
        f"{app_id}-users-store-changelog",
        Serdes.String().deserializer,
        Serdes.Bytes().deserializer,
        until=lambda rs: len(rs) >= 1,
        what="the table's changelog",
    )
    # A timestamped store's changelog: the row's timestamp (8 bytes), then its value.
    assert [(key, json.loads(raw[8:])) for key, raw, _ in changelog] == [("k", {"n": 1})]
