"""``StateUpdater``: restoration of a stream thread's active tasks on a thread of its own (KIP-869).

Each :class:`~streamstate.app.stream_thread.StreamThread` owns one state updater. The stream
thread hands it every new task that has changelogged stores (:meth:`StateUpdater.add`); the
updater owns the thread's *restore consumer* and a :class:`~streamstate.StoreChangelogReader`,
and calls :meth:`~streamstate.StoreChangelogReader.restore` back to back while there is work, so
restoration never waits for the stream thread's ``poll.ms`` nor for its processing. A task whose
every changelog has caught up is removed from the reader and queued for hand-over; the stream
thread takes it (:meth:`StateUpdater.drain_restored`) on its next loop, resumes its partitions
and processes it, while the updater goes on restoring the others. With nothing to restore the
updater sleeps on a condition, polling nothing.

The stores of a task in the updater are written by the updater alone: the stream thread neither
processes nor closes them until the task is handed back (restored) or removed
(:meth:`StateUpdater.remove` returns once the updater has let go of them, its listener having
heard ``on_restore_suspended`` for a store cut short).

Failures follow Kafka Streams 3.x:

* a task whose state cannot be trusted (:class:`~streamstate.errors.TaskCorruptedError`, e.g. a
  corrupt ``.checkpoint``) is wiped and restored from the beginning of its changelogs, with a
  WARNING; the client never sees it;
* a restoration that makes no progress is retried, with a WARNING about every tenth of
  ``task.timeout.ms`` naming the task and its changelogs, and fails the task only once it made
  no progress for ``task.timeout.ms``: that error is raised in the stream thread (as any other
  error of the updater), which takes the client to ``ERROR``.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from streamstate.app.task_state import forget_changelog, restore_start_offsets, wipe_task
from streamstate.clients.restore_consumer import RestoreConsumer
from streamstate.errors import ProcessorStateError, TaskCorruptedError
from streamstate.records import TopicPartition
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.restorer import StateRestoreListener, StateRestorer

if TYPE_CHECKING:
    from streamstate.app.task import StreamTask

__all__ = ["StateUpdater"]

_log = logging.getLogger("streamstate.app")
# Records one restore poll may return: the same as `streamstate restore`, so an app restores at
# the reader's own speed.
_MAX_POLL_RECORDS = 10_000
# How long one restore poll may wait for records (ms). The reader's poll returns as soon as it
# has a full batch, so this is only waited at the tail of a changelog or on a slow fetch.
_POLL_MS = 50


class _Restoring:
    """A task in the updater: its changelogs and when each last moved."""

    def __init__(self, task: StreamTask) -> None:
        self.task = task
        self.last_positions: dict[TopicPartition, int | None] = {}
        self.last_progress = time.monotonic()
        self.last_warning = self.last_progress


class StateUpdater(threading.Thread):
    """Restores the stores of a stream thread's active tasks; see the module doc."""

    def __init__(
        self,
        name: str,
        restore_consumer: RestoreConsumer,
        *,
        task_timeout_ms: int,
        restore_listener: StateRestoreListener | None = None,
    ) -> None:
        """Takes ownership of ``restore_consumer`` (closed when the updater stops); nothing
        runs before :meth:`start`."""
        super().__init__(name=name, daemon=True)
        self.restore_consumer = restore_consumer
        self._task_timeout_ms = task_timeout_ms
        self._reader = StoreChangelogReader(
            restore_consumer,
            poll_ms=_POLL_MS,
            restore_listener=restore_listener,
            stall_timeout_s=max(task_timeout_ms, 1) / 1000.0,
            max_poll_records=_MAX_POLL_RECORDS,
        )
        self._cond = threading.Condition()
        self._actions: collections.deque[tuple[str, Any, Future[None] | None]] = collections.deque()
        # Guarded by _cond: ids of tasks the updater holds (added, not yet handed back or
        # removed), and the restored tasks waiting for their stream thread.
        self._held: set[Any] = set()
        self._restored: list[StreamTask] = []
        self._error: BaseException | None = None
        self._stopping = False
        self._paused = False
        # Updater thread only.
        self._restoring: dict[Any, _Restoring] = {}

    # -- the stream thread's side -------------------------------------------------------------

    def add(self, task: StreamTask) -> None:
        """Takes ``task`` (created, its stores open, none of its partitions processed) for
        restoration; it comes back from :meth:`drain_restored` once restored."""
        with self._cond:
            self._held.add(task.task_id)
            self._actions.append(("add", task, None))
            self._cond.notify_all()

    def remove(self, task_ids: set[Any], timeout: float = 60.0) -> None:
        """Stops restoring the tasks ``task_ids`` (revoked or lost) and returns once the updater
        no longer touches their stores; restored tasks not yet handed back are dropped too."""
        with self._cond:
            self._restored = [t for t in self._restored if t.task_id not in task_ids]
            ids = task_ids & self._held
            if not ids:
                return
            if not self.is_alive():
                self._remove_now(ids)
                return
            done: Future[None] = Future()
            self._actions.append(("remove", ids, done))
            self._cond.notify_all()
        done.result(timeout)

    def holds(self, task_id: Any) -> bool:
        """Whether task ``task_id`` is restoring (in the updater or awaiting hand-over)."""
        with self._cond:
            return task_id in self._held

    def restoring(self) -> bool:
        """Whether any task is restoring (in the updater or awaiting hand-over)."""
        with self._cond:
            return bool(self._held)

    def drain_restored(self) -> list[StreamTask]:
        """The tasks restored since the last call, their ``changelog_offsets`` set to what was
        restored; raises what failed the updater (the stream thread dies of it)."""
        with self._cond:
            if self._error is not None:
                raise self._error
            restored, self._restored = self._restored, []
            for task in restored:
                self._held.discard(task.task_id)
            return restored

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stops the thread (waiting up to ``timeout`` seconds) and closes the restore
        consumer."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.is_alive():
            self.join(timeout)
        if not self.is_alive():
            try:
                self.restore_consumer.close()
            except (KafkaException, RuntimeError):
                pass

    # A test hook: stop fetching (positions stay where they are) until resumed.
    def _pause_fetching(self) -> None:
        with self._cond:
            self._paused = True

    # -- the updater thread -------------------------------------------------------------------

    def run(self) -> None:
        """Applies actions, restores while there is work, hands restored tasks back."""
        try:
            while True:
                with self._cond:
                    while not self._stopping and not self._actions and not self._restoring:
                        self._cond.wait()
                    if self._stopping:
                        return
                    actions = list(self._actions)
                    self._actions.clear()
                    paused = self._paused
                for action, arg, done in actions:
                    try:
                        if action == "add":
                            self._add(arg)
                        else:
                            self._remove_now(arg)
                    finally:
                        if done is not None:
                            done.set_result(None)
                if self._restoring:
                    if paused:
                        self.restore_consumer.pause(self.restore_consumer.assignment())
                    self._restore_once()
        except BaseException as exc:
            _log.error("state-updater [%s] failed: %s", self.name, exc)
            with self._cond:
                self._error = exc
                pending = list(self._actions)
                self._actions.clear()
            for _, _, done in pending:
                if done is not None:
                    done.set_result(None)

    def _add(self, task: StreamTask) -> None:
        try:
            starts = restore_start_offsets(task)
        except TaskCorruptedError as exc:
            starts = self._wipe(task, exc)
        self._register(task, starts)

    def _register(self, task: StreamTask, starts: dict[str, int | None]) -> None:
        for name, changelog in task.changelogs.items():
            self._reader.register(
                StateRestorer(
                    changelog,
                    task.stores[name],
                    starts[name],
                    before_wipe=functools.partial(forget_changelog, task, changelog),
                )
            )
        self._restoring[task.task_id] = _Restoring(task)

    def _wipe(self, task: StreamTask, cause: TaskCorruptedError) -> dict[str, int | None]:
        """Kafka Streams' handling of a corrupted task: wipe every store, forget the
        checkpoint, restore from the beginning."""
        _log.warning(
            "state-updater [%s] task %s is corrupted (%s): wiping its stores and restoring them "
            "from the beginning of their changelogs",
            self.name,
            task.task_id,
            cause,
        )
        return wipe_task(task)

    def _remove_now(self, ids: set[Any]) -> None:
        for task_id in ids:
            entry = self._restoring.pop(task_id, None)
            if entry is not None:
                self._reader.remove(entry.task.changelogs.values())
        with self._cond:
            # A task handed over while its removal was queued is dropped too.
            self._restored = [t for t in self._restored if t.task_id not in ids]
            self._held -= ids

    def _restore_once(self) -> None:
        try:
            completed = self._reader.restore()
        except ProcessorStateError as exc:
            if "no progress" not in str(exc):
                raise
            # str(exc) already names the store, topic and partition; the attributes carry over.
            failed = ProcessorStateError(
                f"task.timeout.ms ({self._task_timeout_ms} ms) passed without restoration "
                f"progress; failing the task: {exc}"
            )
            failed.topic, failed.partition = exc.topic, exc.partition
            failed.store_name = exc.store_name
            raise failed from exc
        offsets = self._reader.restored_offsets()
        now = time.monotonic()
        for entry in list(self._restoring.values()):
            changelogs = list(entry.task.changelogs.values())
            if all(tp in completed for tp in changelogs):
                self._hand_over(entry, changelogs, offsets)
                continue
            self._watch_progress(entry, changelogs, now)

    def _hand_over(
        self,
        entry: _Restoring,
        changelogs: list[TopicPartition],
        offsets: dict[TopicPartition, int],
    ) -> None:
        task = entry.task
        for tp in changelogs:
            if tp in offsets:
                task.changelog_offsets[tp] = offsets[tp]
        self._reader.remove(changelogs)
        del self._restoring[task.task_id]
        _log.info("state-updater [%s] task %s restored; handing it over", self.name, task.task_id)
        with self._cond:
            if task.task_id in self._held:
                self._restored.append(task)

    def _watch_progress(
        self, entry: _Restoring, changelogs: list[TopicPartition], now: float
    ) -> None:
        positions = {tp: self._reader.position(tp) for tp in changelogs}
        if positions != entry.last_positions:
            entry.last_positions = positions
            entry.last_progress = now
            entry.last_warning = now
            return
        stalled_ms = (now - entry.last_progress) * 1000
        if (now - entry.last_warning) * 1000 < max(self._task_timeout_ms / 10, 1000):
            return
        entry.last_warning = now
        _log.warning(
            "state-updater [%s] task %s: restoring %s made no progress for %.0f ms; retrying "
            "until task.timeout.ms (%d ms) has passed without progress",
            self.name,
            entry.task.task_id,
            ", ".join(
                f"{tp.topic}-{tp.partition} (position {positions[tp]}, end "
                f"{self._reader.end_offset(tp)})"
                for tp in changelogs
            ),
            stalled_ms,
            self._task_timeout_ms,
        )
