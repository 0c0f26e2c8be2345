"""``KTable.suppress``: ports of Kafka's ``SuppressScenarioTest`` (whole programs through the
``TopologyTestDriver``, with the outputs Kafka's assertions expect) and of
``KTableSuppressProcessorTest`` (the processor alone over a buffer store), plus naming, the
buffer's changelog and its restoration.

Kafka's driver commits after every record, so the record caches of the aggregations flush after
every record; streamstate's driver does the same, which is what makes the outputs comparable.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from streamstate.dsl import (
    BufferConfig,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Window,
    Windowed,
)
from streamstate.dsl.suppress import (
    UNBOUNDED,
    KTableSuppressProcessor,
    SuppressionBufferFullError,
    TimeOrderedChangeBuffer,
)
from streamstate.dsl.table_processors import Change
from streamstate.dsl.windowed_serde import (
    SessionWindowedDeserializer,
    SessionWindowedSerializer,
    TimeWindowedDeserializer,
    TimeWindowedSerializer,
)
from streamstate.errors import StreamsError, TopologyError
from streamstate.processor.record import Record, RecordMetadata
from streamstate.serde import (
    BytesDeserializer,
    LongDeserializer,
    Serde,
    Serdes,
    StringDeserializer,
    StringSerializer,
)
from streamstate.state.stores import InMemoryKeyValueStore, process_next
from streamstate.testing import TopologyTestDriver

STRING = Serdes.String()
LONG = Serdes.Long()
TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
READ_LONG = LongDeserializer()
RAW = BytesDeserializer()
LONG_MAX = 2**63 - 1

KVT = tuple[Any, Any, int]


class Drain:
    """Reads output topics of ``driver`` as Kafka's test drains them: each call returns what
    the topology wrote to the topic since the last call, as (key, value, timestamp)."""

    def __init__(self, driver: TopologyTestDriver) -> None:
        self.driver = driver
        self.topics: dict[str, Any] = {}

    def __call__(self, topic: str) -> list[KVT]:
        out = self.topics.get(topic)
        if out is None:
            out = self.topics[topic] = self.driver.create_output_topic(topic, READ_TEXT, READ_LONG)
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def value_counts(builder: StreamsBuilder, count: Materialized | None = None) -> Any:
    """Kafka's scenario table: ``input`` (no cache, no changelog) regrouped by value and
    counted (``count``: how the count is materialized)."""
    table = builder.table(
        "input",
        key_serde=STRING,
        value_serde=STRING,
        materialized=Materialized(
            key_serde=STRING, value_serde=STRING, caching=False, logged=False
        ),
    )
    grouped = table.group_by(lambda k, v: (v, k), key_serde=STRING, value_serde=STRING)
    return grouped.count(materialized=count)


def suppressed_and_raw(suppressed: Suppressed, count: Materialized | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    counts = value_counts(builder, count)
    counts.suppress(suppressed).to_stream().to(
        "output-suppressed", key_serde=STRING, value_serde=LONG
    )
    counts.to_stream().to("output-raw", key_serde=STRING, value_serde=LONG)
    return builder


THREE_UPDATES_RAW = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]


def pipe_three_updates(driver: TopologyTestDriver) -> Any:
    source = driver.create_input_topic("input", TEXT, TEXT)
    source.pipe_input("k1", "v1", 0)
    source.pipe_input("k1", "v2", 1)
    source.pipe_input("k2", "v1", 2)
    return source


# -- SuppressScenarioTest: time limits and buffer limits ------------------------------------


def test_should_immediately_emit_events_with_zero_emit_after() -> None:
    builder = suppressed_and_raw(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = pipe_three_updates(driver)
        assert drain("output-raw") == THREE_UPDATES_RAW
        assert drain("output-suppressed") == THREE_UPDATES_RAW
        source.pipe_input("x", "x", 3)
        assert drain("output-raw") == [("x", 1, 3)]
        assert drain("output-suppressed") == [("x", 1, 3)]
        source.pipe_input("x", "y", 4)
        assert drain("output-raw") == [("x", 0, 4), ("y", 1, 4)]
        assert drain("output-suppressed") == [("x", 0, 4), ("y", 1, 4)]


def test_should_suppress_intermediate_events_with_time_limit() -> None:
    builder = suppressed_and_raw(Suppressed.until_time_limit(2, BufferConfig.unbounded()))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = pipe_three_updates(driver)
        assert drain("output-raw") == THREE_UPDATES_RAW
        assert drain("output-suppressed") == [("v1", 1, 2)]
        # a dummy "tick" record just to advance stream time
        source.pipe_input("tick", "tick", 3)
        assert drain("output-raw") == [("tick", 1, 3)]
        # the stream time is now 3, so it's time to emit this record
        assert drain("output-suppressed") == [("v2", 1, 1)]
        source.pipe_input("tick", "tock", 4)
        assert drain("output-raw") == [("tick", 0, 4), ("tock", 1, 4)]
        # tick is still buffered, since it was first inserted at time 3, and it is only time 4
        assert drain("output-suppressed") == []


def test_should_suppress_intermediate_events_with_record_limit() -> None:
    suppressed = Suppressed.until_time_limit(
        LONG_MAX, BufferConfig.max_records(1).emit_early_when_full()
    )
    with TopologyTestDriver(
        suppressed_and_raw(suppressed, Materialized.with_(STRING, LONG)).build()
    ) as driver:
        drain = Drain(driver)
        source = pipe_three_updates(driver)
        assert drain("output-raw") == THREE_UPDATES_RAW
        # consecutive updates to v1 get suppressed into only the latter; the last update
        # won't be evicted until another key comes along
        assert drain("output-suppressed") == [("v1", 0, 1), ("v2", 1, 1)]
        source.pipe_input("x", "x", 3)
        assert drain("output-raw") == [("x", 1, 3)]
        # now we see that last update to v1, but not the update to x until it gets evicted
        assert drain("output-suppressed") == [("v1", 1, 2)]


def test_should_suppress_intermediate_events_with_bytes_limit() -> None:
    # Kafka: "the entries are a little over 100 bytes in size". They are here too: the size is
    # Kafka's estimate (buffer time, key, timestamp, offset, partition and the name of the
    # topic the count read, the 72-character repartition topic: 102 bytes; plus 8 bytes per
    # value kept, 1 to 3 of them): two entries never fit in 200 bytes, one always does.
    suppressed = Suppressed.until_time_limit(
        LONG_MAX, BufferConfig.max_bytes(200).emit_early_when_full()
    )
    with TopologyTestDriver(suppressed_and_raw(suppressed).build()) as driver:
        drain = Drain(driver)
        source = pipe_three_updates(driver)
        assert drain("output-raw") == THREE_UPDATES_RAW
        assert drain("output-suppressed") == [("v1", 0, 1), ("v2", 1, 1)]
        source.pipe_input("x", "x", 3)
        assert drain("output-raw") == [("x", 1, 3)]
        assert drain("output-suppressed") == [("v1", 1, 2)]


# -- SuppressScenarioTest: final results of windows ----------------------------------------


def windowed_counts(windows: Any) -> StreamsBuilder:
    """Kafka's windowed scenario: counts per key and window (store "counts", no cache),
    suppressed until each window closes; both outputs keyed by ``str(Windowed)``."""
    builder = StreamsBuilder()
    counts = (
        builder.stream("input", key_serde=STRING, value_serde=STRING)
        .group_by(lambda k, _v: k, key_serde=STRING, value_serde=STRING)
        .windowed_by(windows)
        .count(materialized=Materialized("counts", key_serde=STRING, caching=False))
    )
    (
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(lambda k, v: (str(k), v))
        .to("output-suppressed", key_serde=STRING, value_serde=LONG)
    )
    (
        counts.to_stream()
        .map(lambda k, v: (str(k), v))
        .to("output-raw", key_serde=STRING, value_serde=LONG)
    )
    return builder


def pipe_k1(driver: TopologyTestDriver, *timestamps: int) -> None:
    source = driver.create_input_topic("input", TEXT, TEXT)
    for timestamp in timestamps:
        source.pipe_input("k1", "v1", timestamp)


def test_should_support_final_results_for_time_windows() -> None:
    builder = windowed_counts(TimeWindows.of_size_and_grace(2, 1))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        # the last record gets dropped because it is out of the grace period
        pipe_k1(driver, 0, 1, 2, 1, 0, 5, 0)
        assert drain("output-raw") == [
            ("[k1@0/2]", 1, 0),
            ("[k1@0/2]", 2, 1),
            ("[k1@2/4]", 1, 2),
            ("[k1@0/2]", 3, 1),
            ("[k1@0/2]", 4, 1),
            ("[k1@4/6]", 1, 5),
        ]
        assert drain("output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_should_support_final_results_for_time_windows_with_large_jump() -> None:
    builder = windowed_counts(TimeWindows.of_size_and_grace(2, 2))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        # the second-to-last 0 is dropped: 4 advanced stream time and closed its window
        pipe_k1(driver, 0, 1, 2, 0, 3, 0, 4, 0, 30)
        assert drain("output-raw") == [
            ("[k1@0/2]", 1, 0),
            ("[k1@0/2]", 2, 1),
            ("[k1@2/4]", 1, 2),
            ("[k1@0/2]", 3, 1),
            ("[k1@2/4]", 2, 3),
            ("[k1@0/2]", 4, 1),
            ("[k1@4/6]", 1, 4),
            ("[k1@30/32]", 1, 30),
        ]
        assert drain("output-suppressed") == [
            ("[k1@0/2]", 4, 1),
            ("[k1@2/4]", 2, 3),
            ("[k1@4/6]", 1, 4),
        ]


def test_should_support_final_results_for_sliding_windows() -> None:
    builder = windowed_counts(SlidingWindows.of_time_difference_and_grace(5, 15))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        # 5 is dropped (24 advanced stream time and closed its window); 90 flushes the rest
        pipe_k1(driver, 10, 11, 10, 13, 10, 24, 5, 7, 90)
        raw = sorted(drain("output-raw"), key=lambda r: (r[0], r[2]))
        assert raw == [
            ("[k1@11/16]", 1, 11),
            ("[k1@11/16]", 2, 13),
            ("[k1@12/17]", 1, 13),
            ("[k1@19/24]", 1, 24),
            ("[k1@5/10]", 1, 10),
            ("[k1@5/10]", 2, 10),
            ("[k1@5/10]", 3, 10),
            ("[k1@5/10]", 4, 10),
            ("[k1@5/10]", 5, 10),
            ("[k1@6/11]", 2, 11),
            ("[k1@6/11]", 3, 11),
            ("[k1@6/11]", 4, 11),
            ("[k1@6/11]", 5, 11),
            ("[k1@8/13]", 4, 13),
            ("[k1@8/13]", 5, 13),
            ("[k1@85/90]", 1, 90),
        ]
        assert drain("output-suppressed") == [
            ("[k1@5/10]", 5, 10),
            ("[k1@6/11]", 5, 11),
            ("[k1@8/13]", 5, 13),
            ("[k1@11/16]", 2, 13),
            ("[k1@12/17]", 1, 13),
            ("[k1@19/24]", 1, 24),
        ]


def test_should_support_final_results_for_session_windows() -> None:
    builder = windowed_counts(SessionWindows.of_inactivity_gap_with_no_grace(5))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = driver.create_input_topic("input", TEXT, TEXT)
        # first window
        source.pipe_input("k1", "v1", 0)
        source.pipe_input("k1", "v1", 5)
        # arbitrarily disordered records are admitted: the window is not closed until
        # stream time > window end + grace
        source.pipe_input("k1", "v1", 1)
        # any record in the same partition advances stream time (note the key is different)
        source.pipe_input("k2", "v1", 11)
        # late event for the first window: dropped from all streams (the window is closed)
        source.pipe_input("k1", "v1", 5)
        # just pushing stream time forward to flush the other events through
        source.pipe_input("k1", "v1", 30)
        assert drain("output-raw") == [
            ("[k1@0/0]", 1, 0),
            ("[k1@0/0]", None, 0),
            ("[k1@0/5]", 2, 5),
            ("[k1@0/5]", None, 5),
            ("[k1@0/5]", 3, 5),
            ("[k2@11/11]", 1, 11),
            ("[k1@30/30]", 1, 30),
        ]
        assert drain("output-suppressed") == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def test_should_work_before_group_by() -> None:
    builder = StreamsBuilder()
    (
        builder.table("topic", key_serde=STRING, value_serde=STRING)
        .suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
        .group_by(lambda k, v: (k, v), key_serde=STRING, value_serde=STRING)
        .count()
        .to_stream()
        .to("output", key_serde=STRING, value_serde=LONG)
    )
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = driver.create_input_topic("topic", TEXT, TEXT)
        source.pipe_input("A", "a", 0)
        source.pipe_input("tick", "tick", 10)
        assert drain("output") == [("A", 1, 0)]


# -- KTableSuppressProcessorTest: the processor alone ---------------------------------------


class FakeContext:
    """What the processor uses of its context: a store, the record's metadata, ``forward``."""

    def __init__(self, store: Any) -> None:
        self.node_name = "testNode"
        self.store = store
        self.record_metadata: RecordMetadata | None = RecordMetadata("", 0, 0)
        self.forwarded: list[Record] = []

    def get_state_store(self, name: str) -> Any:
        assert name == "test-store"
        return self.store

    def forward(self, record: Record) -> None:
        self.forwarded.append(record)


