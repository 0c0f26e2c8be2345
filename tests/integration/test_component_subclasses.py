"""A subclass of a built-in serde or extractor that overrides its method is called, over
records read from a real broker.

The built-in classes carry a Rust object that a ``RecordQueue`` runs without calling Python.
A subclass inherits that object; if it overrides ``deserialize`` / ``extract``, the queue must
call the override (through Python), not the inherited Rust code. A subclass that overrides
nothing keeps the Rust path, and gives what its base class gives.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from tests.messages import as_arrow, read_back

from streamstate import RecordQueue
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import Deserializer, LongDeserializer, StringDeserializer
from streamstate.timestamps import FailOnInvalidTimestamp, TimestampExtractor


@pytest.fixture(scope="module")
def messages(kafka: KafkaTestCluster) -> list[Any]:
    """Three records (long keys, text values) on partition 0 of a fresh topic."""
    topic = kafka.create_topic(partitions=1)
    kafka.produce(
        topic,
        [
            (struct.pack(">q", k), v, ts)
            for k, v, ts in [(7, b"tea", 1_000), (8, b"jam", 2_000), (9, b"bun", 3_000)]
        ],
        partition=0,
    )
    return read_back(kafka, topic, 0, 3)


class ShoutingBase(Deserializer):
    """Overrides the base class's ``deserialize`` (whose Rust object returns the bytes)."""

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return None if data is None else data.decode().upper()


class Exclaiming(StringDeserializer):
    """Overrides a concrete deserializer, building on its result."""

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return f"{super().deserialize(topic, data)}!"


class Doubled(LongDeserializer):
    """Overrides a fixed-width number deserializer."""

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return 2 * super().deserialize(topic, data)


class NamedLong(LongDeserializer):
    """Overrides nothing: the Rust path stays."""


class OffsetTimestamp(TimestampExtractor):
    """Overrides the base class's ``extract`` (whose Rust object reads the record's timestamp)."""

    def extract(self, record: Any, partition_time: int) -> int:
        return 100 + int(record.offset) + int(record.key)


class LaterByPartitionTime(FailOnInvalidTimestamp):
    """Overrides a concrete extractor, building on its result and the partition time."""

    def extract(self, record: Any, partition_time: int) -> int:
        return super().extract(record, partition_time) + max(partition_time, 0)


def admitted(messages: list[Any], raw: Any, **components: Any) -> list[tuple[Any, Any, int]]:
    q = RecordQueue(messages[0].topic(), 0, **components)
    assert q.add_raw_records(raw) == 3
    return [(r.key, r.value, r.timestamp) for r in q.poll_batch()]


@pytest.fixture(params=["messages", "arrow"])
def raw(request: pytest.FixtureRequest, messages: list[Any]) -> Any:
    return messages if request.param == "messages" else as_arrow(messages)


def test_overridden_deserialize_is_called(messages: list[Any], raw: Any) -> None:
    got = admitted(messages, raw, key_deserializer=Doubled(), value_deserializer=ShoutingBase())
    assert got == [(14, "TEA", 1_000), (16, "JAM", 2_000), (18, "BUN", 3_000)]
    got = admitted(messages, raw, key_deserializer=NamedLong(), value_deserializer=Exclaiming())
    assert got == [(7, "tea!", 1_000), (8, "jam!", 2_000), (9, "bun!", 3_000)]


def test_overridden_extract_is_called(messages: list[Any], raw: Any) -> None:
    got = admitted(
        messages, raw, key_deserializer=LongDeserializer(), timestamp_extractor=OffsetTimestamp()
    )
    assert [ts for _, _, ts in got] == [107, 109, 111]
    got = admitted(messages, raw, timestamp_extractor=LaterByPartitionTime())
    # partition time before each record: unknown, 1000, 3000
    assert [ts for _, _, ts in got] == [1_000, 3_000, 6_000]


def test_subclass_overriding_nothing_keeps_the_base_behaviour(
    messages: list[Any], raw: Any
) -> None:
    got = admitted(
        messages,
        raw,
        key_deserializer=NamedLong(),
        value_deserializer=StringDeserializer(),
        timestamp_extractor=type("Named", (FailOnInvalidTimestamp,), {})(),
    )
    assert got == [(7, "tea", 1_000), (8, "jam", 2_000), (9, "bun", 3_000)]
