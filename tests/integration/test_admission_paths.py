"""Every path into a queue admits a record the same way, over records read from a real broker.

A record reaches admission as a ``confluent_kafka.Message`` (the runtime's path), as a
``ConsumerRecord``, as a row of an Arrow batch in Spark's Kafka source schema (built-in
components: admitted without the GIL; a Python component: row by row), or through the ``stamp``
kernel. All run one admission step in Rust, so a bad record must fail with the same
``DeserializationError`` text, and be skipped with the same WARN (naming topic, partition,
offset and why), whichever path it took.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest
from tests.messages import as_arrow, read_back

from streamstate import ConsumerRecord, DeserializationError, RecordQueue, _core
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import BytesDeserializer, LongDeserializer
from streamstate.timestamps import FailOnInvalidTimestamp

BAD_OFFSET = 1


class ByOffsetTimestamp:
    """A Python extractor (timestamp = the record's own): sends Arrow input down the row path."""

    def extract(self, record: Any, partition_time: int) -> int:
        return int(record.timestamp)


@pytest.fixture(scope="module")
def messages(kafka: KafkaTestCluster) -> list[Any]:
    """Three records on partition 2 of a fresh topic; the one at offset 1 has a 2-byte key,
    which ``LongDeserializer`` rejects."""
    topic = kafka.create_topic(partitions=3)
    kafka.produce(
        topic,
        [
            (struct.pack(">q", 7), b"first", 1_000),
            (b"\x00\x01", b"bad key", 2_000),
            (struct.pack(">q", 9), b"third", 3_000),
        ],
        partition=2,
    )
    return read_back(kafka, topic, 2, 3)


def as_records(messages: list[Any]) -> list[ConsumerRecord]:
    return [
        ConsumerRecord(m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value())
        for m in messages
    ]


PATHS = ["messages", "consumer_records", "arrow_built_in", "arrow_row_by_row"]


def add_through(path: str, messages: list[Any], handler: str) -> RecordQueue:
    """A queue of the messages' partition, fed the messages along ``path``."""
    extractor: Any = ByOffsetTimestamp() if path == "arrow_row_by_row" else None
    q = RecordQueue(
        messages[0].topic(),
        messages[0].partition(),
        key_deserializer=LongDeserializer(),
        value_deserializer=BytesDeserializer(),
        timestamp_extractor=extractor or FailOnInvalidTimestamp(),
        deserialization_exception_handler=handler,
    )
    raw: Any = {
        "messages": messages,
        "consumer_records": as_records(messages),
        "arrow_built_in": as_arrow(messages),
        "arrow_row_by_row": as_arrow(messages),
    }[path]
    try:
        q.add_raw_records(raw)
    except DeserializationError:
        assert [r.offset for r in q.poll_batch()] == [0]  # the record before stays queued
        raise
    return q


def test_every_path_fails_with_the_same_error(messages: list[Any]) -> None:
    texts = {}
    for path in PATHS:
        with pytest.raises(DeserializationError) as info:
            add_through(path, messages, "fail")
        err = info.value
        assert (err.topic, err.partition, err.offset) == (messages[0].topic(), 2, BAD_OFFSET)
        texts[path] = str(err)
    with pytest.raises(DeserializationError) as info:
        _core.Stamper(("long",), ("bytes",), FailOnInvalidTimestamp()._spec, "fail").stamp(
            as_arrow(messages)
        )
    texts["stamp"] = str(info.value)
    assert len(set(texts.values())) == 1, texts
    assert "could not deserialize the record key with LongDeserializer" in texts["stamp"]


def test_every_path_skips_with_the_same_warning(
    messages: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    warnings = {}
    for path in PATHS:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamstate.record_queue"):
            q = add_through(path, messages, "continue")
        assert [r.offset for r in q.poll_batch()] == [0, 2]
        assert q.dropped_records == {"deserialization_error": 1, "negative_timestamp": 0}
        warnings[path] = [r.getMessage() for r in caplog.records]
    assert len({tuple(w) for w in warnings.values()}) == 1, warnings
    (warning,) = warnings["messages"]
    topic = messages[0].topic()
    assert f"topic=[{topic}] partition=[2] offset=[{BAD_OFFSET}]" in warning
    assert "could not deserialize the record key with LongDeserializer" in warning
