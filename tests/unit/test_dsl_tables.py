"""``KTable`` operations and ``KGroupedTable`` aggregations on the ``TopologyTestDriver``:
ports of Kafka's ``KTableAggregateTest``, ``KGroupedTableImplTest``, ``KTableFilterTest``,
``KTableMapValuesTest`` and the ``toTable`` cases of ``KStreamImplTest``, with the outputs,
store contents and topology descriptions Kafka's tests assert.

Kafka's ``MockApiProcessor`` on a table's ``toStream()`` is :func:`capture`; on a table's own
node (``topology.addProcessor("proc", supplier, table.name)``) it is :func:`capture_changes`,
which sees the ``Change(new, old)`` values. Kafka's ``enableSendingOldValues`` is
``table.state.enable_send_old_values()``, its value getters are read through the tables'
stores. ``KTableFilterTest`` disables caching in its config: streamstate sets caching per
store, so those stores are ``Materialized(..., caching=False)``. The versioned-store cases
(``testAggOfVersionedStore``, ``testCountOfVersionedStore``, ``shouldNotSkipNullIfVersioned...``)
are in ``test_dsl_versioned_store.py``. Not ported: ``upgrade.from``
(``testShouldSendTransientStateWhenUpgrading``).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.dsl_support import Capture, capture

from streamstate import TopologyError
from streamstate.dsl import Materialized, StreamsBuilder, ValueAndTimestamp
from streamstate.serde import (
    DoubleSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    LongDeserializer,
    Serde,
    Serdes,
    StringDeserializer,
    StringSerializer,
)
from streamstate.testing import TestRecord, TopologyTestDriver

TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
INT = IntegerSerializer()
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
STRING_INT = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.Integer()}


def capture_changes(builder: StreamsBuilder, name: str, table: Any) -> list[Any]:
    """``topology.addProcessor(name, supplier, table.name)``: the table's ``Change`` values,
    as ``(key, (new, old), timestamp)``."""
    out: list[tuple[Any, Any, int]] = []
    builder.topology.add_processor(name, lambda: Capture(out), table.name)
    return out


def take(out: list[Any]) -> list[Any]:
    """Kafka's ``checkAndClearProcessResult``."""
    taken = list(out)
    out.clear()
    return taken


def string_init() -> str:
    return "0"


def tostring_adder(_key: Any, value: Any, aggregate: str) -> str:
    """Kafka's ``MockAggregator.TOSTRING_ADDER``."""
    return f"{aggregate}+{value}"


def tostring_remover(_key: Any, value: Any, aggregate: str) -> str:
    """Kafka's ``MockAggregator.TOSTRING_REMOVER``."""
    return f"{aggregate}-{value}"


def string_table(builder: StreamsBuilder, topic: str, **options: Any) -> Any:
    return builder.table(topic, key_serde=Serdes.String(), value_serde=Serdes.String(), **options)


# -- KTableAggregateTest -----------------------------------------------------------------------
# Its CONFIG sets no default serdes: every serde is given, as in the Java test.


def test_ktable_aggregate_test_agg_basic() -> None:
    builder = StreamsBuilder()
    table2 = (
        string_table(builder, "topic1")
        .group_by(lambda k, v: (k, v), key_serde=Serdes.String(), value_serde=Serdes.String())
        .aggregate(
            string_init,
            tostring_adder,
            tostring_remover,
            materialized=Materialized("topic1-Canonized", value_serde=Serdes.String()),
        )
    )
    out = capture(table2.to_stream())
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5),
            ("D", "6", 25), ("B", "7", 15), ("C", "8", 10),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        ("A", "0+1", 10),
        ("B", "0+2", 15),
        ("A", "0+1-1+3", 20),
        ("B", "0+2-2+4", 18),
        ("C", "0+5", 5),
        ("D", "0+6", 25),
        ("B", "0+2-2+4-4+7", 18),
        ("C", "0+5-5+8", 10),
    ]


def test_ktable_aggregate_test_agg_repartition() -> None:
    builder = StreamsBuilder()

    def selector(key: str, value: str) -> Any:
        if key == "null":
            return (None, value)
        if key == "NULL":
            return None
        return (value, value)

    table2 = (
        string_table(builder, "topic1")
        .group_by(selector, key_serde=Serdes.String(), value_serde=Serdes.String())
        .aggregate(
            string_init,
            tostring_adder,
            tostring_remover,
            materialized=Materialized("topic1-Canonized", value_serde=Serdes.String()),
        )
    )
    out = capture(table2.to_stream())
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
            ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        ("1", "0+1", 10),
        ("1", "0+1-1", 15),
        ("1", "0+1-1+1", 15),
        ("2", "0+2", 20),
        ("2", "0+2-2", 23),
        ("4", "0+4", 23),
        ("4", "0+4-4", 23),
        ("7", "0+7", 22),
    ]


