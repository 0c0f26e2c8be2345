"""``TopologyTestDriver``: every topology form run with no broker, synchronously.

The punctuation cases are ports of Kafka's ``TopologyTestDriverTest``
(``shouldPunctuateOnStreamsTime``, ``shouldPunctuateOnWallClockTime``) with the timestamps its
assertions expect; the rest follow its other cases (processing to completion before
``pipeInput`` returns, reading an empty output topic, unknown topics, stores, global stores,
headers) on this project's three topology forms.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from streamstate import (
    DeserializationError,
    NoSuchElementError,
    Processor,
    PunctuationType,
    Record,
    StreamsError,
    Topology,
    TopologyError,
    UnknownStateStoreError,
)
from streamstate.examples.word_count_graph import word_count_topology
from streamstate.serde import (
    BytesDeserializer,
    BytesSerializer,
    LongDeserializer,
    LongSerializer,
    StringDeserializer,
    StringSerializer,
)
from streamstate.testing import TestRecord, TopologyTestDriver

TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
RAW = BytesSerializer()
READ_RAW = BytesDeserializer()


def counting_function_topology(*, caching: bool = False) -> Topology:
    """The one-function form: counts keys in ``counts``, sends each count to ``counts-out``."""
    topology = Topology().add_store("counts", caching=caching)

    @topology.processor(sources=["in"], stores=["counts"], sinks=["counts-out"])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send("counts-out", record.key, b"%d" % n, headers=record.headers)

    return topology


# -- processing to completion ---------------------------------------------------------------------


def test_a_word_count_through_a_repartition_topic_is_complete_after_each_pipe() -> None:
    with TopologyTestDriver(word_count_topology("lines", "counts")) as driver:
        lines = driver.create_input_topic("lines", TEXT, TEXT)
        counts = driver.create_output_topic("counts", READ_TEXT, READ_TEXT)
        lines.pipe_input(None, "Hello Kafka Streams", 1_000)
        # Before the next pipe: the sub-topology behind the repartition topic has run.
        first = [("hello", "1"), ("kafka", "1"), ("streams", "1")]
        assert counts.read_key_values_to_list() == first
        lines.pipe_input(None, "hello streams", 2_000)
        assert counts.read_records_to_list() == [
            TestRecord("hello", "2", 2_000, ()),
            TestRecord("streams", "2", 2_000, ()),
        ]
        assert driver.get_key_value_store("counts").get(b"hello") == b"2"
        assert driver.producer_topic_names() == {
            "counts",
            "topology-test-driver-words-repartition",
            "topology-test-driver-counts-changelog",
        }
        assert driver.metrics()["process-total"] == 2 + 5  # the lines, then the words


def test_the_one_function_form_counts_and_sends() -> None:
    with TopologyTestDriver(counting_function_topology()) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        source.pipe_key_value_list([(b"a", b"x"), (b"b", b"x"), (b"a", b"x")], timestamp=5)
        assert out.read_key_values_to_list() == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
        assert out.is_empty() and out.get_queue_size() == 0
        assert sorted(driver.get_key_value_store("counts").all()) == [(b"a", b"2"), (b"b", b"1")]


def test_a_record_cache_is_flushed_after_every_record() -> None:
    # Kafka's driver commits after each record: the changelog gets every write, the store
    # shows it at once.
    with TopologyTestDriver(counting_function_topology(caching=True)) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        changelog = driver.create_output_topic(
            "topology-test-driver-counts-changelog", READ_RAW, READ_RAW
        )
        source.pipe_input(b"k", b"v", 1)
        assert driver.get_key_value_store("counts").get(b"k") == b"1"
        source.pipe_input(b"k", b"v", 2)
        assert changelog.read_key_values_to_list() == [(b"k", b"1"), (b"k", b"2")]


def test_exactly_once_commits_after_every_record_too() -> None:
    config = {"processing.guarantee": "exactly_once_v2"}
    with TopologyTestDriver(counting_function_topology(), config) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        for _ in range(3):
            source.pipe_input(b"k", b"v", 1)
        assert out.read_values_to_list() == [b"1", b"2", b"3"]
        assert driver.get_key_value_store("counts").get(b"k") == b"3"


# -- topics ---------------------------------------------------------------------------------------


def test_records_without_a_timestamp_get_the_topics_time_moving_by_its_auto_advance() -> None:
    with TopologyTestDriver(counting_function_topology(), initial_wall_clock_time_ms=1_000) as d:
        source = d.create_input_topic("in", RAW, RAW, auto_advance=datetime.timedelta(seconds=1))
        out = d.create_output_topic("counts-out", READ_RAW, READ_RAW)
        source.pipe_input(b"k", b"v")
        source.pipe_input(b"k", b"v")
        source.advance_time(500)
        source.pipe_input(b"k", b"v")
        source.pipe_input(b"k", b"v", 10)
        assert [r.timestamp for r in out.read_records_to_list()] == [1_000, 2_000, 3_500, 10]


def test_headers_travel_to_the_sink() -> None:
    with TopologyTestDriver(counting_function_topology()) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        source.pipe_record(TestRecord(b"k", b"v", 7, (("trace", b"t-1"),)))
        assert out.read_record() == TestRecord(b"k", b"1", 7, (("trace", b"t-1"),))


def test_reading_an_empty_output_topic_raises() -> None:
    with TopologyTestDriver(counting_function_topology()) as driver:
        out = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        with pytest.raises(NoSuchElementError, match="counts-out") as caught:
            out.read_key_value()
        assert isinstance(caught.value, LookupError)
        assert out.read_key_values_to_list() == []


def test_two_output_topics_on_one_topic_read_independently() -> None:
    with TopologyTestDriver(counting_function_topology()) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        first = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        source.pipe_input(b"k", b"v", 1)
        second = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        assert first.read_value() == b"1"
        assert second.read_value() == b"1"


def test_read_key_values_to_map_keeps_the_latest_value_and_tombstones_as_none() -> None:
    """Kafka's ``readKeyValuesToMap``: a key whose last record is a tombstone maps to null."""
    topology = Topology()

    @topology.processor(sources=["in"], sinks=["out"])
    def forward(ctx: Any, record: Any) -> None:
        ctx.send("out", record.key, record.value)

    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("out", READ_RAW, READ_RAW)
        source.pipe_key_value_list([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None)])
        assert out.read_key_values_to_map() == {b"a": b"2", b"b": None}
        source.pipe_input(None, b"3")
        with pytest.raises(StreamsError, match="null keys"):
            out.read_key_values_to_map()


