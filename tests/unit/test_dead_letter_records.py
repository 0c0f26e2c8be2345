"""Dead-letter records (KIP-1034) as Kafka's ``ExceptionHandlerUtils`` builds them, and the
pieces of ``app/dead_letter_queue.py`` and ``app/refused_sinks.py`` that need no broker."""

from __future__ import annotations

from typing import Any

import pytest

from streamstate.app import Topology
from streamstate.app.config import StreamsConfig
from streamstate.app.dead_letter_queue import (
    HEADER_EXCEPTION,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STACKTRACE,
    HEADER_TOPIC,
    DeadLetterQueue,
    DeadLetterRecord,
    SourceBytes,
    dead_letter_headers,
    exception_class_name,
)
from streamstate.app.refused_sinks import RefusedSends, TrackedSinkProducer
from streamstate.errors import StreamsError
from streamstate.serde import BytesDeserializer, BytesSerializer, IntegerDeserializer
from streamstate.testing import TopologyTestDriver


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_header_names_are_kafkas() -> None:
    assert [HEADER_EXCEPTION, HEADER_MESSAGE, HEADER_STACKTRACE] == [
        "__streams.errors.exception",
        "__streams.errors.message",
        "__streams.errors.stacktrace",
    ]
    assert [HEADER_TOPIC, HEADER_PARTITION, HEADER_OFFSET] == [
        "__streams.errors.topic",
        "__streams.errors.partition",
        "__streams.errors.offset",
    ]


def test_headers_value_by_value() -> None:
    exc = _raised(ValueError("bad value ü"))
    headers = dead_letter_headers(exc, "orders", 3, 42)
    assert [name for name, _ in headers] == [
        HEADER_EXCEPTION,
        HEADER_MESSAGE,
        HEADER_STACKTRACE,
        HEADER_TOPIC,
        HEADER_PARTITION,
        HEADER_OFFSET,
    ]
    values = dict(headers)
    assert values[HEADER_EXCEPTION] == b"ValueError"
    assert values[HEADER_MESSAGE] == "bad value ü".encode()
    stacktrace = (values[HEADER_STACKTRACE] or b"").decode()
    assert stacktrace.startswith("Traceback (most recent call last):")
    assert "_raised" in stacktrace  # the frames
    assert stacktrace.rstrip().endswith("ValueError: bad value ü")
    assert values[HEADER_TOPIC] == b"orders"
    assert values[HEADER_PARTITION] == b"3"
    assert values[HEADER_OFFSET] == b"42"


def test_a_class_outside_builtins_is_named_with_its_module() -> None:
    assert exception_class_name(StreamsError("x")) == "streamstate.errors.StreamsError"
    assert exception_class_name(KeyError("x")) == "KeyError"

    class Local(Exception):
        pass

    assert exception_class_name(Local()).endswith("Local")
    assert exception_class_name(Local()).startswith(__name__ + ".")


def test_no_message_is_an_absent_value_and_no_source_is_minus_one() -> None:
    # Java: getMessage() null -> a null header value; String.valueOf(-1) for no partition.
    values = dict(dead_letter_headers(RuntimeError(), None, None, None))
    assert values[HEADER_MESSAGE] is None
    assert values[HEADER_TOPIC] is None
    assert values[HEADER_PARTITION] == b"-1"
    assert values[HEADER_OFFSET] == b"-1"
    # Not raised: no frames, the exception's line alone.
    assert values[HEADER_STACKTRACE] == b"RuntimeError\n"


def test_record_carries_the_source_bytes_timestamp_and_headers_first() -> None:
    record = DeadLetterRecord.build(
        "dlq",
        _raised(ValueError("boom")),
        topic="in",
        partition=0,
        offset=7,
        timestamp=1_700_000_000_000,
        key=b"k",
        value=b"\x00\xff",
        headers=[("trace", b"abc"), ("s", "text")],
    )
    assert (record.topic, record.key, record.value) == ("dlq", b"k", b"\x00\xff")
    assert record.timestamp == 1_700_000_000_000
    assert record.headers[:2] == [("trace", b"abc"), ("s", b"text")]
    assert [n for n, _ in record.headers[2:]] == [
        HEADER_EXCEPTION,
        HEADER_MESSAGE,
        HEADER_STACKTRACE,
        HEADER_TOPIC,
        HEADER_PARTITION,
        HEADER_OFFSET,
    ]
    assert dict(record.headers)[HEADER_OFFSET] == b"7"


def test_negative_timestamp_leaves_it_to_the_producer() -> None:
    record = DeadLetterRecord.build(
        "dlq",
        ValueError("x"),
        topic="in",
        partition=0,
        offset=0,
        timestamp=-1,
        key=None,
        value=None,
        headers=None,
    )
    assert record.timestamp is None
    assert record.key is None and record.value is None