def _test_count_helper(builder: StreamsBuilder, out: list[Any]) -> None:
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("count-test-input", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
            ("D", "green", 11),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        ("green", 1, 10),
        ("green", 2, 10),
        ("green", 1, 12),
        ("blue", 1, 12),
        ("yellow", 1, 15),
        ("green", 2, 12),
    ]


@pytest.mark.parametrize("store", ["count", None], ids=["count", "with-internal-store"])
def test_ktable_aggregate_test_count(store: str | None) -> None:
    """``testCount`` and ``testCountWithInternalStore``."""
    builder = StreamsBuilder()
    table = (
        string_table(builder, "count-test-input")
        .group_by(lambda k, v: (v, v), key_serde=Serdes.String(), value_serde=Serdes.String())
        .count(materialized=store)
    )
    out = capture(table.to_stream())
    _test_count_helper(builder, out)


def test_ktable_aggregate_test_remove_old_before_add_new() -> None:
    builder = StreamsBuilder()
    table = (
        string_table(builder, "count-test-input")
        .group_by(
            lambda key, _value: (key[0], key[1]),
            key_serde=Serdes.String(),
            value_serde=Serdes.String(),
        )
        .aggregate(
            lambda: "",
            lambda _key, value, aggregate: aggregate + value,
            lambda _key, value, aggregate: aggregate.replace(value, ""),
            materialized=Materialized("someStore", value_serde=Serdes.String()),
        )
    )
    out = capture(table.to_stream())
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("count-test-input", TEXT, TEXT)
        topic.pipe_input("11", "A", 10)
        topic.pipe_input("12", "B", 8)
        topic.pipe_input("11", None, 12)
        topic.pipe_input("12", "C", 6)
    assert out == [("1", "1", 10), ("1", "12", 10), ("1", "2", 12), ("1", "2", 12)]


def test_ktable_aggregate_test_should_not_send_transient_state_if_not_upgrading() -> None:
    builder = StreamsBuilder()
    (
        string_table(builder, "input-topic")
        # key is not changed
        .group_by(lambda k, v: (k, v), key_serde=Serdes.String(), value_serde=Serdes.String())
        .count()
        .to_stream()
        .to("output-topic")
    )
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("input-topic", TEXT, TEXT)
        output = driver.create_output_topic("output-topic", READ_TEXT, LongDeserializer())
        topic.pipe_input("1", "", 8)
        topic.pipe_input("1", "", 9)
        assert output.read_records_to_list() == [TestRecord("1", 1, 8), TestRecord("1", 1, 9)]


class NoEqualsImpl:
    """A value without ``__eq__``: two of them are equal only if they are the same object."""

    def __init__(self, x: str) -> None:
        self.x = x


class _NoEqualsSerializer:
    def serialize(self, topic: str | None, data: NoEqualsImpl | None) -> bytes | None:
        return None if data is None else data.x.encode()


class _NoEqualsDeserializer:
    def deserialize(self, topic: str | None, data: bytes | None) -> NoEqualsImpl | None:
        return None if data is None else NoEqualsImpl(data.decode())


def _test_key_with_no_equals(mapper: Any, expected: list[tuple[str, int, int]]) -> None:
    serde = Serde(_NoEqualsSerializer(), _NoEqualsDeserializer())
    builder = StreamsBuilder()
    (
        builder.table("input-topic", key_serde=serde, value_serde=serde)
        .group_by(mapper, key_serde=serde, value_serde=serde)
        .count()
        .to_stream()
        .to("output-topic")
    )
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic(
            "input-topic", _NoEqualsSerializer(), _NoEqualsSerializer()
        )
        output = driver.create_output_topic(
            "output-topic", _NoEqualsDeserializer(), LongDeserializer()
        )
        a, b = NoEqualsImpl("1"), NoEqualsImpl("1")
        assert a != b
        topic.pipe_input(a, a, 8)
        topic.pipe_input(b, b, 9)
        actual = [(r.key.x, r.value, r.timestamp) for r in output.read_records_to_list()]
    assert actual == expected


def test_ktable_aggregate_test_no_equals_and_not_same_object() -> None:
    # key changes, different object reference (deserializer returns a new object reference)
    _test_key_with_no_equals(
        lambda _key, value: (value, value),
        [("1", 1, 8), ("1", 0, 9), ("1", 1, 9)],  # 0: transient inconsistent state
    )


def test_ktable_aggregate_test_no_equals_and_same_object() -> None:
    # key does not change, same object reference
    _test_key_with_no_equals(lambda key, value: (key, value), [("1", 1, 8), ("1", 1, 9)])


# -- KGroupedTableImplTest ---------------------------------------------------------------------


