"""What a StreamsApp does when something fails: Kafka Streams' exception handlers.

* The **uncaught exception handler** (``StreamsApp.set_uncaught_exception_handler``, Kafka 2.8+,
  KIP-671) decides what happens when a stream thread dies: replace the thread, shut the client
  down, or shut the application down (:class:`StreamThreadExceptionResponse`).
* The **processing exception handler** (``processing.exception.handler``, Kafka 3.9+, KIP-1033)
  decides whether a record whose processor raised fails the thread or is dropped.
* The **production exception handler** (``production.exception.handler``, or the deprecated
  ``default.production.exception.handler``) decides whether a sink record the broker refused
  fails the thread or is dropped.

The two record handlers take ``"fail"`` (the default, as in Kafka), ``"continue"``, or a
callable returning one of those; every drop is counted (``dropped-records-total`` in
``StreamsApp.metrics()``) and logged at WARNING with its topic, partition and offset. With
``errors.dead.letter.queue.topic.name`` set, each record a handler is asked about is also
written to that topic (``app/dead_letter_queue.py``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

__all__ = [
    "CONTINUE",
    "FAIL",
    "ProcessingErrorContext",
    "StreamThreadExceptionResponse",
    "decide",
    "parse_record_handler",
]

_log = logging.getLogger("streamstate.app")

FAIL = "fail"
CONTINUE = "continue"
_RESPONSES = (FAIL, CONTINUE)


class StreamThreadExceptionResponse(enum.Enum):
    """What the uncaught exception handler asks for (Kafka's
    ``StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse``)."""

    REPLACE_THREAD = "REPLACE_THREAD"
    """Start a new stream thread in place of the dead one; the client keeps running."""
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    """Close this client to ``ERROR`` (the default, as in Kafka)."""
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"
    """Close this client to ``ERROR``; Kafka also asks every other client of the application
    to shut down, which streamstate cannot (see ``docs/runtime.md``)."""


class ProcessingErrorContext:
    """What a record handler is told: the failing record's ``topic``, ``partition``,
    ``offset`` (``None`` for a sink record the broker refused: it never got one), the
    ``task_id`` and the ``exception``."""

    __slots__ = ("exception", "offset", "partition", "task_id", "topic")

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        offset: int | None,
        task_id: int,
        exception: BaseException,
    ) -> None:
        """Describes one failure."""
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.task_id = task_id
        self.exception = exception

    def __repr__(self) -> str:
        """Names the record and the error."""
        return (
            f"ProcessingErrorContext(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, task_id={self.task_id}, exception={self.exception!r})"
        )


RecordHandler = Callable[[ProcessingErrorContext], str]


def parse_record_handler(name: str, value: Any) -> str | RecordHandler:
    """Checks a record handler setting: ``"fail"``, ``"continue"`` or a callable."""
    if callable(value):
        return value  # type: ignore[no-any-return]
    text = str(value).lower()
    if text not in _RESPONSES:
        raise ValueError(f"{name} must be 'fail', 'continue' or a callable, not {value!r}")
    return text


def decide(handler: str | RecordHandler, context: ProcessingErrorContext) -> str:
    """The handler's answer for ``context``: ``"fail"`` or ``"continue"``. A callable that
    raises or answers anything else means ``"fail"`` (Kafka treats a failing handler as
    fatal)."""
    if not callable(handler):
        return handler
    try:
        answer = str(handler(context)).lower()
    except Exception:
        _log.exception("the exception handler itself failed on %r; failing", context)
        return FAIL
    return answer if answer in _RESPONSES else FAIL
