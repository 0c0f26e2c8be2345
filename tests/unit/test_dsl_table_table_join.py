"""KTable-KTable joins on the primary key on the ``TopologyTestDriver``: ports of Kafka's
``KTableKTableInnerJoinTest``, ``KTableKTableLeftJoinTest``, ``KTableKTableOuterJoinTest`` and
``KTableKTableRightJoinTest`` (``testJoin``, ``testQueryableJoin``, ``testNotSendingOldValues``,
``testQueryableNotSendingOldValues``, ``testSendingOldValues``, the null-key cases and
``shouldNotThrowIllegalStateExceptionWhenMultiCacheEvictions``), with the outputs Kafka's tests
assert; the names Kafka gives the join's nodes and stores (``describe()`` compared with
``benches/kstreams/DescribeTableTableJoins.java`` on Kafka Streams 4.4); random updates run
through 15 join programs on Kafka Streams 4.4's driver and on streamstate's, compared record
for record (the same Java file's ``--replay`` mode); co-partitioning, windowed tables, and the
errors of programs a join cannot run.

Kafka's ``MockApiProcessor`` on the join's node is :func:`capture_changes` (it sees the
``Change(new, old)`` values); Kafka's ``enableSendingOldValues(true)`` on the result is
``joined.state.enable_send_old_values()``. Kafka's tests read inputs with
``StreamsTestUtils.getStreamsConfig(Integer, String)``: :data:`INT_STRING`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import pytest
from benches import _kstreams
from tests.dsl_support import Capture, capture, dropped

from streamstate import Processor, TopologyError
from streamstate.dsl import (
    BufferConfig,
    KTable,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    ValueAndTimestamp,
)
from streamstate.dsl.table_join_processors import TableJoinProcessor
from streamstate.dsl.table_processors import Change, TableState
from streamstate.dsl.value_getters import RowValueGetter, join_view, store_view
from streamstate.processor.repartition import plan_internal_topics
from streamstate.serde import (
    IntegerDeserializer,
    IntegerSerializer,
    LongSerializer,
    Serdes,
    StringDeserializer,
    StringSerializer,
)
from streamstate.testing import TestRecord, TopologyTestDriver

INT = IntegerSerializer()
TEXT = StringSerializer()
INT_STRING = {"default.key.serde": Serdes.Integer(), "default.value.serde": Serdes.String()}
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
KEYS = (0, 1, 2, 3)


def tostring_joiner(value1: Any, value2: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``value1 + "+" + value2`` (``null`` for
    ``None``, as Java's string concatenation)."""
    return f"{_java(value1)}+{_java(value2)}"


def _java(value: Any) -> str:
    return "null" if value is None else str(value)


def tables(builder: StreamsBuilder) -> tuple[KTable, KTable]:
    """Kafka's ``builder.table(topic1, consumed)`` and ``builder.table(topic2, consumed)``."""
    one = builder.table("topic1", key_serde=Serdes.Integer(), value_serde=Serdes.String())
    two = builder.table("topic2", key_serde=Serdes.Integer(), value_serde=Serdes.String())
    return one, two


def join(kind: str, one: KTable, two: KTable, **options: Any) -> KTable:
    method = {"inner": one.join, "left": one.left_join, "outer": one.outer_join}[kind]
    result: KTable = method(two, tostring_joiner, **options)
    return result


def capture_changes(builder: StreamsBuilder, table: KTable) -> list[Any]:
    """``topology.addProcessor("proc", supplier, joined.name)``: the ``Change`` values the
    join forwards, as ``(key, Change(new, old), timestamp)``."""
    out: list[Any] = []
    builder.topology.add_processor("proc", lambda: Capture(out), table.name)
    return out


def take(out: list[Any]) -> list[Any]:
    """Kafka's ``checkAndClearProcessResult``."""
    taken = list(out)
    out.clear()
    return taken


# -- Kafka's scenario: eight steps, the same in every test of the three classes ---------------
# Each step pipes records into topic1 or topic2 (key, value, timestamp).

STEPS: list[tuple[str, list[tuple[Any, Any, int]]]] = [
    ("topic1", [(0, "X0", 5), (1, "X1", 6), (None, "SomeVal", 42)]),
    ("topic2", [(0, "Y0", 0), (1, "Y1", 10), (None, "AnotherVal", 73)]),
    ("topic1", [(k, f"XX{k}", 7) for k in KEYS]),
    ("topic2", [(k, f"YY{k}", k * 5) for k in KEYS]),
    ("topic1", [(k, f"XXX{k}", 6) for k in KEYS]),
    ("topic2", [(0, None, 5), (1, None, 7)]),
    ("topic1", [(k, f"XXXX{k}", 13) for k in KEYS]),
    ("topic1", [(0, None, 0), (1, None, 42), (2, None, 5), (3, None, 20)]),
]