def _assert_reduced(driver: TopologyTestDriver, out: list[Any]) -> None:
    def last() -> dict[str, tuple[int, int]]:
        return {key: (value, timestamp) for key, value, timestamp in out}

    topic = driver.create_input_topic("input", TEXT, DoubleSerializer())
    topic.pipe_input("A", 1.1, 10)
    topic.pipe_input("B", 2.2, 11)
    assert last()["A"] == (1, 10)
    assert last()["B"] == (2, 11)
    topic.pipe_input("A", 2.6, 30)
    topic.pipe_input("B", 1.3, 30)
    topic.pipe_input("A", 5.7, 50)
    topic.pipe_input("B", 6.2, 20)
    assert last()["A"] == (5, 50)
    assert last()["B"] == (6, 30)


def _double_table(builder: StreamsBuilder, materialized: Any = None) -> Any:
    return builder.table(
        "input",
        key_serde=Serdes.String(),
        value_serde=Serdes.Double(),
        materialized=materialized,
    )


@pytest.mark.parametrize("store", ["reduced", None], ids=["reduce", "with-internal-store-name"])
def test_kgrouped_table_should_reduce(store: str | None) -> None:
    """``shouldReduce`` and ``shouldReduceWithInternalStoreName``: the grouping takes the
    default serdes (String, Integer)."""
    builder = StreamsBuilder()
    source = Materialized("store", key_serde=Serdes.String(), value_serde=Serdes.Double())
    reduced = (
        _double_table(builder, source)
        .group_by(lambda key, value: (key, int(value)))
        .reduce(lambda agg, v: agg + v, lambda agg, v: agg - v, materialized=store)
    )
    out = capture(reduced.to_stream())
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        _assert_reduced(driver, out)
    assert reduced.query_store_name == store


def test_kgrouped_table_should_reduce_and_materialize_results() -> None:
    builder = StreamsBuilder()
    reduced = (
        _double_table(builder)
        .group_by(lambda key, value: (key, int(value)))
        .reduce(
            lambda agg, v: agg + v,
            lambda agg, v: agg - v,
            materialized=Materialized(
                "reduce", key_serde=Serdes.String(), value_serde=Serdes.Integer()
            ),
        )
    )
    out = capture(reduced.to_stream())
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        _assert_reduced(driver, out)
        store = driver.get_key_value_store("reduce")
        assert store.get("A") == 5
        assert store.get("B") == 6
        assert store.get_with_timestamp("A") == ValueAndTimestamp(5, 50)
        assert store.get_with_timestamp("B") == ValueAndTimestamp(6, 30)


def _process_data(driver: TopologyTestDriver) -> None:
    topic = driver.create_input_topic("input", TEXT, TEXT)
    for key, value, timestamp in [
        ("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60),
    ]:  # fmt: skip
        topic.pipe_input(key, value, timestamp)


def _grouped_by_value(builder: StreamsBuilder) -> Any:
    return string_table(builder, "input").group_by(
        lambda k, v: (v, v), key_serde=Serdes.String(), value_serde=Serdes.String()
    )


def test_kgrouped_table_should_count_and_materialize_results() -> None:
    builder = StreamsBuilder()
    _grouped_by_value(builder).count(
        materialized=Materialized("count", key_serde=Serdes.String(), value_serde=Serdes.Long())
    )
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        _process_data(driver)
        counts = driver.get_key_value_store("count")
        assert counts.get("1") == 3
        assert counts.get("2") == 2
        assert counts.get_with_timestamp("1") == ValueAndTimestamp(3, 50)
        assert counts.get_with_timestamp("2") == ValueAndTimestamp(2, 60)


def test_kgrouped_table_should_aggregate_and_materialize_results() -> None:
    builder = StreamsBuilder()
    _grouped_by_value(builder).aggregate(
        string_init,
        tostring_adder,
        tostring_remover,
        materialized=Materialized(
            "aggregate", key_serde=Serdes.String(), value_serde=Serdes.String()
        ),
    )
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        _process_data(driver)
        aggregate = driver.get_key_value_store("aggregate")
        assert aggregate.get("1") == "0+1+1+1"
        assert aggregate.get("2") == "0+2+2"
        assert aggregate.get_with_timestamp("1") == ValueAndTimestamp("0+1+1+1", 50)
        assert aggregate.get_with_timestamp("2") == ValueAndTimestamp("0+2+2", 60)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda g: g.aggregate(
                string_init, tostring_adder, tostring_remover, materialized="~foo bar~"
            ),
            id="aggregate",
        ),
        pytest.param(
            lambda g: g.reduce(lambda a, v: a, lambda a, v: a, materialized="~foo bar~"),
            id="reduce",
        ),
    ],
)
def test_kgrouped_table_should_not_allow_invalid_store_name(call: Any) -> None:
    """``shouldNotAllowInvalidStoreNameOnAggregate`` / ``...OnReduce``: Kafka's
    ``TopologyException`` (a store name is ASCII alphanumerics, ``.``, ``_`` and ``-``)."""
    with pytest.raises(TopologyError):
        call(_grouped_by_value(StreamsBuilder()))


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda g: g.aggregate(None, tostring_adder, tostring_remover), id="init"),
        pytest.param(lambda g: g.aggregate(string_init, None, tostring_remover), id="adder"),
        pytest.param(lambda g: g.aggregate(string_init, tostring_adder, None), id="subtractor"),
        pytest.param(lambda g: g.reduce(None, lambda a, v: a), id="reduce-adder"),
        pytest.param(lambda g: g.reduce(lambda a, v: a, None), id="reduce-subtractor"),
    ],
)
def test_kgrouped_table_should_not_allow_null_functions(call: Any) -> None:
    """``shouldNotAllowNull{Initializer,Adder,Subtractor}OnAggregate``,
    ``shouldNotAllowNull{Adder,Subtractor}OnReduce``: ``TopologyError`` for Kafka's NPE."""
    with pytest.raises(TopologyError):
        call(_grouped_by_value(StreamsBuilder()))


