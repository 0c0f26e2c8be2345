"""Windowed DSL aggregations on the ``TopologyTestDriver``: ports of Kafka's
``KStreamWindowAggregateTest``, ``KStreamSessionWindowAggregateProcessorTest``, the windowed
cases of ``KGroupedStreamImplTest``, and ``TimeWindowsTest`` / ``SessionWindowsTest``.

Expected outputs are the ones Kafka's tests assert (keys, values, timestamps, order, store
contents, dropped-record counts). Where a Kafka test drives a processor directly with a mock
context, the scenario is piped through a driver instead; the comments say how the expected
output follows from what the Java test asserts. streamstate has no emit-interval wall-clock
throttle (``__emit.interval.ms.kstreams.windowed.aggregation``): ``EmitStrategy.on_window_close``
emits as soon as stream time closes a window, as Kafka does with the interval at 0, so the Java
tests that exercise the throttle itself (``shouldEmitWithLargeInterval``) are not ported, nor
those that restart a processor over the same store (``shouldEmitFromLastEmitTime``: the driver
wipes its state on close, as Kafka's does).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.dsl_support import capture, dropped

from streamstate import TopologyError
from streamstate.dsl import (
    EmitStrategy,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    Window,
    Windowed,
)
from streamstate.serde import Serdes, StringDeserializer, StringSerializer
from streamstate.testing import TestRecord, TopologyTestDriver

CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
LOGGER = "streamstate.dsl.window_processors"

EMIT_STRATEGIES = [
    pytest.param(EmitStrategy.on_window_update(), id="on_window_update"),
    pytest.param(EmitStrategy.on_window_close(), id="on_window_close"),
]
# Kafka's getEmitStrategy(): each strategy with and without caching.
STRATEGY_AND_CACHE = [
    pytest.param(EmitStrategy.on_window_update(), True, id="update-cached"),
    pytest.param(EmitStrategy.on_window_update(), False, id="update-uncached"),
    pytest.param(EmitStrategy.on_window_close(), True, id="close-cached"),
    pytest.param(EmitStrategy.on_window_close(), False, id="close-uncached"),
]


def take(out: list[Any]) -> list[Any]:
    """Kafka's ``checkAndClearProcessResult``: the captured records, then cleared."""
    taken = list(out)
    out.clear()
    return taken


def tw(key: str, start: int, end: int) -> Windowed[str]:
    """Kafka's ``new Windowed<>(key, new TimeWindow(start, end))``."""
    return Windowed(key, Window(start, end))


def sw(key: str, start: int, end: int) -> Windowed[str]:
    """Kafka's ``new Windowed<>(key, new SessionWindow(start, end))``."""
    return Windowed(key, Window(start, end))


def string_init() -> str:
    """Kafka's ``MockInitializer.STRING_INIT``."""
    return "0"


def tostring_adder(_key: Any, value: Any, aggregate: str) -> str:
    """Kafka's ``MockAggregator.TOSTRING_ADDER`` (``toStringInstance("+")``)."""
    return f"{aggregate}+{value}"


# -- KStreamWindowAggregateTest ----------------------------------------------------------------


@pytest.mark.parametrize(("emit", "caching"), STRATEGY_AND_CACHE)
def test_kstream_window_aggregate_agg_basic(emit: EmitStrategy, caching: bool) -> None:
    builder = StreamsBuilder()
    table = (
        builder.stream("topic1", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())
        .windowed_by(TimeWindows.of_size_and_grace(10, 100).advance_by(5))
        .emit_strategy(emit)
        .aggregate(
            string_init,
            tostring_adder,
            materialized=Materialized(
                "topic1-Canonized", value_serde=Serdes.String(), caching=caching
            ),
        )
    )
    out = capture(table.to_stream())
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic1 = driver.create_input_topic("topic1", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
            ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
            ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
            ("B", "1", 3), ("B", "2", 2), ("B", "3", 9),
        ]:  # fmt: skip
            topic1.pipe_input(key, value, timestamp)
    if emit.on_close:
        assert out == []  # nothing closes: the grace is 100
        return
    assert out == [
        (tw("A", 0, 10), "0+1", 0),
        (tw("B", 0, 10), "0+2", 1),
        (tw("C", 0, 10), "0+3", 2),
        (tw("D", 0, 10), "0+4", 3),
        (tw("A", 0, 10), "0+1+1", 4),
        (tw("A", 0, 10), "0+1+1+1", 5),
        (tw("A", 5, 15), "0+1", 5),
        (tw("B", 0, 10), "0+2+2", 6),
        (tw("B", 5, 15), "0+2", 6),
        (tw("D", 0, 10), "0+4+4", 7),
        (tw("D", 5, 15), "0+4", 7),
        (tw("B", 0, 10), "0+2+2+2", 8),
        (tw("B", 5, 15), "0+2+2", 8),
        (tw("C", 0, 10), "0+3+3", 9),
        (tw("C", 5, 15), "0+3", 9),
        (tw("A", 5, 15), "0+1+1", 10),
        (tw("A", 10, 20), "0+1", 10),
        (tw("B", 5, 15), "0+2+2+2", 11),
        (tw("B", 10, 20), "0+2", 11),
        (tw("D", 5, 15), "0+4+4", 12),
        (tw("D", 10, 20), "0+4", 12),
        (tw("B", 5, 15), "0+2+2+2+2", 13),
        (tw("B", 10, 20), "0+2+2", 13),
        (tw("C", 5, 15), "0+3+3", 14),
        (tw("C", 10, 20), "0+3", 14),
        (tw("B", 0, 10), "0+2+2+2+1", 8),
        (tw("B", 0, 10), "0+2+2+2+1+2", 8),
        (tw("B", 0, 10), "0+2+2+2+1+2+3", 9),
        (tw("B", 5, 15), "0+2+2+2+2+3", 13),
    ]


