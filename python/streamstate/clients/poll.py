"""One consumer poll, split: each partition's records, and what the error events say.

``Consumer.consume()`` returns one list mixing the records of every assigned partition with
messages that carry an error. The stream threads, the global thread and the changelog reader all
need it the same way: the records of each partition as one run (handed to Rust in one call), the
positions end-of-partition events report, the partitions whose position fell out of the log,
and every other error event. The split by partition runs in Rust
(:func:`streamstate._core.split_by_partition`), which reads each message's ``error()``,
``topic()`` and ``partition()`` once; only the error events, a handful per poll at most, are
classified here (:mod:`streamstate.clients.kafka_errors`). What to do about them is the
caller's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, Message

from streamstate._core import split_by_partition
from streamstate.clients.kafka_errors import ErrorKind, classify
from streamstate.errors import StreamsError

__all__ = ["PollEvent", "PollResult", "split_poll"]


class PollEvent(NamedTuple):
    """A polled message that carries an error instead of a record."""

    error: KafkaError
    topic: str | None
    partition: int | None
    offset: int | None

    @property
    def key(self) -> tuple[str, int] | None:
        """``(topic, partition)``, or ``None`` for a client-wide event."""
        if self.topic is None or self.partition is None:
            return None
        return (self.topic, self.partition)

    @property
    def kind(self) -> ErrorKind:
        """What the error means (:func:`~streamstate.clients.kafka_errors.classify`)."""
        return classify(self.error)


@dataclass
class PollResult:
    """What one poll brought.

    ``runs``: each partition's records, ``{(topic, partition): [Message, ...]}`` in poll order.
    ``end_positions``: ``{(topic, partition): offset}``, the highest position an
    end-of-partition event reported. ``invalid_offsets``: ``{(topic, partition): (offset,
    reason)}`` for partitions whose position fell out of the log (the last event's offset, or
    ``-1``). ``events``: every other error event, in poll order, fatal ones included.
    """

    runs: dict[tuple[str, int], list[Message[Any, Any]]]
    end_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    invalid_offsets: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    events: list[PollEvent] = field(default_factory=list)

    def fatal(self) -> PollEvent | None:
        """The first event whose error is fatal, if any."""
        return next((e for e in self.events if e.kind is ErrorKind.FATAL), None)

    def raise_if_fatal(self, client: str) -> None:
        """Raises :class:`~streamstate.errors.StreamsError` naming ``client`` (``"consumer"``,
        say) when an event is fatal: that client can no longer be used."""
        fatal = self.fatal()
        if fatal is not None:
            raise StreamsError(f"the {client} failed: {fatal.error.str()}")


def split_poll(messages: Sequence[Message[Any, Any]]) -> PollResult:
    """Splits the list a ``consume()`` call returned; see the module doc. End-of-partition
    events never reach ``events``; an invalid-offset event without a partition does."""
    runs, raw_events = split_by_partition(messages)
    result = PollResult(runs)
    for error, topic, partition, offset in raw_events:
        event = PollEvent(error, topic, partition, offset)
        kind, key = event.kind, event.key
        if kind is ErrorKind.END_OF_PARTITION:
            if key is not None and offset is not None and offset >= 0:
                position = result.end_positions.get(key, -1)
                result.end_positions[key] = max(position, offset)
        elif kind is ErrorKind.INVALID_OFFSET and key is not None:
            result.invalid_offsets[key] = (offset if offset is not None else -1, error.str())
        else:
            result.events.append(event)
    return result