class Harness(NamedTuple):
    processor: KTableSuppressProcessor
    context: FakeContext
    buffer: Callable[[], TimeOrderedChangeBuffer]


def harness(
    suppressed: Suppressed,
    key_serde: Serde,
    *,
    grace: int = 0,
    store: Any = None,
) -> Harness:
    """The suppression processor over an in-memory buffer store (``grace``: the close delay
    of a final-results suppression, which the DSL reads from the windowed aggregation)."""
    store = InMemoryKeyValueStore("test-store") if store is None else store

    def opener(inner: Any) -> TimeOrderedChangeBuffer:
        return TimeOrderedChangeBuffer(inner, "test-store", key_serde, LONG)

    wait = grace if suppressed.final_results else suppressed.time_to_wait_ms
    processor = KTableSuppressProcessor("test-store", opener, suppressed, wait)
    context = FakeContext(store)
    processor.init(context)  # type: ignore[arg-type]
    return Harness(processor, context, lambda: processor.buffer)


def time_windowed(size: int) -> Serde:
    return Serde(
        TimeWindowedSerializer(STRING.serializer),
        TimeWindowedDeserializer(STRING.deserializer, size),
    )


SESSION_WINDOWED = Serde(
    SessionWindowedSerializer(STRING.serializer), SessionWindowedDeserializer(STRING.deserializer)
)
ARBITRARY_CHANGE = Change(7, 14)
FINAL = Suppressed.until_window_closes(BufferConfig.unbounded())


