"""The dead-letter queue (Kafka Streams 4.2+, KIP-1034) and sink records the broker refuses
under exactly-once, on the real broker.

Every record a handler is asked about also goes to ``errors.dead.letter.queue.topic.name`` with
Kafka's ``__streams.errors.*`` headers and the source record's raw bytes; under
``exactly_once_v2`` it commits with the task's output (a ``read_committed`` reader sees it only
then) and an aborted transaction leaves none visible. A sink record the broker refuses for what
it holds, which no check before the send can foresee (a null key on a compacted topic, a record
over the topic's ``max.message.bytes``), is dropped alone under exactly-once with
``"continue"``: the records around it commit, the app does not loop on aborts.
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.apps import TIMEOUT, new_app, wait_until

from streamstate import StreamThreadExceptionResponse
from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import IntegerDeserializer

GUARANTEES = ["at_least_once", "exactly_once_v2"]


def read(
    kafka: KafkaTestCluster,
    topic: str,
    count: int,
    *,
    committed: bool = True,
    timeout: float = 30.0,
) -> list[Any]:
    """The messages of ``topic`` (``read_committed`` unless not ``committed``), once ``count``
    are there or after ``timeout`` seconds."""
    consumer = kafka.consumer(isolation_level="read_committed" if committed else "read_uncommitted")
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(messages) < count and time.monotonic() < deadline:
        messages.extend(m for m in consumer.consume(100, 0.5) if m.error() is None)
    return messages


def error_headers(message: Any) -> dict[str, bytes | None]:
    return {k: v for k, v in message.headers() or [] if k.startswith("__streams.errors.")}


def assert_dead_letter(
    message: Any,
    *,
    source: str,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    exception: str,
    message_contains: str,
) -> None:
    """``message`` is the dead-letter record of the source record at ``source`` partition 0
    ``offset``, for an ``exception`` whose message contains ``message_contains``."""
    assert message.key() == key
    assert message.value() == value
    headers = error_headers(message)
    assert list(headers) == [
        "__streams.errors.exception",
        "__streams.errors.message",
        "__streams.errors.stacktrace",
        "__streams.errors.topic",
        "__streams.errors.partition",
        "__streams.errors.offset",
    ]
    assert headers["__streams.errors.exception"] == exception.encode()
    assert message_contains.encode() in (headers["__streams.errors.message"] or b"")
    stacktrace = (headers["__streams.errors.stacktrace"] or b"").decode()
    # Python's rendering of the exception: its class name and message, after the frames.
    assert exception.rsplit(".", maxsplit=1)[-1] in stacktrace
    assert message_contains in stacktrace
    assert headers["__streams.errors.topic"] == source.encode()
    assert headers["__streams.errors.partition"] == b"0"
    assert headers["__streams.errors.offset"] == str(offset).encode()


def running_with_dlq(
    apps: list[StreamsApp],
    kafka: KafkaTestCluster,
    topology: Topology,
    tmp: Path,
    *,
    dlq: str,
    guarantee: str,
    handler: str,
) -> StreamsApp:
    """A RUNNING app of ``topology`` whose ``handler`` config (``"deserialization"``,
    ``"processing"`` or ``"production"``) answers ``"continue"``, dead-lettering to ``dlq``."""
    app = new_app(
        apps,
        kafka,
        topology,
        tmp,
        **{
            "processing.guarantee": guarantee,
            f"{handler}.exception.handler": "continue",
            "errors.dead.letter.queue.topic.name": dlq,
        },
    )
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    return app


def run_until(app: StreamsApp, condition: Any, what: str) -> None:
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(condition, what)


# --- the three handlers ----------------------------------------------------------------------


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_deserialization_error_goes_to_the_dead_letter_topic(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], guarantee: str
) -> None:
    source, sink, dlq = kafka.create_topic(), kafka.create_topic(), kafka.create_topic()
    kafka.produce(
        source,
        [
            {"key": b"k1", "value": struct.pack(">i", 1)},
            {
                "key": b"k2",
                "value": b"bad",
                "timestamp": 1_700_000_000_000,
                "headers": [("h", b"x")],
            },
            {"key": b"k3", "value": struct.pack(">i", 3)},
        ],
    )
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink], value_deserializer=IntegerDeserializer())
    def forward(ctx: Any, record: Any) -> None:
        ctx.send(sink, record.key, str(record.value).encode())

    app = running_with_dlq(
        apps, kafka, topology, tmp_path, dlq=dlq, guarantee=guarantee, handler="deserialization"
    )
    # The record after the bad one still arrives.
    assert [m.value() for m in read(kafka, sink, 2)] == [b"1", b"3"]
    (dead,) = read(kafka, dlq, 1)
    assert_dead_letter(
        dead,
        source=source,
        offset=1,
        key=b"k2",
        value=b"bad",
        exception="streamstate.errors.DeserializationError",
        message_contains="",
    )
    # The source record's timestamp and headers, then the error headers.
    assert dead.timestamp()[1] == 1_700_000_000_000
    assert (dead.headers() or [])[0] == ("h", b"x")
    assert app.state is State.RUNNING
    assert app.close(30)


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_processing_error_goes_to_the_dead_letter_topic(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], guarantee: str
) -> None:
    source, sink, dlq = kafka.create_topic(), kafka.create_topic(), kafka.create_topic()
    kafka.produce(source, [(b"k1", b"a"), (b"k2", b"boom"), (b"k3", b"c")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        if record.value == b"boom":
            raise ValueError("the processor cannot take boom")
        ctx.send(sink, record.key, record.value)

    app = running_with_dlq(
        apps, kafka, topology, tmp_path, dlq=dlq, guarantee=guarantee, handler="processing"
    )
    assert [m.value() for m in read(kafka, sink, 2)] == [b"a", b"c"]
    (dead,) = read(kafka, dlq, 1)
    assert_dead_letter(
        dead,
        source=source,
        offset=1,
        key=b"k2",
        value=b"boom",
        exception="ValueError",
        message_contains="the processor cannot take boom",
    )
    assert (error_headers(dead)["__streams.errors.message"]) == b"the processor cannot take boom"
    assert app.metrics()["dropped-records-total"] == 1
    assert app.close(30)


@pytest.mark.parametrize("guarantee", GUARANTEES)
@pytest.mark.parametrize("refusal", ["null key on a compacted topic", "over max.message.bytes"])
def test_a_sink_record_the_broker_refuses_is_dropped_alone_and_dead_lettered(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    guarantee: str,
    refusal: str,
) -> None:
    # Refusals no check before the send can foresee: the broker fails the record's whole
    # produce batch, and under exactly-once makes the transaction abortable. "continue" drops
    # that record only: the others commit, and the app does not abort and retry forever.
    compacted = refusal.startswith("null key")
    sink = kafka.create_topic(
        config={"cleanup.policy": "compact"} if compacted else {"max.message.bytes": "2000"}
    )
    source, dlq = kafka.create_topic(), kafka.create_topic()
    kafka.produce(source, [(b"k1", b"a"), (b"k2", b"bad"), (b"k3", b"c"), (b"k4", b"d")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        bad = record.value == b"bad"
        if compacted:
            ctx.send(sink, None if bad else record.key, record.value)
        else:
            # The producer's own message.max.bytes (1 MB) lets it through; the topic does not.
            ctx.send(sink, record.key, record.value * (2000 if bad else 1))

    app = running_with_dlq(
        apps, kafka, topology, tmp_path, dlq=dlq, guarantee=guarantee, handler="production"
    )
    assert [m.value() for m in read(kafka, sink, 3)] == [b"a", b"c", b"d"]
    wait_until(lambda: app.metrics()["commit-total"] > 0, "a commit")
    (dead,) = read(kafka, dlq, 1)
    # The source record's bytes (Kafka's sourceRawKey / sourceRawValue), not the sink record's.
    assert_dead_letter(
        dead,
        source=source,
        offset=1,
        key=b"k2",
        value=b"bad",
        # A broker's refusal reaches the handler as a StreamsError naming the broker's error.
        exception="streamstate.errors.StreamsError",
        message_contains="INVALID_RECORD" if compacted else "MSG_SIZE_TOO_LARGE",
    )
    assert app.state is State.RUNNING
    # The handler was asked once, about the refused record alone.
    assert app.metrics()["dropped-records-total"] == 1
    # Nothing more is aborted once the record is dropped (no livelock).
    (thread,) = app._threads
    aborted = thread.metrics.transactions_aborted
    time.sleep(2)
    assert thread.metrics.transactions_aborted == aborted
    assert app.close(30)


# --- exactly-once: the dead-letter record commits with the transaction ------------------------


def test_at_least_once_fail_writes_the_dead_letter_record_too(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # Kafka's built-in handlers build the dead-letter record for FAIL as well as CONTINUE.
    source, sink, dlq = kafka.create_topic(), kafka.create_topic(), kafka.create_topic()
    kafka.produce(source, [(b"k1", b"a"), (b"k2", b"boom")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        if record.value == b"boom":
            raise ValueError("boom")
        ctx.send(sink, record.key, record.value)

    app = new_app(apps, kafka, topology, tmp_path, **{"errors.dead.letter.queue.topic.name": dlq})
    app.set_uncaught_exception_handler(lambda exc: StreamThreadExceptionResponse.SHUTDOWN_CLIENT)
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    (dead,) = read(kafka, dlq, 1)
    assert dead.value() == b"boom"
    assert error_headers(dead)["__streams.errors.offset"] == b"1"


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_exactly_once_dead_letter_record_is_seen_only_if_its_transaction_commits(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], outcome: str
) -> None:
    # Premise by construction: commits are an hour apart, so the transaction holding the
    # dead-letter record stays open until the app closes (commit) or fails (abort); the
    # record is on the broker (a read_uncommitted reader sees it) before either.
    source, sink, dlq = kafka.create_topic(), kafka.create_topic(), kafka.create_topic()
    kafka.produce(source, [(b"k1", b"boom"), (b"k2", b"b")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        if record.value in (b"boom", b"fatal"):
            raise ValueError(record.value.decode())
        ctx.send(sink, record.key, record.value)

    def handler(context: Any) -> str:
        return "fail" if str(context.exception) == "fatal" else "continue"

    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        **{
            "processing.guarantee": "exactly_once_v2",
            "commit.interval.ms": 3_600_000,
            "processing.exception.handler": handler,
            "errors.dead.letter.queue.topic.name": dlq,
        },
    )
    app.set_uncaught_exception_handler(lambda exc: StreamThreadExceptionResponse.SHUTDOWN_CLIENT)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    (written,) = read(kafka, dlq, 1, committed=False)
    assert written.value() == b"boom"
    assert read(kafka, dlq, 1, timeout=3) == []
    if outcome == "commit":
        # The close commits: the dead-letter record becomes visible with the output.
        assert app.close(30)
        assert [m.value() for m in read(kafka, dlq, 1)] == [b"boom"]
        assert [m.value() for m in read(kafka, sink, 1)] == [b"b"]
    else:
        # The thread fails and aborts its transaction: the record never becomes visible.
        kafka.produce(source, [(b"k3", b"fatal")])
        assert app.wait_for_state(State.ERROR, TIMEOUT)
        assert read(kafka, dlq, 1, timeout=5) == []
        assert read(kafka, sink, 1, timeout=1) == []


# --- a dead-letter topic that does not exist ---------------------------------------------------


def test_a_missing_dead_letter_topic_fails_as_a_refused_record_does(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # Kafka does not create the topic: a record to it is refused like any sink record, and
    # the production exception handler (here the default, "fail") decides.
    source, sink = kafka.create_topic(), kafka.create_topic()
    missing = f"missing-dlq-{uuid.uuid4().hex[:8]}"
    kafka.produce(source, [(b"k1", b"boom")])
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def forward(ctx: Any, record: Any) -> None:
        raise ValueError("boom")

    app = new_app(
        apps,
        kafka,
        topology,
        tmp_path,
        **{
            "processing.exception.handler": "continue",
            "errors.dead.letter.queue.topic.name": missing,
            "producer.topic.metadata.propagation.max.ms": 1000,
        },
    )
    failures: list[BaseException] = []

    def shut_down(exc: BaseException) -> StreamThreadExceptionResponse:
        failures.append(exc)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    app.set_uncaught_exception_handler(shut_down)
    app.start()
    assert app.wait_for_state(State.ERROR, TIMEOUT)
    (failure,) = failures
    assert missing in str(failure)
