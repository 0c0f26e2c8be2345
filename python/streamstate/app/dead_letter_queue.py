"""The dead-letter queue (Kafka Streams 4.2+, KIP-1034): ``errors.dead.letter.queue.topic.name``.

With the topic set, every record an exception handler is asked about — a source record that
could not be deserialized (``deserialization.exception.handler``), a source record whose
processor raised (``processing.exception.handler``), a source record one of whose sink records
the broker refused (``production.exception.handler``) — is also written to that topic, whatever
the handler answers (Kafka's built-in handlers build the record for ``FAIL`` and ``CONTINUE``
alike; with ``"fail"`` the thread then dies, and under exactly-once the record dies with the
aborted transaction). As ``ExceptionHandlerUtils.buildDeadLetterQueueRecord`` builds it:

* key and value: the **source** record's raw bytes (``sourceRawKey`` / ``sourceRawValue``),
  not the sink record's; ``None`` for a sink record sent from a punctuation;
* timestamp: the source record's; partition: the producer's choice;
* headers: the source record's, then the six ``__streams.errors.*`` headers, UTF-8 strings:
  the exception's class, message (absent value when it has none), stack trace, and the source
  record's topic, partition and offset (``-1`` when there is none).

The records go out through the stream thread's producer: under ``exactly_once_v2`` in the
task's open transaction (they commit with its output and offsets, or not at all), under
at-least-once before the commit that passes the bad record. The topic is the user's:
streamstate does not create it. A dead-letter record the broker refuses (the topic missing,
say) goes to the production exception handler like any refused record.

Difference from Kafka: a handler here is a name or a callable answering ``"fail"`` /
``"continue"``; it cannot return records of its own, and the dead-letter record is written for
a callable's answer too (Kafka writes one only when the handler returns it).
"""

from __future__ import annotations

import traceback
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from streamstate.clients.producer_proxy import UnsentMessage

__all__ = [
    "HEADER_EXCEPTION",
    "HEADER_MESSAGE",
    "HEADER_OFFSET",
    "HEADER_PARTITION",
    "HEADER_STACKTRACE",
    "HEADER_TOPIC",
    "DeadLetterQueue",
    "DeadLetterRecord",
    "SourceBytes",
    "dead_letter_headers",
    "exception_class_name",
]

HEADER_EXCEPTION = "__streams.errors.exception"
"""The exception's class name (Kafka's ``HEADER_ERRORS_EXCEPTION_NAME``)."""
HEADER_MESSAGE = "__streams.errors.message"
"""The exception's message (``HEADER_ERRORS_EXCEPTION_MESSAGE_NAME``)."""
HEADER_STACKTRACE = "__streams.errors.stacktrace"
"""The exception's stack trace (``HEADER_ERRORS_STACKTRACE_NAME``)."""
HEADER_TOPIC = "__streams.errors.topic"
"""The source record's topic (``HEADER_ERRORS_TOPIC_NAME``)."""
HEADER_PARTITION = "__streams.errors.partition"
"""The source record's partition (``HEADER_ERRORS_PARTITION_NAME``)."""
HEADER_OFFSET = "__streams.errors.offset"
"""The source record's offset (``HEADER_ERRORS_OFFSET_NAME``)."""

Headers = list[tuple[str, bytes | None]]


