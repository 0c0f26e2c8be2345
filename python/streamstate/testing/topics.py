"""The ``TopologyTestDriver``'s topics: :class:`TestInputTopic` pipes typed records in,
:class:`TestOutputTopic` reads what the topology wrote, as :class:`TestRecord` s or key-value
pairs (Kafka's ``TestInputTopic``, ``TestOutputTopic`` and ``TestRecord``).

An output topic is a queue: each read takes the oldest record not yet read through *that*
:class:`TestOutputTopic` (two of them on one topic read independently, as two consumers would).
Reading an empty one raises :class:`~streamstate.errors.NoSuchElementError`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamstate.errors import NoSuchElementError, StreamsError

if TYPE_CHECKING:
    from streamstate.serde import Deserializer, Serializer

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "epoch_millis", "to_millis"]

Headers = Sequence[tuple[str, bytes | None]]


def to_millis(duration: int | datetime.timedelta, what: str) -> int:
    """A duration as whole milliseconds (``int`` milliseconds or a ``timedelta``)."""
    if isinstance(duration, datetime.timedelta):
        return int(duration.total_seconds() * 1000)
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise TypeError(f"{what} must be int milliseconds or a timedelta, not {duration!r}")
    return duration


def epoch_millis(instant: int | datetime.datetime) -> int:
    """An instant as epoch milliseconds (``int`` milliseconds or a ``datetime``)."""
    if isinstance(instant, datetime.datetime):
        return int(instant.timestamp() * 1000)
    return int(instant)


@dataclass(frozen=True)
class TestRecord:
    """A record read from (or piped to) a test topic: Kafka's ``TestRecord``."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


class TestInputTopic:
    """Pipes records to one input topic of the driver: serialized with the topic's serializers,
    each processed to completion before the call returns (Kafka's ``TestInputTopic``).

    A record without a timestamp gets the topic's *current time*, which starts at
    ``start_timestamp_ms`` (the driver's wall-clock time when the topic was made, by default)
    and moves on by ``auto_advance_ms`` after each record."""

    __test__ = False

    def __init__(
        self,
        name: str,
        key_serializer: Serializer,
        value_serializer: Serializer,
        pipe: Callable[[str, bytes | None, bytes | None, int, Headers], None],
        *,
        start_timestamp_ms: int,
        auto_advance_ms: int = 0,
    ) -> None:
        """Made by ``TopologyTestDriver.create_input_topic``."""
        self.name = name
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._pipe = pipe
        self._current_time = start_timestamp_ms
        self._auto_advance = auto_advance_ms

    def advance_time(self, advance: int | datetime.timedelta) -> None:
        """Moves the topic's current time on (Java's ``advanceTime``)."""
        millis = to_millis(advance, "advance")
        if millis < 0:
            raise ValueError(f"advance must not be negative, got {millis}")
        self._current_time += millis

    def _timestamp(self, timestamp: int | datetime.datetime | None) -> int:
        if timestamp is None:
            stamp = self._current_time
            self._current_time += self._auto_advance
            return stamp
        return epoch_millis(timestamp)

    def pipe_input(
        self,
        key: Any,
        value: Any,
        timestamp: int | datetime.datetime | None = None,
        headers: Headers = (),
    ) -> None:
        """Pipes one record; without ``timestamp`` it gets the topic's current time."""
        stamp = self._timestamp(timestamp)
        key_bytes = self._key_serializer.serialize(self.name, key)
        value_bytes = self._value_serializer.serialize(self.name, value)
        self._pipe(self.name, key_bytes, value_bytes, stamp, tuple(headers))

    def pipe_record(self, record: TestRecord) -> None:
        """Pipes a :class:`TestRecord` (its timestamp, or the topic's current time)."""
        self.pipe_input(record.key, record.value, record.timestamp, record.headers)

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        """Pipes each value with a ``None`` key."""
        for value in values:
            self.pipe_input(None, value)

    def pipe_key_value_list(
        self, pairs: Iterable[tuple[Any, Any]], timestamp: int | None = None
    ) -> None:
        """Pipes each ``(key, value)``; with ``timestamp`` all get it, else the topic's
        current time (moving on by its auto-advance)."""
        for key, value in pairs:
            self.pipe_input(key, value, timestamp)

    def pipe_records_list(self, records: Iterable[TestRecord]) -> None:
        """Pipes each :class:`TestRecord`."""
        for record in records:
            self.pipe_record(record)


class TestOutputTopic:
    """Reads what the topology wrote to one topic, deserialized with the topic's
    deserializers (Kafka's ``TestOutputTopic``); see the module doc."""

    __test__ = False

    def __init__(
        self,
        name: str,
        key_deserializer: Deserializer,
        value_deserializer: Deserializer,
        log: list[Any],
    ) -> None:
        """Made by ``TopologyTestDriver.create_output_topic``; ``log`` is the driver's record
        of every message written to the topic."""
        self.name = name
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._log = log
        self._read = 0

    def get_queue_size(self) -> int:
        """Records written and not yet read through this topic."""
        return len(self._log) - self._read

    def is_empty(self) -> bool:
        """Whether every record written has been read through this topic."""
        return self.get_queue_size() == 0

    def read_record(self) -> TestRecord:
        """The oldest record not read yet; :class:`NoSuchElementError` when there is none."""
        if self.is_empty():
            raise NoSuchElementError(f"output topic {self.name!r} is empty", topic=self.name)
        message = self._log[self._read]
        self._read += 1
        return TestRecord(
            self._key_deserializer.deserialize(self.name, message.key()),
            self._value_deserializer.deserialize(self.name, message.value()),
            message.timestamp()[1],
            tuple(message.headers() or ()),
        )

    def read_value(self) -> Any:
        """The value of :meth:`read_record`."""
        return self.read_record().value

    def read_key_value(self) -> tuple[Any, Any]:
        """``(key, value)`` of :meth:`read_record`."""
        record = self.read_record()
        return record.key, record.value

    def read_records_to_list(self) -> list[TestRecord]:
        """Every record not read yet."""
        return [self.read_record() for _ in range(self.get_queue_size())]

    def read_values_to_list(self) -> list[Any]:
        """The values of every record not read yet."""
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        """``(key, value)`` of every record not read yet."""
        return [(r.key, r.value) for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The latest value of each key among the records not read yet; a key whose last
        record is a tombstone stays, with the value ``None`` (as Kafka's ``readKeyValuesToMap``).
        A record without a key raises :class:`~streamstate.errors.StreamsError`, as Kafka's
        ``IllegalStateException``."""
        latest: dict[Any, Any] = {}
        while not self.is_empty():
            record = self.read_record()
            if record.key is None:
                raise StreamsError("null keys are not allowed with read_key_values_to_map")
            latest[record.key] = record.value
        return latest