def test_an_unknown_input_topic_is_refused() -> None:
    with TopologyTestDriver(counting_function_topology()) as driver:
        with pytest.raises(TopologyError, match="'nope' is not read by the topology"):
            driver.create_input_topic("nope", RAW, RAW)


# -- bad input ------------------------------------------------------------------------------------


def long_source_topology() -> Topology:
    topology = Topology()

    @topology.processor(sources=["in"], sinks=["out"], value_deserializer=LongDeserializer())
    def forward(ctx: Any, record: Any) -> None:
        ctx.send("out", record.key, b"%d" % record.value)

    return topology


def test_a_record_the_deserializer_cannot_read_fails_naming_where_it_is() -> None:
    with TopologyTestDriver(long_source_topology()) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        source.pipe_input(b"k", LongSerializer().serialize("in", 1), 1)
        with pytest.raises(DeserializationError) as caught:
            source.pipe_input(b"k", b"\x00", 2)
        assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("in", 0, 1)


def test_a_record_the_handler_drops_is_counted() -> None:
    config = {"default.deserialization.exception.handler": "continue"}
    with TopologyTestDriver(long_source_topology(), config) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("out", READ_RAW, READ_RAW)
        source.pipe_input(b"k", b"\x00", 1)
        source.pipe_input(b"k", LongSerializer().serialize("in", 7), 2)
        assert out.read_values_to_list() == [b"7"]
        assert driver.metrics()["dropped-records-total"] == 1


# -- punctuation (Kafka's TopologyTestDriverTest) -------------------------------------------------


class Punctuated(Processor):
    """Kafka's ``MockProcessor`` with a ``MockPunctuator``: records each punctuation."""

    punctuated_at: list[int] = []  # noqa: RUF012 - reset per test by the factory

    def __init__(self, punctuation_type: PunctuationType) -> None:
        self.punctuation_type = punctuation_type

    def init(self, context: Any) -> None:
        self.context = context
        context.schedule(10, self.punctuation_type, self.punctuate)

    def punctuate(self, timestamp: int) -> None:
        Punctuated.punctuated_at.append(timestamp)
        self.context.forward(Record("tick", str(timestamp), timestamp))

    def process(self, record: Record) -> None:
        pass


def punctuated_topology(punctuation_type: PunctuationType) -> Topology:
    Punctuated.punctuated_at = []
    topology = Topology()
    topology.add_source("source", "in")
    topology.add_processor("p", lambda: Punctuated(punctuation_type), "source")
    topology.add_sink("sink", "ticks", "p", key_serializer=TEXT, value_serializer=TEXT)
    return topology