def windowed(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, Window(start, end))


def test_zero_time_limit_should_immediately_emit() -> None:
    h = harness(Suppressed.until_time_limit(0, BufferConfig.unbounded()), STRING)
    h.processor.process(Record("hey", ARBITRARY_CHANGE, 5))
    assert h.context.forwarded == [Record("hey", ARBITRARY_CHANGE, 5)]


def test_windowed_zero_time_limit_should_immediately_emit() -> None:
    h = harness(Suppressed.until_time_limit(0, BufferConfig.unbounded()), time_windowed(100))
    key = windowed("hey", 0, 100)
    h.processor.process(Record(key, ARBITRARY_CHANGE, 5))
    assert h.context.forwarded == [Record(key, ARBITRARY_CHANGE, 5)]


def test_intermediate_suppression_should_buffer_and_emit_later() -> None:
    h = harness(Suppressed.until_time_limit(1, BufferConfig.unbounded()), STRING)
    h.context.record_metadata = RecordMetadata("topic", 0, 0)
    h.processor.process(Record("hey", Change(None, 1), 0))
    assert h.context.forwarded == []
    h.context.record_metadata = RecordMetadata("topic", 0, 1)
    h.processor.process(Record("tick", Change(None, None), 1))
    assert h.context.forwarded == [Record("hey", Change(None, 1), 0)]


