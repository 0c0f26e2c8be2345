"""The one boundary to Kafka: client configs, the error classification and the poll split.

Messages come from librdkafka's in-process mock cluster (real ``confluent_kafka.Message``
objects, error events included); the error flags are set on real ``KafkaError`` objects.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError

from streamstate import _core
from streamstate.app.config import StreamsConfig
from streamstate.clients.config import (
    PREFIXES,
    admin_config,
    global_consumer_config,
    main_consumer_config,
    producer_config,
    restore_consumer_config,
    thread_restore_consumer_config,
)
from streamstate.clients.kafka_errors import ErrorKind, classify, error_text, kafka_error
from streamstate.clients.poll import PollEvent, split_poll
from streamstate.errors import StreamsError

_QUIET = {"log_level": 3}


# -- configs ----------------------------------------------------------------------------------


def _overrides(**settings: Any) -> StreamsConfig:
    return StreamsConfig.from_mapping(
        {"application.id": "app", "bootstrap.servers": "b:1", **settings}
    )


def test_every_client_gets_its_own_prefix_and_the_user_wins() -> None:
    config = _overrides(
        **{
            "consumer.auto.offset.reset": "latest",
            "consumer.client.id": "mine",
            "producer.linger.ms": 50,
            "restore.consumer.max.partition.fetch.bytes": 1,
            "global.consumer.client.id": "global-mine",
        }
    )
    main = main_consumer_config(
        "b:1",
        group_id="app",
        client_id="t-consumer",
        partition_assignment_strategy="range",
        session_timeout_ms=10_000,
        group_instance_id="static-1",
        overrides=config.overrides,
    )
    assert main["auto.offset.reset"] == "latest" and main["client.id"] == "mine"
    assert main["group.id"] == "app" and main["group.instance.id"] == "static-1"
    assert main["enable.auto.commit"] is False and main["isolation.level"] == "read_uncommitted"
    assert "linger.ms" not in main and "max.partition.fetch.bytes" not in main

    producer = producer_config("b:1", client_id="t-producer", overrides=config.overrides)
    assert producer["linger.ms"] == 50 and producer["enable.idempotence"] is True
    assert producer["client.id"] == "t-producer"

    restore = thread_restore_consumer_config(
        "b:1", client_id="t-restore", overrides=config.overrides
    )
    assert restore["max.partition.fetch.bytes"] == 1 and restore["client.id"] == "t-restore"
    assert restore["auto.offset.reset"] == "error" and restore["enable.partition.eof"] is True

    global_ = global_consumer_config("b:1", client_id="g-consumer", overrides=config.overrides)
    assert global_["client.id"] == "global-mine"
    assert global_["auto.offset.reset"] == "error"
    assert global_["max.partition.fetch.bytes"] == 4 * 1024 * 1024


def test_no_overrides_and_no_static_membership() -> None:
    main = main_consumer_config(
        "b:1",
        group_id="app",
        client_id="c",
        partition_assignment_strategy="cooperative-sticky",
        session_timeout_ms=6_000,
    )
    assert "group.instance.id" not in main
    assert main["partition.assignment.strategy"] == "cooperative-sticky"
    assert main["session.timeout.ms"] == 6_000
    assert admin_config("b:1") == {"bootstrap.servers": "b:1"}
    assert admin_config("b:1", log_level=0) == {"bootstrap.servers": "b:1", "log_level": 0}


def test_restore_consumers_never_share_a_group() -> None:
    first, second = restore_consumer_config("b:1"), restore_consumer_config("b:1")
    assert first["group.id"] != second["group.id"]


def test_the_app_config_reads_the_prefixes_the_builders_use() -> None:
    config = _overrides(**{f"{p}x": i for i, p in enumerate(PREFIXES)})
    assert {p: dict(v) for p, v in config.overrides.items()} == {
        p: {"x": i} for i, p in enumerate(PREFIXES)
    }


def test_connection_settings_without_a_prefix_reach_every_client_under_prefixed_ones() -> None:
    config = _overrides(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "ssl.ca.location": "/ca.pem",
            "producer.sasl.mechanism": "SCRAM-SHA-256",
            "admin.request.timeout.ms": 5_000,
        }
    )
    o = config.overrides
    clients = {
        "main": main_consumer_config(
            "b:1",
            group_id="g",
            client_id="c",
            partition_assignment_strategy="range",
            session_timeout_ms=6_000,
            overrides=o,
        ),
        "producer": producer_config("b:1", client_id="p", overrides=o),
        "restore": thread_restore_consumer_config("b:1", client_id="r", overrides=o),
        "global": global_consumer_config("b:1", client_id="g", overrides=o),
        "admin": admin_config("b:1", overrides=o),
    }
    for name, client in clients.items():
        assert client["security.protocol"] == "SASL_SSL", name
        assert client["ssl.ca.location"] == "/ca.pem", name
        expected = "SCRAM-SHA-256" if name == "producer" else "PLAIN"
        assert client["sasl.mechanism"] == expected, name
    assert clients["admin"]["request.timeout.ms"] == 5_000
    assert "request.timeout.ms" not in clients["main"]
    # Any other name without a prefix is still refused.
    with pytest.raises(ValueError, match=r"fetch\.min\.bytes"):
        _overrides(**{"fetch.min.bytes": 1})


# -- the classification -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (KafkaError(KafkaError._PARTITION_EOF), ErrorKind.END_OF_PARTITION),
        (KafkaError(KafkaError._AUTO_OFFSET_RESET), ErrorKind.INVALID_OFFSET),
        (KafkaError(KafkaError.OFFSET_OUT_OF_RANGE), ErrorKind.INVALID_OFFSET),
        (KafkaError(KafkaError.ILLEGAL_GENERATION), ErrorKind.REBALANCE_IN_PROGRESS),
        (KafkaError(KafkaError.UNKNOWN_MEMBER_ID), ErrorKind.TASK_MIGRATED),
        (KafkaError(KafkaError.REBALANCE_IN_PROGRESS), ErrorKind.REBALANCE_IN_PROGRESS),
        (KafkaError(KafkaError.FENCED_INSTANCE_ID), ErrorKind.TASK_MIGRATED),
        (KafkaError(KafkaError.PRODUCER_FENCED), ErrorKind.TASK_MIGRATED),
        (KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), ErrorKind.RETRIABLE),
        (KafkaError(KafkaError._TIMED_OUT), ErrorKind.RETRIABLE),
        (KafkaError(KafkaError.INVALID_CONFIG, retriable=True), ErrorKind.RETRIABLE),
        (KafkaError(KafkaError.INVALID_CONFIG), ErrorKind.OTHER),
        # A fatal error is fatal whatever its code.
        (KafkaError(KafkaError._FENCED, fatal=True), ErrorKind.FATAL),
        (KafkaError(KafkaError._AUTO_OFFSET_RESET, fatal=True), ErrorKind.FATAL),
    ],
)
def test_classify(error: KafkaError, kind: ErrorKind) -> None:
    assert classify(error) is kind


def test_the_error_of_an_exception() -> None:
    error = KafkaError(KafkaError._TIMED_OUT, "slow")
    exc = confluent_kafka.KafkaException(error)
    assert kafka_error(exc) is error
    assert error_text(exc) == "slow"
    plain = confluent_kafka.KafkaException("no error inside")
    assert kafka_error(plain) is None
    assert error_text(plain) == "no error inside"


# -- the split --------------------------------------------------------------------------------


def _interleaved(mock_kafka: Any) -> list[confluent_kafka.Message]:
    """Records of partitions 1 and 0 of one topic and partition 0 of another, interleaved."""
    topic_a = f"poll-a-{uuid.uuid4().hex[:8]}"
    topic_b = f"poll-b-{uuid.uuid4().hex[:8]}"
    a = mock_kafka.messages(
        [(0, b"k", b"a0", 1), (0, b"k", b"a1", 2), (1, b"k", b"a2", 3), (1, b"k", b"a3", 4)],
        topic=topic_a,
    )
    b = mock_kafka.messages([(0, b"k", b"b0", 5), (0, b"k", b"b1", 6)], topic=topic_b)
    a0, a1, a2, a3 = a  # sorted by (partition, offset)
    b0, b1 = b
    return [a2, a0, b0, a3, a1, a1, b1]


def test_records_are_grouped_by_partition_in_poll_order(mock_kafka: Any) -> None:
    messages = _interleaved(mock_kafka)
    a2, a0, b0, a3, a1, _, b1 = messages
    runs, events = _core.split_by_partition(messages)
    topic_a, topic_b = a0.topic(), b0.topic()
    assert topic_a is not None and topic_b is not None
    assert list(runs) == [(topic_a, 1), (topic_a, 0), (topic_b, 0)]
    assert runs[(topic_a, 1)] == [a2, a3]
    assert runs[(topic_a, 0)] == [a0, a1, a1]
    assert runs[(topic_b, 0)] == [b0, b1]
    # The very objects polled, not copies.
    assert runs[(topic_a, 1)][0] is a2
    assert events == []
    assert _core.split_by_partition([]) == ({}, [])


def _poll_events(bootstrap_servers: str, topic: str, offset: int) -> list[Any]:
    """Polls partition 0 of ``topic`` from ``offset`` with a restore consumer's config until an
    error event arrives; returns everything polled."""
    consumer = confluent_kafka.Consumer(restore_consumer_config(bootstrap_servers, **_QUIET))
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
        polled: list[Any] = []
        deadline = time.monotonic() + 10
        while not any(m.error() is not None for m in polled) and time.monotonic() < deadline:
            polled.extend(consumer.consume(100, 0.5))
        return polled
    finally:
        consumer.close()


def test_end_of_partition_positions(mock_kafka: Any) -> None:
    topic = f"poll-eof-{uuid.uuid4().hex[:8]}"
    mock_kafka.messages([(0, b"k", b"v", 1), (0, b"k", b"v", 2)], topic=topic)
    polled = _poll_events(mock_kafka.bootstrap_servers, topic, 0)
    result = split_poll(polled)
    assert [m.offset() for m in result.runs[(topic, 0)]] == [0, 1]
    assert result.end_positions == {(topic, 0): 2}
    assert result.invalid_offsets == {} and result.events == [] and result.fatal() is None


def test_a_position_out_of_the_log_is_an_invalid_offset(mock_kafka: Any) -> None:
    topic = f"poll-oor-{uuid.uuid4().hex[:8]}"
    mock_kafka.messages([(0, b"k", b"v", 1)], topic=topic)
    polled = _poll_events(mock_kafka.bootstrap_servers, topic, 50)
    result = split_poll(polled)
    assert result.runs == {}
    assert list(result.invalid_offsets) == [(topic, 0)]
    offset, reason = result.invalid_offsets[(topic, 0)]
    assert offset == 50 and reason
    assert result.events == []


class _Polled:
    """An object with a Message's methods: what the split reads of anything not a Message."""

    def __init__(
        self, error: KafkaError | None, topic: str | None, partition: int | None, offset: int
    ) -> None:
        self._fields = (error, topic, partition, offset)

    def error(self) -> KafkaError | None:
        return self._fields[0]

    def topic(self) -> str | None:
        return self._fields[1]

    def partition(self) -> int | None:
        return self._fields[2]

    def offset(self) -> int:
        return self._fields[3]