# -- KTableFilterTest --------------------------------------------------------------------------


def _is_even(_key: str, value: int) -> bool:
    return value % 2 == 0


def int_table(builder: StreamsBuilder, **options: Any) -> Any:
    return builder.table(
        "topic1", key_serde=Serdes.String(), value_serde=Serdes.Integer(), **options
    )


def _do_test_ktable(builder: StreamsBuilder, table2: Any, table3: Any) -> None:
    out2 = capture(table2.to_stream())
    out3 = capture(table3.to_stream())
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        for key, value, timestamp in [
            ("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18),
            ("B", None, 15),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out2 == [
        ("A", None, 10),
        ("B", 2, 5),
        ("C", None, 8),
        ("D", 4, 14),
        ("A", None, 18),
        ("B", None, 15),
    ]
    assert out3 == [
        ("A", 1, 10),
        ("B", None, 5),
        ("C", 3, 8),
        ("D", None, 14),
        ("A", None, 18),
        ("B", None, 15),
    ]


def test_ktable_filter_should_pass_through_without_materialization() -> None:
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even)
    table3 = table1.filter_not(_is_even)
    assert table1.query_store_name is None
    assert table2.query_store_name is None
    assert table3.query_store_name is None
    _do_test_ktable(builder, table2, table3)


def test_ktable_filter_should_pass_through_on_materialization() -> None:
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even, materialized=Materialized("store2", caching=False))
    table3 = table1.filter_not(_is_even)
    assert table1.query_store_name is None
    assert table2.query_store_name == "store2"
    assert table3.query_store_name is None
    _do_test_ktable(builder, table2, table3)


def test_ktable_filter_should_get_values_on_materialization() -> None:
    """The value getters of the materialized filters read their stores: read here through the
    driver."""
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even, materialized=Materialized("store2", caching=False))
    table3 = table1.filter_not(_is_even, materialized=Materialized("store3", caching=False))
    table4 = table1.filter_not(_is_even)
    assert table1.query_store_name is None
    assert table2.query_store_name == "store2"
    assert table3.query_store_name == "store3"
    assert table4.query_store_name is None
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        getter2 = driver.get_key_value_store("store2").get_with_timestamp
        getter3 = driver.get_key_value_store("store3").get_with_timestamp
        topic.pipe_input("A", 1, 5)
        topic.pipe_input("B", 1, 10)
        topic.pipe_input("C", 1, 15)
        assert [getter2(k) for k in "ABC"] == [None, None, None]
        assert [getter3(k) for k in "ABC"] == [(1, 5), (1, 10), (1, 15)]
        topic.pipe_input("A", 2, 10)
        topic.pipe_input("B", 2, 5)
        assert [getter2(k) for k in "ABC"] == [(2, 10), (2, 5), None]
        assert [getter3(k) for k in "ABC"] == [None, None, (1, 15)]
        topic.pipe_input("A", 3, 15)
        assert [getter2(k) for k in "ABC"] == [None, (2, 5), None]
        assert [getter3(k) for k in "ABC"] == [(3, 15), None, (1, 15)]
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        assert [getter2(k) for k in "ABC"] == [None, None, None]
        assert [getter3(k) for k in "ABC"] == [None, None, (1, 15)]


