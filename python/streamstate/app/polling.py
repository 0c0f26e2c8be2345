"""One consumer poll, split: records grouped by partition, and the error events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, Message

from streamstate.errors import StreamsError

__all__ = ["split_poll"]


def split_poll(
    messages: Iterable[Message[Any, Any]], consumer: str
) -> tuple[dict[tuple[str, int], list[Message[Any, Any]]], list[Message[Any, Any]]]:
    """``(records by (topic, partition) in poll order, error events)``. End-of-partition events
    are dropped; a fatal error raises :class:`~streamstate.errors.StreamsError` naming
    ``consumer``. What to do with the other error events is the caller's policy."""
    runs: dict[tuple[str, int], list[Message[Any, Any]]] = {}
    events: list[Message[Any, Any]] = []
    for message in messages:
        error = message.error()
        if error is not None:
            if error.fatal():
                raise StreamsError(f"the {consumer} failed: {error.str()}")
            if error.code() != KafkaError._PARTITION_EOF:
                events.append(message)
            continue
        topic, partition = message.topic(), message.partition()
        if topic is not None and partition is not None:
            runs.setdefault((topic, partition), []).append(message)
    return runs, events