def test_final_results_suppression_should_buffer_and_emit_at_grace_expiration() -> None:
    h = harness(FINAL, time_windowed(1), grace=1)
    key = windowed("hey", 99, 100)
    h.processor.process(Record(key, ARBITRARY_CHANGE, 99))
    assert h.context.forwarded == []
    # stream time is now 100, but "hey" waits 1 ms after its window's end
    h.processor.process(Record(windowed("dummyKey1", 100, 101), ARBITRARY_CHANGE, 100))
    assert h.context.forwarded == []
    h.processor.process(Record(windowed("dummyKey2", 101, 102), ARBITRARY_CHANGE, 101))
    assert h.context.forwarded == [Record(key, ARBITRARY_CHANGE, 99)]


def test_final_results_with_zero_grace_should_still_buffer_until_the_window_end() -> None:
    h = harness(FINAL, time_windowed(100))
    # the record is in the past, but its window ends in the future: buffered
    key = windowed("hey", 0, 100)
    h.processor.process(Record(key, ARBITRARY_CHANGE, 5))
    assert h.context.forwarded == []
    h.processor.process(Record(windowed("dummyKey", 100, 200), ARBITRARY_CHANGE, 100))
    assert h.context.forwarded == [Record(key, ARBITRARY_CHANGE, 5)]


