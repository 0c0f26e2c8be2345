"""When an application has caught up: its consumer group's committed offsets at the end of every
input partition (the lag-0 point the end-to-end benchmarks time to)."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

__all__ = ["CommittedLag"]


class CommittedLag:
    """Whether consumer group ``group`` has committed ``ends`` (partition -> end offset) of
    ``topic``; a context manager that closes its consumer."""

    def __init__(self, bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> None:
        self.ends = ends
        self.partitions = [TopicPartition(topic, p) for p in sorted(ends)]
        # Never subscribes: it only fetches the group's committed offsets.
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )

    def zero(self) -> bool:
        """Whether every partition's committed offset has reached its end."""
        try:
            committed = self.consumer.committed(self.partitions, timeout=10)
        except KafkaException:
            return False  # the coordinator is loading or moving: asked again
        return all(c.error is None and c.offset >= self.ends[c.partition] for c in committed)

    def __enter__(self) -> CommittedLag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()
