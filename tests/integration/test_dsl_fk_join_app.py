"""The foreign-key table-table join (KIP-213) against Kafka Streams itself, and through
``StreamsApp`` on the real broker.

* ``describe()``: each program of ``benches/kstreams/DescribeForeignKeyJoins.java``, written
  with streamstate's DSL, describes itself exactly as Kafka Streams 4.4 describes the Java
  program (node, store and topic names: inner, left, materialized, named, a key-and-value
  extractor, derived tables, a chained join, an aggregated left side).
* Java's ``TopologyTestDriver`` 4.4 runs the scripts of Kafka's
  ``KTableKTableForeignKeyJoinIntegrationTest`` on Kafka's test program; streamstate's driver
  must write the same records (keys, values, timestamps, in order) and keep the same store.
* The real broker: a foreign-key join of orders (4 partitions) with customers (3 partitions:
  the two tables need not be co-partitioned) through ``StreamsApp``, inner and left at once,
  with foreign-key changes and customer deletes; the final result of every order is exact.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from tests.integration.test_dsl_app import BASE, read_all
from tests.integration.test_streams_app import new_app

from streamstate import Serdes, StreamsApp, StreamsBuilder, Topology
from streamstate.dsl import Materialized
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import StringDeserializer, StringSerializer
from streamstate.testing import TopologyTestDriver

S = Serdes.String()
Program = Callable[[StreamsBuilder], None]


def fk(value: str) -> str | None:
    """The text after ``|``; ``None`` for ``none`` (as the Java program's extractor)."""
    key = value.split("|")[1]
    return None if key == "none" else key


def joiner(left: Any, right: Any) -> str:
    return f"({'null' if left is None else left},{'null' if right is None else right})"


def table(b: StreamsBuilder, topic: str) -> Any:
    return b.table(topic, key_serde=S, value_serde=S)


# --- the programs, as in DescribeForeignKeyJoins.java ----------------------------------------


def fk_inner(b: StreamsBuilder) -> None:
    table(b, "left").join(table(b, "right"), fk, joiner).to_stream().to("out")


def fk_left(b: StreamsBuilder) -> None:
    table(b, "left").left_join(table(b, "right"), fk, joiner).to_stream().to("out")


def fk_materialized(b: StreamsBuilder) -> None:
    lhs = table(b, "left")
    lhs.join(table(b, "right"), fk, joiner, materialized="fk-result").to_stream().to("out")


def fk_named(b: StreamsBuilder) -> None:
    table(b, "left").join(table(b, "right"), fk, joiner, name="fkj").to_stream().to("out")


def fk_named_left_materialized(b: StreamsBuilder) -> None:
    lhs = table(b, "left")
    joined = lhs.left_join(table(b, "right"), fk, joiner, name="fkj", materialized="fk-store")
    joined.to_stream().to("out")


def fk_with_key(b: StreamsBuilder) -> None:
    lhs = table(b, "left")
    lhs.join(table(b, "right"), lambda k, v: k + v, joiner, extractor_with_key=True).to_stream().to(
        "out"
    )


def fk_right_first(b: StreamsBuilder) -> None:
    right = table(b, "right")
    table(b, "left").join(right, fk, joiner).to_stream().to("out")


def fk_derived(b: StreamsBuilder) -> None:
    lhs = table(b, "left").filter(lambda _k, _v: True)
    lhs.join(table(b, "right").map_values(lambda v: v), fk, joiner).to_stream().to("out")


def fk_chained(b: StreamsBuilder) -> None:
    first = table(b, "left").join(table(b, "right"), fk, joiner)
    first.join(table(b, "third"), fk, joiner).to_stream().to("out")


def fk_aggregated_left(b: StreamsBuilder) -> None:
    reduced = b.stream("events", key_serde=S, value_serde=S).group_by_key().reduce(lambda _x, y: y)
    reduced.left_join(table(b, "right"), fk, joiner).to_stream().to("out")


PROGRAMS: dict[str, Program] = {
    p.__name__: p
    for p in (
        fk_inner,
        fk_left,
        fk_materialized,
        fk_named,
        fk_named_left_materialized,
        fk_with_key,
        fk_right_first,
        fk_derived,
        fk_chained,
        fk_aggregated_left,
    )
}


def _java(*arguments: str) -> dict[str, Any]:
    return _kstreams._run_java("DescribeForeignKeyJoins", list(arguments), 120.0)


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` text of every program, by name (Java runs once)."""
    return {str(k): str(v) for k, v in _java().items()}


def test_the_programs_are_those_of_the_java_oracle(kafka_texts: dict[str, str]) -> None:
    assert list(kafka_texts) == list(PROGRAMS)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_describe_is_kafkas(name: str, kafka_texts: dict[str, str]) -> None:
    builder = StreamsBuilder()
    PROGRAMS[name](builder)
    assert str(builder.build().describe()) == kafka_texts[name]


# --- Java's TopologyTestDriver on Kafka's test program ---------------------------------------

# Kafka's KTableKTableForeignKeyJoinIntegrationTest, as steps (side, key, value, timestamp).
SCRIPTS: dict[str, list[tuple[str, str, str | None, int]]] = {
    "join_from_left_then_delete_left": [
        ("R", "rhs1", "rhsValue1", 0),
        ("R", "rhs2", "rhsValue2", 1),
        ("R", "rhs3", "rhsValue3", 2),
        ("L", "lhs1", "lhsValue1|rhs1", 3),
        ("L", "lhs2", "lhsValue2|rhs2", 4),
        ("L", "lhs3", "lhsValue3|rhs1", 5),
        ("L", "lhs1", None, 6),
    ],
    "join_from_right_then_delete_right": [
        ("L", "lhs1", "lhsValue1|rhs1", 0),
        ("L", "lhs2", "lhsValue2|rhs2", 1),
        ("L", "lhs3", "lhsValue3|rhs1", 2),
        ("R", "rhs1", "rhsValue1", 3),
        ("R", "rhs2", "rhsValue2", 4),
        ("R", "rhs3", "rhsValue3", 5),
        ("R", "rhs1", None, 6),
    ],
    "delete_non_joining_then_non_existing": [
        ("L", "lhs1", "lhsValue1|rhs1", 0),
        ("L", "lhs1", None, 1),
        ("L", "lhs1", None, 2),
        ("L", "lhs9", None, 3),
    ],
    "non_matching_foreign_keys": [
        ("L", "lhs1", "lhsValue1|rhs1", 0),
        ("L", "lhs1", "lhsValue1|rhs2", 1),
        ("L", "lhs1", "lhsValue1|rhs3", 2),
        ("R", "rhs1", "rhsValue1", 3),
        ("L", "lhs1", "lhsValue1|rhs1", 4),
        ("L", "lhs1", "lhsValue1|rhs2", 5),
    ],
    "unsubscribe_old_foreign_key": [
        ("R", "rhs1", "rhsValue1", 0),
        ("R", "rhs2", "rhsValue2", 1),
        ("L", "lhs1", "lhsValue1|rhs1", 2),
        ("L", "lhs1", "lhsValue1|rhs2", 3),
        ("R", "rhs1", "rhsValue1Delta", 4),
        # and more: the same value again, an out-of-order right update, a right delete that
        # nothing references, timestamps from both sides
        ("L", "lhs1", "lhsValue1|rhs2", 10),
        ("R", "rhs2", "rhsValue2b", 7),
        ("R", "rhs9", None, 8),
        ("L", "lhs2", "x|rhs2", 2),
    ],
    "null_foreign_keys": [
        ("R", "rhs1", "a", 1),
        ("L", "lhs1", "x|rhs1", 2),
        ("L", "lhs1", "x|none", 3),
        ("L", "lhs1", "y|none", 4),
        ("L", "lhs1", "x|rhs1", 5),
        ("L", "lhs1", None, 6),
        ("L", "lhs2", "z|none", 7),
        ("L", "lhs2", None, 8),
    ],
    "identical_updates_and_repeated_deletes": [
        ("R", "rhs1", "a", 1),
        ("L", "lhs1", "x|rhs1", 2),
        ("R", "rhs1", "a", 3),
        ("L", "lhs1", "x|rhs1", 4),
        ("R", "rhs1", None, 5),
        ("R", "rhs1", None, 6),
        ("L", "lhs1", None, 7),
        ("L", "lhs1", None, 8),
    ],
}


def _ours(program: str, steps: list[tuple[str, str, str | None, int]]) -> dict[str, Any]:
    """What streamstate's driver writes for ``program`` (as the Java side names them)."""
    builder = StreamsBuilder()
    lhs = table(builder, "left_table")
    rhs = table(builder, "right_table")
    store = program.endswith("_store")
    mat = Materialized("store" if store else None, value_serde=S, caching=False)
    join = lhs.left_join if program.startswith("left") else lhs.join
    join(rhs, fk, joiner, materialized=mat).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    with TopologyTestDriver(builder.build()) as driver:
        inputs = {
            side: driver.create_input_topic(topic, StringSerializer(), StringSerializer())
            for side, topic in (("L", "left_table"), ("R", "right_table"))
        }
        output = driver.create_output_topic(
            "output-topic", StringDeserializer(), StringDeserializer()
        )
        for side, key, value, timestamp in steps:
            inputs[side].pipe_input(key, value, timestamp)
        records = [[r.key, r.value, r.timestamp] for r in output.read_records_to_list()]
        rows = sorted([k, v] for k, v in driver.get_key_value_store("store").all()) if store else []
    return {"output": records, "store": rows}


@pytest.mark.parametrize("program", ["inner", "left", "inner_store", "left_store"])
@pytest.mark.parametrize("script", list(SCRIPTS))
def test_the_driver_writes_what_javas_writes(program: str, script: str) -> None:
    steps = SCRIPTS[script]
    arguments = [f"{s}|{k}|{'~' if v is None else v}|{t}" for s, k, v, t in steps]
    java = _java("--run", program, *arguments)
    java["store"] = sorted(java["store"])
    assert _ours(program, steps) == java


def _random_script(seed: int) -> list[tuple[str, str, str | None, int]]:
    """40 random updates and deletes of both sides: few keys, so foreign keys change (to and
    from ``None`` too), rows come back, right rows appear and vanish under their subscribers;
    timestamps out of order."""
    rng = random.Random(seed)
    steps: list[tuple[str, str, str | None, int]] = []
    for i in range(40):
        if rng.random() < 0.5:
            target = "none" if rng.random() < 0.15 else f"rhs{rng.randrange(4)}"
            value = None if rng.random() < 0.2 else f"v{i}|{target}"
            steps.append(("L", f"lhs{rng.randrange(5)}", value, rng.randrange(100)))
        else:
            value = None if rng.random() < 0.25 else f"r{i}"
            steps.append(("R", f"rhs{rng.randrange(4)}", value, rng.randrange(100)))
    return steps


@pytest.mark.parametrize("program", ["inner", "left_store"])
@pytest.mark.parametrize("seed", range(4))
def test_random_updates_write_what_javas_writes(program: str, seed: int) -> None:
    steps = _random_script(seed)
    arguments = [f"{s}|{k}|{'~' if v is None else v}|{t}" for s, k, v, t in steps]
    java = _java("--run", program, *arguments)
    java["store"] = sorted(java["store"])
    assert _ours(program, steps) == java


# --- the real broker ---------------------------------------------------------------------------

ORDERS = 300
CUSTOMERS = 60


def fk_topology(orders: str, customers: str, inner_out: str, left_out: str) -> Topology:
    """Orders (``order -> "amount|customer"``) joined with customers (``customer -> name``)
    by the order's customer: inner to ``inner_out``, left to ``left_out``."""
    builder = StreamsBuilder()
    order_table = builder.table(orders, key_serde=S, value_serde=S)
    customer_table = builder.table(customers, key_serde=S, value_serde=S)
    order_table.join(customer_table, fk, joiner, name="inner").to_stream().to(
        inner_out, key_serde=S, value_serde=S
    )
    order_table.left_join(customer_table, fk, joiner, name="left").to_stream().to(
        left_out, key_serde=S, value_serde=S
    )
    return builder.build()


def test_a_foreign_key_join_is_exact_over_differently_partitioned_tables(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    orders_topic = kafka.create_topic(partitions=4)
    customers_topic = kafka.create_topic(partitions=3)
    inner_out, left_out = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    rng = random.Random(11)
    # Customers c0..c59; orders name c0..c69 (c60..c69 never exist).
    customers = {f"c{i}": f"name-{i}" for i in range(CUSTOMERS)}
    orders = {f"o{i}": f"{i}|c{rng.randrange(CUSTOMERS + 10)}" for i in range(ORDERS)}
    kafka.produce(customers_topic, [(k, v, BASE) for k, v in customers.items()])
    # Each order in partition i % 4, not where murmur2 of its key would put it: the responses
    # must come back to the partition the order's row is in (Kafka's primary partition), not
    # to the partition of the key's hash.
    partition_of = {k: i % 4 for i, k in enumerate(orders)}

    def order_records(rows: dict[str, str], timestamp: int) -> list[dict[str, Any]]:
        return [
            {"key": k, "value": v, "timestamp": timestamp, "partition": partition_of[k]}
            for k, v in rows.items()
        ]

    kafka.produce(orders_topic, order_records(orders, BASE + 1))
    app_id = f"dsl-fk-{uuid.uuid4().hex[:8]}"
    topology = fk_topology(orders_topic, customers_topic, inner_out, left_out)
    app = new_app(apps, kafka, topology, tmp_path, app_id)
    app.start()
    # Then, in any interleaving with the join's own work: a third of the orders move to
    # another customer, a tenth of the customers are deleted, some renamed.
    moved = {k: f"{k[1:]}|c{rng.randrange(CUSTOMERS + 10)}" for k in list(orders)[::3]}
    orders.update(moved)
    kafka.produce(orders_topic, order_records(moved, BASE + 2))
    deleted = [f"c{i}" for i in range(0, CUSTOMERS, 10)]
    renamed = {f"c{i}": f"renamed-{i}" for i in range(5, CUSTOMERS, 10)}
    for key in deleted:
        del customers[key]
    customers.update(renamed)
    kafka.produce(
        customers_topic,
        [(k, None, BASE + 3) for k in deleted] + [(k, v, BASE + 3) for k, v in renamed.items()],
    )

    expected_left = {k: joiner(v, customers.get(fk(v))) for k, v in orders.items()}
    expected_inner = {
        k: (joiner(v, customers[fk(v)]) if fk(v) in customers else None) for k, v in orders.items()
    }
    # An inner join writes a tombstone only for an order that had a result (or may have had):
    # an order never joined writes nothing at all.
    expected_inner_present = {k: v for k, v in expected_inner.items() if v is not None}

    def final(records: list[tuple[Any, Any, int]]) -> dict[Any, Any]:
        return {key: value for key, value, _ in records}

    left_records = read_all(
        kafka,
        left_out,
        S.deserializer,
        S.deserializer,
        until=lambda rs: final(rs) == expected_left,
        what="the left join's final result of every order",
    )
    assert final(left_records) == expected_left
    inner_records = read_all(
        kafka,
        inner_out,
        S.deserializer,
        S.deserializer,
        until=lambda rs: (
            {k: v for k, v in final(rs).items() if v is not None} == expected_inner_present
        ),
        what="the inner join's final result of every order",
    )
    latest_inner = final(inner_records)
    assert {k: v for k, v in latest_inner.items() if v is not None} == expected_inner_present
    # Every order whose last inner result is a tombstone has no match now.
    assert all(expected_inner[k] is None for k, v in latest_inner.items() if v is None)
    # The internal topics: subscriptions partitioned as the customers, responses as the orders.
    for name, partitions in (
        ("inner-subscription-registration-topic", 3),
        ("inner-subscription-response-topic", 4),
        ("left-subscription-registration-topic", 3),
        ("left-subscription-response-topic", 4),
    ):
        assert len(kafka.end_offsets(f"{app_id}-{name}")) == partitions, name