def test_final_results_with_zero_grace_at_window_end_should_immediately_emit() -> None:
    h = harness(FINAL, time_windowed(100))
    key = windowed("hey", 0, 100)
    h.processor.process(Record(key, ARBITRARY_CHANGE, 100))
    assert h.context.forwarded == [Record(key, ARBITRARY_CHANGE, 100)]


@pytest.mark.parametrize(
    ("key_serde", "key"),
    [(time_windowed(100), windowed("hey", 0, 100)), (SESSION_WINDOWED, windowed("hey", 0, 0))],
    ids=["time-windows", "session-windows"],
)
def test_final_results_should_drop_tombstones(key_serde: Serde, key: Windowed[str]) -> None:
    h = harness(FINAL, key_serde)
    h.processor.process(Record(key, Change(None, 5), 100))
    assert h.context.forwarded == []
    assert h.buffer().num_records == 0  # evicted, not forwarded


@pytest.mark.parametrize(
    ("key_serde", "key"),
    [
        (time_windowed(100), windowed("hey", 0, 100)),
        (SESSION_WINDOWED, windowed("hey", 0, 0)),
        (STRING, "hey"),
    ],
    ids=["time-windows", "session-windows", "ktable"],
)
def test_suppress_should_not_drop_tombstones(key_serde: Serde, key: Any) -> None:
    h = harness(Suppressed.until_time_limit(0, BufferConfig.max_records(0)), key_serde)
    headers = (("k", b"v"),)
    h.processor.process(Record(key, Change(None, 5), 100, headers))
    assert h.context.forwarded == [Record(key, Change(None, 5), 100, headers)]


HUNDRED_DAYS = datetime.timedelta(days=100)


@pytest.mark.parametrize(
    "config", [BufferConfig.max_records(1), BufferConfig.max_bytes(60)], ids=["records", "bytes"]
)
def test_suppress_should_emit_when_over_capacity(config: BufferConfig) -> None:
    # bytes: "hey" is 39 bytes by Kafka's estimate, "dummyKey" 44: together over 60
    h = harness(Suppressed.until_time_limit(HUNDRED_DAYS, config), STRING)
    h.processor.process(Record("hey", Change(None, 5), 100))
    h.context.record_metadata = RecordMetadata("", 0, 1)
    h.processor.process(Record("dummyKey", Change(None, 5), 101))
    assert h.context.forwarded == [Record("hey", Change(None, 5), 100)]
    assert (h.buffer().num_records, h.buffer().buffer_size) == (1, 44)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (BufferConfig.max_records(1), f"Currently [2/1] records and [85/{UNBOUNDED}] bytes."),
        (BufferConfig.max_bytes(60), f"Currently [2/{UNBOUNDED}] records and [85/60] bytes."),
    ],
    ids=["records", "bytes"],
)
def test_suppress_should_shut_down_when_over_capacity(config: BufferConfig, message: str) -> None:
    h = harness(Suppressed.until_time_limit(HUNDRED_DAYS, config.shutdown_when_full()), STRING)
    h.processor.process(Record("hey", Change(None, 5), 100))
    # 39 + 44 bytes as above, and 2 for the name of the topic the second record came from
    h.context.record_metadata = RecordMetadata("in", 3, 1)
    with pytest.raises(SuppressionBufferFullError) as caught:
        h.processor.process(Record("dummyKey", Change(None, 5), 100))
    error = caught.value
    assert isinstance(error, StreamsError)
    assert str(error).startswith("testNode buffer exceeded its max capacity. " + message)
    assert (error.topic, error.partition, error.offset, error.store_name) == (
        "in",
        3,
        1,
        "test-store",
    )