def exception_class_name(exc: BaseException) -> str:
    """The class of ``exc`` as Java's ``getClass().getName()`` names one: qualified by its
    module (builtins unqualified: ``ValueError``)."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def dead_letter_headers(
    exc: BaseException, topic: str | None, partition: int | None, offset: int | None
) -> Headers:
    """The six ``__streams.errors.*`` headers for ``exc`` raised on the record at ``topic``,
    ``partition``, ``offset`` (``None``: not known, ``-1`` as Kafka writes it for the numbers,
    an absent value for the topic)."""
    # Java's getMessage() is null for an exception made without one: an absent header value.
    message = str(exc) if exc.args else None
    stacktrace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return [
        (HEADER_EXCEPTION, _utf8(exception_class_name(exc))),
        (HEADER_MESSAGE, _utf8(message)),
        (HEADER_STACKTRACE, _utf8(stacktrace)),
        (HEADER_TOPIC, _utf8(topic)),
        (HEADER_PARTITION, _utf8(str(-1 if partition is None else partition))),
        (HEADER_OFFSET, _utf8(str(-1 if offset is None else offset))),
    ]


class DeadLetterRecord:
    """One record for the dead-letter topic: ``key``/``value`` bytes, ``timestamp`` (``None``:
    the producer's clock) and ``headers``."""

    __slots__ = ("headers", "key", "timestamp", "topic", "value")

    def __init__(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None,
        headers: Headers,
    ) -> None:
        """A record for ``topic``."""
        self.topic = topic
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    @classmethod
    def build(
        cls,
        dlq_topic: str,
        exc: BaseException,
        *,
        topic: str | None,
        partition: int | None,
        offset: int | None,
        timestamp: int | None,
        key: Any,
        value: Any,
        headers: Iterable[tuple[str, Any]] | None,
    ) -> DeadLetterRecord:
        """The dead-letter record of the source record (``topic``, ``partition``, ``offset``,
        ``timestamp``, raw ``key``/``value``, ``headers``) on which ``exc`` was raised."""
        out: Headers = [(name, _header_bytes(v)) for name, v in headers or ()]
        out.extend(dead_letter_headers(exc, topic, partition, offset))
        stamp = timestamp if timestamp is not None and timestamp >= 0 else None
        return cls(dlq_topic, _raw(key), _raw(value), stamp, out)

    def __repr__(self) -> str:
        """Names the topic and the error headers."""
        return f"DeadLetterRecord(topic={self.topic!r}, headers={self.headers[-6:]!r})"


def _raw(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    return None  # not raw bytes: Kafka's sourceRawKey would be null too


def _header_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


class SourceBytes:
    """The raw key, value and headers of a task's buffered source records, by partition and
    offset, kept only while a dead-letter topic is set (Kafka keeps them on the record context
    for the same purpose): :meth:`take` hands out a record's as it is processed, forgetting
    those before it (dropped on admission)."""

    __slots__ = ("_by_partition",)

    def __init__(self) -> None:
        """Holds nothing."""
        self._by_partition: dict[tuple[str, int], deque[tuple[int, Any, Any, Any]]] = {}

    def add(self, topic: str, partition: int, messages: Iterable[Any]) -> None:
        """Remembers polled ``confluent_kafka.Message`` objects of one partition."""
        queue = self._by_partition.setdefault((topic, partition), deque())
        for m in messages:
            queue.append((m.offset(), m.key(), m.value(), m.headers()))

    def take(self, topic: str, partition: int, offset: int) -> tuple[Any, Any, Any] | None:
        """The ``(key, value, headers)`` of the record at ``offset``, if remembered."""
        queue = self._by_partition.get((topic, partition))
        while queue and queue[0][0] < offset:
            queue.popleft()
        if queue and queue[0][0] == offset:
            _, key, value, headers = queue.popleft()
            return key, value, headers
        return None


class DeadLetterQueue:
    """A task's writer to the dead-letter ``topic``: :meth:`add` sends a record at once (while
    processing: under exactly-once the transaction is open); :meth:`add_polled` sends it at
    once when ``immediate()`` says the producer may, and keeps it for :meth:`send_pending`
    otherwise (a bad record found while polling, before the transaction begins).
    ``on_failure(err, msg)`` hears of a record the broker refused."""

    def __init__(
        self,
        topic: str,
        producer: Any,
        *,
        immediate: Callable[[], bool],
        on_failure: Callable[[Any, Any], None],
    ) -> None:
        """Writes to ``topic`` with ``producer``."""
        self.topic = topic
        self._producer = producer
        self._immediate = immediate
        self._on_failure = on_failure
        self._pending: list[DeadLetterRecord] = []
        self.sent = 0

    def add(self, record: DeadLetterRecord) -> None:
        """Sends ``record`` now."""
        self._send(record)

    def add_polled(self, record: DeadLetterRecord) -> None:
        """Sends ``record`` now, or with the next :meth:`send_pending`."""
        if self._immediate():
            self._send(record)
        else:
            self._pending.append(record)

    def record_of(self, exc: BaseException, source: Any) -> DeadLetterRecord:
        """The dead-letter record of the source record being processed, ``source`` (``(topic,
        partition, offset, timestamp, (key, value, headers) or None)``; ``None``: a
        punctuation's send, no source record), on which ``exc`` was raised."""
        if source is None:
            source = (None, None, None, None, None)
        topic, partition, offset, timestamp, source_bytes = source
        key, value, headers = source_bytes if source_bytes is not None else (None, None, None)
        return DeadLetterRecord.build(
            self.topic,
            exc,
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=timestamp,
            key=key,
            value=value,
            headers=headers,
        )

    def deserialization_handler(self, configured: Any) -> Callable[[Any, BaseException], Any]:
        """The ``configured`` deserialization handler (a name or a callable ``(record,
        error)``) as the record queues call it: it also writes the dead-letter record of each
        record it is asked about, from the raw record it is handed (so a name becomes a
        callable: the Rust fast path cannot hand the raw bytes over)."""

        def handle(record: Any, error: BaseException) -> Any:
            answer = configured(record, error) if callable(configured) else configured
            self.add_polled(
                DeadLetterRecord.build(
                    self.topic,
                    error,
                    topic=record.topic,
                    partition=record.partition,
                    offset=record.offset,
                    timestamp=record.timestamp,
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                )
            )
            return answer

        return handle

    def send_pending(self) -> None:
        """Sends the records kept by :meth:`add` (the caller's transaction is open)."""
        pending, self._pending = self._pending, []
        for record in pending:
            self._send(record)

    def discard(self) -> None:
        """Forgets the records not sent (their task is closed without a commit)."""
        self._pending.clear()

    def _send(self, record: DeadLetterRecord) -> None:
        kwargs: dict[str, Any] = {"on_delivery": self._delivered, "headers": record.headers}
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        while True:
            try:
                self._producer.produce(record.topic, record.value, record.key, **kwargs)
                break
            except BufferError:
                self._producer.poll(0.05)
            except Exception as exc:  # refused before it was queued: the handler decides
                self._on_failure(exc, UnsentMessage(record.topic, None))
                return
        self.sent += 1

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._on_failure(err, msg)
