"""Stream-table and stream-global-table joins on the ``TopologyTestDriver``: ports of Kafka's
``KStreamKTableJoinTest``, ``KStreamKTableLeftJoinTest``, ``KStreamGlobalKTableJoinTest`` and
``KStreamGlobalKTableLeftJoinTest`` with the outputs they assert, cases checked against Kafka
Streams 4.4's own ``TopologyTestDriver`` (null keys and values, rekeyed left joins, versioned
tables and grace periods: the expected outputs below are what Java printed for the same
programs and inputs), and ``describe()`` of join programs compared with Java's
(``benches/kstreams/DescribeStreamTableJoins.java``).

Kafka's tables in these tests get random timestamps (``pushToTable``); a non-versioned table's
lookups do not depend on them, so they are fixed here. Kafka's global tests auto-advance the
stream's timestamps by 1 ms per record: the timestamps are given explicitly.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import pytest
from benches import _kstreams
from tests.dsl_support import capture, dropped

from streamstate import TopologyError
from streamstate.dsl import Materialized, StreamsBuilder
from streamstate.dsl.stream_table_join_processors import TimeOrderedJoinBuffer
from streamstate.processor.graph import TaskId
from streamstate.processor.repartition import plan_internal_topics
from streamstate.serde import IntegerSerializer, Serdes, StringSerializer
from streamstate.state.stores import InMemoryKeyValueStore
from streamstate.testing import TopologyTestDriver

INT = IntegerSerializer()
TEXT = StringSerializer()
INT_STRING = {"default.key.serde": Serdes.Integer(), "default.value.serde": Serdes.String()}
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
KEYS = (0, 1, 2, 3)
HAS_VERSIONED_STORE = importlib.util.find_spec("streamstate.dsl.versioned_store") is not None
needs_versioned = pytest.mark.skipif(
    not HAS_VERSIONED_STORE, reason="the versioned key-value store is not there yet"
)


def tostring(v1: Any, v2: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER`` (Java prints null as ``null``)."""
    return f"{_java(v1)}+{_java(v2)}"


def _java(value: Any) -> str:
    return "null" if value is None else str(value)


def take(out: list[Any]) -> list[Any]:
    """Kafka's ``checkAndClearProcessResult``."""
    taken = list(out)
    out.clear()
    return taken


# -- KStreamKTableJoinTest / KStreamKTableLeftJoinTest --------------------------------------