# -- the buffer: order, prior values, restoration -----------------------------------------


def test_a_buffered_key_keeps_its_place_and_forwards_its_last_change() -> None:
    # Kafka's non-resetting put: "a" stays first though updated last; the change forwarded is
    # the last one buffered (its old value too), the prior value is the first one's old value.
    h = harness(Suppressed.until_time_limit(10, BufferConfig.unbounded()), STRING)
    h.processor.process(Record("a", Change(1, 0), 0))
    h.processor.process(Record("b", Change(5, None), 1))
    h.processor.process(Record("a", Change(2, 1), 2, (("h", b"x"),)))
    buffer = h.buffer()
    assert buffer.prior_value_for_buffered("a") == (True, 0)
    assert buffer.prior_value_for_buffered("b") == (True, None)
    assert buffer.prior_value_for_buffered("c") == (False, None)
    assert sorted(buffer.all()) == [("a", Change(2, 1)), ("b", Change(5, None))]
    h.processor.process(Record("tick", Change(0, None), 11))
    assert h.context.forwarded == [
        Record("a", Change(2, 1), 2, (("h", b"x"),)),
        Record("b", Change(5, None), 1),
    ]
    assert buffer.num_records == 1


def test_ties_in_buffer_time_leave_in_serialized_key_order() -> None:
    h = harness(Suppressed.until_time_limit(1, BufferConfig.unbounded()), STRING)
    for key in ("c", "a", "b"):
        h.processor.process(Record(key, Change(1, None), 0))
    h.processor.process(Record("tick", Change(1, None), 1))
    assert [r.key for r in h.context.forwarded] == ["a", "b", "c"]


def test_a_full_buffer_that_shuts_down_stops_the_application() -> None:
    suppressed = Suppressed.until_time_limit(
        LONG_MAX, BufferConfig.max_records(1).shutdown_when_full()
    )
    with TopologyTestDriver(suppressed_and_raw(suppressed).build()) as driver:
        with pytest.raises(SuppressionBufferFullError, match=r"Currently \[2/1\] records") as e:
            pipe_three_updates(driver)
        assert e.value.store_name == "KTABLE-SUPPRESS-STATE-STORE-0000000009"
        assert str(e.value).startswith("KTABLE-SUPPRESS-0000000008 buffer exceeded")


class ChangelogRecord(NamedTuple):
    offset: int
    key: bytes
    value: bytes | None


def test_the_buffer_is_restored_from_its_changelog() -> None:
    # The changelog the driver's task wrote for the buffer, replayed into a fresh store with
    # the restoration step (process_next): a new processor over it forwards what was buffered,
    # with the timestamps and headers of the buffered records. (The count has no record cache:
    # streamstate's cache does not keep headers.)
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    builder = suppressed_and_raw(suppressed, Materialized(caching=False))
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = driver.create_input_topic("input", TEXT, TEXT)
        source.pipe_input("k1", "v1", 0)
        source.pipe_input("k1", "v2", 1, headers=[("h", b"1")])
        source.pipe_input("k3", "v3", 10)  # evicts v1 (buffered at 0), keeps v2 and v3
        assert drain("output-suppressed") == [("v1", 0, 1)]
        changelog = driver.create_output_topic(
            "topology-test-driver-KTABLE-SUPPRESS-STATE-STORE-0000000009-changelog", RAW, RAW
        ).read_records_to_list()
    # One write per buffered update (stamped with the update's timestamp), then a tombstone
    # for the eviction.
    assert [(r.key, r.value is None) for r in changelog] == [
        (b"v1", False),
        (b"v1", False),
        (b"v2", False),
        (b"v3", False),
        (b"v1", True),
    ]
    assert [r.timestamp for r in changelog[:4]] == [0, 1, 1, 10]
    store = InMemoryKeyValueStore("test-store")
    replay = [ChangelogRecord(i, r.key, r.value) for i, r in enumerate(changelog)]
    process_next(store, replay, len(replay))
    h = harness(suppressed, STRING, store=store)
    assert (h.buffer().num_records, h.buffer().min_timestamp) == (2, 1)
    assert h.buffer().prior_value_for_buffered("v2") == (True, None)
    h.processor.process(Record("tick", Change(1, None), 22))
    assert h.context.forwarded == [
        Record("v2", Change(1, None), 1, (("h", b"1"),)),
        Record("v3", Change(1, None), 10),
    ]


