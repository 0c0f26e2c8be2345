"""``PartitionGroup``: draining a task's buffered records in timestamp order.

Four partitions of 250k records each (1M in all), interleaved timestamps, built-in serdes. Each
round buffers the records, then takes them out one by one as ``StreamTask.process`` does and
learns each record's partition: from ``next_record()`` by building a ``TopicPartition`` (what the
runtime did), or from ``next_record_indexed()`` by the partition's index.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from benches._common import size

from streamstate import ConsumerRecord, PartitionGroup, RecordQueue, TopicPartition
from streamstate.serde import LongDeserializer

PARTITIONS = 4
N = size(1_000_000)
PER_PARTITION = N // PARTITIONS
GROUP = "PartitionGroup: drain 1M records of 4 partitions, learning each record's partition"


@pytest.fixture(scope="module")
def batches() -> dict[TopicPartition, list[ConsumerRecord]]:
    out = {}
    for p in range(PARTITIONS):
        tp = TopicPartition("events", p)
        out[tp] = [
            ConsumerRecord("events", p, i, i * PARTITIONS + p, struct.pack(">q", i), b"v")
            for i in range(PER_PARTITION)
        ]
    return out


def filled(batches: dict[TopicPartition, list[ConsumerRecord]]) -> tuple[tuple[Any], dict]:
    queues = {
        tp: RecordQueue(tp.topic, tp.partition, key_deserializer=LongDeserializer())
        for tp in batches
    }
    group = PartitionGroup(queues)
    for tp, records in batches.items():
        group.add_raw_records(tp, records)
    return (group,), {}


def drain_building_partitions(group: PartitionGroup) -> dict[TopicPartition, int]:
    consumed: dict[TopicPartition, int] = {}
    while (picked := group.next_record()) is not None:
        record, _queue = picked
        consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
    return consumed


def drain_indexed(group: PartitionGroup) -> dict[TopicPartition, int]:
    partitions = group.partitions()
    consumed: dict[TopicPartition, int] = {}
    while (picked := group.next_record_indexed()) is not None:
        record, index = picked
        consumed[partitions[index]] = record.offset + 1
    return consumed


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("how", ["topic_partition", "indexed"])
def bench_drain(
    benchmark: Any, batches: dict[TopicPartition, list[ConsumerRecord]], how: str
) -> None:
    benchmark.extra_info.update(records=N, partitions=PARTITIONS, how=how)
    drain = drain_indexed if how == "indexed" else drain_building_partitions
    consumed = benchmark.pedantic(drain, setup=lambda: filled(batches), rounds=5, iterations=1)
    assert consumed == {tp: PER_PARTITION for tp in batches}