# What each step forwards, (key, new, old, timestamp), per join kind, with old values sent.
# Kafka's testSendingOldValue(s); without old values, every old is None (testNotSendingOldValue)
# and testJoin's output topic gets (key, new, timestamp).
SENDING_OLD: dict[str, list[list[tuple[int, Any, Any, int]]]] = {
    "inner": [
        [],
        [(0, "X0+Y0", None, 5), (1, "X1+Y1", None, 10)],
        [(0, "XX0+Y0", "X0+Y0", 7), (1, "XX1+Y1", "X1+Y1", 10)],
        [
            (0, "XX0+YY0", "XX0+Y0", 7),
            (1, "XX1+YY1", "XX1+Y1", 7),
            (2, "XX2+YY2", None, 10),
            (3, "XX3+YY3", None, 15),
        ],
        [
            (0, "XXX0+YY0", "XX0+YY0", 6),
            (1, "XXX1+YY1", "XX1+YY1", 6),
            (2, "XXX2+YY2", "XX2+YY2", 10),
            (3, "XXX3+YY3", "XX3+YY3", 15),
        ],
        [(0, None, "XXX0+YY0", 6), (1, None, "XXX1+YY1", 7)],
        [(2, "XXXX2+YY2", "XXX2+YY2", 13), (3, "XXXX3+YY3", "XXX3+YY3", 15)],
        [(2, None, "XXXX2+YY2", 10), (3, None, "XXXX3+YY3", 20)],
    ],
    "left": [
        [(0, "X0+null", None, 5), (1, "X1+null", None, 6)],
        [(0, "X0+Y0", "X0+null", 5), (1, "X1+Y1", "X1+null", 10)],
        [
            (0, "XX0+Y0", "X0+Y0", 7),
            (1, "XX1+Y1", "X1+Y1", 10),
            (2, "XX2+null", None, 7),
            (3, "XX3+null", None, 7),
        ],
        [
            (0, "XX0+YY0", "XX0+Y0", 7),
            (1, "XX1+YY1", "XX1+Y1", 7),
            (2, "XX2+YY2", "XX2+null", 10),
            (3, "XX3+YY3", "XX3+null", 15),
        ],
        [
            (0, "XXX0+YY0", "XX0+YY0", 6),
            (1, "XXX1+YY1", "XX1+YY1", 6),
            (2, "XXX2+YY2", "XX2+YY2", 10),
            (3, "XXX3+YY3", "XX3+YY3", 15),
        ],
        [(0, "XXX0+null", "XXX0+YY0", 6), (1, "XXX1+null", "XXX1+YY1", 7)],
        [
            (0, "XXXX0+null", "XXX0+null", 13),
            (1, "XXXX1+null", "XXX1+null", 13),
            (2, "XXXX2+YY2", "XXX2+YY2", 13),
            (3, "XXXX3+YY3", "XXX3+YY3", 15),
        ],
        [
            (0, None, "XXXX0+null", 0),
            (1, None, "XXXX1+null", 42),
            (2, None, "XXXX2+YY2", 10),
            (3, None, "XXXX3+YY3", 20),
        ],
    ],
}
SENDING_OLD["outer"] = [
    *SENDING_OLD["left"][:7],
    [
        (0, None, "XXXX0+null", 0),
        (1, None, "XXXX1+null", 42),
        (2, "null+YY2", "XXXX2+YY2", 10),
        (3, "null+YY3", "XXXX3+YY3", 20),
    ],
]


def run_steps(
    driver: TopologyTestDriver, after_step: Callable[[int], None], *, null_keys: bool = True
) -> None:
    """Pipes Kafka's eight steps (Kafka's topics start at time 0, advancing by 0), calling
    ``after_step(i)`` after step ``i``."""
    inputs = {t: driver.create_input_topic(t, INT, TEXT) for t in ("topic1", "topic2")}
    for index, (topic, records) in enumerate(STEPS):
        for key, value, timestamp in records:
            if key is not None or null_keys:
                inputs[topic].pipe_input(key, value, timestamp)
        after_step(index)


def expected_changes(kind: str, index: int, *, old_values: bool) -> list[Any]:
    return [
        (key, Change(new, old if old_values else None), timestamp)
        for key, new, old, timestamp in SENDING_OLD[kind][index]
    ]


# -- testJoin / testQueryableJoin -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize(
    "materialized",
    [None, Materialized.with_(Serdes.Integer(), Serdes.String()), Materialized("joined")],
    ids=["not-materialized", "materialized", "materialized-named"],
)
def test_join_to_output_topic(kind: str, materialized: Materialized | None) -> None:
    """Kafka's ``testJoin`` (and the inner join's ``testQueryableJoin``): the result's
    ``to_stream().to(output)`` through the driver; two records with a null key are dropped and
    counted."""
    builder = StreamsBuilder()
    one, two = tables(builder)
    options = {} if materialized is None else {"materialized": materialized}
    join(kind, one, two, **options).to_stream().to("output")
    with TopologyTestDriver(builder.build(), INT_STRING) as driver:
        output = driver.create_output_topic("output", IntegerDeserializer(), StringDeserializer())

        def check(index: int) -> None:
            expected = [
                TestRecord(key, new, timestamp)
                for key, new, _old, timestamp in SENDING_OLD[kind][index]
            ]
            assert output.read_records_to_list() == expected, f"step {index + 1}"

        run_steps(driver, check)
        assert dropped(driver) == 2  # the table sources drop the two records without a key


