"""What the wrappers around a stream thread's producer share: delegation of everything they do
not change, and the stand-in message of a record they did not send.

A task's sink producer is the thread's producer behind wrappers (the sink topics' timestamp
limits, ``app/sink_timestamps.py``; the tracking of sends the broker refused,
``app/refused_sinks.py``); a record refused before it was queued reaches its ``on_delivery``
with an :class:`UnsentMessage` (``app/context.py``), as a delivery report would.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProducerProxy", "UnsentMessage"]


class ProducerProxy:
    """A producer wrapper: every attribute it does not define is the wrapped producer's."""

    def __init__(self, producer: Any) -> None:
        """Wraps ``producer``."""
        self._producer = producer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)

    def __len__(self) -> int:
        return len(self._producer)


class UnsentMessage:
    """Stands for the message of a record that was not sent: its topic and partition, as the
    ``msg`` of a delivery report has them."""

    __slots__ = ("_partition", "_topic")

    def __init__(self, topic: str, partition: int | None) -> None:
        """The record's ``topic`` and requested ``partition`` (``None``: the partitioner's)."""
        self._topic = topic
        self._partition = partition

    def topic(self) -> str:
        """The record's topic."""
        return self._topic

    def partition(self) -> int | None:
        """The record's requested partition, if any."""
        return self._partition
