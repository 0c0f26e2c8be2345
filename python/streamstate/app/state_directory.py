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

Task directories are deleted, as Kafka Streams deletes them, by the state cleaner
(:class:`StateDirectoryCleaner`, every ``state.cleanup.delay.ms``): a task directory that no
task of this process holds (:data:`TASK_DIRECTORIES`) and that has not been modified for longer
than the delay goes. A task that comes back after its changelog was compacted would otherwise
restore from its old checkpoint, and the deletions compacted away meanwhile would never reach
it. :func:`clean_app_dir` is ``StreamsApp.clean_up()``: every store of the application.

:func:`checkpointed_tasks` reads what the task directories hold (their ``.checkpoint``), for the
streams group's ``TaskOffsets`` (``app/standby_task.py``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

from streamstate.errors import CorruptCheckpointError, ProcessorStateError
from streamstate.state.checkpoint import OffsetCheckpoint

__all__ = [
    "PROCESS_FILE",
    "TASK_DIRECTORIES",
    "LockedTasks",
    "StateDirectoryCleaner",
    "StateDirectoryLock",
    "TaskDirectories",
    "checkpoint_offset_sum",
    "checkpointed_tasks",
    "clean_app_dir",
    "clean_removed_tasks",
    "is_lock_conflict",
    "process_id",
]

_log = logging.getLogger("streamstate.app")
LOCK_FILE = ".lock"
PROCESS_FILE = "kafka-streams-process-metadata"
"""The file of :func:`process_id` in the application's state directory (Kafka 3.x's name)."""
_PROCESS_FILE_VERSION = 1
# A task's directory: its partition (the one-function form) or a graph's ``<subtopology>_<p>``
# (Kafka's pattern); ``global`` and the files of the application directory never match.
_TASK_DIRECTORY = re.compile(r"\d+(_\d+)?")
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


class TaskDirectories:
    """Which task directories tasks of this process hold (Kafka's task directory locks).

    A task claims its directory before it opens a store there and releases it when closed; the
    state cleaner deletes a directory only under the same lock, and only when no task holds it.
    Holders are kept by weak reference, so a task that failed half-built (a store still open
    elsewhere, say) releases its claim when it is collected instead of keeping the directory
    forever."""

    def __init__(self) -> None:
        """No directory is held."""
        self.lock = threading.Lock()
        self._holders: dict[Path, weakref.WeakSet[Any]] = {}

    def claim(self, directory: Path, holder: object) -> None:
        """``holder`` (a task) uses ``directory`` from now on."""
        with self.lock:
            self._holders.setdefault(directory.absolute(), weakref.WeakSet()).add(holder)

    def release(self, directory: Path, holder: object) -> None:
        """``holder`` is done with ``directory``."""
        with self.lock:
            holders = self._holders.get(directory.absolute())
            if holders is not None:
                holders.discard(holder)
                if not holders:
                    del self._holders[directory.absolute()]

    def held(self, directory: Path) -> bool:
        """Whether a live task holds ``directory``; call with :attr:`lock` held."""
        return bool(self._holders.get(directory.absolute()))


TASK_DIRECTORIES = TaskDirectories()
"""The process's one registry: one client per application directory (:class:`StateDirectoryLock`)
makes a directory's path name one client's task."""


def clean_removed_tasks(
    app_dir: Path, delay_ms: int, *, directories: TaskDirectories = TASK_DIRECTORIES
) -> list[Path]:
    """Deletes the task directories under ``app_dir`` that no task holds and that were last
    modified more than ``delay_ms`` ago (Kafka's ``StateDirectory.cleanRemovedTasks``); returns
    them. A task writes its ``.checkpoint`` (a rename in its directory) on every commit and on
    close, so the modification time is when it last ran here. A failure is logged, never
    raised: the next run tries again."""
    deleted: list[Path] = []
    try:
        entries = sorted(app_dir.iterdir())
    except FileNotFoundError:
        return deleted
    for entry in entries:
        if not _TASK_DIRECTORY.fullmatch(entry.name) or not entry.is_dir():
            continue
        with directories.lock:
            try:
                idle_ms = (time.time() - entry.stat().st_mtime) * 1000
                if directories.held(entry) or idle_ms <= delay_ms:
                    continue
                _log.info(
                    "Deleting obsolete state directory %s as %.0f ms has elapsed (cleanup delay "
                    "is %d ms)",
                    entry,
                    idle_ms,
                    delay_ms,
                )
                shutil.rmtree(entry)
                deleted.append(entry)
            except OSError as exc:
                _log.warning("could not delete obsolete state directory %s: %s", entry, exc)
    return deleted


