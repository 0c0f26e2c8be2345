"""``RecordQueue`` and ``PartitionGroup``: Kafka Streams' per-task record buffering, in Rust.

A ``RecordQueue`` buffers one topic partition. ``add_raw_records`` takes a whole batch — a list
of ``ConsumerRecord``, a list of ``confluent_kafka.Message``, or a ``pyarrow.RecordBatch`` /
``Table`` in Spark's Kafka source schema — and processes it eagerly, in offset order:
deserialize key and value, extract the timestamp given the current partition time, drop the
record if the timestamp is negative, queue it otherwise. Partition time is the highest
timestamp accepted so far. Bad records follow the ``deserialization_exception_handler``
(``"fail"``, ``"continue"`` or a callable ``(record, error) -> "continue" | "fail"``), and
every drop is counted in ``dropped_records`` and logged at WARNING with its topic, partition and
offset. A failure keeps the records before the bad one and raises naming its offset.

A ``PartitionGroup`` chooses, across a task's queues, the head record with the lowest timestamp
(ties: the earlier partition in the mapping) and tracks stream time.

Deliberate difference from Kafka Streams 2.6+: admission is eager, so partition time advances
when a record is *added*, not when it is polled (see ``docs/record-path.md``).
"""

from __future__ import annotations

from streamstate._core import PartitionGroup, RecordQueue

__all__ = ["PartitionGroup", "RecordQueue"]
