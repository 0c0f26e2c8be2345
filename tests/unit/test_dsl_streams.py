"""``KStream`` operations and ``KGroupedStream`` aggregations on the ``TopologyTestDriver``:
ports of Kafka's ``KStreamFilterTest``, ``KStreamMapTest``, ``KStreamFlatMapTest``,
``KStreamFlatMapValuesTest``, ``KStreamMapValuesTest``, ``KStreamSelectKeyTest``,
``KStreamPeekTest``, ``KStreamForeachTest``, ``KStreamSplitTest`` (``branch`` is its
``split().branch(...)`` without a default branch), ``KStreamRepartitionTest``, the stream
cases of ``KStreamImplTest`` and the non-windowed cases of ``KGroupedStreamImplTest``, with the
outputs Kafka's tests assert, and the DSL's bad-input errors.

Kafka's ``MockApiProcessor`` is :func:`capture` (``stream.process(...)``): it keeps what the
stream forwards. Kafka's tests configure default serdes (``StreamsTestUtils.getStreamsConfig``);
so do these, except where the point is their absence.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.dsl_support import capture, dropped

from streamstate import StreamsError, TopologyError
from streamstate.dsl import Materialized, StreamsBuilder, TimeWindows, ValueAndTimestamp
from streamstate.dsl.windowed_serde import TimeWindowedDeserializer
from streamstate.serde import (
    IntegerDeserializer,
    IntegerSerializer,
    LongDeserializer,
    Serdes,
    StringDeserializer,
    StringSerializer,
)
from streamstate.testing import TestRecord, TopologyTestDriver

TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
INT = IntegerSerializer()
READ_INT = IntegerDeserializer()
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
INT_KEYS = {"default.key.serde": Serdes.Integer(), "default.value.serde": Serdes.String()}
STRING_INT = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.Integer()}


def int_string_stream(builder: StreamsBuilder, topic: str = "topic") -> Any:
    return builder.stream(topic, key_serde=Serdes.Integer(), value_serde=Serdes.String())


# -- KStreamFilterTest -------------------------------------------------------------------------


def _is_multiple_of_three(key: int, _value: str) -> bool:
    return key % 3 == 0


def test_kstream_filter_test_filter() -> None:
    builder = StreamsBuilder()
    out = capture(int_string_stream(builder).filter(_is_multiple_of_three))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in range(1, 8):
            topic.pipe_input(key, f"V{key}", 0)
    assert len(out) == 2
    assert out == [(3, "V3", 0), (6, "V6", 0)]


def test_kstream_filter_test_filter_not() -> None:
    builder = StreamsBuilder()
    out = capture(int_string_stream(builder).filter_not(_is_multiple_of_three))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in range(1, 8):
            topic.pipe_input(key, f"V{key}", 0)
    assert len(out) == 5
    assert [key for key, _, _ in out] == [1, 2, 4, 5, 7]


# -- KStreamMapTest, KStreamFlatMapTest --------------------------------------------------------


def test_kstream_map_test_map() -> None:
    builder = StreamsBuilder()
    out = capture(int_string_stream(builder).map(lambda key, value: (value, key)))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in range(4):
            topic.pipe_input(key, f"V{key}", 10 - key)
    assert out == [("V0", 0, 10), ("V1", 1, 9), ("V2", 2, 8), ("V3", 3, 7)]


def test_kstream_flat_map_test_flat_map() -> None:
    builder = StreamsBuilder()

    def mapper(key: int, value: str) -> list[tuple[str, str]]:
        return [(str(key * 10 + i), value) for i in range(key)]

    out = capture(int_string_stream(builder).flat_map(mapper))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in range(4):
            topic.pipe_input(key, f"V{key}", 0)
    assert len(out) == 6
    assert out == [
        ("10", "V1", 0),
        ("20", "V2", 0),
        ("21", "V2", 0),
        ("30", "V3", 0),
        ("31", "V3", 0),
        ("32", "V3", 0),
    ]


@pytest.mark.parametrize("operation", ["map", "flat_map"])
def test_kstream_map_test_key_value_mapper_result_not_null(operation: str) -> None:
    """``KStreamMapTest`` / ``KStreamFlatMapTest.testKeyValueMapperResultNotNull``: a mapper
    returning ``null`` fails the processing (Kafka: ``NullPointerException: The provided
    KeyValueMapper returned null which is not allowed.``)."""
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.Integer())
    getattr(stream, operation)(lambda key, value: None).to("output")
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic", TEXT, INT)
        with pytest.raises(StreamsError):
            topic.pipe_input("K", 0, 0)


# -- KStreamFlatMapValuesTest, KStreamMapValuesTest --------------------------------------------


def test_kstream_flat_map_values_test_flat_map_values() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.Integer(), value_serde=Serdes.Integer())
    out = capture(stream.flat_map_values(lambda value: [f"v{value}", f"V{value}"]))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, INT)
        for key in range(4):
            topic.pipe_input(key, key, 0)
    assert out == [
        (0, "v0", 0),
        (0, "V0", 0),
        (1, "v1", 0),
        (1, "V1", 0),
        (2, "v2", 0),
        (2, "V2", 0),
        (3, "v3", 0),
        (3, "V3", 0),
    ]


def test_kstream_flat_map_values_test_flat_map_values_with_keys() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.Integer(), value_serde=Serdes.Integer())
    out = capture(
        stream.flat_map_values(lambda key, value: [f"v{value}", f"k{key}"], with_key=True)
    )
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, INT)
        for key in range(4):
            topic.pipe_input(key, key, 0)
    assert out == [
        (0, "v0", 0),
        (0, "k0", 0),
        (1, "v1", 0),
        (1, "k1", 0),
        (2, "v2", 0),
        (2, "k2", 0),
        (3, "v3", 0),
        (3, "k3", 0),
    ]


def test_kstream_map_values_test_flat_map_values() -> None:
    """Kafka's ``KStreamMapValuesTest.testFlatMapValues`` (a ``mapValues`` despite its name)."""
    builder = StreamsBuilder()
    out = capture(int_string_stream(builder).map_values(len))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in (1, 10, 100, 1000):
            topic.pipe_input(key, str(key), key // 2)
    assert out == [(1, 1, 0), (10, 2, 5), (100, 3, 50), (1000, 4, 500)]


def test_kstream_map_values_test_map_values_with_keys() -> None:
    builder = StreamsBuilder()
    stream = int_string_stream(builder)
    out = capture(stream.map_values(lambda key, value: len(value) + key, with_key=True))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key in (1, 10, 100, 1000):
            topic.pipe_input(key, str(key), key // 2)
    assert out == [(1, 2, 0), (10, 12, 5), (100, 103, 50), (1000, 1004, 500)]


# -- KStreamSelectKeyTest, KStreamPeekTest, KStreamForeachTest ---------------------------------


def test_kstream_select_key_test_select_key() -> None:
    builder = StreamsBuilder()
    key_map = {1: "ONE", 2: "TWO", 3: "THREE"}
    stream = builder.stream(
        "topic_key_select", key_serde=Serdes.String(), value_serde=Serdes.Integer()
    )
    out = capture(stream.select_key(lambda _key, value: key_map[value]))
    with TopologyTestDriver(builder.build(), STRING_INT) as driver:
        topic = driver.create_input_topic("topic_key_select", TEXT, INT)
        for value in (1, 2, 3):
            topic.pipe_input(None, value)
    assert out == [("ONE", 1, 0), ("TWO", 2, 0), ("THREE", 3, 0)]


def test_kstream_peek_test_should_observe_stream_elements() -> None:
    builder = StreamsBuilder()
    peek_observed: list[tuple[int, str]] = []
    stream_observed: list[tuple[int, str]] = []
    (
        int_string_stream(builder)
        .peek(lambda key, value: peek_observed.append((key, value)))
        .foreach(lambda key, value: stream_observed.append((key, value)))
    )
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        expected = []
        for key in range(32):
            topic.pipe_input(key, f"V{key}")
            expected.append((key, f"V{key}"))
        assert peek_observed == expected
        assert stream_observed == expected


def test_kstream_foreach_test_foreach() -> None:
    builder = StreamsBuilder()
    actual: list[tuple[int, str]] = []
    int_string_stream(builder).foreach(lambda key, value: actual.append((key * 2, value.upper())))
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("topic", INT, TEXT)
        for key, value in [(0, "zero"), (1, "one"), (2, "two"), (3, "three")]:
            topic.pipe_input(key, value)
    assert actual == [(0, "ZERO"), (2, "ONE"), (4, "TWO"), (6, "THREE")]


# -- KStreamSplitTest (branch) -----------------------------------------------------------------


def _pipe_split_input(driver: TopologyTestDriver) -> None:
    topic = driver.create_input_topic("topic", INT, TEXT)
    for key in (-1, 0, 1, 2, 3, 4, 5, 6, 7):
        topic.pipe_input(key, f"V{key}")


def test_kstream_split_test_kstream_split() -> None:
    """A record goes to the first branch whose predicate it matches (6 to ``x2``, not
    ``x3``), or nowhere (no default branch)."""
    builder = StreamsBuilder()
    even, three, five = int_string_stream(builder).branch(
        lambda key, _value: key % 2 == 0,
        lambda key, _value: key % 3 == 0,
        lambda key, _value: key % 5 == 0,
    )
    even.to("x2")
    three.to("x3")
    five.to("x5")
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _pipe_split_input(driver)
        x2 = driver.create_output_topic("x2", READ_INT, READ_TEXT)
        x3 = driver.create_output_topic("x3", READ_INT, READ_TEXT)
        x5 = driver.create_output_topic("x5", READ_INT, READ_TEXT)
        assert x2.read_values_to_list() == ["V0", "V2", "V4", "V6"]
        assert x3.read_values_to_list() == ["V3"]
        assert x5.read_values_to_list() == ["V5"]


def test_kstream_split_test_branching_with_no_terminal_operation() -> None:
    builder = StreamsBuilder()
    even, five = int_string_stream(builder).branch(
        lambda key, _value: key % 2 == 0, lambda key, _value: key % 5 == 0
    )
    even.to("output")
    five.to("output")
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _pipe_split_input(driver)
        output = driver.create_output_topic("output", READ_INT, READ_TEXT)
        assert output.read_values_to_list() == ["V0", "V2", "V4", "V5", "V6"]


# -- KStreamImplTest: merge, repartition, to ---------------------------------------------------


def test_kstream_impl_should_merge_two_streams() -> None:
    builder = StreamsBuilder()
    merged = builder.stream("topic-1").merge(builder.stream("topic-2"))
    out = capture(merged)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic1 = driver.create_input_topic("topic-1", TEXT, TEXT)
        topic2 = driver.create_input_topic("topic-2", TEXT, TEXT)
        topic1.pipe_input("A", "aa")
        topic2.pipe_input("B", "bb")
        topic2.pipe_input("C", "cc")
        topic1.pipe_input("D", "dd")
    assert out == [("A", "aa", 0), ("B", "bb", 0), ("C", "cc", 0), ("D", "dd", 0)]


def test_kstream_impl_should_merge_multiple_streams() -> None:
    builder = StreamsBuilder()
    sources = [builder.stream(f"topic-{i}") for i in range(1, 5)]
    merged = sources[0].merge(sources[1]).merge(sources[2]).merge(sources[3])
    out = capture(merged)
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topics = {i: driver.create_input_topic(f"topic-{i}", TEXT, TEXT) for i in range(1, 5)}
        for i, key, value, timestamp in [
            (1, "A", "aa", 1), (2, "B", "bb", 9), (3, "C", "cc", 2), (4, "D", "dd", 8),
            (4, "E", "ee", 3), (3, "F", "ff", 7), (2, "G", "gg", 4), (1, "H", "hh", 6),
        ]:  # fmt: skip
            topics[i].pipe_input(key, value, timestamp)
    assert out == [
        ("A", "aa", 1),
        ("B", "bb", 9),
        ("C", "cc", 2),
        ("D", "dd", 8),
        ("E", "ee", 3),
        ("F", "ff", 7),
        ("G", "gg", 4),
        ("H", "hh", 6),
    ]


def test_kstream_impl_should_send_data_through_repartition_topic_using_repartitioned() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    out = capture(stream.repartition(key_serde=Serdes.String(), value_serde=Serdes.String()))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        driver.create_input_topic("topic", TEXT, TEXT).pipe_input("a", "b")
    assert out == [("a", "b", 0)]


def test_kstream_impl_should_send_data_to_topic_using_produced() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    stream.to("to-topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    out = capture(
        builder.stream("to-topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    )
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        driver.create_input_topic("topic", TEXT, TEXT).pipe_input("e", "f")
    assert out == [("e", "f", 0)]


def test_kstream_repartition_test_named_repartition_topic() -> None:
    """``KStreamRepartitionTest.shouldInvokePartitionerWhenSet`` without the partitioner
    (``repartition`` takes none): the records written to ``<application.id>-test-repartition``,
    with their timestamps."""
    builder = StreamsBuilder()
    int_string_stream(builder, "input-topic").repartition(name="test")
    with TopologyTestDriver(builder.build(), INT_KEYS) as driver:
        topic = driver.create_input_topic("input-topic", INT, TEXT)
        repartition = driver.create_output_topic(
            "topology-test-driver-test-repartition", READ_INT, READ_TEXT
        )
        for i, key in enumerate((0, 1)):
            topic.pipe_input(key, f"X{key}", i + 10)
        assert repartition.read_record() == TestRecord(0, "X0", 10)
        assert repartition.read_record() == TestRecord(1, "X1", 11)
        assert repartition.read_records_to_list() == []


def test_kstream_impl_should_preserve_serdes_for_operators() -> None:
    """The serdes each operation's result carries (``AbstractStream.keySerde/valueSerde``):
    ``None`` where Kafka's are ``null`` (the app's default is used)."""
    builder = StreamsBuilder()
    string = Serdes.String()
    mine = Serdes.Long()
    stream1 = builder.stream(["topic-1"], key_serde=string, value_serde=string)

    def serdes(result: Any) -> tuple[Any, Any]:
        return result.key_slot.given, result.value_slot.given

    assert serdes(stream1.filter(lambda k, v: False)) == (string, string)
    assert serdes(stream1.filter_not(lambda k, v: False)) == (string, string)
    assert serdes(stream1.select_key(lambda k, v: k)) == (None, string)
    assert serdes(stream1.map(lambda k, v: (k, v))) == (None, None)
    assert serdes(stream1.map_values(lambda v: v)) == (string, None)
    assert serdes(stream1.flat_map(lambda k, v: [(k, v)])) == (None, None)
    assert serdes(stream1.flat_map_values(lambda v: [v])) == (string, None)
    assert serdes(stream1.merge(stream1)) == (None, None)
    assert serdes(stream1.repartition()) == (string, string)
    assert serdes(stream1.repartition(key_serde=mine, value_serde=mine)) == (mine, mine)
    assert serdes(stream1.group_by_key()) == (string, string)
    assert serdes(stream1.group_by_key(key_serde=mine, value_serde=mine)) == (mine, mine)
    assert serdes(stream1.group_by(lambda k, v: k)) == (None, string)
    assert serdes(stream1.group_by(lambda k, v: k, key_serde=mine, value_serde=mine)) == (
        mine,
        mine,
    )


# -- KGroupedStreamImplTest --------------------------------------------------------------------


def _grouped_stream(builder: StreamsBuilder) -> Any:
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    return stream.group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())


def _process_data(driver: TopologyTestDriver) -> None:
    topic = driver.create_input_topic("topic", TEXT, TEXT)
    topic.pipe_input("1", "A", 5)
    topic.pipe_input("2", "B", 1)
    topic.pipe_input("1", "C", 3)
    topic.pipe_input("1", "D", 10)
    topic.pipe_input("3", "E", 8)
    topic.pipe_input("3", "F", 9)
    topic.pipe_input("3", None)


def test_kgrouped_stream_should_count_and_materialize_results() -> None:
    builder = StreamsBuilder()
    _grouped_stream(builder).count(materialized=Materialized("count", key_serde=Serdes.String()))
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _process_data(driver)
        count = driver.get_key_value_store("count")
        assert count.get("1") == 3
        assert count.get("2") == 1
        assert count.get("3") == 2
        assert count.get_with_timestamp("1") == ValueAndTimestamp(3, 10)
        assert count.get_with_timestamp("2") == ValueAndTimestamp(1, 1)
        assert count.get_with_timestamp("3") == ValueAndTimestamp(2, 9)


def test_kgrouped_stream_should_log_and_measure_skips_in_aggregate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = StreamsBuilder()
    _grouped_stream(builder).count(materialized=Materialized("count", key_serde=Serdes.String()))
    with caplog.at_level(logging.WARNING, logger="streamstate.dsl.table_processors"):
        with TopologyTestDriver(builder.build(), STRINGS) as driver:
            _process_data(driver)
            assert dropped(driver) == 1
    assert (
        "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[6]"
        in caplog.messages
    )


def test_kgrouped_stream_should_reduce_and_materialize_results() -> None:
    builder = StreamsBuilder()
    _grouped_stream(builder).reduce(
        lambda one, two: f"{one}+{two}",
        materialized=Materialized("reduce", key_serde=Serdes.String(), value_serde=Serdes.String()),
    )
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _process_data(driver)
        reduced = driver.get_key_value_store("reduce")
        assert reduced.get("1") == "A+C+D"
        assert reduced.get("2") == "B"
        assert reduced.get("3") == "E+F"
        assert reduced.get_with_timestamp("1") == ValueAndTimestamp("A+C+D", 10)
        assert reduced.get_with_timestamp("2") == ValueAndTimestamp("B", 1)
        assert reduced.get_with_timestamp("3") == ValueAndTimestamp("E+F", 9)


def test_kgrouped_stream_should_log_and_measure_skips_in_reduce(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = StreamsBuilder()
    _grouped_stream(builder).reduce(
        lambda one, two: f"{one}+{two}",
        materialized=Materialized("reduce", key_serde=Serdes.String(), value_serde=Serdes.String()),
    )
    with caplog.at_level(logging.WARNING, logger="streamstate.dsl.table_processors"):
        with TopologyTestDriver(builder.build(), STRINGS) as driver:
            _process_data(driver)
            assert dropped(driver) == 1
    assert (
        "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[6]"
        in caplog.messages
    )


def test_kgrouped_stream_should_aggregate_and_materialize_results() -> None:
    builder = StreamsBuilder()
    _grouped_stream(builder).aggregate(
        lambda: "0",
        lambda _key, value, aggregate: f"{aggregate}+{value}",
        materialized=Materialized(
            "aggregate", key_serde=Serdes.String(), value_serde=Serdes.String()
        ),
    )
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _process_data(driver)
        aggregate = driver.get_key_value_store("aggregate")
        assert aggregate.get("1") == "0+A+C+D"
        assert aggregate.get("2") == "0+B"
        assert aggregate.get("3") == "0+E+F"
        assert aggregate.get_with_timestamp("1") == ValueAndTimestamp("0+A+C+D", 10)
        assert aggregate.get_with_timestamp("2") == ValueAndTimestamp("0+B", 1)
        assert aggregate.get_with_timestamp("3") == ValueAndTimestamp("0+E+F", 9)


def test_kgrouped_stream_should_aggregate_with_default_serdes() -> None:
    builder = StreamsBuilder()
    table = _grouped_stream(builder).aggregate(
        lambda: "0", lambda _key, value, aggregate: f"{aggregate}+{value}"
    )
    out = capture(table.to_stream())
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        _process_data(driver)
    last = {key: (value, timestamp) for key, value, timestamp in out}
    assert last["1"] == ("0+A+C+D", 10)
    assert last["2"] == ("0+B", 1)
    assert last["3"] == ("0+E+F", 9)
    # Not asserted by Kafka (its MockApiProcessor keeps them all): the cache is flushed
    # after each record, so each update is forwarded.
    assert out == [
        ("1", "0+A", 5),
        ("2", "0+B", 1),
        ("1", "0+A+C", 5),
        ("1", "0+A+C+D", 10),
        ("3", "0+E", 8),
        ("3", "0+E+F", 9),
    ]


def test_kgrouped_stream_group_by_drops_null_keys_and_values() -> None:
    """Not a Kafka test: a re-keyed stream is counted after a repartition topic; a record
    whose new key is ``None``, or whose value is ``None``, is dropped and counted once. Java's
    driver (the oracle, run on the same program) gives the same output but counts 1: Kafka's
    repartition filter drops the null key unmetered (``InternalStreamsBuilder`` rewrites it to
    ``k != null``) and only the null value is metered, in ``KStreamAggregate``; streamstate
    counts both (a deliberate difference, ``docs/dsl.md``: nothing is dropped uncounted)."""
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())

    def selector(_key: str, value: str | None) -> str | None:
        if value is None:
            return "a"  # a null value under a key: dropped by the count
        return None if value == "drop" else value[0]  # a null key: dropped too

    table = stream.group_by(selector).count()
    out = capture(table.to_stream())
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("k", "a1", 1)
        topic.pipe_input("k", "drop", 2)
        topic.pipe_input("k", "a2", 3)
        topic.pipe_input("k", None, 4)
        assert dropped(driver) == 2
    assert out == [("a", 1, 1), ("a", 2, 3)]


# -- bad input ---------------------------------------------------------------------------------


def test_a_store_name_used_twice_raises_topology_error() -> None:
    """Kafka: ``TopologyException: ... StateStore count is already added``
    (``InternalTopologyBuilderTest.shouldNotAllowToAddStoresWithSameName``)."""
    builder = StreamsBuilder()
    grouped = _grouped_stream(builder)
    grouped.count(materialized="count")
    with pytest.raises(TopologyError, match="count"):
        grouped.reduce(lambda one, two: one + two, materialized="count")


def test_kgrouped_stream_should_not_have_invalid_store_name_on_reduce() -> None:
    """Kafka rejects a store name with characters other than ASCII alphanumerics, ``.``,
    ``_`` and ``-`` (``Named.validate``) with a ``TopologyException``."""
    builder = StreamsBuilder()
    with pytest.raises(TopologyError):
        _grouped_stream(builder).reduce(lambda one, two: one + two, materialized="~foo bar~")


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda grouped: grouped.reduce(None), id="reduce-null-reducer"),
        pytest.param(
            lambda grouped: grouped.aggregate(None, lambda k, v, a: a), id="aggregate-null-init"
        ),
        pytest.param(
            lambda grouped: grouped.aggregate(lambda: "0", None), id="aggregate-null-adder"
        ),
    ],
)
def test_kgrouped_stream_should_not_have_null_functions(call: Any) -> None:
    """``shouldNotHaveNullReducerOnReduce``, ``shouldNotHaveNullInitializerOnAggregate``,
    ``shouldNotHaveNullAdderOnAggregate``: Kafka's ``NullPointerException`` is a
    ``TopologyError`` here."""
    with pytest.raises(TopologyError):
        call(_grouped_stream(StreamsBuilder()))