def checkpointed_tasks(
    app_dir: Path, *, directories: TaskDirectories = TASK_DIRECTORIES
) -> dict[str, int]:
    """The task directories under ``app_dir`` that hold state and that no task of this process
    runs (those are reported by their thread, live), by name (``<subtopology>_<p>``, or
    ``<p>`` for the one-function form), each with :func:`checkpoint_offset_sum`: Kafka's
    ``TaskManager.getTaskOffsetSums`` for the task directories a thread locks but does not
    run."""
    found: dict[str, int] = {}
    try:
        entries = sorted(app_dir.iterdir())
    except OSError:
        return found
    for entry in entries:
        if not _TASK_DIRECTORY.fullmatch(entry.name):
            continue
        with directories.lock:
            if directories.held(entry):
                continue
        offset = checkpoint_offset_sum(entry / ".checkpoint")
        if offset is not None:
            found[entry.name] = offset
    return found


def checkpoint_offset_sum(path: Path) -> int | None:
    """The sum of a ``.checkpoint``'s changelog positions (the offset after the last record
    applied, per changelog partition), or ``None`` for no state: no checkpoint, an empty one,
    or a corrupt or unreadable one (the task would restore from scratch: Kafka wipes a
    corrupted task). Read without a lock: a checkpoint is replaced by a rename, so a read sees
    the old file or the new one."""
    try:
        offsets = OffsetCheckpoint(path).read()
    except (CorruptCheckpointError, OSError) as exc:
        _log.debug("%s: no task offsets reported (%s)", path, exc)
        return None
    return sum(offset + 1 for offset in offsets.values()) if offsets else None


def clean_app_dir(app_dir: Path) -> None:
    """Deletes every store of the application under ``app_dir`` (task directories, global
    stores, anything else there) but the lock file and the process id, which Kafka keeps too.
    Takes the :class:`StateDirectoryLock` for the time: a client of another process running on
    the directory makes it raise :class:`~streamstate.errors.ProcessorStateError` instead."""
    if not app_dir.is_dir():
        return
    lock = StateDirectoryLock(app_dir)
    lock.acquire()
    try:
        for entry in sorted(app_dir.iterdir()):
            if entry.name in (LOCK_FILE, PROCESS_FILE):
                continue
            _log.info("Deleting %s as the user called clean_up()", entry)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    finally:
        lock.release()


class StateDirectoryCleaner(threading.Thread):
    """Runs :func:`clean_removed_tasks` every ``delay_ms`` until :meth:`shutdown` (Kafka's
    ``stateDirCleaner``, whose first run is one delay after the start too: tasks of a restarted
    client get their directories back before any could look obsolete)."""

    def __init__(self, app_dir: Path, delay_ms: int, *, name: str) -> None:
        """Made stopped; :meth:`start` runs it."""
        super().__init__(name=name, daemon=True)
        self._app_dir = app_dir
        self._delay_ms = delay_ms
        self._stop_requested = threading.Event()

    def run(self) -> None:
        """Cleans every ``delay_ms`` until :meth:`shutdown`."""
        while not self._stop_requested.wait(self._delay_ms / 1000):
            try:
                clean_removed_tasks(self._app_dir, self._delay_ms)
            except Exception:  # the cleaner must outlive a surprise; the next run tries again
                _log.exception("the state directory cleaner of %s failed", self._app_dir)

    def shutdown(self) -> None:
        """Stops the thread (a run under way completes)."""
        self._stop_requested.set()