def test_join_result_feeds_a_sink() -> None:
    """A join result's ``to_stream().to(topic)`` with a serde given at the sink, its keys and
    values readable from the topic, including the tombstone of a deleted result row."""
    builder = StreamsBuilder()
    users = builder.table("users", key_serde=Serdes.String(), value_serde=Serdes.String())
    regions = builder.table("regions", key_serde=Serdes.String(), value_serde=Serdes.Long())
    users.left_join(regions, lambda name, region: f"{name}@{region}").to_stream().to(
        "user-regions", value_serde=Serdes.String()
    )
    with TopologyTestDriver(builder.build()) as driver:
        user_topic = driver.create_input_topic("users", TEXT, TEXT)
        region_topic = driver.create_input_topic("regions", TEXT, LongSerializer())
        output = driver.create_output_topic(
            "user-regions", StringDeserializer(), StringDeserializer()
        )
        user_topic.pipe_input("alice", "Alice", 100)
        region_topic.pipe_input("alice", 7, 250)
        region_topic.pipe_input("bob", 3, 260)  # no user bob: a left join forwards nothing
        user_topic.pipe_input("bob", "Bob", 120)
        user_topic.pipe_input("alice", None, 300)
        assert output.read_records_to_list() == [
            TestRecord("alice", "Alice@None", 100),
            TestRecord("alice", "Alice@7", 250),
            TestRecord("bob", "Bob@3", 260),
            TestRecord("alice", None, 300),
        ]


# -- testNotSendingOldValues / testQueryableNotSendingOldValues / testSendingOldValues --------


@pytest.mark.parametrize(
    ("kind", "materialized"),
    [("inner", False), ("left", False), ("outer", False), ("inner", True)],
    ids=["inner", "left", "outer", "inner-queryable"],
)
def test_not_sending_old_values(kind: str, materialized: bool) -> None:
    """Kafka's ``testNotSendingOldValue(s)`` (and the inner join's
    ``testQueryableNotSendingOldValues``, whose result has a cached store): the join forwards
    ``Change(new, None)``; a left join turns on its left table's old values, an outer join
    both tables'."""
    builder = StreamsBuilder()
    one, two = tables(builder)
    options = (
        {"materialized": Materialized.with_(Serdes.Integer(), Serdes.String())}
        if materialized
        else {}
    )
    joined = join(kind, one, two, **options)
    proc = capture_changes(builder, joined)
    with TopologyTestDriver(builder.build(), INT_STRING) as driver:
        assert one.state.send_old_values is (kind != "inner")
        assert two.state.send_old_values is (kind == "outer")
        assert joined.state.send_old_values is False
        run_steps(
            driver,
            lambda index: _check(
                take(proc), expected_changes(kind, index, old_values=False), index
            ),
        )


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_sending_old_values(kind: str) -> None:
    """Kafka's ``testSendingOldValue(s)``: with old values asked of the result, both tables
    send theirs and the join forwards ``Change(new, old)``."""
    builder = StreamsBuilder()
    one, two = tables(builder)
    joined = join(kind, one, two)
    assert joined.state.enable_send_old_values() is True
    assert one.state.send_old_values and two.state.send_old_values
    assert joined.state.send_old_values
    proc = capture_changes(builder, joined)
    with TopologyTestDriver(builder.build(), INT_STRING) as driver:
        run_steps(
            driver,
            lambda index: _check(take(proc), expected_changes(kind, index, old_values=True), index),
        )


def _check(got: list[Any], expected: list[Any], index: int) -> None:
    assert got == expected, f"step {index + 1}"


def test_queryable_join_store_holds_the_result() -> None:
    """``testQueryableJoin``'s store: the result is queryable by its store's name with the
    rows and timestamps of the join (max of both sides')."""
    builder = StreamsBuilder()
    one, two = tables(builder)
    joined = join("inner", one, two, materialized=Materialized("joined", caching=False))
    assert joined.query_store_name == "joined"
    with TopologyTestDriver(builder.build(), INT_STRING) as driver:
        store = driver.get_key_value_store("joined")
        seen: list[list[Any]] = []
        run_steps(driver, lambda _i: seen.append([store.get_with_timestamp(k) for k in KEYS]))
    assert seen[1] == [ValueAndTimestamp("X0+Y0", 5), ValueAndTimestamp("X1+Y1", 10), None, None]
    assert seen[4] == [
        ValueAndTimestamp("XXX0+YY0", 6),
        ValueAndTimestamp("XXX1+YY1", 6),
        ValueAndTimestamp("XXX2+YY2", 10),
        ValueAndTimestamp("XXX3+YY3", 15),
    ]
    assert seen[5][:2] == [None, None]
    assert seen[7] == [None, None, None, None]


def test_materialized_unnamed_result_is_queryable_by_its_generated_name() -> None:
    """As Kafka's ``queryableStoreName()`` of a join given ``Materialized.with(serdes)``: the
    generated ``KTABLE-MERGE-STATE-STORE-<n>`` (``left_materialized_unnamed.queryable`` of the
    Java oracle); without ``materialized`` the result has none."""
    builder = StreamsBuilder()
    one, two = tables(builder)
    joined = join("left", one, two, materialized=Materialized.with_(Serdes.Integer(), None))
    assert joined.query_store_name == "KTABLE-MERGE-STATE-STORE-0000000006"
    assert join("left", *tables(StreamsBuilder())).query_store_name is None