def test_other_events_are_kept_in_order_and_the_first_fatal_is_named() -> None:
    transport = KafkaError(KafkaError._TRANSPORT, "connection dropped")
    fenced = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    reset = KafkaError(KafkaError._AUTO_OFFSET_RESET, "no partition named")
    eof = KafkaError(KafkaError._PARTITION_EOF)
    record = _Polled(None, "t", 3, 7)
    polled: list[Any] = [
        _Polled(transport, None, None, -1001),
        record,
        _Polled(eof, None, None, -1001),
        _Polled(reset, None, None, -1001),
        _Polled(fenced, "t", 3, 8),
        _Polled(eof, "t", 3, 5),
        _Polled(eof, "t", 3, 9),
        _Polled(None, None, None, 1),
    ]
    result = split_poll(polled)
    assert result.runs == {("t", 3): [record]}
    assert result.end_positions == {("t", 3): 9}
    assert result.events == [
        PollEvent(transport, None, None, -1001),
        PollEvent(reset, None, None, -1001),
        PollEvent(fenced, "t", 3, 8),
    ]
    assert [e.kind for e in result.events] == [
        ErrorKind.RETRIABLE,
        ErrorKind.INVALID_OFFSET,
        ErrorKind.FATAL,
    ]
    fatal = result.fatal()
    assert fatal is not None and fatal.error is fenced and fatal.key == ("t", 3)
    assert result.events[0].key is None


def test_a_fatal_event_stops_the_client_that_polled_it() -> None:
    fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    transport = KafkaError(KafkaError._TRANSPORT, "connection dropped")
    split_poll([_Polled(transport, None, None, -1001)]).raise_if_fatal("consumer")
    with pytest.raises(StreamsError, match="the global consumer failed: fenced by a newer"):
        split_poll([_Polled(fenced, None, None, -1001)]).raise_if_fatal("global consumer")
