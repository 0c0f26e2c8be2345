"""``Record``: what flows between the nodes of a processor graph (Kafka's ``api.Record``).

A record is immutable: ``with_key``, ``with_value``, ``with_timestamp`` and ``with_headers``
return changed copies, so a processor may forward the same record to several children, or keep
it, without one child's change reaching another. Keys and values are whatever the source's
deserializers made of the bytes (sinks serialize them again); ``headers`` is a tuple of
``(key, value)`` pairs, ``key`` a ``str`` and ``value`` ``bytes`` or ``None``, as Kafka's
headers (confluent-kafka's form). A record is a named tuple underneath: cheap to make, which
matters on a path that makes one per record per hop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = ["Headers", "Record", "RecordMetadata"]

Headers = tuple[tuple[str, "bytes | None"], ...]
"""Record headers: ``(key, value)`` pairs in order; a key may repeat, as in Kafka."""


class _RecordFields(NamedTuple):
    key: Any
    value: Any
    timestamp: int
    headers: Headers


class Record(_RecordFields):
    """A key, a value, a timestamp (epoch ms) and headers; immutable (see the module doc)."""

    __slots__ = ()

    def __new__(
        cls,
        key: Any,
        value: Any,
        timestamp: int,
        headers: Iterable[tuple[str, bytes | None]] | None = (),
    ) -> Record:
        """``headers`` may be any iterable of pairs (or ``None``); it is kept as a tuple."""
        if type(headers) is not tuple:
            headers = tuple((str(k), v) for k, v in headers) if headers is not None else ()
        return tuple.__new__(cls, (key, value, timestamp, headers))

    def with_key(self, key: Any) -> Record:
        """A copy with ``key``."""
        return tuple.__new__(Record, (key, self[1], self[2], self[3]))

    def with_value(self, value: Any) -> Record:
        """A copy with ``value``."""
        return tuple.__new__(Record, (self[0], value, self[2], self[3]))

    def with_timestamp(self, timestamp: int) -> Record:
        """A copy with ``timestamp``; a negative one raises ``ValueError``, as in Kafka."""
        if timestamp < 0:
            raise ValueError(f"a record's timestamp must not be negative, not {timestamp}")
        return tuple.__new__(Record, (self[0], self[1], timestamp, self[3]))

    def with_headers(self, headers: Iterable[tuple[str, bytes | None]] | None) -> Record:
        """A copy with ``headers`` (replacing the old ones)."""
        return Record(self[0], self[1], self[2], headers)

    def __repr__(self) -> str:
        return (
            f"Record(key={self[0]!r}, value={self[1]!r}, timestamp={self[2]!r}, "
            f"headers={self[3]!r})"
        )


class RecordMetadata(NamedTuple):
    """Where the record being processed came from: its source ``topic``, ``partition`` and
    ``offset`` (Kafka's ``RecordMetadata`` of ``ProcessorContext.recordMetadata()``)."""

    topic: str
    partition: int
    offset: int