# -- null keys --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["inner", "left", "right", "outer"])
def test_null_key_is_logged_and_dropped(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ``shouldLogAndMeterSkippedRecordsDueToNullLeftKey`` (and the right join's):
    a join processor given a record without a key logs it with its topic, partition and offset,
    counts it in ``dropped-records-total`` and forwards nothing."""
    builder = StreamsBuilder()
    left = builder.table("left", key_serde=Serdes.String(), value_serde=Serdes.String())
    right = builder.table("right", key_serde=Serdes.String(), value_serde=Serdes.String())
    joined = left.join(right, tostring_joiner)
    out = capture(joined.to_stream())
    processor = TableJoinProcessor(kind, joined.state.view, tostring_joiner, TableState())  # type: ignore[attr-defined]
    # A stream whose null keys reach the join: the processor under a KStream's source.
    stream = builder.stream("raw", key_serde=Serdes.String(), value_serde=Serdes.String())
    builder.topology.add_processor("to-change", _ToChange, stream.name)
    builder.topology.add_processor("join", lambda: processor, "to-change")
    for store in joined.state.view.stores:  # type: ignore[attr-defined]
        builder.topology.connect_store(store, "join")
    with (
        TopologyTestDriver(builder.build(), STRINGS) as driver,
        caplog.at_level(logging.WARNING),
    ):
        driver.create_input_topic("raw", TEXT, TEXT).pipe_input(None, "new", 0)
        assert dropped(driver) == 1
    assert out == []
    assert "Skipping record due to null key. topic=[raw] partition=[0] offset=[0]" in caplog.text


class _ToChange(Processor):
    """A stream record as a table update ``Change(value, "old")``, key kept (null too)."""

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Any) -> None:
        self.context.forward(record.with_value(Change(record.value, "old")))


# -- co-partitioning ---------------------------------------------------------------------------


def _joined_topology() -> Any:
    builder = StreamsBuilder()
    one, two = tables(builder)
    join("inner", one, two).to_stream().to("output")
    return builder.build()


def test_join_puts_both_tables_in_one_sub_topology() -> None:
    """Kafka's ``copartitionGroups()`` assertion of ``testJoin``: both source topics are read
    by one sub-topology (each side's processor reads the other side's store)."""
    graph = _joined_topology().graph()
    assert [sorted(sub.source_topics) for sub in graph.subtopologies] == [["topic1", "topic2"]]


def test_join_of_tables_not_co_partitioned_fails_at_start() -> None:
    """Topics with different partition counts: the check ``StreamsApp.start()`` runs
    (``plan_internal_topics``) raises a :class:`TopologyError` naming both topics and their
    counts; equal counts pass."""
    graph = _joined_topology().graph()
    with pytest.raises(TopologyError, match="not co-partitioned") as caught:
        plan_internal_topics(graph, "app", {"topic1": 2, "topic2": 3, "output": 1})
    assert "topic1: 2" in str(caught.value)
    assert "topic2: 3" in str(caught.value)
    internal = plan_internal_topics(graph, "app", {"topic1": 3, "topic2": 3, "output": 1})
    assert internal.changelogs == {
        "topic1-STATE-STORE-0000000000": 3,
        "topic2-STATE-STORE-0000000003": 3,
    }


def test_rekeyed_aggregation_joined_takes_the_tables_partition_count() -> None:
    """Kafka's co-partition group of a join holds the aggregation's repartition topic: it is
    created with the joined table's partition count (3), not that of the topic written to it
    (2)."""
    builder = StreamsBuilder()
    counts = builder.stream("events").group_by(lambda k, v: v).count().map_values(str)
    counts.join(builder.table("topic2"), tostring_joiner).to_stream().to("output")
    graph = builder.build().graph()
    internal = plan_internal_topics(graph, "app", {"events": 2, "topic2": 3, "output": 1})
    assert internal.repartitions == {"app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition": 3}
    assert internal.changelogs == {
        "KSTREAM-AGGREGATE-STATE-STORE-0000000002": 3,
        "topic2-STATE-STORE-0000000008": 3,
    }


VERSIONED_INPUTS = [
    ("t1", "a", "A1", 10), ("t2", "a", "B1", 20), ("t1", "a", "A0", 5), ("t2", "a", "B0", 15),
    ("t1", "a", "A2", 30), ("t2", "a", None, 12), ("t1", "a", None, 40), ("t2", "a", "B2", 50),
    ("t1", "a", "old", 1), ("t2", "b", "X", 60), ("t2", "b", "Y", 55),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("inner", [("a", "A1+B1!", 20), ("a", "A2+B1!", 30), ("a", None, 40)]),
        ("left", [("a", "A1+null", 10), ("a", "A1+B1", 20), ("a", "A2+B1", 30), ("a", None, 40)]),
        (
            "outer",
            [
                ("a", "A1+null", 10),
                ("a", "A1+B1", 20),
                ("a", "A2+B1", 30),
                ("a", "null+B1", 40),
                ("a", "null+B2", 50),
                ("b", "null+X", 60),
            ],
        ),
    ],
)
def test_join_of_versioned_tables_drops_out_of_order_updates(
    kind: str, expected: list[Any]
) -> None:
    """KIP-914: an update of a versioned table older than its key's latest (kept in the
    store's history) is not joined: the join drops it and counts it in
    ``dropped-records-total`` (5 here), also through a ``map_values`` of the versioned table.
    The outputs and the count are Kafka Streams 4.4's for the same program."""
    builder = StreamsBuilder()
    one = builder.table("t1", materialized=Materialized("v1", versioned_retention=100))
    two = builder.table("t2", materialized=Materialized("v2", versioned_retention=100))
    if kind == "inner":
        two = two.map_values(lambda v: v + "!")
    join(kind, one, two).to_stream().to("out")
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        inputs = {t: driver.create_input_topic(t, TEXT, TEXT) for t in ("t1", "t2")}
        output = driver.create_output_topic("out", StringDeserializer(), StringDeserializer())
        for topic, key, value, timestamp in VERSIONED_INPUTS:
            inputs[topic].pipe_input(key, value, timestamp)
        assert [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()] == expected
        assert dropped(driver) == 5


# -- windowed tables and bad programs -----------------------------------------------------------


@pytest.mark.parametrize("filtered", [False, True], ids=["counts", "materialized-filter"])
def test_join_of_time_windowed_tables(filtered: bool) -> None:
    """Two windowed counts joined: each side reads the other's window store by key and window
    (the output Kafka Streams 4.4's driver gives the same program); a materialized filter of
    one count in between (passing everything) is read from its own key-value store."""
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_with_no_grace(10)
    one = builder.stream("s1").group_by_key().windowed_by(windows).count()
    two = builder.stream("s2").group_by_key().windowed_by(windows).count()
    if filtered:
        one = one.filter(lambda k, v: True, materialized=Materialized("f", caching=False))
    one.join(two, tostring_joiner).to_stream(lambda k, v: f"{k.key}@{k.window.start}").to("out")
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        s1 = driver.create_input_topic("s1", TEXT, TEXT)
        s2 = driver.create_input_topic("s2", TEXT, TEXT)
        output = driver.create_output_topic("out", StringDeserializer(), StringDeserializer())
        for topic, key, timestamp in [
            (s1, "a", 1), (s2, "a", 2), (s1, "a", 3), (s2, "a", 15), (s1, "a", 16), (s2, "b", 4),
            (s1, "b", 5),
        ]:  # fmt: skip
            topic.pipe_input(key, "x", timestamp)
        assert output.read_records_to_list() == [
            TestRecord("a@0", "1+1", 2),
            TestRecord("a@0", "2+1", 3),
            TestRecord("a@10", "1+1", 16),
        ]


def _two_tables() -> tuple[KTable, KTable]:
    return tables(StreamsBuilder())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a, b: a.join(b, tostring_joiner, grace=5), "unknown option"),
        (lambda a, b: a.join(b, "joiner"), "must be a function"),
        (lambda a, b: a.outer_join(b, tostring_joiner, name="a/b"), "a name is"),
        (
            lambda a, b: a.join(
                b, tostring_joiner, materialized=Materialized("m", versioned_retention=1000)
            ),
            "versioned",
        ),
        (lambda a, b: a.join(b, tostring_joiner, materialized="bad name"), "illegal"),
        (
            lambda a, b: a.suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded())).join(
                b, tostring_joiner
            ),
            "cannot be read by a join",
        ),
        (lambda a, b: a.join(tables(StreamsBuilder())[1], tostring_joiner), "same StreamsBuilder"),
    ],
    ids=["option", "joiner", "name", "versioned", "store-name", "suppressed", "builders"],
)
def test_bad_joins_raise_topology_errors(call: Any, message: str) -> None:
    """A program a join cannot run raises :class:`TopologyError` naming the operation when it
    is written."""
    with pytest.raises(TopologyError, match=message):
        call(*_two_tables())


