"""A plain-Python reference implementation of streamstate's record path (the test oracle).

It implements the record path as ``docs/api.md`` documents it ("Serdes", "Timestamp
extractors", "RecordQueue and PartitionGroup") with the standard library only, so that property
tests can compare the Rust-backed ``streamstate.RecordQueue`` / ``PartitionGroup`` with it
record by record, and benchmarks can time "the plain-Python path".

Semantics are the *eager* ones of the contract: ``add_raw_records`` deserializes, stamps and
filters every record of the batch in offset order, and partition time is the highest timestamp
*accepted* so far (Kafka 2.6+ advances it on poll instead).

Deserializers are plain functions ``bytes -> object`` (``None`` -> ``None``); extractors are
objects with ``extract(record, partition_time) -> int``, like streamstate's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import struct
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

__all__ = [
    "DESERIALIZERS",
    "NOT_KNOWN",
    "JsonFieldTimestamp",
    "OracleDeserializationError",
    "OracleInvalidTimestampError",
    "OraclePartitionGroup",
    "OracleRecord",
    "OracleRecordError",
    "OracleRecordQueue",
    "RecordTimestamp",
]

log = logging.getLogger(__name__)

NOT_KNOWN = -1
"""Partition time / stream time before any record (Kafka's ``RecordQueue.UNKNOWN``)."""


class OracleRecordError(ValueError):
    """A record the queue cannot take; names its topic, partition and offset when known."""

    def __init__(
        self,
        reason: str,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        location = f" (topic={topic}, partition={partition}, offset={offset})"
        super().__init__(reason if offset is None else reason + location)
        self.reason, self.topic, self.partition, self.offset = reason, topic, partition, offset


class OracleDeserializationError(OracleRecordError):
    """A key or value could not be deserialized and the handler said "fail"."""


class OracleInvalidTimestampError(OracleRecordError):
    """An extractor found no usable timestamp and its policy is to fail."""


# --- deserializers ------------------------------------------------------------------------------


def _fixed(fmt: str, name: str) -> Callable[[bytes | None], Any]:
    size = struct.calcsize(fmt)

    def deserialize(data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != size:
            raise ValueError(f"Size of data received by {name} is not {size}")
        return struct.unpack(fmt, data)[0]

    deserialize.__name__ = name
    return deserialize


def deserialize_bytes(data: bytes | None) -> bytes | None:
    return None if data is None else bytes(data)


def deserialize_string(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


deserialize_short = _fixed(">h", "ShortDeserializer")
deserialize_integer = _fixed(">i", "IntegerDeserializer")
deserialize_long = _fixed(">q", "LongDeserializer")
deserialize_float = _fixed(">f", "FloatDeserializer")
deserialize_double = _fixed(">d", "DoubleDeserializer")

_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


def deserialize_uuid(data: bytes | None) -> uuid.UUID | None:
    """Kafka's UUIDDeserializer: the UTF-8 text form ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
    if data is None:
        return None
    text = bytes(data).decode("utf-8")
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"not a UUID in its 36-character text form: {text!r}")
    return uuid.UUID(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def deserialize_json(data: bytes | None) -> Any:
    """One UTF-8 JSON document (strict JSON: no NaN / Infinity)."""
    if data is None:
        return None
    return json.loads(bytes(data).decode("utf-8"), parse_constant=_reject_constant)


DESERIALIZERS: dict[str, Callable[[bytes | None], Any]] = {
    "bytes": deserialize_bytes,
    "string": deserialize_string,
    "short": deserialize_short,
    "integer": deserialize_integer,
    "long": deserialize_long,
    "float": deserialize_float,
    "double": deserialize_double,
    "uuid": deserialize_uuid,
    "json": deserialize_json,
}

# --- timestamp extractors -----------------------------------------------------------------------

_POLICIES = ("fail", "skip", "partition_time")


def _on_invalid(policy: str, invalid_ts: int, partition_time: int, reason: str) -> int:
    """Kafka's three behaviors for a record without a valid timestamp."""
    if policy == "skip":
        log.warning("Dropping a record: %s", reason)
        return invalid_ts  # negative: the queue drops the record
    if policy == "partition_time" and partition_time >= 0:
        return partition_time
    if policy == "partition_time":
        reason += "; cannot use partition time instead because it is unknown"
    raise OracleInvalidTimestampError(reason)


class RecordTimestamp:
    """The record's own timestamp: Fail- / LogAndSkip- / UsePartitionTimeOnInvalidTimestamp."""

    def __init__(self, on_invalid: str = "fail") -> None:
        if on_invalid not in _POLICIES:
            raise ValueError(f"on_invalid must be one of {_POLICIES}, got {on_invalid!r}")
        self.on_invalid = on_invalid

    def extract(self, record: Any, partition_time: int) -> int:
        ts: int = record.timestamp
        if ts >= 0:
            return ts
        return _on_invalid(self.on_invalid, ts, partition_time, f"negative timestamp {ts}")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_ONE_MS = dt.timedelta(milliseconds=1)


class JsonFieldTimestamp:
    """A field of a JSON object value (dotted path), in ``ms``, ``s`` or ``iso8601``.

    A missing, null, unparsable or negative field is invalid and handled by ``on_invalid`` like
    the record-timestamp policies (``"skip"`` hands back a negative field unchanged and ``-1``
    otherwise).
    """

    def __init__(self, field: str, unit: str = "ms", on_invalid: str = "fail") -> None:
        if unit not in ("ms", "s", "iso8601"):
            raise ValueError(f"unit must be 'ms', 's' or 'iso8601', got {unit!r}")
        if on_invalid not in _POLICIES:
            raise ValueError(f"on_invalid must be one of {_POLICIES}, got {on_invalid!r}")
        self.path = field.split(".")
        self.field, self.unit, self.on_invalid = field, unit, on_invalid

    def _millis(self, value: Any) -> int:
        """The field as epoch ms; raises ValueError when it is missing or unparsable."""
        for name in self.path:
            if not isinstance(value, dict) or name not in value:
                raise ValueError("is missing")
            value = value[name]
        if value is None:
            raise ValueError("is null")
        if self.unit == "iso8601":
            if not isinstance(value, str):
                raise ValueError(f"holds {value!r}, not an ISO-8601 string")
            when = dt.datetime.fromisoformat(value)
            if when.tzinfo is None:
                raise ValueError(f"holds {value!r}, an ISO-8601 date-time without offset")
            return (when - _EPOCH) // _ONE_MS
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"holds {value!r}, not a number")
        if self.unit == "s":
            return int(value) * 1000 if isinstance(value, int) else int(value * 1000)
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"holds {value!r}, not a whole number of milliseconds")
        return int(value)

    def extract(self, record: Any, partition_time: int) -> int:
        try:
            ts = self._millis(record.value)
        except ValueError as e:
            reason = f"JSON field {self.field!r} {e}"
            return _on_invalid(self.on_invalid, NOT_KNOWN, partition_time, reason)
        if ts < 0:
            reason = f"JSON field {self.field!r} holds a negative timestamp {ts}"
            return _on_invalid(self.on_invalid, ts, partition_time, reason)
        return ts


# --- RecordQueue and PartitionGroup -------------------------------------------------------------


class OracleRecord(NamedTuple):
    """A deserialized record; in the queue, ``timestamp`` is the extracted one."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any


Handler = str | Callable[[Any, Exception], str]


class OracleRecordQueue:
    """Kafka's RecordQueue with eager deserialization and timestamp extraction."""

    def __init__(  # noqa: PLR0917 (the positional order mirrors Kafka's constructor)
        self,
        topic: str,
        partition: int,
        key_deserializer: Callable[[bytes | None], Any] = deserialize_bytes,
        value_deserializer: Callable[[bytes | None], Any] = deserialize_bytes,
        extractor: Any = None,
        handler: Handler = "fail",
    ) -> None:
        self.topic, self.partition = topic, partition
        self.key_deserializer, self.value_deserializer = key_deserializer, value_deserializer
        self.extractor = RecordTimestamp() if extractor is None else extractor
        self.handler = handler
        self._queue: deque[OracleRecord] = deque()
        self.partition_time = NOT_KNOWN
        self.dropped_records = {"deserialization_error": 0, "negative_timestamp": 0}

    def _handle(self, raw: Any, error: Exception) -> str:
        response = self.handler(raw, error) if callable(self.handler) else self.handler
        if response not in ("continue", "fail"):
            raise ValueError(f"deserialization handler returned {response!r}")
        return response

    def add_raw_records(self, records: Iterable[Any]) -> int:
        for raw in records:
            try:
                key = self.key_deserializer(raw.key)
                value = self.value_deserializer(raw.value)
            except Exception as error:
                if self._handle(raw, error) == "fail":
                    raise OracleDeserializationError(
                        str(error), raw.topic, raw.partition, raw.offset
                    ) from error
                log.warning(
                    "Skipping record due to deserialization error. topic=[%s] partition=[%s] "
                    "offset=[%s]",
                    raw.topic,
                    raw.partition,
                    raw.offset,
                )
                self.dropped_records["deserialization_error"] += 1
                continue
            record = OracleRecord(raw.topic, raw.partition, raw.offset, raw.timestamp, key, value)
            try:
                ts = self.extractor.extract(record, self.partition_time)
            except OracleInvalidTimestampError as error:
                raise OracleInvalidTimestampError(
                    error.reason, raw.topic, raw.partition, raw.offset
                ) from error
            if ts < 0:
                log.warning(
                    "Skipping record due to negative extracted timestamp. topic=[%s] "
                    "partition=[%s] offset=[%s] extractedTimestamp=[%s]",
                    raw.topic,
                    raw.partition,
                    raw.offset,
                    ts,
                )
                self.dropped_records["negative_timestamp"] += 1
                continue
            self._queue.append(record._replace(timestamp=ts))
            self.partition_time = max(self.partition_time, ts)
        return len(self._queue)

    def poll(self) -> OracleRecord | None:
        return self._queue.popleft() if self._queue else None

    @property
    def head_record(self) -> OracleRecord | None:
        return self._queue[0] if self._queue else None

    @property
    def head_timestamp(self) -> int:
        return self._queue[0].timestamp if self._queue else NOT_KNOWN

    def set_partition_time(self, t: int) -> None:
        self.partition_time = t

    def size(self) -> int:
        return len(self._queue)

    def clear(self) -> None:
        self._queue.clear()
        self.partition_time = NOT_KNOWN


class OraclePartitionGroup:
    """Kafka's PartitionGroup: the lowest head timestamp first, ties to the earlier partition."""

    def __init__(self, queues: Mapping[Any, OracleRecordQueue]) -> None:
        self.queues = dict(queues)
        self.stream_time = NOT_KNOWN

    def _queue(self, tp: Any) -> OracleRecordQueue:
        try:
            return self.queues[tp]
        except KeyError:
            raise KeyError(f"Partition {tp} not found.") from None

    def add_raw_records(self, tp: Any, records: Iterable[Any]) -> int:
        return self._queue(tp).add_raw_records(records)

    def next_record(self) -> tuple[OracleRecord, OracleRecordQueue] | None:
        non_empty = [q for q in self.queues.values() if q.size()]
        if not non_empty:
            return None
        queue = min(non_empty, key=lambda q: q.head_timestamp)  # min keeps the first of ties
        record = queue.poll()
        assert record is not None
        self.stream_time = max(self.stream_time, record.timestamp)
        return record, queue

    def partition_time(self, tp: Any) -> int:
        return self._queue(tp).partition_time

    def set_partition_time(self, tp: Any, t: int) -> None:
        self._queue(tp).set_partition_time(t)
        self.stream_time = max(self.stream_time, t)

    def num_buffered(self) -> int:
        return sum(q.size() for q in self.queues.values())

    def all_partitions_buffered(self) -> bool:
        return all(q.size() for q in self.queues.values())

    def clear(self) -> None:
        for q in self.queues.values():
            q.clear()
        self.stream_time = NOT_KNOWN
