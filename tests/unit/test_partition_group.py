"""PartitionGroup: Kafka's PartitionGroupTest scenarios, in the eager form of docs/api.md.

Two partitions ``topic-1``/1 and ``topic-2``/2, 4-byte int keys and values, and a
MockTimestampExtractor (timestamp = offset), as in Kafka's tests. Records are chosen by the
lowest *head* timestamp (Kafka 2.3+); partition times are stamped when records are added.
"""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest

from streamstate import (
    NOT_KNOWN,
    ConsumerRecord,
    DeserializationError,
    PartitionGroup,
    RecordQueue,
    TopicPartition,
)
from streamstate.serde import IntegerDeserializer

P1 = TopicPartition("topic-1", 1)
P2 = TopicPartition("topic-2", 2)
UNKNOWN = TopicPartition("unknown-partition", 0)
KEY, VALUE = struct.pack(">i", 1), struct.pack(">i", 10)
BAD = struct.pack(">q", 1)


class MockTimestampExtractor:
    def extract(self, record, partition_time: int) -> int:
        return record.offset


def make_queue(tp: TopicPartition, handler="fail") -> RecordQueue:
    return RecordQueue(
        tp.topic,
        tp.partition,
        key_deserializer=IntegerDeserializer(),
        value_deserializer=IntegerDeserializer(),
        timestamp_extractor=MockTimestampExtractor(),
        deserialization_exception_handler=handler,
    )


def recs(tp: TopicPartition, offsets: list[int], key: bytes = KEY) -> list[ConsumerRecord]:
    return [ConsumerRecord(tp.topic, tp.partition, o, -1, key, VALUE) for o in offsets]


@pytest.fixture
def queues() -> dict[TopicPartition, RecordQueue]:
    return {P1: make_queue(P1), P2: make_queue(P2)}


@pytest.fixture
def group(queues: dict[TopicPartition, RecordQueue]) -> PartitionGroup:
    return PartitionGroup(queues)


def next_of(group: PartitionGroup) -> tuple[TopicPartition, int]:
    """The next record's partition and timestamp."""
    item = group.next_record()
    assert item is not None
    record, queue = item
    assert isinstance(queue, RecordQueue)
    assert record.offset == record.timestamp  # MockTimestampExtractor
    return TopicPartition(record.topic, record.partition), record.timestamp


def test_time_tracking(group: PartitionGroup) -> None:
    assert group.stream_time == NOT_KNOWN
    assert group.num_buffered() == 0
    assert not group.all_partitions_buffered()
    assert group.next_record() is None

    assert group.add_raw_records(P1, recs(P1, [1, 3, 5])) == 3
    assert not group.all_partitions_buffered()
    assert group.add_raw_records(P2, recs(P2, [2, 4, 6])) == 3
    assert group.all_partitions_buffered()
    assert group.num_buffered() == 6
    assert group.stream_time == NOT_KNOWN  # nothing returned yet
    assert (group.partition_time(P1), group.partition_time(P2)) == (5, 6)  # stamped on add

    assert next_of(group) == (P1, 1)
    assert group.stream_time == 1
    assert next_of(group) == (P2, 2)
    assert group.stream_time == 2
    assert group.num_buffered() == 4

    assert group.add_raw_records(P1, recs(P1, [2, 4])) == 4
    assert group.num_buffered() == 6
    assert group.stream_time == 2
    assert group.partition_time(P1) == 5

    steps = [(P1, 3, 3), (P2, 4, 4), (P1, 5, 5), (P1, 2, 5), (P1, 4, 5)]
    for tp, ts, stream_time in steps:
        assert next_of(group) == (tp, ts)
        assert group.stream_time == stream_time
    # p1 is now empty
    assert not group.all_partitions_buffered()
    assert group.num_buffered() == 1
    assert next_of(group) == (P2, 6)
    assert group.stream_time == 6
    assert group.num_buffered() == 0
    assert group.next_record() is None
    assert group.stream_time == 6


def test_choose_next_record_based_on_head_timestamp(group: PartitionGroup) -> None:
    group.add_raw_records(P1, recs(P1, [1, 5, 3]))
    assert group.num_buffered() == 3
    assert next_of(group) == (P1, 1)
    assert next_of(group) == (P1, 5)
    group.add_raw_records(P2, recs(P2, [2, 4, 6]))
    assert next_of(group) == (P2, 2)
    # p1 already returned 5, but its head is 3: the head timestamp decides, not partition time
    assert next_of(group) == (P1, 3)
    assert group.stream_time == 5
    assert next_of(group) == (P2, 4)
    assert next_of(group) == (P2, 6)
    assert group.next_record() is None


def test_ties_go_to_the_earlier_partition_in_the_mapping() -> None:
    for order in ([P1, P2], [P2, P1]):
        queues = {tp: make_queue(tp) for tp in order}
        group = PartitionGroup(queues)
        for tp in reversed(order):  # add order must not matter
            group.add_raw_records(tp, recs(tp, [1, 2]))
        got = []
        while (item := group.next_record()) is not None:
            got.append((TopicPartition(item[0].topic, item[0].partition), item[0].timestamp))
        first, second = order
        assert got == [(first, 1), (second, 1), (first, 2), (second, 2)]


def test_set_partition_time_and_stream_time(group: PartitionGroup) -> None:
    group.set_partition_time(P1, 100)
    assert group.partition_time(P1) == 100
    assert group.stream_time == 100
    group.set_partition_time(P2, 50)
    assert group.partition_time(P2) == 50
    assert group.stream_time == 100  # stream time never goes backwards