def test_joining_session_windowed_tables_raises() -> None:
    builder = StreamsBuilder()
    sessions = (
        builder.stream("s")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
    )
    with pytest.raises(TopologyError, match=r"KTable\.left_join: joining session-windowed"):
        sessions.count().left_join(sessions.count(), tostring_joiner)


# -- value getters ----------------------------------------------------------------------------


def test_join_value_getters() -> None:
    """Kafka's join value getters (read by a later join of an unmaterialized result): a row
    joined on the fly, with the larger timestamp; a left row without a right one keeps its
    own timestamp; an outer join's lone right row too."""

    class Rows:
        def __init__(self, rows: dict[Any, ValueAndTimestamp]) -> None:
            self.rows = rows

        def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
            return self.rows.get(key)

    left = Rows({"a": ValueAndTimestamp("A", 5), "b": ValueAndTimestamp("B", 9)})
    right = Rows({"a": ValueAndTimestamp("1", 7), "c": ValueAndTimestamp("3", 2)})
    # The "store" a view opens is the rows themselves.
    views = {"l": store_view("l", lambda _inner: left), "r": store_view("r", lambda _inner: right)}

    class Context:
        @staticmethod
        def get_state_store(name: str) -> str:
            return name

    def rows(kind: str) -> list[Any]:
        getter = join_view(kind, views["l"], views["r"], tostring_joiner).open(Context())  # type: ignore[arg-type]
        return [getter.get_with_timestamp(key) for key in "abcd"]

    assert rows("inner") == [ValueAndTimestamp("A+1", 7), None, None, None]
    assert rows("left") == [ValueAndTimestamp("A+1", 7), ValueAndTimestamp("B+null", 9), None, None]
    assert (
        RowValueGetter(
            join_view("left", views["l"], views["r"], tostring_joiner).open(Context())  # type: ignore[arg-type]
        ).get("b")
        == "B+null"
    )
    assert rows("outer") == [
        ValueAndTimestamp("A+1", 7),
        ValueAndTimestamp("B+null", 9),
        ValueAndTimestamp("null+3", 2),
        None,
    ]