def test_source_bytes_hands_out_the_record_processed_and_forgets_those_before() -> None:
    class Msg:
        def __init__(self, offset: int) -> None:
            self._offset = offset

        def offset(self) -> int:
            return self._offset

        def key(self) -> bytes:
            return b"k%d" % self._offset

        def value(self) -> bytes:
            return b"v%d" % self._offset

        def headers(self) -> None:
            return None

    source = SourceBytes()
    source.add("t", 0, [Msg(o) for o in (5, 6, 7, 8)])
    # 6 was dropped on admission (never processed): taking 7 forgets it.
    assert source.take("t", 0, 5) == (b"k5", b"v5", None)
    assert source.take("t", 0, 7) == (b"k7", b"v7", None)
    assert source.take("t", 0, 6) is None
    assert source.take("t", 1, 8) is None
    assert source.take("t", 0, 8) == (b"k8", b"v8", None)


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.flushes = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        self.sent.append((topic, key, value, kwargs))

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        return 0

    def poll(self, timeout: float) -> int:
        return 0


def test_dead_letter_queue_defers_what_is_polled_before_the_transaction() -> None:
    producer = _Producer()
    open_transaction = [False]
    dlq = DeadLetterQueue(
        "dlq", producer, immediate=lambda: open_transaction[0], on_failure=lambda e, m: None
    )
    record = DeadLetterRecord("dlq", b"k", b"v", 5, [])
    dlq.add_polled(record)
    assert producer.sent == []
    open_transaction[0] = True
    dlq.send_pending()
    dlq.add(DeadLetterRecord("dlq", None, b"w", None, []))
    assert [(t, k, v) for t, k, v, _ in producer.sent] == [("dlq", b"k", b"v"), ("dlq", None, b"w")]
    assert producer.sent[0][3]["timestamp"] == 5
    assert "timestamp" not in producer.sent[1][3]
    assert dlq.sent == 2


def test_tracked_sends_are_named_skipped_and_sent_alone() -> None:
    producer = _Producer()
    sends = RefusedSends()
    reports: list[Any] = []
    skipped: list[Any] = []
    tracker = TrackedSinkProducer(
        producer,
        producer,
        sends,
        lambda err, msg, send=None: reports.append(send),
        skipped.append,
    )
    sends.skip[("in", 0, 4, 1)] = None
    sends.alone.add(("in", 0, 4, 2))
    tracker.begin(("in", 0, 4, 100, None))
    for value in (b"a", b"b", b"c"):
        tracker.produce("out", value, b"k", on_delivery=print)
    # The second send of the record at offset 4 is skipped; the third goes alone.
    assert [v for _, _, v, _ in producer.sent] == [b"a", b"c"]
    assert skipped == [("in", 0, 4, 1)]
    assert producer.flushes == 2
    producer.sent[0][3]["on_delivery"](None, None)
    producer.sent[1][3]["on_delivery"](None, None)
    assert reports == [(("in", 0, 4, 100, None), 0), (("in", 0, 4, 100, None), 2)]
    # A punctuation's sends have no name.
    tracker.begin(None)
    tracker.produce("out", b"p", None, on_delivery=print)
    producer.sent[-1][3]["on_delivery"](None, None)
    assert reports[-1] == (None, 0)
    sends.forget_committed({("in", 0): 5})
    assert not sends


def test_config_name_and_validation() -> None:
    base = {"application.id": "a", "bootstrap.servers": "b:1"}
    assert StreamsConfig.from_mapping(base).dead_letter_queue_topic is None
    config = StreamsConfig.from_mapping({**base, "errors.dead.letter.queue.topic.name": "dlq"})
    assert config.dead_letter_queue_topic == "dlq"
    with pytest.raises(ValueError, match=r"errors\.dead\.letter\.queue\.topic\.name"):
        StreamsConfig.from_mapping({**base, "errors.dead.letter.queue.topic.name": ""})


def test_topology_test_driver_writes_dead_letter_records() -> None:
    # As Kafka's TopologyTestDriver, the driver hands the dead-letter records to an output
    # topic of their own name.
    topology = Topology()

    @topology.processor(sources=["in"], sinks=["out"], value_deserializer=IntegerDeserializer())
    def forward(ctx: Any, record: Any) -> None:
        if record.value == 13:
            raise ValueError("unlucky")
        ctx.send("out", record.key, b"%d" % record.value)

    config = {
        "deserialization.exception.handler": "continue",
        "processing.exception.handler": "continue",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    with TopologyTestDriver(topology, config) as driver:
        source = driver.create_input_topic("in", BytesSerializer(), BytesSerializer())
        for key, value in [
            (b"a", b"\x00\x00\x00\x01"),
            (b"b", b"xyz"),
            (b"c", b"\x00\x00\x00\x0d"),
        ]:
            source.pipe_input(key, value)
        out = driver.create_output_topic("out", BytesDeserializer(), BytesDeserializer())
        assert out.read_key_values_to_list() == [(b"a", b"1")]
        dlq = driver.create_output_topic("dlq", BytesDeserializer(), BytesDeserializer())
        records = dlq.read_records_to_list()
    assert [(r.key, r.value) for r in records] == [(b"b", b"xyz"), (b"c", b"\x00\x00\x00\x0d")]
    first, second = (dict(r.headers) for r in records)
    assert first[HEADER_EXCEPTION] == b"streamstate.errors.DeserializationError"
    assert (first[HEADER_OFFSET], second[HEADER_OFFSET]) == (b"1", b"2")
    assert (second[HEADER_EXCEPTION], second[HEADER_MESSAGE]) == (b"ValueError", b"unlucky")
    assert second[HEADER_TOPIC] == b"in" and second[HEADER_PARTITION] == b"0"