def test_should_punctuate_on_streams_time() -> None:
    with TopologyTestDriver(punctuated_topology(PunctuationType.STREAM_TIME)) as driver:
        source = driver.create_input_topic("in", RAW, RAW)
        expected: list[int] = []
        for timestamp, fires in [
            (42, True),
            (42, False),
            (51, True),
            (52, False),
            (61, True),
            (65, False),
            (71, True),
            (72, False),
            (95, True),
            (101, True),
            (102, False),
        ]:
            source.pipe_input(b"k", b"v", timestamp)
            if fires:
                expected.append(timestamp)
            assert Punctuated.punctuated_at == expected, timestamp
        ticks = driver.create_output_topic("ticks", READ_TEXT, READ_TEXT)
        assert [int(v) for _, v in ticks.read_key_values_to_list()] == expected


def test_should_punctuate_on_wall_clock_time() -> None:
    topology = punctuated_topology(PunctuationType.WALL_CLOCK_TIME)
    with TopologyTestDriver(topology, initial_wall_clock_time_ms=0) as driver:
        expected: list[int] = []
        for advance, fires_at in [(5, None), (9, 14), (1, None), (20, 35), (5, 40)]:
            driver.advance_wall_clock_time(advance)
            if fires_at is not None:
                expected.append(fires_at)
            assert Punctuated.punctuated_at == expected
        ticks = driver.create_output_topic("ticks", READ_TEXT, READ_TEXT)
        assert ticks.read_key_values_to_list() == [("tick", "14"), ("tick", "35"), ("tick", "40")]


# -- stores ---------------------------------------------------------------------------------------


class Enrich(Processor):
    def init(self, context: Any) -> None:
        self.context = context
        self.prices = context.get_state_store("prices")

    def process(self, record: Record) -> None:
        price = self.prices.get(record.key)
        self.context.forward(record.with_value(price))


def test_a_global_store_is_updated_by_its_topic_and_read_by_processors() -> None:
    topology = Topology()
    topology.add_global_store("prices", topic="price-updates")
    topology.add_source("orders", "orders")
    topology.add_processor("enrich", Enrich, "orders")
    topology.add_sink("out", "enriched", "enrich")
    with TopologyTestDriver(topology) as driver:
        prices = driver.create_input_topic("price-updates", RAW, RAW)
        orders = driver.create_input_topic("orders", RAW, RAW)
        out = driver.create_output_topic("enriched", READ_RAW, READ_RAW)
        prices.pipe_input(b"apple", b"3", 1)
        orders.pipe_input(b"apple", b"order-1", 2)
        prices.pipe_input(b"apple", None, 3)  # a tombstone deletes
        orders.pipe_input(b"apple", b"order-2", 4)
        assert out.read_key_values_to_list() == [(b"apple", b"3"), (b"apple", None)]
        assert driver.get_key_value_store("prices").get(b"apple") is None


def test_a_store_written_through_the_driver_is_what_processors_read() -> None:
    with TopologyTestDriver(counting_function_topology(caching=True)) as driver:
        store = driver.get_key_value_store("counts")
        store.put(b"k", b"41")
        source = driver.create_input_topic("in", RAW, RAW)
        out = driver.create_output_topic("counts-out", READ_RAW, READ_RAW)
        source.pipe_input(b"k", b"v", 1)
        assert out.read_value() == b"42"
        assert set(driver.get_all_state_stores()) == {"counts"}
        with pytest.raises(UnknownStateStoreError, match="no store named 'nope'"):
            driver.get_state_store("nope")


# -- life -----------------------------------------------------------------------------------------


def test_close_removes_the_temporary_state_and_the_driver_refuses_more() -> None:
    driver = TopologyTestDriver(counting_function_topology())
    state_dir = Path(str(driver.config.state_dir))
    source = driver.create_input_topic("in", RAW, RAW)
    source.pipe_input(b"k", b"v", 1)
    assert state_dir.exists()
    driver.close()
    assert not state_dir.exists()
    assert driver.metrics()["state"] == "NOT_RUNNING"
    with pytest.raises(StreamsError, match="closed"):
        source.pipe_input(b"k", b"v", 2)


def test_should_clean_up_persistent_state_stores_on_close(tmp_path: Path) -> None:
    config = {"application.id": "cleanup", "state.dir": str(tmp_path)}
    with TopologyTestDriver(counting_function_topology(), config) as driver:
        assert driver.get_key_value_store("counts").get(b"a") is None
        driver.create_input_topic("in", RAW, RAW).pipe_input(b"a", b"v", 1)
        assert driver.get_key_value_store("counts").get(b"a") == b"1"
    with TopologyTestDriver(counting_function_topology(), config) as driver:
        assert driver.get_key_value_store("counts").get(b"a") is None