# -- shouldNotThrowIllegalStateExceptionWhenMultiCacheEvictions ------------------------------


def test_chain_of_left_joins_with_many_cache_evictions() -> None:
    """Kafka's ``shouldNotThrowIllegalStateExceptionWhenMultiCacheEvictions`` (KAFKA-4492):
    an aggregation left-joined with six tables in a row (the last a join of a table with a
    mapped table), fed random records through cached stores (1050; Kafka's test pipes 7000).
    It must run, and (beyond Kafka's test) each row of the result must be the joins of the
    inputs' final rows."""
    builder = StreamsBuilder()
    long_string = {"key_serde": Serdes.Long(), "value_serde": Serdes.String()}

    def in_memory(name: str) -> Materialized:
        return Materialized(name, persistent=False)

    agg_table = (
        builder.table("agg", materialized=in_memory("agg-base-store"), **long_string)
        .group_by(lambda k, v: (k, v), key_serde=Serdes.Long(), value_serde=Serdes.String())
        .reduce(lambda a, v: a + v, lambda a, v: a + v, materialized=in_memory("agg-store"))
    )
    names = ["tableOne", "tableTwo", "tableThree", "tableFour", "tableFive", "tableSix"]
    inputs = {
        name: builder.table(name, materialized=in_memory(f"{name}-base-store"), **long_string)
        for name in names
    }
    seven = inputs["tableOne"].map_values(str.upper)
    eight = inputs["tableSix"].left_join(seven, tostring_joiner)
    result = agg_table
    for other in [inputs[name] for name in names[:5]] + [eight]:
        result = result.left_join(other, tostring_joiner)
    result.map_values(str.upper, materialized=Materialized("final", caching=False))
    values = ["a", "AA", "BBB", "CCCC", "DD", "EEEEEEEE", "F", "GGGGGGGGGGGGGGG", "HHH", "J"]
    rng = random.Random(4492)
    latest: dict[str, dict[int, str]] = {name: {} for name in names}
    config = {"default.key.serde": Serdes.Long(), "default.value.serde": Serdes.String()}
    with TopologyTestDriver(builder.build(), config) as driver:
        topics = {
            name: driver.create_input_topic(name, LongSerializer(), TEXT)
            for name in ["agg", *names]
        }
        for _ in range(150):
            for name in ["agg", *names]:
                key, value = rng.randrange(40), rng.choice(values)
                topics[name].pipe_input(key, value)
                if name in latest:
                    latest[name][key] = value
        aggregates = dict(driver.get_key_value_store("agg-store").all())
        rows = dict(driver.get_key_value_store("final").all())
    assert len(rows) > 30
    assert rows.keys() == aggregates.keys()
    for key, row in rows.items():
        expected = aggregates[key]
        for name in names[:5]:
            expected = tostring_joiner(expected, latest[name].get(key))
        six, one = latest["tableSix"].get(key), latest["tableOne"].get(key)
        joined_eight = None if six is None else tostring_joiner(six, one and one.upper())
        assert row == tostring_joiner(expected, joined_eight).upper(), key


# -- Kafka's names: describe() against Kafka Streams 4.4 -----------------------------------


def _j(builder: StreamsBuilder, topic: str) -> KTable:
    return builder.table(topic)


def _string_joiner(one: Any, two: Any) -> str:
    return f"{one}+{two}"


