"""Who may use a state directory: one process per ``state.dir/application.id``, one store object
per task directory, and the retry of a task whose directory is still held.

Kafka Streams' ``StateDirectory`` makes the same two promises. A process takes an exclusive lock
on ``state.dir/application.id/.lock`` at start-up (:class:`StateDirectoryLock`); a second
process (or a second client in this one) with the same ``state.dir`` and ``application.id``
fails to start with :class:`~streamstate.errors.ProcessorStateError` naming the directory,
instead of two clients writing the same stores. Inside a process, a task that moves from one
stream thread to another may be assigned to the new thread before the old one has closed it: its
persistent stores are then still open, and opening them again fails. The new thread does not
fail: it keeps the task's partitions paused and retries (:class:`LockedTasks`) with a growing
backoff, as Kafka Streams retries a task whose directory lock it could not get.

The directory also holds the process id (:func:`process_id`, Kafka 3.x's
``kafka-streams-process-metadata``): a UUID made the first time a client runs on this directory
and read back on every later start. Under exactly-once each stream thread's
``transactional.id`` is built from it, so a client restarted on the same disk takes over (and
fences) its previous incarnation's producers, and two clients never share one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from streamstate.errors import ProcessorStateError

__all__ = ["PROCESS_FILE", "LockedTasks", "StateDirectoryLock", "is_lock_conflict", "process_id"]

_log = logging.getLogger("streamstate.app")
LOCK_FILE = ".lock"
PROCESS_FILE = "kafka-streams-process-metadata"
"""The file of :func:`process_id` in the application's state directory (Kafka 3.x's name)."""
_PROCESS_FILE_VERSION = 1
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


def is_lock_conflict(exc: ProcessorStateError) -> bool:
    """Whether opening a persistent store failed because another store object holds its
    directory (the Rust store's one message for that case)."""
    return "is already open" in str(exc)


def process_id(app_dir: Path) -> uuid.UUID:
    """This client's process id: read from ``app_dir/kafka-streams-process-metadata``, or made
    (a random UUID) and written there when the file is missing or unreadable. Call it with the
    :class:`StateDirectoryLock` held. The file is JSON (``{"processId": ..., "version": 1}``),
    written to a temporary file and renamed, so a crash never leaves half of it."""
    path = app_dir / PROCESS_FILE
    try:
        return uuid.UUID(json.loads(path.read_text())["processId"])
    except FileNotFoundError:
        pass
    except (ValueError, KeyError, TypeError, OSError) as exc:
        _log.warning("unreadable process id in %s (%s); making a new one", path, exc)
    made = uuid.uuid4()
    app_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"processId": str(made), "version": _PROCESS_FILE_VERSION}))
    os.replace(tmp, path)
    return made


class StateDirectoryLock:
    """An exclusive advisory lock (``flock``) on ``app_dir/.lock``, held while the client runs.

    The lock belongs to the open file: the operating system drops it when the process dies, so
    a crashed client never leaves a stale lock behind."""

    def __init__(self, app_dir: Path) -> None:
        """Names the directory; nothing is locked before :meth:`acquire`."""
        self.path = app_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Takes the lock, or raises :class:`~streamstate.errors.ProcessorStateError`."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ProcessorStateError(
                f"the state directory {self.path.parent} is in use by another streamstate client "
                f"(process or instance) with the same application.id: {self.path} is locked. "
                "Give each client its own state.dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Drops the lock (the file stays; its lock is what counts)."""
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None


class LockedTasks:
    """Tasks assigned to a thread whose stores could not be opened yet, with their next retry."""

    def __init__(self) -> None:
        """No task waits."""
        self._retry_at: dict[Any, tuple[float, float]] = {}

    def __bool__(self) -> bool:
        """Whether any task waits."""
        return bool(self._retry_at)

    def __contains__(self, task_id: object) -> bool:
        """Whether ``task_id`` waits for its directory."""
        return task_id in self._retry_at

    def holds_partition(self, partition: int) -> bool:
        """Whether a task of ``partition`` (the partition itself, or a graph's ``TaskId``)
        waits for its directory."""
        return any(getattr(t, "partition", t) == partition for t in self._retry_at)

    def retry_later(self, thread: str, task_id: Any, cause: ProcessorStateError) -> None:
        """Schedules another attempt, doubling the backoff up to one second."""
        _, backoff = self._retry_at.get(task_id, (0.0, _FIRST_BACKOFF_S / 2))
        backoff = min(backoff * 2, _MAX_BACKOFF_S)
        self._retry_at[task_id] = (time.monotonic() + backoff, backoff)
        _log.warning(
            "stream-thread [%s] could not open the stores of task %s (%s); its partitions stay "
            "paused and it is retried in %.2f s",
            thread,
            task_id,
            cause,
            backoff,
        )

    def due(self) -> list[Any]:
        """The tasks whose next attempt is due."""
        now = time.monotonic()
        return sorted(t for t, (at, _) in self._retry_at.items() if at <= now)

    def discard(self, task_ids: set[Any]) -> None:
        """Forgets ``task_ids`` (created, revoked or lost)."""
        for task_id in task_ids:
            self._retry_at.pop(task_id, None)