def test_set_partition_time_reaches_the_queue(group, queues) -> None:
    group.set_partition_time(P1, 100)
    assert queues[P1].partition_time == 100
    group.add_raw_records(P1, recs(P1, [50]))
    assert group.partition_time(P1) == 100


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.add_raw_records(UNKNOWN, recs(UNKNOWN, [1])),
        lambda g: g.partition_time(UNKNOWN),
        lambda g: g.set_partition_time(UNKNOWN, 5),
    ],
    ids=["add_raw_records", "partition_time", "set_partition_time"],
)
def test_unknown_partition_raises_key_error_naming_it(group: PartitionGroup, call) -> None:
    with pytest.raises(KeyError, match="unknown-partition"):
        call(group)
    assert group.num_buffered() == 0
    assert group.stream_time == NOT_KNOWN


def test_clear(group: PartitionGroup) -> None:
    group.add_raw_records(P1, recs(P1, [1, 3, 5]))
    group.add_raw_records(P2, recs(P2, [2]))
    next_of(group)
    next_of(group)
    assert group.stream_time == 2
    group.clear()
    assert group.num_buffered() == 0
    assert group.stream_time == NOT_KNOWN
    assert group.next_record() is None
    assert (group.partition_time(P1), group.partition_time(P2)) == (NOT_KNOWN, NOT_KNOWN)
    assert not group.all_partitions_buffered()

    assert group.add_raw_records(P1, recs(P1, [1, 3, 5])) == 3
    assert group.num_buffered() == 3
    assert next_of(group) == (P1, 1)


def test_dropped_records_are_not_buffered() -> None:
    queues = {P1: make_queue(P1, handler="continue"), P2: make_queue(P2, handler="continue")}
    group = PartitionGroup(queues)
    assert group.add_raw_records(P1, recs(P1, [1, 2], key=BAD)) == 0
    group.add_raw_records(P2, recs(P2, [3]))
    assert group.num_buffered() == 1
    assert not group.all_partitions_buffered()
    assert queues[P1].dropped_records["deserialization_error"] == 2


def test_failure_in_one_partition_keeps_what_was_admitted(group: PartitionGroup) -> None:
    raws = [*recs(P1, [1, 2]), *recs(P1, [3], key=BAD), *recs(P1, [4])]
    with pytest.raises(DeserializationError) as e:
        group.add_raw_records(P1, raws)
    assert (e.value.topic, e.value.partition, e.value.offset) == ("topic-1", 1, 3)
    assert group.num_buffered() == 2
    assert [next_of(group), next_of(group)] == [(P1, 1), (P1, 2)]
    assert group.next_record() is None


def test_arrow_batches_feed_the_group(group: PartitionGroup) -> None:
    def batch(tp: TopicPartition, offsets: list[int]) -> pa.RecordBatch:
        n = len(offsets)
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return pa.RecordBatch.from_pydict(
            {
                "key": pa.array([KEY] * n, pa.binary()),
                "value": pa.array([VALUE] * n, pa.binary()),
                "topic": pa.array([tp.topic] * n, pa.string()),
                "partition": pa.array([tp.partition] * n, pa.int32()),
                "offset": pa.array(offsets, pa.int64()),
                "timestamp": pa.array([epoch] * n, pa.timestamp("us", "UTC")),
            }
        )

    assert group.add_raw_records(P1, batch(P1, [1, 3])) == 2
    assert group.add_raw_records(P2, batch(P2, [2])) == 1
    assert [next_of(group) for _ in range(3)] == [(P1, 1), (P2, 2), (P1, 3)]


def test_next_record_returns_the_queue_it_came_from(group, queues) -> None:
    group.add_raw_records(P1, recs(P1, [1]))
    group.add_raw_records(P2, recs(P2, [2]))
    record, queue = group.next_record()
    assert record.offset == 1
    assert queue is queues[P1]
    record, queue = group.next_record()
    assert queue is queues[P2]


def test_next_record_indexed_names_the_partition_by_its_place(group, queues) -> None:
    group.add_raw_records(P2, recs(P2, [1, 4]))
    group.add_raw_records(P1, recs(P1, [2]))
    picked = []
    while (item := group.next_record_indexed()) is not None:
        record, index = item
        picked.append((group.partitions()[index], record.offset))
        assert (record.topic, record.partition) == (picked[-1][0].topic, picked[-1][0].partition)
    assert picked == [(P2, 1), (P1, 2), (P2, 4)]
    assert group.stream_time == 4
    assert group.num_buffered() == 0


def test_next_record_hands_back_the_same_queue_object_every_time(group, queues) -> None:
    group.add_raw_records(P1, recs(P1, [1, 2]))
    by_queue = {id(q): tp for tp, q in queues.items()}
    seen = {by_queue[id(group.next_record()[1])] for _ in range(2)}
    assert seen == {P1}
    counts: dict[RecordQueue, int] = {}
    group.add_raw_records(P2, recs(P2, [3]))
    _, queue = group.next_record()
    counts[queue] = counts.get(queue, 0) + 1  # usable as a dict key
    assert counts == {queues[P2]: 1}


def test_queues_shared_with_the_group_see_its_polls(group, queues) -> None:
    group.add_raw_records(P1, recs(P1, [1, 2]))
    assert queues[P1].size() == 2
    next_of(group)
    assert queues[P1].size() == 1
    assert queues[P1].head_timestamp == 2