def _do_test_not_sending_old_value(builder: StreamsBuilder, table1: Any, table2: Any) -> None:
    proc1 = capture_changes(builder, "proc1", table1)
    proc2 = capture_changes(builder, "proc2", table2)
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        topic.pipe_input("A", 1, 5)
        topic.pipe_input("B", 1, 10)
        topic.pipe_input("C", 1, 15)
        assert take(proc1) == [("A", (1, None), 5), ("B", (1, None), 10), ("C", (1, None), 15)]
        assert take(proc2) == [
            ("A", (None, None), 5),
            ("B", (None, None), 10),
            ("C", (None, None), 15),
        ]
        topic.pipe_input("A", 2, 15)
        topic.pipe_input("B", 2, 8)
        assert take(proc1) == [("A", (2, None), 15), ("B", (2, None), 8)]
        assert take(proc2) == [("A", (2, None), 15), ("B", (2, None), 8)]
        topic.pipe_input("A", 3, 20)
        assert take(proc1) == [("A", (3, None), 20)]
        assert take(proc2) == [("A", (None, None), 20)]
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        assert take(proc1) == [("A", (None, None), 10), ("B", (None, None), 20)]
        assert take(proc2) == [("A", (None, None), 10), ("B", (None, None), 20)]


def test_ktable_filter_should_not_send_old_values_without_materialization() -> None:
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even)
    _do_test_not_sending_old_value(builder, table1, table2)


def test_ktable_filter_should_not_send_old_values_on_materialization() -> None:
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even, materialized=Materialized("store2", caching=False))
    _do_test_not_sending_old_value(builder, table1, table2)


def _do_test_sending_old_value(builder: StreamsBuilder, table1: Any, table2: Any) -> None:
    table1_output = capture_changes(builder, "proc1", table1)
    table2_output = capture_changes(builder, "proc2", table2)
    parent_old = table1.state.send_old_values
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        topic.pipe_input("A", 1, 5)
        topic.pipe_input("B", 1, 10)
        topic.pipe_input("C", 1, 15)
        assert take(table1_output) == [
            ("A", (1, None), 5),
            ("B", (1, None), 10),
            ("C", (1, None), 15),
        ]
        assert take(table2_output) == []
        topic.pipe_input("A", 2, 15)
        topic.pipe_input("B", 2, 8)
        assert take(table1_output) == [
            ("A", (2, 1 if parent_old else None), 15),
            ("B", (2, 1 if parent_old else None), 8),
        ]
        assert take(table2_output) == [("A", (2, None), 15), ("B", (2, None), 8)]
        topic.pipe_input("A", 3, 20)
        assert take(table1_output) == [("A", (3, 2 if parent_old else None), 20)]
        assert take(table2_output) == [("A", (None, 2), 20)]
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        assert take(table1_output) == [
            ("A", (None, 3 if parent_old else None), 10),
            ("B", (None, 2 if parent_old else None), 20),
        ]
        assert take(table2_output) == [("B", (None, 2), 20)]


def test_ktable_filter_should_enable_send_old_values_when_not_materialized_already_but_forced_to_materialize() -> (  # noqa: E501
    None
):
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even)
    table2.state.enable_send_old_values()
    assert table1.state.send_old_values
    assert table2.state.send_old_values
    _do_test_sending_old_value(builder, table1, table2)


def test_ktable_filter_should_enable_send_old_values_when_materialized_already_and_forced_to_materialize() -> (  # noqa: E501
    None
):
    builder = StreamsBuilder()
    table1 = int_table(builder)
    table2 = table1.filter(_is_even, materialized=Materialized("store2", caching=False))
    table2.state.enable_send_old_values()
    assert not table1.state.send_old_values
    assert table2.state.send_old_values
    _do_test_sending_old_value(builder, table1, table2)


def test_ktable_filter_should_send_old_values_when_enabled_on_up_stream_materialization() -> None:
    builder = StreamsBuilder()
    table1 = int_table(builder, materialized=Materialized("store2", caching=False))
    table2 = table1.filter(_is_even)
    table2.state.enable_send_old_values()
    assert table1.state.send_old_values
    assert table2.state.send_old_values
    _do_test_sending_old_value(builder, table1, table2)