class StreamTable:
    """Kafka's set-up: ``stream.join(table, TOSTRING_JOINER).process(supplier)`` over
    Integer keys and String values."""

    def __init__(self, left: bool) -> None:
        builder = StreamsBuilder()
        stream = builder.stream(
            "streamTopic", key_serde=Serdes.Integer(), value_serde=Serdes.String()
        )
        table = builder.table("tableTopic", key_serde=Serdes.Integer(), value_serde=Serdes.String())
        joined = stream.left_join(table, tostring) if left else stream.join(table, tostring)
        self.out = capture(joined)
        self.topology = builder.build()
        self.driver = TopologyTestDriver(self.topology, INT_STRING)
        self.stream = self.driver.create_input_topic("streamTopic", INT, TEXT)
        self.table = self.driver.create_input_topic("tableTopic", INT, TEXT)

    def push_stream(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", i)

    def push_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", 1000 + i)

    def push_null_values_to_table(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(KEYS[i], None, 0)


@pytest.fixture
def inner() -> Any:
    setup = StreamTable(left=False)
    yield setup
    setup.driver.close()


@pytest.fixture
def left() -> Any:
    setup = StreamTable(left=True)
    yield setup
    setup.driver.close()


def test_join_should_require_copartitioned_streams(inner: StreamTable) -> None:
    # Kafka's copartitionGroups() == {streamTopic, tableTopic}: one sub-topology reads both.
    graph = inner.topology.graph()
    assert [set(sub.source_topics) for sub in graph.subtopologies] == [
        {"streamTopic", "tableTopic"}
    ]


def test_join_should_not_join_with_empty_table_on_stream_updates(inner: StreamTable) -> None:
    inner.push_stream(2, "X")
    assert take(inner.out) == []


def test_join_should_not_join_on_table_updates(inner: StreamTable) -> None:
    inner.push_stream(2, "X")
    assert take(inner.out) == []
    inner.push_table(2, "Y")
    assert take(inner.out) == []
    inner.push_stream(4, "X")
    assert take(inner.out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    inner.push_table(4, "YY")
    assert take(inner.out) == []
    inner.push_stream(4, "X")
    assert take(inner.out) == [
        (0, "X0+YY0", 0),
        (1, "X1+YY1", 1),
        (2, "X2+YY2", 2),
        (3, "X3+YY3", 3),
    ]
    inner.push_table(4, "YYY")
    assert take(inner.out) == []


def test_join_should_join_only_if_match_found_on_stream_updates(inner: StreamTable) -> None:
    inner.push_table(2, "Y")
    assert take(inner.out) == []
    inner.push_stream(4, "X")
    assert take(inner.out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]


def test_join_should_clear_table_entry_on_null_value_updates(inner: StreamTable) -> None:
    inner.push_table(4, "Y")
    inner.push_stream(4, "X")
    assert take(inner.out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    inner.push_null_values_to_table(2)
    assert take(inner.out) == []
    inner.push_stream(4, "XX")
    assert take(inner.out) == [(2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


@pytest.mark.parametrize(("key", "value"), [(None, "A"), (1, None)])
def test_join_should_log_and_meter_when_skipping_null_key_or_value(
    inner: StreamTable, key: Any, value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        inner.stream.pipe_input(key, value)
    assert (
        "Skipping record due to null join key or value. topic=[streamTopic] partition=[0] "
        "offset=[0]" in caplog.messages
    )
    assert dropped(inner.driver) == 1
    assert take(inner.out) == []


def test_left_join_should_join_with_empty_table_on_stream_updates(left: StreamTable) -> None:
    left.push_stream(2, "X")
    assert take(left.out) == [(0, "X0+null", 0), (1, "X1+null", 1)]


def test_left_join_should_not_join_on_table_updates(left: StreamTable) -> None:
    left.push_stream(2, "X")
    assert take(left.out) == [(0, "X0+null", 0), (1, "X1+null", 1)]
    left.push_table(2, "Y")
    assert take(left.out) == []
    left.push_stream(4, "X")
    assert take(left.out) == [
        (0, "X0+Y0", 0),
        (1, "X1+Y1", 1),
        (2, "X2+null", 2),
        (3, "X3+null", 3),
    ]
    left.push_table(4, "YY")
    assert take(left.out) == []
    left.push_stream(4, "X")
    assert take(left.out) == [
        (0, "X0+YY0", 0),
        (1, "X1+YY1", 1),
        (2, "X2+YY2", 2),
        (3, "X3+YY3", 3),
    ]
    left.push_table(4, "YYY")
    assert take(left.out) == []


def test_left_join_should_join_regardless_if_match_found(left: StreamTable) -> None:
    left.push_table(2, "Y")
    assert take(left.out) == []
    left.push_stream(4, "X")
    assert take(left.out) == [
        (0, "X0+Y0", 0),
        (1, "X1+Y1", 1),
        (2, "X2+null", 2),
        (3, "X3+null", 3),
    ]


def test_left_join_should_clear_table_entry_on_null_value_updates(left: StreamTable) -> None:
    left.push_table(4, "Y")
    left.push_stream(4, "X")
    assert take(left.out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    left.push_null_values_to_table(2)
    assert take(left.out) == []
    left.push_stream(4, "XX")
    assert take(left.out) == [
        (0, "XX0+null", 0),
        (1, "XX1+null", 1),
        (2, "XX2+Y2", 2),
        (3, "XX3+Y3", 3),
    ]


def test_null_keys_and_values_as_kafka_4_4() -> None:
    """Java's ``JoinOracle`` printed, for the same program and input:
    ``left_nulls: (null,x+null,1) (a,a+A,3) (b,nb+null,4)``,
    ``left_nulls_rekeyed: (x,x+null,1) (a,a+A,3) (null,nb+null,4)``,
    ``inner_nulls_rekeyed: (a,a+A,3)``: a left join joins a record without a key (also one
    whose key became null before a repartition, which then passes the repartition topic);
    a null value is dropped by every join."""
    builder = StreamsBuilder()
    stream = builder.stream("s")
    table = builder.table("t")

    def rekey(_key: Any, value: Any) -> Any:
        return None if value is None or value.startswith("n") else value

    left = capture(stream.left_join(table, tostring))
    left_rekeyed = capture(stream.select_key(rekey).left_join(table, tostring))
    inner_rekeyed = capture(stream.select_key(rekey).join(table, tostring))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        streams = driver.create_input_topic("s", TEXT, TEXT)
        driver.create_input_topic("t", TEXT, TEXT).pipe_input("a", "A", 0)
        streams.pipe_input(None, "x", 1)
        streams.pipe_input("a", None, 2)
        streams.pipe_input("a", "a", 3)
        streams.pipe_input("b", "nb", 4)
        assert left == [(None, "x+null", 1), ("a", "a+A", 3), ("b", "nb+null", 4)]
        assert left_rekeyed == [("x", "x+null", 1), ("a", "a+A", 3), (None, "nb+null", 4)]
        assert inner_rekeyed == [("a", "a+A", 3)]
        # Kafka meters 2 (the two left joins drop the null value; its inner join's repartition
        # filter drops the null value's null key unmetered); streamstate also counts that one,
        # and the null key of "nb" its inner join's repartition filter drops.
        assert dropped(driver) == 4


def test_a_left_join_lets_null_keys_through_every_repartition_upstream() -> None:
    """Java's ``JoinOracle``: ``reused_inner: (a,a+A,1)``, ``reused_left: (a,a+A,1)
    (null,nb+null,2) (x,x+null,3)``, ``repartition_left: (k,a+null,1) (k,nb+null,2)
    (null,x+null,3)``: a left join reusing an inner join's repartition topic, and one after
    ``repartition()``, still join records without a key (Kafka relaxes the repartition's
    null-key filter for any left join downstream)."""
    builder = StreamsBuilder()
    stream = builder.stream("s")
    table = builder.table("t")

    def rekey(_key: Any, value: Any) -> Any:
        return None if value.startswith("n") else value

    rekeyed = stream.select_key(rekey)
    inner = capture(rekeyed.join(table, tostring))
    reused_left = capture(rekeyed.left_join(table, tostring))
    repartition_left = capture(stream.repartition().left_join(table, tostring))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        streams = driver.create_input_topic("s", TEXT, TEXT)
        driver.create_input_topic("t", TEXT, TEXT).pipe_input("a", "A", 0)
        streams.pipe_input("k", "a", 1)
        streams.pipe_input("k", "nb", 2)
        streams.pipe_input(None, "x", 3)
        assert inner == [("a", "a+A", 1)]
        assert reused_left == [("a", "a+A", 1), (None, "nb+null", 2), ("x", "x+null", 3)]
        assert repartition_left == [("k", "a+null", 1), ("k", "nb+null", 2), (None, "x+null", 3)]
        assert dropped(driver) == 1  # the inner join's null key, as Kafka meters it


def test_join_with_key_and_through_filtered_and_mapped_table() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("orders")
    table = builder.table("customers").filter(lambda _k, v: v != "hidden").map_values(str.upper)
    out = capture(stream.join(table, lambda k, v1, v2: f"{k}:{v1}+{v2}", with_key=True))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        customers = driver.create_input_topic("customers", TEXT, TEXT)
        orders = driver.create_input_topic("orders", TEXT, TEXT)
        customers.pipe_input("a", "alice", 0)
        customers.pipe_input("b", "hidden", 0)
        orders.pipe_input("a", "o1", 5)
        orders.pipe_input("b", "o2", 6)
        assert out == [("a", "a:o1+ALICE", 5)]


def test_join_with_an_aggregated_table_reads_through_its_cache() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("clicks").group_by_key().count()
    out = capture(builder.stream("orders").join(counts, lambda v, c: f"{v}#{c}"))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        clicks = driver.create_input_topic("clicks", TEXT, TEXT)
        orders = driver.create_input_topic("orders", TEXT, TEXT)
        clicks.pipe_input("a", "c", 0)
        clicks.pipe_input("a", "c", 1)
        orders.pipe_input("a", "o", 2)
        orders.pipe_input("b", "o", 3)
        assert out == [("a", "o#2", 2)]


def test_rekeyed_join_repartitions_and_reads_the_table_after_it() -> None:
    builder = StreamsBuilder()
    table = builder.table("customers")
    orders = builder.stream("orders").select_key(lambda _k, v: v.split(":")[0])
    out = capture(orders.join(table, tostring, name="enrich"))
    topology = builder.build()
    assert "enrich-repartition" in {t.removesuffix("") for t in topology.repartition_topics}
    with TopologyTestDriver(topology, STRINGS) as driver:
        driver.create_input_topic("customers", TEXT, TEXT).pipe_input("alice", "A", 0)
        driver.create_input_topic("orders", TEXT, TEXT).pipe_input("o1", "alice:1", 7)
        assert out == [("alice", "alice:1+A", 7)]


# -- co-partitioning -------------------------------------------------------------------------


def test_a_join_of_topics_with_different_partition_counts_fails_naming_both() -> None:
    builder = StreamsBuilder()
    builder.stream("orders").join(builder.table("customers"), tostring).to("out")
    graph = builder.build().graph()
    with pytest.raises(TopologyError, match=r"not co-partitioned") as failure:
        plan_internal_topics(graph, "app", {"orders": 4, "customers": 2, "out": 1})
    assert "app-orders" not in str(failure.value)
    assert "customers: 2" in str(failure.value)
    assert "orders: 4" in str(failure.value)
    assert graph.subtopology_of("orders", "app") == graph.subtopology_of("customers", "app")


def test_a_rekeyed_join_is_co_partitioned_through_its_repartition_topic() -> None:
    # Kafka's CopartitionedTopicsEnforcer: the join's repartition topic takes the table's
    # partition count (2), not the count of the topic written to it (4).
    builder = StreamsBuilder()
    table = builder.table("customers")
    builder.stream("orders").map(lambda k, v: (v, k)).join(table, tostring).to("out")
    graph = builder.build().graph()
    internal = plan_internal_topics(graph, "app", {"orders": 4, "customers": 2, "out": 1})
    assert internal.repartitions == {"app-KSTREAM-MAP-0000000004-repartition": 2}
    assert internal.changelogs == {"customers-STATE-STORE-0000000000": 2}


# -- KStreamGlobalKTableJoinTest / KStreamGlobalKTableLeftJoinTest --------------------------


class StreamGlobal:
    """Kafka's set-up: the stream's value optionally holds the global table's key after a
    comma; ``join(global, keyMapper, TOSTRING_JOINER)``."""

    def __init__(self, left: bool) -> None:
        builder = StreamsBuilder()
        stream = builder.stream(
            "streamTopic", key_serde=Serdes.Integer(), value_serde=Serdes.String()
        )
        table = builder.global_table(
            "globalTableTopic", key_serde=Serdes.String(), value_serde=Serdes.String()
        )

        def key_mapper(_key: Any, value: str) -> Any:
            tokens = value.split(",")
            return tokens[1] if len(tokens) > 1 else None

        join = stream.left_join if left else stream.join
        self.out = capture(join(table, key_mapper, tostring))
        self.topology = builder.build()
        self.driver = TopologyTestDriver(self.topology, INT_STRING)
        self.stream = self.driver.create_input_topic("streamTopic", INT, TEXT)
        self.table = self.driver.create_input_topic("globalTableTopic", TEXT, TEXT)
        self.time = 0  # Kafka auto-advances the stream's timestamps by 1 ms

    def push_stream(self, count: int, prefix: str, foreign_key: bool, null_key: bool) -> None:
        for i in range(count):
            value = f"{prefix}{KEYS[i]}" + (f",FKey{KEYS[i]}" if foreign_key else "")
            key = None if null_key and i == 0 else KEYS[i]
            self.stream.pipe_input(key, value, self.time)
            self.time += 1

    def push_global(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", f"{prefix}{KEYS[i]}", 0)

    def push_null_values_to_global(self, count: int) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{KEYS[i]}", None, 0)


@pytest.fixture
def global_inner() -> Any:
    setup = StreamGlobal(left=False)
    yield setup
    setup.driver.close()


@pytest.fixture
def global_left() -> Any:
    setup = StreamGlobal(left=True)
    yield setup
    setup.driver.close()


@pytest.mark.parametrize("setup", ["global_inner", "global_left"])
def test_global_join_should_not_require_copartitioning(
    setup: str, request: pytest.FixtureRequest
) -> None:
    topology = request.getfixturevalue(setup).topology
    assert [set(sub.source_topics) for sub in topology.graph().subtopologies] == [{"streamTopic"}]


def test_global_join_should_not_join_with_empty_global_table(global_inner: StreamGlobal) -> None:
    global_inner.push_stream(2, "X", True, False)
    assert take(global_inner.out) == []


def test_global_join_should_not_join_on_global_table_updates(global_inner: StreamGlobal) -> None:
    g = global_inner
    g.push_stream(2, "X", True, False)
    assert take(g.out) == []
    g.push_global(2, "Y")
    assert take(g.out) == []
    g.push_stream(4, "X", True, False)
    assert take(g.out) == [(0, "X0,FKey0+Y0", 2), (1, "X1,FKey1+Y1", 3)]
    g.push_global(4, "YY")
    assert take(g.out) == []
    g.push_stream(4, "X", True, False)
    assert take(g.out) == [
        (0, "X0,FKey0+YY0", 6),
        (1, "X1,FKey1+YY1", 7),
        (2, "X2,FKey2+YY2", 8),
        (3, "X3,FKey3+YY3", 9),
    ]
    g.push_global(4, "YYY")
    assert take(g.out) == []


def test_global_join_should_join_only_if_match_found(global_inner: StreamGlobal) -> None:
    global_inner.push_global(2, "Y")
    global_inner.push_stream(4, "X", True, False)
    assert take(global_inner.out) == [(0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]


def test_global_join_should_clear_entry_on_null_value_updates(global_inner: StreamGlobal) -> None:
    g = global_inner
    g.push_global(4, "Y")
    g.push_stream(4, "X", True, False)
    assert take(g.out) == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+Y2", 2),
        (3, "X3,FKey3+Y3", 3),
    ]
    g.push_null_values_to_global(2)
    assert take(g.out) == []
    g.push_stream(4, "XX", True, False)
    assert take(g.out) == [(2, "XX2,FKey2+Y2", 6), (3, "XX3,FKey3+Y3", 7)]


def test_global_join_should_not_join_on_null_key_mapper_values(global_inner: StreamGlobal) -> None:
    global_inner.push_global(4, "Y")
    global_inner.push_stream(4, "XXX", False, False)
    assert take(global_inner.out) == []
    assert dropped(global_inner.driver) == 4


def test_global_join_should_join_a_null_key_with_a_key_mapper_value(
    global_inner: StreamGlobal,
) -> None:
    global_inner.push_global(2, "Y")
    global_inner.push_stream(4, "X", True, True)
    assert take(global_inner.out) == [(None, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]


def test_global_left_join_should_join_with_empty_global_table(global_left: StreamGlobal) -> None:
    global_left.push_stream(2, "X", True, False)
    assert take(global_left.out) == [(0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1)]


def test_global_left_join_should_not_join_on_global_table_updates(
    global_left: StreamGlobal,
) -> None:
    g = global_left
    g.push_stream(2, "X", True, False)
    assert take(g.out) == [(0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1)]
    g.push_global(2, "Y")
    assert take(g.out) == []
    g.push_stream(4, "X", True, False)
    assert take(g.out) == [
        (0, "X0,FKey0+Y0", 2),
        (1, "X1,FKey1+Y1", 3),
        (2, "X2,FKey2+null", 4),
        (3, "X3,FKey3+null", 5),
    ]
    g.push_global(4, "YY")
    assert take(g.out) == []
    g.push_stream(4, "X", True, False)
    assert take(g.out) == [
        (0, "X0,FKey0+YY0", 6),
        (1, "X1,FKey1+YY1", 7),
        (2, "X2,FKey2+YY2", 8),
        (3, "X3,FKey3+YY3", 9),
    ]


def test_global_left_join_should_join_regardless_if_match_found(global_left: StreamGlobal) -> None:
    global_left.push_global(2, "Y")
    global_left.push_stream(4, "X", True, False)
    assert take(global_left.out) == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+null", 2),
        (3, "X3,FKey3+null", 3),
    ]


def test_global_left_join_should_clear_entry_on_null_value_updates(
    global_left: StreamGlobal,
) -> None:
    g = global_left
    g.push_global(4, "Y")
    g.push_stream(4, "X", True, False)
    take(g.out)
    g.push_null_values_to_global(2)
    assert take(g.out) == []
    g.push_stream(4, "XX", True, False)
    assert take(g.out) == [
        (0, "XX0,FKey0+null", 4),
        (1, "XX1,FKey1+null", 5),
        (2, "XX2,FKey2+Y2", 6),
        (3, "XX3,FKey3+Y3", 7),
    ]


def test_global_left_join_joins_null_key_mapper_values_with_null(
    global_left: StreamGlobal,
) -> None:
    # Kafka 4.4 (JoinOracle: "global_left: ... (k,nofk+null,2)"): a left join no longer drops
    # a record whose selected key is null; it joins it with null.
    global_left.push_global(4, "Y")
    global_left.push_stream(4, "XXX", False, False)
    assert take(global_left.out) == [
        (0, "XXX0+null", 0),
        (1, "XXX1+null", 1),
        (2, "XXX2+null", 2),
        (3, "XXX3+null", 3),
    ]
    assert dropped(global_left.driver) == 0


def test_global_left_join_should_join_a_null_key(global_left: StreamGlobal) -> None:
    global_left.push_global(4, "Y")
    global_left.push_stream(4, "X", True, True)
    assert take(global_left.out) == [
        (None, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+Y2", 2),
        (3, "X3,FKey3+Y3", 3),
    ]


def test_global_join_keeps_the_need_to_repartition() -> None:
    builder = StreamsBuilder()
    products = builder.global_table("products")
    (
        builder.stream("orders")
        .select_key(lambda _k, v: v)
        .left_join(products, lambda _k, v: v, tostring, name="lookup")
        .group_by_key()
        .count()
        .to_stream()
        .to("out", value_serde=Serdes.Long())
    )
    assert len(builder.build().repartition_topics) == 1


# -- versioned tables and the grace period (KIP-914, KIP-923) -------------------------------


def test_grace_on_a_non_versioned_table_is_a_topology_error() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic")
    table = builder.table("topic2")
    with pytest.raises(TopologyError, match="KTable must be versioned to use a grace period"):
        stream.join(table, tostring, name="first-join", grace=6)


def test_grace_on_a_filter_of_a_non_versioned_store_is_a_topology_error() -> None:
    # Kafka's shouldFailIfTableIsNotVersionedButMaterializationIsInherited (Kafka: at build).
    builder = StreamsBuilder()
    source = builder.table("topic2", materialized=Materialized("tableB", persistent=False))
    with pytest.raises(TopologyError, match="KTable must be versioned"):
        builder.stream("topic").join(source.filter(lambda _k, _v: True), tostring, grace=6)


def test_grace_longer_than_the_history_retention_is_a_topology_error() -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "topic2", materialized=Materialized("tableB", versioned_retention=300_000)
    )
    with pytest.raises(TopologyError, match="History retention must be at least grace period"):
        builder.stream("topic").join(table, tostring, grace=360_000)


def test_grace_on_a_filter_of_a_versioned_table_reads_it_as_of_the_record_time() -> None:
    # Kafka's shouldNotFailIfTableIsVersionedButMaterializationIsInherited, run: the filter
    # keeps no store, so the join reads the versioned source store through it.
    builder = StreamsBuilder()
    source = builder.table(
        "topic2", materialized=Materialized("tableB", versioned_retention=300_000)
    )
    tableb = source.filter(lambda _k, v: v != "hidden")
    out = capture(builder.stream("topic").join(tableb, tostring, name="first-join", grace=6))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        rows = driver.create_input_topic("topic2", TEXT, TEXT)
        stream = driver.create_input_topic("topic", TEXT, TEXT)
        rows.pipe_input("a", "A1", 1)
        rows.pipe_input("a", "hidden", 5)
        stream.pipe_input("a", "s3", 3)
        stream.pipe_input("a", "s7", 7)
        assert out == []
        stream.pipe_input("b", "flush", 13)  # stream time 13: both are past 13 - 6
        assert out == [("a", "s3+A1", 3)]  # s7 reads "hidden", filtered out: no row


def test_grace_longer_than_an_inherited_stores_history_retention_is_a_topology_error() -> None:
    # Kafka's shouldFailIfGracePeriodIsLongerThanHistoryRetentionAndInheritedStore.
    builder = StreamsBuilder()
    source = builder.table("topic2", materialized=Materialized("V-grace", versioned_retention=0))
    with pytest.raises(TopologyError, match="History retention must be at least grace period"):
        builder.stream("topic").join(source.filter(lambda _k, _v: True), tostring, grace=6)


def _versioned_join(left: bool, grace: int | None) -> tuple[Any, list[Any]]:
    builder = StreamsBuilder()
    stream = builder.stream("streamTopic", key_serde=Serdes.Integer(), value_serde=Serdes.String())
    table = builder.table(
        "tableTopic2",
        key_serde=Serdes.Integer(),
        value_serde=Serdes.String(),
        materialized=Materialized("V-grace", versioned_retention=300_000),
    )
    join = stream.left_join if left else stream.join
    options: dict[str, Any] = {"name": "Grace"}
    if grace is not None:
        options["grace"] = grace
    out = capture(join(table, tostring, **options))
    return builder.build(), out


@needs_versioned
def test_should_delay_join_by_grace_period() -> None:
    topology, out = _versioned_join(left=False, grace=2)
    with TopologyTestDriver(topology, INT_STRING) as driver:
        stream = driver.create_input_topic("streamTopic", INT, TEXT)
        table = driver.create_input_topic("tableTopic2", INT, TEXT)

        def push_stream(prefix: str) -> None:
            for i in range(4):
                stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", i)

        def push_table(prefix: str) -> None:
            for i in range(4):
                table.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", 0)

        push_table("Y")
        assert take(out) == []
        push_stream("X")
        assert take(out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
        push_table("YY")
        assert take(out) == []
        push_stream("X")
        assert take(out) == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
        stream.pipe_input(5, "test", 7)
        assert take(out) == [
            (2, "X2+YY2", 2),
            (2, "X2+YY2", 2),
            (3, "X3+YY3", 3),
            (3, "X3+YY3", 3),
        ]
        push_table("YYY")
        assert take(out) == []


@needs_versioned
def test_should_handle_late_joins_with_grace_period() -> None:
    topology, out = _versioned_join(left=False, grace=2)
    with TopologyTestDriver(topology, INT_STRING) as driver:
        stream = driver.create_input_topic("streamTopic", INT, TEXT)
        table = driver.create_input_topic("tableTopic2", INT, TEXT)
        for i in range(4):
            table.pipe_input(KEYS[i], f"Y{KEYS[i]}", 0)
        for i in range(4):
            stream.pipe_input(KEYS[i], f"X{KEYS[i]}", i)
        assert take(out) == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
        stream.pipe_input(0, "X0", 0)  # late: joined at once, evicting nothing
        assert take(out) == [(0, "X0+Y0", 0)]


@needs_versioned
def test_versioned_lookups_are_as_of_the_record_time() -> None:
    """Java's ``JoinOracle``: ``versioned_left: (a,s5+null,5) (a,s10+A10,10) (a,s15+A10,15)
    (a,s25+A20,25) (a,s35+null,35) (a,s16+A15,16) (a,s26+A20,26)``."""
    builder = StreamsBuilder()
    table = builder.table("t", materialized=Materialized("v", versioned_retention=300_000))
    out = capture(builder.stream("s").left_join(table, tostring))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        stream = driver.create_input_topic("s", TEXT, TEXT)
        rows = driver.create_input_topic("t", TEXT, TEXT)
        rows.pipe_input("a", "A10", 10)
        rows.pipe_input("a", "A20", 20)
        rows.pipe_input("a", None, 30)
        for time in (5, 10, 15, 25, 35):
            stream.pipe_input("a", f"s{time}", time)
        rows.pipe_input("a", "A15", 15)
        stream.pipe_input("a", "s16", 16)
        stream.pipe_input("a", "s26", 26)
        assert out == [
            ("a", "s5+null", 5),
            ("a", "s10+A10", 10),
            ("a", "s15+A10", 15),
            ("a", "s25+A20", 25),
            ("a", "s35+null", 35),
            ("a", "s16+A15", 16),
            ("a", "s26+A20", 26),
        ]


@needs_versioned
def test_grace_orders_by_time_then_key_and_joins_late_records_at_once() -> None:
    """Java's ``JoinOracle``: ``grace_left: (a,s3+A0,3) (a,s2+A4,5) (b,s1+B0,5)
    (a,late+A0,2) (c,s4+null,20) dropped=1``."""
    builder = StreamsBuilder()
    table = builder.table("t", materialized=Materialized("v", versioned_retention=300_000))
    out = capture(builder.stream("s").left_join(table, tostring, name="j", grace=10))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        stream = driver.create_input_topic("s", TEXT, TEXT)
        rows = driver.create_input_topic("t", TEXT, TEXT)
        rows.pipe_input("a", "A0", 0)
        rows.pipe_input("b", "B0", 0)
        stream.pipe_input("b", "s1", 5)
        stream.pipe_input("a", "s2", 5)
        stream.pipe_input("a", "s3", 3)
        rows.pipe_input("a", "A4", 4)
        stream.pipe_input("c", "s4", 20)
        stream.pipe_input("a", "late", 2)
        stream.pipe_input("a", None, 21)
        stream.pipe_input("b", "s6", 40)
        assert out == [
            ("a", "s3+A0", 3),
            ("a", "s2+A4", 5),
            ("b", "s1+B0", 5),
            ("a", "late+A0", 2),
            ("c", "s4+null", 20),
        ]
        assert dropped(driver) == 1


def test_the_grace_buffer_orders_by_time_then_key_bytes_and_survives_reopening() -> None:
    store = InMemoryKeyValueStore("j-Buffer")
    buffer = TimeOrderedJoinBuffer(store, "j-Buffer", Serdes.String(), Serdes.String(), 10)
    from streamstate.processor.record import Record  # noqa: PLC0415

    assert buffer.put(Record("b", "s1", 5, (("h", b"1"),)))
    assert buffer.put(Record("a", "s2", 5))
    assert buffer.put(Record("a", "s3", 3))
    assert list(buffer.evict()) == []
    assert buffer.put(Record("c", "s4", 20))
    assert [(r.key, r.value, r.timestamp, r.headers) for r in buffer.evict()] == [
        ("a", "s3", 3, ()),
        ("a", "s2", 5, ()),
        ("b", "s1", 5, (("h", b"1"),)),
    ]
    reopened = TimeOrderedJoinBuffer(store, "j-Buffer", Serdes.String(), Serdes.String(), 10)
    assert reopened.observed == 20
    assert not reopened.put(Record("a", "late", 2))  # 20 - 10 > 2: joined at once
    assert reopened.num_records() == 1
    assert reopened.put(Record("b", "s6", 40))
    assert [r.value for r in reopened.evict()] == ["s4"]


# -- describe(), against Kafka Streams' -------------------------------------------------------


def joined(a: Any, b: Any) -> str:
    return f"{a}+{b}"


def _join(b: StreamsBuilder) -> None:
    b.stream("orders").join(b.table("customers"), joined).to("out")


def _left_join(b: StreamsBuilder) -> None:
    b.stream("orders").left_join(b.table("customers"), joined).to("out")


def _named_join(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    t = b.table("customers", materialized="customer-store")
    s.join(t, joined, name="enrich").to("out")


def _rekeyed(b: StreamsBuilder, names: tuple[str | None, str | None]) -> None:
    a = b.stream("topic")
    t2 = b.table("topic2")
    t3 = b.table("topic3")
    rekeyed = a.map(lambda k, v: (v, k))
    rekeyed.join(t2, joined, name=names[0]).to("out-one")
    rekeyed.join(t3, joined, name=names[1]).to("out-two")


def _rekeyed_left_join(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    t = b.table("customers")
    s.select_key(lambda _k, v: v).left_join(t, joined).map_values(lambda v: v).to("out")


def _filtered_table(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    t = b.table("customers").filter(lambda _k, _v: True).map_values(lambda v: v)
    s.join(t, joined).to("out")


def _aggregated_table(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    counts = b.stream("clicks").group_by_key().count()
    s.join(counts, joined).to("out")


def _stream_to_table(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    t = b.stream("updates").to_table()
    s.left_join(t, joined).to("out")


def _versioned_grace(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    t = b.table("prices", materialized=Materialized("prices-store", versioned_retention=300_000))
    s.join(t, joined, name="priced", grace=100).to("out")


def _reused_repartition_left_join(b: StreamsBuilder) -> None:
    s = b.stream("s")
    t = b.table("t")
    rekeyed = s.select_key(lambda _k, v: v)
    rekeyed.join(t, joined).to("out")
    rekeyed.left_join(t, joined).to("out2")
    s.repartition().left_join(t, joined).to("out3")


def _global_join(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    g = b.global_table("products")
    s.join(g, lambda _k, v: v, joined).to("out")


def _global_left_join_named(b: StreamsBuilder) -> None:
    s = b.stream("orders")
    g = b.global_table("products")
    (
        s.select_key(lambda _k, v: v)
        .left_join(g, lambda _k, v: v, joined, name="lookup")
        .group_by_key()
        .count()
        .to_stream()
        .to("out")
    )


PROGRAMS = {
    "join": _join,
    "left_join": _left_join,
    "named_join": _named_join,
    "rekeyed_generated": lambda b: _rekeyed(b, (None, None)),
    "rekeyed_named": lambda b: _rekeyed(b, ("first-join", "second-join")),
    "rekeyed_left_join": _rekeyed_left_join,
    "filtered_table": _filtered_table,
    "aggregated_table": _aggregated_table,
    "stream_to_table": _stream_to_table,
    "versioned_grace": _versioned_grace,
    "reused_repartition_left_join": _reused_repartition_left_join,
    "global_join": _global_join,
    "global_left_join_named": _global_left_join_named,
}


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` of every program (Java runs once)."""
    report = _kstreams._run_java("DescribeStreamTableJoins", [], 120.0)
    return {str(name): str(text) for name, text in report.items()}


def describe(program: Any) -> str:
    builder = StreamsBuilder()
    program(builder)
    return str(builder.build().describe())


def test_the_programs_are_those_of_the_java_oracle(kafka_texts: dict[str, str]) -> None:
    assert list(kafka_texts) == list(PROGRAMS)
    assert {n: t for n, t in kafka_texts.items() if t.startswith("ERROR")} == {}


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n != "global_left_join_named"])
def test_describe_is_kafkas(name: str, kafka_texts: dict[str, str]) -> None:
    assert describe(PROGRAMS[name]) == kafka_texts[name]


def test_describe_of_a_global_join_differs_only_in_sub_topology_order(
    kafka_texts: dict[str, str],
) -> None:
    # Kafka numbers the global store's sub-topology among the others, in the order they were
    # added; streamstate lists global stores after the stream sub-topologies (docs/dsl.md).
    java = kafka_texts["global_left_join_named"]
    head, rest = java.split("  Sub-topology: 1 for global store (will not generate tasks)\n")
    global_part, stream_part = rest.split("  Sub-topology: 2\n")
    expected = (
        head
        + "  Sub-topology: 1\n"
        + stream_part.rstrip("\n")
        + "\n  Sub-topology: 2 for global store (will not generate tasks)\n"
        + global_part
    )
    ours = describe(PROGRAMS["global_left_join_named"])
    assert ours.split() == expected.split()


def test_task_ids_of_a_join_are_one_per_partition() -> None:
    builder = StreamsBuilder()
    _join(builder)
    topology = builder.build().bind("app", Serdes.String(), Serdes.String())
    assert topology.task_id("orders", 3) == topology.task_id("customers", 3) == TaskId(0, 3)