def _two_windowed_tables(
    emit: EmitStrategy, caching: bool, grace: int
) -> tuple[StreamsBuilder, list[Any], list[Any]]:
    builder = StreamsBuilder()
    outs = []
    for topic in ("topic1", "topic2"):
        table = (
            builder.stream(topic, key_serde=Serdes.String(), value_serde=Serdes.String())
            .group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())
            .windowed_by(TimeWindows.of_size_and_grace(10, grace).advance_by(5))
            .emit_strategy(emit)
            .aggregate(
                string_init,
                tostring_adder,
                materialized=Materialized(
                    f"{topic}-Canonized", value_serde=Serdes.String(), caching=caching
                ),
            )
        )
        outs.append(capture(table.to_stream()))
    return builder, outs[0], outs[1]


@pytest.mark.parametrize("caching", [True, False])
def test_kstream_window_aggregate_join_emit_update(caching: bool) -> None:
    """``testJoin`` (``processEmitUpdateJoin``) without its KTable-KTable join, which the DSL
    does not have yet: the two windowed aggregations' outputs (``processors.get(0)`` and
    ``get(1)``) as Kafka asserts them."""
    builder, out1, out2 = _two_windowed_tables(EmitStrategy.on_window_update(), caching, 100)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic1 = driver.create_input_topic("topic1", TEXT, TEXT)
        topic2 = driver.create_input_topic("topic2", TEXT, TEXT)
        for key, value, timestamp in [("A", "1", 0), ("B", "2", 1), ("C", "3", 2)]:
            topic1.pipe_input(key, value, timestamp)
        topic1.pipe_input("D", "4", 3)
        topic1.pipe_input("A", "1", 9)
        assert take(out1) == [
            (tw("A", 0, 10), "0+1", 0),
            (tw("B", 0, 10), "0+2", 1),
            (tw("C", 0, 10), "0+3", 2),
            (tw("D", 0, 10), "0+4", 3),
            (tw("A", 0, 10), "0+1+1", 9),
            (tw("A", 5, 15), "0+1", 9),
        ]
        assert take(out2) == []
        for key, value, timestamp in [
            ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
        ]:  # fmt: skip
            topic1.pipe_input(key, value, timestamp)
        assert take(out1) == [
            (tw("A", 0, 10), "0+1+1+1", 9),
            (tw("A", 5, 15), "0+1+1", 9),
            (tw("B", 0, 10), "0+2+2", 6),
            (tw("B", 5, 15), "0+2", 6),
            (tw("D", 0, 10), "0+4+4", 7),
            (tw("D", 5, 15), "0+4", 7),
            (tw("B", 0, 10), "0+2+2+2", 8),
            (tw("B", 5, 15), "0+2+2", 8),
            (tw("C", 0, 10), "0+3+3", 9),
            (tw("C", 5, 15), "0+3", 9),
        ]
        assert take(out2) == []
        for key, value, timestamp in [
            ("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 20), ("A", "a", 20),
        ]:  # fmt: skip
            topic2.pipe_input(key, value, timestamp)
        assert take(out1) == []
        assert take(out2) == [
            (tw("A", 0, 10), "0+a", 0),
            (tw("B", 0, 10), "0+b", 1),
            (tw("C", 0, 10), "0+c", 2),
            (tw("D", 15, 25), "0+d", 20),
            (tw("D", 20, 30), "0+d", 20),
            (tw("A", 15, 25), "0+a", 20),
            (tw("A", 20, 30), "0+a", 20),
        ]
        for key, value, timestamp in [
            ("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21),
        ]:  # fmt: skip
            topic2.pipe_input(key, value, timestamp)
        assert take(out1) == []
        assert take(out2) == [
            (tw("A", 0, 10), "0+a+a", 5),
            (tw("A", 5, 15), "0+a", 5),
            (tw("B", 0, 10), "0+b+b", 6),
            (tw("B", 5, 15), "0+b", 6),
            (tw("D", 0, 10), "0+d", 7),
            (tw("D", 5, 15), "0+d", 7),
            (tw("D", 10, 20), "0+d", 18),
            (tw("D", 15, 25), "0+d+d", 20),
            (tw("A", 15, 25), "0+a+a", 21),
            (tw("A", 20, 30), "0+a+a", 21),
        ]


@pytest.mark.parametrize("caching", [True, False])
def test_kstream_window_aggregate_join_emit_final(caching: bool) -> None:
    """``testJoin`` (``processEmitFinalJoin``, grace 5) without the join. Java checks the
    second table's output after the first batch only with caching (without, it lets it pile
    up and checks it all after the second batch): the totals are the same, checked here per
    batch."""
    builder, out1, out2 = _two_windowed_tables(EmitStrategy.on_window_close(), caching, 5)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic1 = driver.create_input_topic("topic1", TEXT, TEXT)
        topic2 = driver.create_input_topic("topic2", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9),
            ("A", "1", 15),
        ]:  # fmt: skip
            topic1.pipe_input(key, value, timestamp)
        assert take(out1) == [
            (tw("A", 0, 10), "0+1+1", 9),
            (tw("B", 0, 10), "0+2", 1),
            (tw("C", 0, 10), "0+3", 2),
            (tw("D", 0, 10), "0+4", 3),
        ]
        assert take(out2) == []
        for key, value, timestamp in [
            ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
            ("A", "1", 20),
        ]:  # fmt: skip
            topic1.pipe_input(key, value, timestamp)
        assert take(out1) == [
            (tw("A", 5, 15), "0+1+1", 10),
            (tw("B", 5, 15), "0+2+2", 13),
            (tw("C", 5, 15), "0+3", 14),
            (tw("D", 5, 15), "0+4", 12),
        ]
        assert take(out2) == []
        for key, value, timestamp in [
            ("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 10), ("A", "a", 15),
        ]:  # fmt: skip
            topic2.pipe_input(key, value, timestamp)
        assert take(out1) == []
        assert take(out2) == [
            (tw("A", 0, 10), "0+a", 0),
            (tw("B", 0, 10), "0+b", 1),
            (tw("C", 0, 10), "0+c", 2),
        ]
        for key, value, timestamp in [
            ("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21),
        ]:  # fmt: skip
            topic2.pipe_input(key, value, timestamp)
        assert take(out1) == []
        assert take(out2) == [
            (tw("A", 5, 15), "0+a", 5),
            (tw("B", 5, 15), "0+b", 6),
            (tw("D", 5, 15), "0+d+d", 10),
        ]


@pytest.mark.parametrize(("emit", "caching"), STRATEGY_AND_CACHE)
def test_kstream_window_aggregate_should_log_and_meter_when_skipping_null_key(
    emit: EmitStrategy, caching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())
        .windowed_by(TimeWindows.of_size_with_no_grace(10).advance_by(5))
        .emit_strategy(emit)
        .aggregate(
            string_init,
            tostring_adder,
            materialized=Materialized(
                "topic1-Canonicalized", value_serde=Serdes.String(), caching=caching
            ),
        )
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with TopologyTestDriver(builder.build(), CONFIG) as driver:
            driver.create_input_topic("topic", TEXT, TEXT).pipe_input(None, "1")
            assert dropped(driver) == 1
    assert (
        "Skipping record due to null key. topic=[topic] partition=[0] offset=[0]" in caplog.messages
    )


def _skipping_topology(emit: EmitStrategy, caching: bool, windows: TimeWindows, **mat: Any) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())
        .windowed_by(windows)
        .emit_strategy(emit)
        .aggregate(
            lambda: "",
            tostring_adder,
            materialized=Materialized(
                "topic1-Canonicalized",
                value_serde=Serdes.String(),
                logged=False,
                caching=caching,
                **mat,
            ),
        )
        .to_stream()
        .map(lambda key, value: (str(key), value))
        .to("output")
    )
    return builder.build()


@pytest.mark.parametrize(("emit", "caching"), STRATEGY_AND_CACHE)
def test_kstream_window_aggregate_should_log_and_meter_when_skipping_expired_window(
    emit: EmitStrategy, caching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka also checks the lateness metrics (``record-lateness-max/avg``), which
    streamstate does not have; the dropped count and the log lines are checked."""
    windows = TimeWindows.of_size_and_grace(10, 90).advance_by(5)
    topology = _skipping_topology(emit, caching, windows, retention=100)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with TopologyTestDriver(topology, CONFIG) as driver:
            topic = driver.create_input_topic("topic", TEXT, TEXT)
            for key, value, timestamp in [
                ("k", "100", 100), ("k", "0", 0), ("k", "1", 1), ("k", "2", 2), ("k", "3", 3),
                ("k", "4", 4), ("k", "5", 5), ("k", "6", 6), ("k", "105", 105),
                ("k", "106", 106),
            ]:  # fmt: skip
                topic.pipe_input(key, value, timestamp)
            # 0..4 fall only in the closed [0,10); 5 and 6 also in the open [5,15): one drop
            # per closed window a record falls in.
            assert dropped(driver) == 7
            output = driver.create_output_topic("output", READ_TEXT, READ_TEXT)
            if emit.on_close:
                # Window close time is 15 when timestamp is 105
                expected = [TestRecord("[k@5/15]", "+5+6", 6)]
            else:
                expected = [
                    TestRecord("[k@95/105]", "+100", 100),
                    TestRecord("[k@100/110]", "+100", 100),
                    TestRecord("[k@5/15]", "+5", 5),
                    TestRecord("[k@5/15]", "+5+6", 6),
                    TestRecord("[k@100/110]", "+100+105", 105),
                    TestRecord("[k@105/115]", "+105", 105),
                    TestRecord("[k@100/110]", "+100+105+106", 106),
                    TestRecord("[k@105/115]", "+105+106", 106),
                ]
            assert output.read_records_to_list() == expected
            assert output.is_empty()
    for offset in range(1, 8):
        timestamp = offset - 1
        line = (
            f"Skipping record for expired window. topic=[topic] partition=[0] "
            f"offset=[{offset}] timestamp=[{timestamp}] window=[0,10) expiration=[10] "
            f"streamTime=[100]"
        )
        assert line in caplog.messages


@pytest.mark.parametrize(("emit", "caching"), STRATEGY_AND_CACHE)
def test_kstream_window_aggregate_should_log_and_meter_when_skipping_expired_window_by_grace(
    emit: EmitStrategy, caching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    windows = TimeWindows.of_size_and_grace(10, 90).advance_by(10)
    topology = _skipping_topology(emit, caching, windows)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with TopologyTestDriver(topology, CONFIG) as driver:
            topic = driver.create_input_topic("topic", TEXT, TEXT)
            for key, value, timestamp in [
                ("k", "100", 200), ("k", "0", 100), ("k", "1", 101), ("k", "2", 102),
                ("k", "3", 103), ("k", "4", 104), ("k", "5", 105), ("k", "6", 6),
            ]:  # fmt: skip
                topic.pipe_input(key, value, timestamp)
            assert dropped(driver) == 7
            output = driver.create_output_topic("output", READ_TEXT, READ_TEXT)
            if emit.on_close:
                # Kafka does not check the output here. Derived: stream time 200 closes every
                # window ending by 110, and the only windows kept ([200,210)) is still open.
                assert output.read_records_to_list() == []
            else:
                assert output.read_records_to_list() == [TestRecord("[k@200/210]", "+100", 200)]
    expected = [(offset, offset + 99, "[100,110)") for offset in range(1, 7)] + [(7, 6, "[0,10)")]
    for offset, timestamp, window in expected:
        line = (
            f"Skipping record for expired window. topic=[topic] partition=[0] "
            f"offset=[{offset}] timestamp=[{timestamp}] window={window} expiration=[110] "
            f"streamTime=[200]"
        )
        assert line in caplog.messages


def _processor_test_topology(emit: EmitStrategy) -> tuple[Any, list[Any]]:
    """The processor of Kafka's processor-level window tests: size 10, grace 5, advance 5,
    retention one day, caching and logging off (its mock context supports neither)."""
    builder = StreamsBuilder()
    table = (
        builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, 5).advance_by(5))
        .emit_strategy(emit)
        .aggregate(
            string_init,
            tostring_adder,
            materialized=Materialized(
                "dummy-store-name",
                value_serde=Serdes.String(),
                caching=False,
                logged=False,
                retention=86_400_000,
            ),
        )
    )
    return builder.build(), capture(table.to_stream())


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_kstream_window_aggregate_should_not_emit_final_if_not_progress_enough(
    emit: EmitStrategy,
) -> None:
    topology, out = _processor_test_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("A", "1", 0)
        topic.pipe_input("B", "2", 5)
        topic.pipe_input("C", "3", 15)
        if emit.on_close:
            expected = [(tw("A", 0, 10), "0+1", 0), (tw("B", 0, 10), "0+2", 5)]
        else:
            expected = [
                (tw("A", 0, 10), "0+1", 0),
                (tw("B", 0, 10), "0+2", 5),
                (tw("B", 5, 15), "0+2", 5),
                (tw("C", 10, 20), "0+3", 15),
                (tw("C", 15, 25), "0+3", 15),
            ]
        assert take(out) == expected
        topic.pipe_input("D", "4", 15)
        if emit.on_close:
            # None emitted because observedTime doesn't progress
            assert take(out) == []
        else:
            assert take(out) == [(tw("D", 10, 20), "0+4", 15), (tw("D", 15, 25), "0+4", 15)]
        topic.pipe_input("E", "5", 19)
        if emit.on_close:
            # None emitted because observedTime doesn't progress enough to cover new windows
            assert take(out) == []
        else:
            assert take(out) == [(tw("E", 10, 20), "0+5", 19), (tw("E", 15, 25), "0+5", 19)]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_kstream_window_aggregate_should_emit_with_interval0(emit: EmitStrategy) -> None:
    topology, out = _processor_test_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key, value, timestamp in [
            ("A", "1", 0), ("A", "1", 5), ("B", "2", 10), ("C", "3", 15), ("D", "4", 20),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    if emit.on_close:
        expected = [
            (tw("A", 0, 10), "0+1+1", 5),
            (tw("A", 5, 15), "0+1", 5),
            (tw("B", 5, 15), "0+2", 10),
        ]
    else:
        expected = [
            (tw("A", 0, 10), "0+1", 0),
            (tw("A", 0, 10), "0+1+1", 5),
            (tw("A", 5, 15), "0+1", 5),
            (tw("B", 5, 15), "0+2", 10),
            (tw("B", 10, 20), "0+2", 10),
            (tw("C", 10, 20), "0+3", 15),
            (tw("C", 15, 25), "0+3", 15),
            (tw("D", 15, 25), "0+4", 20),
            (tw("D", 20, 30), "0+4", 20),
        ]
    assert out == expected


# -- KGroupedStreamImplTest: windowed ----------------------------------------------------------


def _grouped_stream(builder: StreamsBuilder) -> Any:
    return builder.stream(
        "topic", key_serde=Serdes.String(), value_serde=Serdes.String()
    ).group_by_key(key_serde=Serdes.String(), value_serde=Serdes.String())


def _do_count_windowed(builder: StreamsBuilder, out: list[Any]) -> None:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key, value, timestamp in [
            ("1", "A", 0), ("1", "A", 499), ("1", "A", 100), ("2", "B", 0), ("2", "B", 100),
            ("2", "B", 200), ("3", "C", 1), ("1", "A", 500), ("1", "A", 500), ("2", "B", 500),
            ("2", "B", 500), ("3", "B", 100),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    assert out == [
        (tw("1", 0, 500), 1, 0),
        (tw("1", 0, 500), 2, 499),
        (tw("1", 0, 500), 3, 499),
        (tw("2", 0, 500), 1, 0),
        (tw("2", 0, 500), 2, 100),
        (tw("2", 0, 500), 3, 200),
        (tw("3", 0, 500), 1, 1),
        (tw("1", 500, 1000), 1, 500),
        (tw("1", 500, 1000), 2, 500),
        (tw("2", 500, 1000), 1, 500),
        (tw("2", 500, 1000), 2, 500),
        (tw("3", 0, 500), 2, 100),
    ]


def test_kgrouped_stream_should_count_windowed() -> None:
    builder = StreamsBuilder()
    table = (
        _grouped_stream(builder)
        .windowed_by(TimeWindows.of_size_and_grace(500, 100))
        .count(materialized="aggregate-by-key-windowed")
    )
    out = capture(table.to_stream())
    _do_count_windowed(builder, out)


def test_kgrouped_stream_should_count_windowed_with_internal_store_name() -> None:
    builder = StreamsBuilder()
    table = _grouped_stream(builder).windowed_by(TimeWindows.of_size_and_grace(500, 100)).count()
    out = capture(table.to_stream())
    _do_count_windowed(builder, out)


def _last_value_and_timestamp_per_key(out: list[Any]) -> dict[Any, tuple[Any, int]]:
    """Kafka's ``lastValueAndTimestampPerKey`` (a tombstone removes the key)."""
    last: dict[Any, tuple[Any, int]] = {}
    for key, value, timestamp in out:
        if value is None:
            last.pop(key, None)
        else:
            last[key] = (value, timestamp)
    return last


def _do_session_windows(builder: StreamsBuilder, values: list[str]) -> None:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        keys_and_times = [("1", 10), ("2", 15), ("1", 30), ("1", 70), ("1", 100), ("1", 90)]
        for (key, timestamp), value in zip(keys_and_times, values, strict=True):
            topic.pipe_input(key, value, timestamp)


def _assert_sessions(out: list[Any], first: Any, second: Any, third: Any) -> None:
    result = _last_value_and_timestamp_per_key(out)
    assert result[sw("1", 10, 30)] == (first, 30)
    assert result[sw("2", 15, 15)] == (second, 15)
    assert result[sw("1", 70, 100)] == (third, 100)


@pytest.mark.parametrize("named", [True, False], ids=["store-name", "internal-store-name"])
def test_kgrouped_stream_should_aggregate_session_windows(named: bool) -> None:
    builder = StreamsBuilder()
    materialized = (
        Materialized("session-store", value_serde=Serdes.Integer())
        if named
        else Materialized.with_(None, Serdes.Integer())
    )
    table = (
        _grouped_stream(builder)
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
        .aggregate(
            lambda: 0,
            lambda _key, _value, aggregate: aggregate + 1,
            lambda _key, one, two: one + two,
            materialized=materialized,
        )
    )
    out = capture(table.to_stream())
    _do_session_windows(builder, ["1"] * 6)
    _assert_sessions(out, 2, 1, 3)
    assert table.query_store_name == ("session-store" if named else None)


@pytest.mark.parametrize("named", [True, False], ids=["store-name", "internal-store-name"])
def test_kgrouped_stream_should_count_session_windows(named: bool) -> None:
    builder = StreamsBuilder()
    table = (
        _grouped_stream(builder)
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
        .count(materialized="session-store" if named else None)
    )
    out = capture(table.to_stream())
    _do_session_windows(builder, ["1"] * 6)
    _assert_sessions(out, 2, 1, 3)
    assert table.query_store_name == ("session-store" if named else None)


@pytest.mark.parametrize("named", [True, False], ids=["store-name", "internal-store-name"])
def test_kgrouped_stream_should_reduce_session_windows(named: bool) -> None:
    builder = StreamsBuilder()
    table = (
        _grouped_stream(builder)
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
        .reduce(lambda one, two: f"{one}:{two}", materialized="session-store" if named else None)
    )
    out = capture(table.to_stream())
    _do_session_windows(builder, ["A", "Z", "B", "A", "B", "C"])
    _assert_sessions(out, "A:B", "Z", "A:B:C")
    assert table.query_store_name == ("session-store" if named else None)


# -- KStreamSessionWindowAggregateProcessorTest ------------------------------------------------

GAP_MS = 5 * 60 * 1000
STORE_NAME = "session-store"


def _session_topology(
    emit: EmitStrategy, *, caching: bool = True, windows: SessionWindows | None = None
) -> tuple[Any, list[Any]]:
    """Kafka's processor under test: ``aggregate + 1`` from 0, sessions merged by sum (a
    count), no grace, a store of ``GAP_MS * 3`` retention without logging; caching as the Java
    test's ``setup(type, enableCaching)`` (never for emit-final, as in Kafka)."""
    builder = StreamsBuilder()
    windows = windows or SessionWindows.of_inactivity_gap_with_no_grace(GAP_MS)
    table = (
        builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(emit)
        .aggregate(
            lambda: 0,
            lambda _key, _value, aggregate: aggregate + 1,
            lambda _key, one, two: one + two,
            materialized=Materialized(
                STORE_NAME,
                value_serde=Serdes.Long(),
                logged=False,
                caching=caching and not emit.on_close,
                retention=GAP_MS * 3,
            ),
        )
    )
    return builder.build(), capture(table.to_stream())


def _sessions(driver: TopologyTestDriver, key: str, earliest_end: int, latest_start: int) -> list:
    store = driver.get_session_store(STORE_NAME)
    return list(store.find_sessions(key, earliest_end, latest_start))


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_create_single_session_when_within_gap(
    emit: EmitStrategy,
) -> None:
    topology, _ = _session_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("john", "first", 0)
        topic.pipe_input("john", "second", 500)
        values = _sessions(driver, "john", 0, 2000)
        assert values
        assert values[0][1] == 2


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_merge_sessions(emit: EmitStrategy) -> None:
    topology, _ = _session_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("mel", "first", 0)
        assert _sessions(driver, "mel", 0, 0)
        # move time beyond gap
        topic.pipe_input("mel", "second", GAP_MS + 1)
        assert _sessions(driver, "mel", GAP_MS + 1, GAP_MS + 1)
        # should still exist as not within gap
        assert _sessions(driver, "mel", 0, 0)
        # move time back
        topic.pipe_input("mel", "third", GAP_MS // 2)
        sessions = _sessions(driver, "mel", 0, GAP_MS + 1)
        assert [value for _, value in sessions] == [3]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_update_session_if_the_same_time(
    emit: EmitStrategy,
) -> None:
    topology, _ = _session_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("mel", "first", 0)
        topic.pipe_input("mel", "second", 0)
        assert [value for _, value in _sessions(driver, "mel", 0, 0)] == [2]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_have_multiple_sessions_for_same_id_when_timestamp_apart_by_session_gap(  # noqa: E501
    emit: EmitStrategy,
) -> None:
    """Java runs this with caching and flushes once at the end, so it sees each session's
    last value only; the driver flushes after every record, so this port runs uncached and
    checks every update: the Java list is the last update of each session, in order."""
    topology, out = _session_topology(emit, caching=False)
    now = 0
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("mel", "first", now)
        now += GAP_MS + 1
        topic.pipe_input("mel", "second", now)
        topic.pipe_input("mel", "second", now)
        now += GAP_MS + 1
        for _ in range(3):
            topic.pipe_input("mel", "third", now)
    second = GAP_MS + 1
    if emit.on_close:
        assert out == [(sw("mel", 0, 0), 1, 0), (sw("mel", second, second), 2, second)]
    else:
        assert out == [
            (sw("mel", 0, 0), 1, 0),
            (sw("mel", second, second), 1, second),
            (sw("mel", second, second), 2, second),
            (sw("mel", now, now), 1, now),
            (sw("mel", now, now), 2, now),
            (sw("mel", now, now), 3, now),
        ]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_remove_merged_sessions_from_state_store(
    emit: EmitStrategy,
) -> None:
    topology, _ = _session_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("a", "1", 0)
        # first ensure it is in the store
        assert _sessions(driver, "a", 0, 0)[0] == (sw("a", 0, 0), 1)
        topic.pipe_input("a", "2", 100)
        # a1 from above should have been removed; should have merged session in store
        assert _sessions(driver, "a", 0, 100) == [(sw("a", 0, 100), 2)]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_handle_multiple_sessions_and_merging(
    emit: EmitStrategy,
) -> None:
    """Java asserts, after one flush of a cached store at the end, the last value of each
    session in the order last written (sessions merged away before the flush never reach
    the store, so no tombstone for them). Uncached here (see above): every update and, for
    each session merged away, its tombstone stamped with its end, before the merged one."""
    topology, out = _session_topology(emit, caching=False)
    half, later = GAP_MS // 2, GAP_MS + 1
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key, value, timestamp in [
            ("a", "1", 0), ("b", "1", 0), ("c", "1", 0), ("d", "1", 0), ("d", "2", half),
            ("a", "2", later), ("b", "2", later), ("a", "3", later + half),
            ("c", "3", later + half),
        ]:  # fmt: skip
            topic.pipe_input(key, value, timestamp)
    if emit.on_close:
        assert out == [
            (sw("a", 0, 0), 1, 0),
            (sw("b", 0, 0), 1, 0),
            (sw("c", 0, 0), 1, 0),
            (sw("d", 0, half), 2, half),
        ]
    else:
        assert out == [
            (sw("a", 0, 0), 1, 0),
            (sw("b", 0, 0), 1, 0),
            (sw("c", 0, 0), 1, 0),
            (sw("d", 0, 0), 1, 0),
            (sw("d", 0, 0), None, 0),
            (sw("d", 0, half), 2, half),
            (sw("a", later, later), 1, later),
            (sw("b", later, later), 1, later),
            (sw("a", later, later), None, later),
            (sw("a", later, later + half), 2, later + half),
            (sw("c", later + half, later + half), 1, later + half),
        ]
        # What the Java test asserts: the last update of each session, tombstones of sessions
        # it never flushed left out.
        assert _last_value_and_timestamp_per_key(out) == {
            sw("a", 0, 0): (1, 0),
            sw("b", 0, 0): (1, 0),
            sw("c", 0, 0): (1, 0),
            sw("d", 0, half): (2, half),
            sw("b", later, later): (1, later),
            sw("a", later, later + half): (2, later + half),
            sw("c", later + half, later + half): (1, later + half),
        }


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_get_aggregated_values_from_value_getter(
    emit: EmitStrategy,
) -> None:
    """The value getter reads the store: read here through the driver."""
    topology, _ = _session_topology(emit)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("a", "1", 0)
        topic.pipe_input("a", "1", GAP_MS + 1)
        topic.pipe_input("a", "2", GAP_MS + 1)
        store = driver.get_session_store(STORE_NAME)
        assert store.fetch_session("a", 0, 0) == 1
        assert store.fetch_session("a", GAP_MS + 1, GAP_MS + 1) == 2


def test_session_window_aggregate_should_immediately_forward_new_session_when_non_cached() -> None:
    topology, out = _session_topology(EmitStrategy.on_window_update(), caching=False)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key in ("a", "b", "c"):
            topic.pipe_input(key, "1", 0)
    assert out == [(sw("a", 0, 0), 1, 0), (sw("b", 0, 0), 1, 0), (sw("c", 0, 0), 1, 0)]


def test_session_window_aggregate_should_immediately_forward_removed_sessions_when_merging() -> (
    None
):
    topology, out = _session_topology(EmitStrategy.on_window_update(), caching=False)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("a", "1", 0)
        topic.pipe_input("a", "1", 5)
    assert out == [(sw("a", 0, 0), 1, 0), (sw("a", 0, 0), None, 0), (sw("a", 0, 5), 2, 5)]


def test_session_window_aggregate_forwards_tombstones_of_merged_sessions_when_cached() -> None:
    """Not a Kafka test: the same merge with caching on. The driver flushes the cache after
    each record, so the merged-away session had reached the store: Kafka's caching session
    store forwards its tombstone at the next flush (``CachingSessionStore.putAndMaybeForward``
    reads the old value of a deleted key), stamped with the session end
    (``SessionCacheFlushListener``)."""
    topology, out = _session_topology(EmitStrategy.on_window_update(), caching=True)
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        topic.pipe_input("a", "1", 0)
        topic.pipe_input("a", "1", 5)
        # A record inside the session: Kafka removes the session and puts it back in the same
        # cache entry, so only the new value is flushed.
        topic.pipe_input("a", "1", 3)
    assert out == [
        (sw("a", 0, 0), 1, 0),
        (sw("a", 0, 0), None, 0),
        (sw("a", 0, 5), 2, 5),
        (sw("a", 0, 5), 3, 5),
    ]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_log_and_meter_when_skipping_null_key_with_built_in_metrics(
    emit: EmitStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    topology, out = _session_topology(emit, caching=False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with TopologyTestDriver(topology, CONFIG) as driver:
            driver.create_input_topic("topic", TEXT, TEXT).pipe_input(None, "1", 0)
            assert dropped(driver) == 1
    assert out == []
    assert (
        "Skipping record due to null key. topic=[topic] partition=[0] offset=[0]" in caplog.messages
    )


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_log_and_meter_when_skipping_late_record_with_zero_grace(
    emit: EmitStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    """Java builds this processor with ``EmitStrategy.onWindowUpdate()`` whatever the
    parameter; so does the port."""
    del emit
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    topology, out = _session_topology(
        EmitStrategy.on_window_update(), caching=False, windows=windows
    )
    with TopologyTestDriver(topology, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        # dummy record to establish stream time = 0
        topic.pipe_input("dummy", "dummy", 0)
        # record arrives on time, should not be skipped
        topic.pipe_input("OnTime1", "1", 0)
        # dummy record to advance stream time = 11, 10 for gap time plus 1 to place outside
        topic.pipe_input("dummy", "dummy", 11)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            # record is late
            topic.pipe_input("Late1", "1", 0)
        assert dropped(driver) == 1
    assert (
        "Skipping record for expired window. topic=[topic] partition=[0] offset=[3] "
        "timestamp=[0] window=[0,0] expiration=[1] streamTime=[11]"
    ) in caplog.messages
    # Not asserted by Java (its mock context captures nothing here): the updates forwarded.
    assert out == [
        (sw("dummy", 0, 0), 1, 0),
        (sw("OnTime1", 0, 0), 1, 0),
        (sw("dummy", 11, 11), 1, 11),
    ]


@pytest.mark.parametrize("emit", EMIT_STRATEGIES)
def test_session_window_aggregate_should_log_and_meter_when_skipping_late_record_with_nonzero_grace(
    emit: EmitStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    del emit
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 1)
    topology, out = _session_topology(
        EmitStrategy.on_window_update(), caching=False, windows=windows
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with TopologyTestDriver(topology, CONFIG) as driver:
            topic = driver.create_input_topic("topic", TEXT, TEXT)
            # dummy record to establish stream time = 0
            topic.pipe_input("dummy", "dummy", 0)
            # record arrives on time, should not be skipped
            topic.pipe_input("OnTime1", "1", 0)
            # dummy record to advance stream time = 11, 10 for gap plus 1: edge of the window
            topic.pipe_input("dummy", "dummy", 11)
            # delayed record arrives on time, should not be skipped
            topic.pipe_input("OnTime2", "1", 0)
            # dummy record to advance stream time = 12, 10 for gap plus 2: outside the window
            topic.pipe_input("dummy", "dummy", 12)
            # delayed record arrives late
            topic.pipe_input("Late1", "1", 0)
            assert dropped(driver) == 1
    assert (
        "Skipping record for expired window. topic=[topic] partition=[0] offset=[5] "
        "timestamp=[0] window=[0,0] expiration=[1] streamTime=[12]"
    ) in caplog.messages
    assert (sw("OnTime2", 0, 0), 1, 0) in out


# -- TimeWindowsTest, SessionWindowsTest: bad specifications -----------------------------------


def test_time_windows_should_set_window_size_and_advance() -> None:
    assert TimeWindows.of_size_with_no_grace(123).size_ms == 123
    assert TimeWindows.of_size_and_grace(123, 1024).size_ms == 123
    assert TimeWindows.of_size_with_no_grace(123).advance_by(4).advance_ms == 4


@pytest.mark.parametrize("size", [0, -1], ids=["zero", "negative"])
def test_time_windows_window_size_must_be_positive(size: int) -> None:
    with pytest.raises(TopologyError):
        TimeWindows.of_size_with_no_grace(size)
    with pytest.raises(TopologyError):
        TimeWindows.of_size_and_grace(size, 0)


@pytest.mark.parametrize("advance", [0, -1, 124], ids=["zero", "negative", "larger-than-size"])
def test_time_windows_advance_interval_must_be_positive_and_at_most_the_size(advance: int) -> None:
    with pytest.raises(TopologyError):
        TimeWindows.of_size_with_no_grace(123).advance_by(advance)


def test_time_windows_grace_period_should_enforce_boundaries() -> None:
    TimeWindows.of_size_and_grace(3, 0)
    with pytest.raises(TopologyError):
        TimeWindows.of_size_and_grace(3, -1)


def test_time_windows_should_compute_windows() -> None:
    """``shouldComputeWindowsForHoppingWindows``, ``...BarelyOverlappingHoppingWindows``,
    ``...TumblingWindows``."""
    assert TimeWindows.of_size_with_no_grace(12).advance_by(5).windows_for(21) == [10, 15, 20]
    assert TimeWindows.of_size_with_no_grace(6).advance_by(5).windows_for(7) == [5]
    assert TimeWindows.of_size_with_no_grace(12).windows_for(21) == [12]


@pytest.mark.parametrize("gap", [0, -1], ids=["zero", "negative"])
def test_session_windows_window_size_must_be_positive(gap: int) -> None:
    with pytest.raises(TopologyError):
        SessionWindows.of_inactivity_gap_with_no_grace(gap)
    with pytest.raises(TopologyError):
        SessionWindows.of_inactivity_gap_and_grace(gap, 0)


def test_session_windows_grace_period_should_enforce_boundaries() -> None:
    SessionWindows.of_inactivity_gap_and_grace(3, 0)
    with pytest.raises(TopologyError):
        SessionWindows.of_inactivity_gap_and_grace(3, -1)


def test_windowed_aggregation_with_a_store_name_used_twice_raises() -> None:
    """A store name given twice is a ``TopologyException`` in Kafka
    (``InternalTopologyBuilderTest.shouldNotAllowToAddStoresWithSameName``)."""
    builder = StreamsBuilder()
    grouped = _grouped_stream(builder)
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(materialized="store")
    with pytest.raises(TopologyError):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count(
            materialized="store"
        )