def test_a_buffer_without_logging_has_no_changelog() -> None:
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded().with_logging_disabled())
    with TopologyTestDriver(suppressed_and_raw(suppressed).build()) as driver:
        pipe_three_updates(driver)
        assert not any("SUPPRESS" in topic for topic in driver.producer_topic_names())


# -- naming and checks --------------------------------------------------------------------


def test_names_are_kafkas() -> None:
    builder = suppressed_and_raw(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    text = str(builder.build().describe())
    assert (
        "Processor: KTABLE-SUPPRESS-0000000008 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000009])"
        in text
    )


def test_a_named_suppression_names_its_processor_and_store() -> None:
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded()).with_name("hold")
    builder = suppressed_and_raw(suppressed)
    text = str(builder.build().describe())
    assert "Processor: hold (stores: [hold-store])" in text
    # the names count no generated index: the next node is number 8
    assert "KTABLE-TOSTREAM-0000000008" in text


def test_suppressing_a_suppressed_windowed_table_finds_the_same_close_time() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("input", key_serde=STRING, value_serde=STRING)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 1))
        .count()
        .suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
        .suppress(FINAL)
        .to_stream()
        .map(lambda k, v: (str(k), v))
        .to("out", key_serde=STRING, value_serde=LONG)
    )
    with TopologyTestDriver(builder.build()) as driver:
        drain = Drain(driver)
        source = driver.create_input_topic("input", TEXT, TEXT)
        source.pipe_input("a", "x", 0)
        source.pipe_input("b", "x", 6)  # the session of a closes at 0 + 5 + 1
        assert drain("out") == [("[a@0/0]", 1, 0)]


def test_until_window_closes_needs_a_windowed_table() -> None:
    builder = StreamsBuilder()
    table = builder.table("input", key_serde=STRING, value_serde=STRING)
    with pytest.raises(TopologyError, match="only defined for windowed computations"):
        table.suppress(FINAL)


def test_until_window_closes_needs_a_buffer_that_never_emits_early() -> None:
    with pytest.raises(TopologyError, match="never emits early"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))
    limited = BufferConfig.max_records(3).shutdown_when_full()
    assert Suppressed.until_window_closes(limited).buffer == BufferConfig(3, UNBOUNDED, False)


def test_a_versioned_table_cannot_be_suppressed() -> None:
    builder = StreamsBuilder()
    table = builder.table(
        "input",
        key_serde=STRING,
        value_serde=STRING,
        materialized=Materialized("versioned", versioned_retention=1000),
    )
    with pytest.raises(TopologyError, match="non-versioned"):
        table.suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded()))


def test_buffer_configs_are_kafkas() -> None:
    assert BufferConfig.unbounded() == BufferConfig(UNBOUNDED, UNBOUNDED, False, True)
    assert BufferConfig.max_records(5) == BufferConfig(5, UNBOUNDED, True)
    assert BufferConfig.max_bytes(7).with_max_records(5) == BufferConfig(5, 7, True)
    assert BufferConfig.max_bytes(7).with_no_bound() == BufferConfig.unbounded()
    assert BufferConfig.max_bytes(7).shutdown_when_full().emit_early is False
    wait = Suppressed.until_time_limit(datetime.timedelta(seconds=2), BufferConfig.unbounded())
    assert wait.time_to_wait_ms == 2000
    with pytest.raises(TopologyError):
        BufferConfig.max_records(-1)
    with pytest.raises(TopologyError):
        Suppressed.until_time_limit(-1, BufferConfig.unbounded())
    with pytest.raises(TopologyError):
        Suppressed.until_time_limit(1, None)  # type: ignore[arg-type]
    with pytest.raises(TopologyError):
        Suppressed.until_time_limit(1, BufferConfig.unbounded()).with_name("a/b")