def test_ktable_filter_of_a_materialized_table_sends_old_values_unasked() -> None:
    """Not a Kafka test: ``KTableFilter``'s constructor calls
    ``parent.enableSendingOldValues(false)`` ("If upstream is already materialized, enable
    sending old values to avoid sending unnecessary tombstones"), which is how
    ``shouldSendOldValuesWhenEnabledOnUpStreamMaterialization`` finds old values on even
    without being asked. So a filter over a materialized table forwards no tombstone for a
    row that never passed."""
    builder = StreamsBuilder()
    table1 = int_table(builder, materialized=Materialized("store2", caching=False))
    out = capture(table1.filter(_is_even).to_stream())
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        for key, value, timestamp in [
            ("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18),
            ("B", None, 15),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [("B", 2, 5), ("D", 4, 14), ("B", None, 15)]


def test_ktable_filter_cached_materialization_forwards_no_tombstone_for_an_absent_row() -> None:
    """Not a Kafka test: ``shouldPassThroughOnMaterialization`` with Kafka's default caching.
    A filtered-out row is a delete in the filter's cache; at the flush Kafka's
    ``CachingKeyValueStore.putAndMaybeForward`` reads the old value of a deleted key and
    forwards nothing when the key was in neither the cache nor the store ("this is an
    optimization: if this key did not exist in underlying store and also not in the cache,
    we can skip flushing to downstream")."""
    builder = StreamsBuilder()
    table2 = int_table(builder).filter(_is_even, materialized=Materialized("store2"))
    out = capture(table2.to_stream())
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, INT)
        for key, value, timestamp in [
            ("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18),
            ("B", None, 15),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [("B", 2, 5), ("D", 4, 14), ("B", None, 15)]


def _do_test_skip_null_on_materialization(
    builder: StreamsBuilder, table1: Any, table2: Any
) -> None:
    proc1 = capture_changes(builder, "proc1", table1)
    proc2 = capture_changes(builder, "proc2", table2)
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        topic.pipe_input("A", "reject", 5)
        topic.pipe_input("B", "reject", 10)
        topic.pipe_input("C", "reject", 20)
    assert proc1 == [
        ("A", ("reject", None), 5),
        ("B", ("reject", None), 10),
        ("C", ("reject", None), 20),
    ]
    assert proc2 == []  # shouldSkip


def test_ktable_filter_should_skip_null_to_repartition_without_materialization() -> None:
    # Do not explicitly set enableSendingOldValues. Let a further downstream stateful operator
    # trigger it instead.
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.filter(lambda _key, value: value.lower() == "accept")
    table2.group_by(lambda k, v: (k, v)).reduce(lambda a, v: a + v, lambda a, v: a)
    _do_test_skip_null_on_materialization(builder, table1, table2)


def test_ktable_filter_should_skip_null_to_repartition_on_materialization() -> None:
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.filter(
        lambda _key, value: value.lower() == "accept",
        materialized=Materialized("store2", caching=False),
    )
    table2.group_by(lambda k, v: (k, v)).reduce(
        lambda a, v: a + v, lambda a, v: a, materialized="mock-result"
    )
    _do_test_skip_null_on_materialization(builder, table1, table2)


def test_ktable_filter_materialized_sends_its_stored_old_value_to_group_by() -> None:
    """Not a Kafka test: a materialized filter asked for old values keeps them itself (its
    ``enableSendingOldValues`` does not ask its parent) and reads the old value from its
    store (``KTableFilter.computeOldValue``), so a row that stops passing is subtracted from
    its group."""
    builder = StreamsBuilder()
    table = string_table(builder, "topic1").filter(
        lambda _key, value: value != "x", materialized=Materialized("filtered", caching=False)
    )
    out = capture(table.group_by(lambda k, v: (v, v)).count().to_stream())
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        topic.pipe_input("A", "a", 1)
        topic.pipe_input("A", "x", 2)
        topic.pipe_input("A", "b", 3)
    assert out == [("a", 1, 1), ("a", 0, 2), ("b", 1, 3)]


# -- KTableMapValuesTest -----------------------------------------------------------------------


def _do_test_map_values_ktable(builder: StreamsBuilder, out: list[Any]) -> None:
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        topic.pipe_input("A", "1", 5)
        topic.pipe_input("B", "2", 25)
        topic.pipe_input("C", "3", 20)
        topic.pipe_input("D", "4", 10)
        assert out == [("A", 1, 5), ("B", 2, 25), ("C", 3, 20), ("D", 4, 10)]


def test_ktable_map_values_test_ktable() -> None:
    builder = StreamsBuilder()
    table2 = string_table(builder, "topic1").map_values(lambda value: ord(value[0]) - 48)
    out = capture(table2.to_stream())
    _do_test_map_values_ktable(builder, out)


def test_ktable_map_values_test_queryable_ktable() -> None:
    builder = StreamsBuilder()
    table2 = string_table(builder, "topic1").map_values(
        lambda value: ord(value[0]) - 48,
        materialized=Materialized("anyName", value_serde=Serdes.Integer()),
    )
    out = capture(table2.to_stream())
    _do_test_map_values_ktable(builder, out)


def test_ktable_map_values_test_queryable_value_getter() -> None:
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.map_values(
        int, materialized=Materialized("store2", value_serde=Serdes.Integer())
    )
    table3 = table1.map_values(
        lambda value: -int(value), materialized=Materialized("store3", value_serde=Serdes.Integer())
    )
    table4 = table1.map_values(int)
    assert table2.query_store_name == "store2"
    assert table3.query_store_name == "store3"
    assert table4.query_store_name is None
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        getter2 = driver.get_key_value_store("store2").get_with_timestamp
        getter3 = driver.get_key_value_store("store3").get_with_timestamp
        topic.pipe_input("A", "01", 50)
        topic.pipe_input("B", "01", 10)
        topic.pipe_input("C", "01", 30)
        assert [getter2(k) for k in "ABC"] == [(1, 50), (1, 10), (1, 30)]
        assert [getter3(k) for k in "ABC"] == [(-1, 50), (-1, 10), (-1, 30)]
        topic.pipe_input("A", "02", 25)
        topic.pipe_input("B", "02", 20)
        assert [getter2(k) for k in "ABC"] == [(2, 25), (2, 20), (1, 30)]
        assert [getter3(k) for k in "ABC"] == [(-2, 25), (-2, 20), (-1, 30)]
        topic.pipe_input("A", "03", 35)
        assert [getter2(k) for k in "ABC"] == [(3, 35), (2, 20), (1, 30)]
        assert [getter3(k) for k in "ABC"] == [(-3, 35), (-2, 20), (-1, 30)]
        topic.pipe_input("A", None, 1)
        assert [getter2(k) for k in "ABC"] == [None, (2, 20), (1, 30)]
        assert [getter3(k) for k in "ABC"] == [None, (-2, 20), (-1, 30)]


def test_ktable_map_values_test_not_sending_old_value() -> None:
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.map_values(int)
    proc = capture_changes(builder, "proc", table2)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        assert not table1.state.send_old_values
        assert not table2.state.send_old_values
        topic.pipe_input("A", "01", 5)
        topic.pipe_input("B", "01", 10)
        topic.pipe_input("C", "01", 15)
        assert take(proc) == [("A", (1, None), 5), ("B", (1, None), 10), ("C", (1, None), 15)]
        topic.pipe_input("A", "02", 10)
        topic.pipe_input("B", "02", 8)
        assert take(proc) == [("A", (2, None), 10), ("B", (2, None), 8)]
        topic.pipe_input("A", "03", 20)
        assert take(proc) == [("A", (3, None), 20)]
        topic.pipe_input("A", None, 30)
        assert take(proc) == [("A", (None, None), 30)]


def _test_sending_old_values(builder: StreamsBuilder, table2: Any) -> None:
    proc = capture_changes(builder, "proc", table2)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        topic.pipe_input("A", "01", 5)
        topic.pipe_input("B", "01", 10)
        topic.pipe_input("C", "01", 15)
        assert take(proc) == [("A", (1, None), 5), ("B", (1, None), 10), ("C", (1, None), 15)]
        topic.pipe_input("A", "02", 10)
        topic.pipe_input("B", "02", 8)
        assert take(proc) == [("A", (2, 1), 10), ("B", (2, 1), 8)]
        topic.pipe_input("A", "03", 20)
        assert take(proc) == [("A", (3, 2), 20)]
        topic.pipe_input("A", None, 30)
        assert take(proc) == [("A", (None, 3), 30)]


def test_ktable_map_values_should_enable_sending_old_values_on_parent_if_map_values_not_materialized() -> (  # noqa: E501
    None
):
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.map_values(int)
    table2.state.enable_send_old_values()
    assert table1.state.send_old_values
    assert table2.state.send_old_values
    _test_sending_old_values(builder, table2)


def test_ktable_map_values_should_not_enable_sending_old_values_on_parent_if_map_values_materialized() -> (  # noqa: E501
    None
):
    builder = StreamsBuilder()
    table1 = string_table(builder, "topic1")
    table2 = table1.map_values(int, materialized=Materialized("bob", value_serde=Serdes.Integer()))
    table2.state.enable_send_old_values()
    assert not table1.state.send_old_values
    assert table2.state.send_old_values
    _test_sending_old_values(builder, table2)


def test_ktable_map_values_materialized_sends_its_stored_old_value_to_group_by() -> None:
    """Not a Kafka test: as for the filter, a materialized ``mapValues`` reads the old value
    from its own store (``KTableMapValues.computeOldValue``)."""
    builder = StreamsBuilder()
    table = string_table(builder, "topic1").map_values(
        str.upper, materialized=Materialized("mapped", caching=False)
    )
    out = capture(table.group_by(lambda k, v: (v, v)).count().to_stream())
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic1", TEXT, TEXT)
        topic.pipe_input("A", "a", 1)
        topic.pipe_input("A", "b", 2)
    assert out == [("A", 1, 1), ("A", 0, 2), ("B", 1, 2)]


# -- KStreamImplTest: toTable ------------------------------------------------------------------


def test_kstream_impl_should_materialize_ktable_from_kstream() -> None:
    builder = StreamsBuilder()
    string_stream = builder.stream("input", key_serde=Serdes.String(), value_serde=Serdes.String())
    string_stream.to_table(materialized=Materialized("store", persistent=False))
    topology = builder.build()
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [store])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000000\n\n"
    )
    with TopologyTestDriver(topology, STRINGS) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        store = driver.get_key_value_store("store")
        topic.pipe_input("A", "01")
        topic.pipe_input("B", "02")
        topic.pipe_input("A", "03")
        assert dict(store.all()) == {"A": "03", "B": "02"}


def _key_change_to_table(builder: StreamsBuilder) -> Any:
    (
        builder.stream("input", key_serde=Serdes.String(), value_serde=Serdes.String())
        .map(lambda key, value: (ord(key[0]) - ord("A"), value))
        .to_table(materialized=Materialized.with_(Serdes.Integer(), None))
        .to_stream()
        .to("output")
    )
    return builder.build()


def test_kstream_impl_should_support_key_change_ktable_from_kstream() -> None:
    topology = _key_change_to_table(StreamsBuilder())
    with TopologyTestDriver(topology, STRINGS) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        output = driver.create_output_topic("output", IntegerDeserializer(), READ_TEXT)
        for key, value, timestamp in [
            ("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10),
            ("A", "06", 8),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
        assert output.read_records_to_list() == [
            TestRecord(0, "01", 5),
            TestRecord(1, "02", 100),
            TestRecord(2, "03", 0),
            TestRecord(3, "04", 0),
            TestRecord(0, "05", 10),
            TestRecord(0, "06", 8),
        ]


def test_kstream_impl_should_support_key_change_ktable_from_kstream_description() -> None:
    """The description Kafka asserts in ``shouldSupportKeyChangeKTableFromKStream``: a
    ``toTable`` after a key change repartitions first."""
    topology = _key_change_to_table(StreamsBuilder())
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-MAP-0000000001\n"
        "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-MAP-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])\n"
        "      --> KSTREAM-TOTABLE-0000000002\n"
        "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-TOTABLE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n\n"
    )


def test_kstream_impl_should_support_group_by_count_with_kstream_to_ktable() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input", key_serde=Serdes.String(), value_serde=Serdes.String())
        .to_table()
        .group_by(lambda k, v: (v, v), key_serde=Serdes.String(), value_serde=Serdes.String())
        .count()
        .to_stream()
        .to("output")
    )
    topology = builder.build()
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 "
        "(stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-SELECT-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000005 "
        "(topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
        "      <-- KTABLE-SELECT-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 "
        "(topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
        "      --> KTABLE-AGGREGATE-0000000007\n"
        "    Processor: KTABLE-AGGREGATE-0000000007 "
        "(stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KTABLE-AGGREGATE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n\n"
    )
    with TopologyTestDriver(topology, STRINGS) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        output = driver.create_output_topic("output", READ_TEXT, LongDeserializer())
        for key, value, timestamp in [
            ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
            ("D", "green", 11),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
        assert output.read_records_to_list() == [
            TestRecord("green", 1, 10),
            TestRecord("green", 2, 10),
            TestRecord("green", 1, 12),
            TestRecord("blue", 1, 12),
            TestRecord("yellow", 1, 15),
            TestRecord("green", 2, 12),
        ]


def test_kstream_impl_should_support_trigger_materialized_with_ktable_from_kstream() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input", key_serde=Serdes.String(), value_serde=Serdes.String())
        .to_table()
        .map_values(
            lambda value: ord(value[0]) - ord("a"),
            materialized=Materialized(
                "store", key_serde=Serdes.String(), value_serde=Serdes.Integer()
            ),
        )
        .to_stream()
        .to("output")
    )
    topology = builder.build()
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-MAPVALUES-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-MAPVALUES-0000000003 (stores: [store])\n"
        "      --> KTABLE-TOSTREAM-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KTABLE-MAPVALUES-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000004\n\n"
    )
    with TopologyTestDriver(topology, STRINGS) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        output = driver.create_output_topic("output", READ_TEXT, IntegerDeserializer())
        store = driver.get_key_value_store("store")
        for key, value, timestamp in [
            ("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
            ("D", "green", 11),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
        assert dict(store.all()) == {"A": 1, "B": 6, "C": 24, "D": 6}
        assert output.read_records_to_list() == [
            TestRecord("A", 6, 10),
            TestRecord("B", 6, 9),
            TestRecord("A", 1, 12),
            TestRecord("C", 24, 15),
            TestRecord("D", 6, 11),
        ]


def test_ktable_source_with_a_store_name_used_twice_raises() -> None:
    """``InternalTopologyBuilderTest.shouldNotAllowToAddStoresWithSameName`` through the DSL."""
    builder = StreamsBuilder()
    string_table(builder, "topic1", materialized="store")
    with pytest.raises(TopologyError):
        string_table(builder, "topic2", materialized="store")