def _describe_programs() -> dict[str, Callable[[StreamsBuilder], Any]]:
    """The programs of ``DescribeTableTableJoins.java``, in streamstate's DSL."""
    j = _string_joiner

    def aggregate_join(b: StreamsBuilder) -> None:
        counts = b.stream("events").group_by_key().count().map_values(str)
        counts.join(_j(b, "topic2"), j).to_stream().to("output")

    def joined_again(b: StreamsBuilder) -> None:
        one, two = _j(b, "topic1"), _j(b, "topic2")
        joined = one.join(two, j)
        one.left_join(joined, j).to_stream().to("output")

    from streamstate.dsl import BufferConfig, Suppressed  # noqa: PLC0415 - one test uses them

    return {
        "inner": lambda b: _j(b, "topic1").join(_j(b, "topic2"), j).to_stream().to("output"),
        "left": lambda b: _j(b, "topic1").left_join(_j(b, "topic2"), j).to_stream().to("output"),
        "outer": lambda b: _j(b, "topic1").outer_join(_j(b, "topic2"), j).to_stream().to("output"),
        "inner_materialized_named": lambda b: (
            _j(b, "topic1").join(_j(b, "topic2"), j, materialized="joined").to_stream().to("output")
        ),
        "left_materialized_unnamed": lambda b: (
            _j(b, "topic1")
            .left_join(
                _j(b, "topic2"),
                j,
                materialized=Materialized.with_(Serdes.String(), Serdes.String()),
            )
            .to_stream()
            .to("output")
        ),
        "outer_materialized_named": lambda b: (
            _j(b, "topic1")
            .outer_join(_j(b, "topic2"), j, materialized=Materialized("outer-store"))
            .to_stream()
            .to("output")
        ),
        "named": lambda b: (
            _j(b, "topic1").join(_j(b, "topic2"), j, name="my-join").to_stream().to("output")
        ),
        "named_materialized": lambda b: (
            _j(b, "topic1")
            .left_join(_j(b, "topic2"), j, name="my-join", materialized="my-store")
            .to_stream()
            .to("output")
        ),
        "source_tables_materialized": lambda b: (
            b.table("topic1", materialized="store1")
            .join(b.table("topic2", materialized="store2"), j)
            .to_stream()
            .to("output")
        ),
        "derived": lambda b: (
            _j(b, "topic1")
            .filter(lambda k, v: v is not None)
            .join(_j(b, "topic2").map_values(lambda v: v + "!"), j)
            .to_stream()
            .to("output")
        ),
        "derived_materialized": lambda b: (
            _j(b, "topic1")
            .filter(lambda k, v: v is not None, materialized="filtered")
            .left_join(_j(b, "topic2").map_values(lambda v: v + "!", materialized="mapped"), j)
            .to_stream()
            .to("output")
        ),
        "chained": lambda b: (
            _j(b, "topic1")
            .join(_j(b, "topic2"), j)
            .left_join(_j(b, "topic3"), j)
            .outer_join(_j(b, "topic4"), j)
            .to_stream()
            .to("output")
        ),
        "join_then_filter": lambda b: (
            _j(b, "topic1")
            .join(_j(b, "topic2"), j)
            .filter(lambda k, v: len(v) > 3)
            .to_stream()
            .to("output")
        ),
        "join_then_map_values_materialized": lambda b: (
            _j(b, "topic1")
            .outer_join(_j(b, "topic2"), j)
            .map_values(lambda v: v + "!", materialized="mapped")
            .to_stream()
            .to("output")
        ),
        "join_then_group_by": lambda b: (
            _j(b, "topic1")
            .join(_j(b, "topic2"), j)
            .group_by(lambda k, v: (v, k))
            .count()
            .to_stream()
            .to("output")
        ),
        "join_then_suppress": lambda b: (
            _j(b, "topic1")
            .left_join(_j(b, "topic2"), j)
            .suppress(Suppressed.until_time_limit(1000, BufferConfig.unbounded()))
            .to_stream()
            .to("output")
        ),
        "aggregate_join": aggregate_join,
        "join_result_joined_again": joined_again,
    }


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` of each program of ``DescribeTableTableJoins.java``."""
    report = _kstreams._run_java("DescribeTableTableJoins", [], 120.0)
    return {str(name): str(text) for name, text in report.items()}


@pytest.mark.parametrize("program", list(_describe_programs()))
def test_describe_matches_kafka(program: str, kafka_texts: dict[str, str]) -> None:
    """The same program, described by Kafka Streams 4.4 and by streamstate: same nodes, names,
    stores and edges."""
    builder = StreamsBuilder()
    _describe_programs()[program](builder)
    assert str(builder.build().describe()) == kafka_texts[program]


def test_describe_oracle_queryable_names(kafka_texts: dict[str, str]) -> None:
    """Kafka's ``queryableStoreName()`` of join results: ``None`` unmaterialized, the given
    name, or the generated store's name when ``Materialized`` has no name."""
    results = {}
    for program in ("inner", "inner_materialized_named", "left_materialized_unnamed"):
        builder = StreamsBuilder()
        one, two = _j(builder, "topic1"), _j(builder, "topic2")
        if program == "inner":
            joined = one.join(two, _string_joiner)
        elif program == "inner_materialized_named":
            joined = one.join(two, _string_joiner, materialized="joined")
        else:
            joined = one.left_join(
                two, _string_joiner, materialized=Materialized.with_(Serdes.String(), None)
            )
        results[f"{program}.queryable"] = str(joined.query_store_name).replace("None", "null")
    assert results == {name: kafka_texts[name] for name in results}


# -- differential: random inputs through Kafka Streams 4.4 and streamstate --------------------


def _replay_programs() -> dict[str, Callable[[StreamsBuilder], Any]]:
    """The programs of ``replays()`` in ``DescribeTableTableJoins.java``."""
    j = tostring_joiner

    def joined_again(b: StreamsBuilder) -> None:
        joined = _j(b, "t1").outer_join(_j(b, "t2"), j)
        _j(b, "t3").left_join(joined, j).to_stream().to("out")

    def joined_again_inner(b: StreamsBuilder) -> None:
        joined = _j(b, "t1").left_join(_j(b, "t2"), j)
        _j(b, "t3").join(joined, j).to_stream().to("out")

    def self_join(b: StreamsBuilder) -> None:
        one = _j(b, "t1")
        one.join(one, j).to_stream().to("out")

    def map_values_materialized_then_join(b: StreamsBuilder) -> None:
        one = _j(b, "t1")
        one.map_values(lambda v: v + "?", materialized="mv").to_stream().to("out2")
        one.left_join(_j(b, "t2"), j).to_stream().to("out")

    return {
        "inner": lambda b: _j(b, "t1").join(_j(b, "t2"), j).to_stream().to("out"),
        "left": lambda b: _j(b, "t1").left_join(_j(b, "t2"), j).to_stream().to("out"),
        "outer": lambda b: _j(b, "t1").outer_join(_j(b, "t2"), j).to_stream().to("out"),
        "inner_cached": lambda b: (
            _j(b, "t1").join(_j(b, "t2"), j, materialized="m").to_stream().to("out")
        ),
        "outer_cached": lambda b: (
            _j(b, "t1").outer_join(_j(b, "t2"), j, materialized="m").to_stream().to("out")
        ),
        "left_uncached": lambda b: (
            _j(b, "t1")
            .left_join(_j(b, "t2"), j, materialized=Materialized("m", caching=False))
            .to_stream()
            .to("out")
        ),
        "join_then_filter": lambda b: (
            _j(b, "t1").join(_j(b, "t2"), j).filter(lambda k, v: "1" in v).to_stream().to("out")
        ),
        "left_then_filter_not": lambda b: (
            _j(b, "t1")
            .left_join(_j(b, "t2"), j)
            .filter_not(lambda k, v: v.endswith("null"))
            .to_stream()
            .to("out")
        ),
        "join_then_group_by": lambda b: (
            _j(b, "t1")
            .left_join(_j(b, "t2"), j)
            .group_by(lambda k, v: (v[:2], v))
            .count()
            .to_stream()
            .map_values(str)
            .to("out")
        ),
        "derived": lambda b: (
            _j(b, "t1")
            .filter(lambda k, v: not v.startswith("c"))
            .join(_j(b, "t2").map_values(lambda v: v + "!"), j)
            .to_stream()
            .to("out")
        ),
        "chain": lambda b: (
            _j(b, "t1")
            .join(_j(b, "t2"), j)
            .left_join(_j(b, "t3"), j)
            .outer_join(_j(b, "t4"), j)
            .to_stream()
            .to("out")
        ),
        "joined_again": joined_again,
        "joined_again_inner": joined_again_inner,
        "self_join": self_join,
        "map_values_materialized_then_join": map_values_materialized_then_join,
    }


def _random_inputs(count: int, seed: int) -> list[tuple[str, str | None, str | None, int]]:
    """Updates of t1..t4 over five keys, a fifth of them deletes, a few without a key, with
    timestamps that go back now and then (out-of-order updates)."""
    rng = random.Random(seed)
    inputs = []
    timestamp = 100
    for _ in range(count):
        topic = rng.choice(["t1", "t1", "t2", "t2", "t3", "t4"])
        key = rng.choice("abcde") if rng.random() > 0.03 else None
        value = None if rng.random() < 0.2 else rng.choice("abcd") + str(rng.randrange(3))
        timestamp = max(timestamp + rng.randrange(-20, 40), 0)
        inputs.append((topic, key, value, timestamp))
    return inputs


@pytest.fixture(scope="module")
def replay_inputs() -> list[tuple[str, str | None, str | None, int]]:
    return _random_inputs(300, seed=7)


@pytest.fixture(scope="module")
def kafka_replays(
    replay_inputs: list[tuple[str, str | None, str | None, int]], tmp_path_factory: Any
) -> dict[str, Any]:
    """What Kafka Streams 4.4's driver wrote for each program of ``replays()``."""
    path = tmp_path_factory.mktemp("replay") / "inputs.tsv"
    path.write_text(
        "".join(
            f"{topic}\t{'<null>' if key is None else key}\t"
            f"{'<null>' if value is None else value}\t{ts}\n"
            for topic, key, value, ts in replay_inputs
        )
    )
    return _kstreams._run_java("DescribeTableTableJoins", ["--replay", str(path)], 120.0)


@pytest.mark.parametrize("program", list(_replay_programs()))
def test_random_updates_match_kafka(
    program: str,
    replay_inputs: list[tuple[str, str | None, str | None, int]],
    kafka_replays: dict[str, Any],
) -> None:
    """300 random updates (deletes, null keys, out-of-order timestamps) through each program
    on Kafka Streams 4.4's driver and on streamstate's: the same records on the output topics
    after each input, with the same timestamps, and the same count of dropped records."""
    builder = StreamsBuilder()
    _replay_programs()[program](builder)
    topology = builder.build()
    rows: list[list[Any]] = []
    with TopologyTestDriver(topology, STRINGS) as driver:
        read = {"t1", "t2", "t3", "t4"} & set(topology.source_topics)
        inputs = {t: driver.create_input_topic(t, TEXT, TEXT) for t in sorted(read)}
        outputs = {
            t: driver.create_output_topic(t, StringDeserializer(), StringDeserializer())
            for t in ("out", "out2")
        }
        for index, (topic, key, value, timestamp) in enumerate(replay_inputs):
            if topic not in read:
                continue
            inputs[topic].pipe_input(key, value, timestamp)
            for name, output in outputs.items():
                rows += [
                    [index, name, r.key, r.value, r.timestamp]
                    for r in output.read_records_to_list()
                ]
        rows.append([-1, "dropped", None, None, dropped(driver)])
    expected = kafka_replays[program]
    assert len(rows) > 50
    assert rows == expected