def test_an_operation_without_a_serde_and_no_default_raises_when_the_driver_is_created() -> None:
    """Not a Kafka test (Kafka fails with a ``ConfigException`` when the task starts): an
    operation that needs a serde it was not given, in an app without a default, is a
    ``TopologyError`` naming the operation, raised when the driver is made."""
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    stream.map_values(len).to("output")
    with pytest.raises(TopologyError, match="map_values"):
        TopologyTestDriver(builder.build())


def test_a_source_without_serdes_and_no_default_raises_naming_the_source() -> None:
    builder = StreamsBuilder()
    builder.stream("topic").to("output")
    with pytest.raises(TopologyError, match="stream"):
        TopologyTestDriver(builder.build())


def test_serdes_given_upstream_need_no_default() -> None:
    """Not a Kafka test: what ``shouldPreserveSerdesForOperators`` implies. Operations that
    keep the serdes (``filter``, ``to``, ``group_by_key``, ``count`` with its ``Long``) need no
    default serde: Kafka runs this program without one."""
    builder = StreamsBuilder()
    stream = builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
    stream.filter(lambda _key, value: value != "x").to("filtered")
    stream.group_by_key().count().to_stream().to("counts")
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("topic", TEXT, TEXT).pipe_input("k", "v", 7)
        filtered = driver.create_output_topic("filtered", READ_TEXT, READ_TEXT)
        counts = driver.create_output_topic("counts", READ_TEXT, LongDeserializer())
        assert filtered.read_records_to_list() == [TestRecord("k", "v", 7)]
        assert counts.read_records_to_list() == [TestRecord("k", 1, 7)]


def test_a_cached_aggregation_forwards_the_headers_of_the_record_that_last_wrote_each_key() -> None:
    # Kafka's record cache keeps each entry's record context: the result of a cached count
    # (and of a cached windowed count) carries the headers of the last record counted.
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
    grouped = grouped.group_by_key()
    grouped.count(materialized="plain").to_stream().to("counts", value_serde=Serdes.Long())
    (
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(60_000))
        .count(materialized="windowed")
        .to_stream()
        .to("windowed", value_serde=Serdes.Long())
    )
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in", TEXT, TEXT)
        source.pipe_input("a", "x", 1_000, headers=[("trace", b"1")])
        source.pipe_input("a", "y", 2_000, headers=[("trace", b"2")])
        for topic, key_de in (
            ("counts", READ_TEXT),
            ("windowed", TimeWindowedDeserializer(READ_TEXT, 60_000)),
        ):
            out = driver.create_output_topic(topic, key_de, LongDeserializer())
            records = out.read_records_to_list()
            assert [r.value for r in records] == [1, 2]
            assert [list(r.headers) for r in records] == [[("trace", b"1")], [("trace", b"2")]]
