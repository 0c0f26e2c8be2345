"""``clients.group_metadata``: the generation read from librdkafka's serialized group metadata,
which the stream thread compares with its last assignment's to know a rebalance is going on."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer

from streamstate.clients.group_metadata import NO_GENERATION, group_generation, parse_generation


def test_a_consumer_not_in_its_group_has_no_generation() -> None:
    # A real client: librdkafka's own serialization, not a hand-made copy of it.
    consumer = Consumer({"group.id": "g", "bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    try:
        assert group_generation(consumer) == NO_GENERATION
    finally:
        consumer.close()


def test_a_closed_consumer_tells_nothing() -> None:
    consumer = Consumer({"group.id": "g", "bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    consumer.close()
    assert group_generation(consumer) is None


@pytest.mark.parametrize("generation", [0, 1, 7, 2**31 - 1])
def test_the_generation_is_read_from_the_serialized_form(generation: int) -> None:
    metadata = b"CGMDv2:" + struct.pack("=i", generation) + b"app\x00member-1\x00\x01"
    assert parse_generation(metadata) == generation


@pytest.mark.parametrize(
    "metadata",
    [b"", b"CGMDv2:", b"CGMDv2:\x01\x00", b"CGMDv3:\x01\x00\x00\x00g\x00\x00\x01", "text", None],
)
def test_another_format_tells_nothing(metadata: object) -> None:
    assert parse_generation(metadata) is None