def test_a_stateless_topology_makes_no_state_directory(tmp_path: Path) -> None:
    with TopologyTestDriver(long_source_topology(), {"state.dir": str(tmp_path)}) as driver:
        driver.create_input_topic("in", RAW, RAW).pipe_input(
            b"k", LongSerializer().serialize("in", 1), 1
        )
        assert not (tmp_path / "topology-test-driver").exists()


class Lifecycle(Processor):
    seen: list[str] = []  # noqa: RUF012 - reset per test

    def init(self, context: Any) -> None:
        Lifecycle.seen.append("init")

    def process(self, record: Record) -> None:
        Lifecycle.seen.append("process")

    def close(self) -> None:
        Lifecycle.seen.append("close")


def test_should_init_and_close_processors() -> None:
    Lifecycle.seen = []
    topology = Topology().add_source("source", "in").add_processor("p", Lifecycle, "source")
    driver = TopologyTestDriver(topology)
    assert Lifecycle.seen == ["init"]
    driver.close()
    assert Lifecycle.seen == ["init", "close"]


# -- records the topology writes to topics it reads (Kafka's TopologyTestDriverTest) --------------


class Recurse(Processor):
    """Forwards a ``recurse-`` copy of each record back to the input, then the record itself
    (Kafka's test's ``recursiveProcessor``)."""

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        if not record.value.startswith("recurse-"):
            self.context.forward(record.with_value("recurse-" + record.value), "recursive-sink")
        self.context.forward(record, "sink")


class RecurseToGlobal(Recurse):
    """The same, and every record to the global store's topic too."""

    def process(self, record: Record) -> None:
        super().process(record)
        self.context.forward(record, "global-sink")


def recursive_topology(*, with_global: bool = False) -> Topology:
    topology = Topology()
    topology.add_source("source", "input", key_deserializer=READ_TEXT, value_deserializer=READ_TEXT)
    topology.add_processor("recursive", RecurseToGlobal if with_global else Recurse, "source")
    for name, topic in [("recursive-sink", "input"), ("sink", "output")]:
        topology.add_sink(name, topic, "recursive", key_serializer=TEXT, value_serializer=TEXT)
    if with_global:
        topology.add_global_store("global-store", topic="global-topic")
        topology.add_sink(
            "global-sink", "global-topic", "recursive", key_serializer=TEXT, value_serializer=TEXT
        )
    return topology


def test_should_enqueue_later_outputs_after_earlier_ones() -> None:
    with TopologyTestDriver(recursive_topology()) as driver:
        source = driver.create_input_topic("input", TEXT, TEXT)
        out = driver.create_output_topic("output", READ_TEXT, READ_TEXT)
        source.pipe_input("B", "beta")
        assert out.read_key_values_to_list() == [("B", "beta"), ("B", "recurse-beta")]


def test_should_apply_global_updates_correctly_in_recursive_topologies() -> None:
    with TopologyTestDriver(recursive_topology(with_global=True)) as driver:
        source = driver.create_input_topic("input", TEXT, TEXT)
        global_topic = driver.create_output_topic("global-topic", READ_TEXT, READ_TEXT)
        source.pipe_input("A", "alpha")
        assert driver.get_key_value_store("global-store").get(b"A") == b"recurse-alpha"
        assert global_topic.read_key_values_to_list() == [("A", "alpha"), ("A", "recurse-alpha")]


def test_should_respect_task_idling() -> None:
    # The driver's clock does not move by itself: with max.task.idle.ms, a task waits for it.
    topology = Topology()
    topology.add_source(
        "source1", "input1", key_deserializer=READ_TEXT, value_deserializer=READ_TEXT
    )
    topology.add_source(
        "source2", "input2", key_deserializer=READ_TEXT, value_deserializer=READ_TEXT
    )
    topology.add_sink(
        "sink", "output", "source1", "source2", key_serializer=TEXT, value_serializer=TEXT
    )
    with TopologyTestDriver(topology, {"max.task.idle.ms": 1000}) as driver:
        in1 = driver.create_input_topic("input1", TEXT, TEXT)
        in2 = driver.create_input_topic("input2", TEXT, TEXT)
        out = driver.create_output_topic("output", READ_TEXT, READ_TEXT)
        in1.pipe_input("A", "alpha")
        driver.advance_wall_clock_time(1)
        # Only one input has records, and it has been one ms.
        assert out.read_key_values_to_list() == []
        in2.pipe_input("B", "beta")
        # Both inputs have records: A (the earlier) goes; then only one input has records again.
        assert out.read_key_values_to_list() == [("A", "alpha")]
        driver.advance_wall_clock_time(datetime.timedelta(seconds=1))
        assert out.read_key_values_to_list() == [("B", "beta")]
