"""Standby and warm-up tasks of a stream thread (Kafka Streams' ``StandbyTask``).

Under ``group.protocol="streams"`` (KIP-1071) the broker gives each member, besides its active
tasks, *standby* tasks (``num.standby.replicas`` copies of each stateful task's stores, kept on
other instances) and, on 4.4 brokers, *warm-up* tasks (a standby that catches up before an
active task moves to this instance). Both run the same way here, as in Kafka: the task's
stores are opened in the same task directory as an active task's (``state.dir/<application
id>/<task id>``, the same ``.checkpoint`` file), and their changelogs are replayed
continuously, never "done": a standby processes no source record and sends nothing.

:class:`StandbyTasks` holds a stream thread's standbys and replays them on a thread of its own
with a consumer of its own (a restore consumer; ``read_committed`` under exactly-once), so
that neither the stream thread's processing nor its active tasks' restoration waits for it.
Each poll's records are applied per changelog partition in one write batch
(:func:`streamstate.process_next`); every ``commit.interval.ms`` the stores are flushed and the
checkpoint written (Kafka checkpoints standbys at commit too). While the thread's state updater
restores active tasks the standbys wait, as Kafka's state updater updates standbys only when
no active task is restoring: a failover's restoration gets the machine. The restore listener hears
nothing of standbys (Kafka tells standby progress to a ``StandbyUpdateListener`` instead).

When the broker makes a standby active on this instance, :meth:`StandbyTasks.take` stops its
replay, writes its checkpoint and hands the very task object, stores open, to the stream
thread, which gives it to the state updater as any new active task: only the changelog tail
past the checkpoint is restored (Kafka moves the stores from standby to active without closing
them too). A standby the broker takes away is checkpointed and closed.

:meth:`StandbyTasks.task_offsets` gives each standby's changelog position (the sum of its
changelog offsets, KIP-1071's ``TaskOffsets``) for the heartbeat.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.state_directory import checkpoint_offset_sum, is_lock_conflict
from streamstate.app.streams_group import TaskId as GroupTaskId
from streamstate.app.task_state import forget_changelog, restore_start_offsets, wipe_task
from streamstate.clients.kafka_errors import error_text
from streamstate.clients.poll import split_poll
from streamstate.errors import ProcessorStateError, TaskCorruptedError
from streamstate.records import TopicPartition
from streamstate.state.stores import process_next, wipe_store

if TYPE_CHECKING:
    from streamstate.app.task import StreamTask

__all__ = ["StandbyTasks", "directory_task_id", "group_task_id", "task_offsets"]

_log = logging.getLogger("streamstate.app")
# A standby has no end to reach: every record polled is applied.
_NO_END = 1 << 62
_POLL_RECORDS = 10_000
_POLL_S = 0.1
_TASK_DIRECTORY = re.compile(r"(?:([0-9]+)_)?([0-9]+)")


class _Standby:
    """A standby task and the next changelog offset to apply of each of its changelogs."""

    def __init__(self, task: StreamTask, starts: dict[str, int | None]) -> None:
        self.task = task
        # Changelog partition -> the offset of the next record to apply (0: from the start).
        self.next: dict[TopicPartition, int] = {}
        for name, tp in task.changelogs.items():
            start = starts[name]
            self.next[tp] = 0 if start is None else start + 1
        self.store_of = {tp: task.stores[name] for name, tp in task.changelogs.items()}


class StandbyTasks:
    """A stream thread's standby (and warm-up) tasks; see the module doc.

    ``make_task(task_id)`` opens a task's stores (the stream thread's task factory; it may
    raise a lock conflict, retried at the next :meth:`update`); ``make_consumer()`` makes the
    standby consumer, on the first standby."""

    def __init__(
        self,
        name: str,
        make_task: Callable[[Any], StreamTask],
        make_consumer: Callable[[], Consumer],
        *,
        commit_interval_ms: int,
        actives_restoring: Callable[[], bool] = lambda: False,
    ) -> None:
        """Nothing runs before the first standby arrives. While ``actives_restoring()``
        the standbys wait: active tasks restore first (Kafka's state updater's order)."""
        self._name = name
        self._make_task = make_task
        self._make_consumer = make_consumer
        self._actives_restoring = actives_restoring
        self._commit_interval_s = max(commit_interval_ms, 1) / 1000.0
        self._cond = threading.Condition()
        self._standbys: dict[Any, _Standby] = {}
        # Standbys the broker gave that could not open yet (their directory locked by another
        # thread's task, closing): opened at a later update.
        self._waiting: set[Any] = set()
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._error: BaseException | None = None
        self._last_checkpoint = time.monotonic()

    # -- the stream thread's side -------------------------------------------------------------

    @property
    def task_ids(self) -> set[Any]:
        """The standby tasks open now."""
        with self._cond:
            return set(self._standbys)

    def update(self, wanted: Iterable[Any]) -> None:
        """Makes the standbys ``wanted`` (the broker's standby and warm-up tasks minus this
        thread's active ones): closes the others (checkpointed), opens the new ones."""
        wanted = set(wanted)
        self.raise_if_failed()
        with self._cond:
            gone = [self._standbys.pop(t) for t in list(self._standbys) if t not in wanted]
            self._unassign(gone)
            self._waiting = wanted - set(self._standbys)
        for standby in gone:
            self._close(standby.task)
        self.retry_waiting()

    def tick(self) -> None:
        """Called every loop of the stream thread: raises what failed the standby thread and
        opens the standbys that could not open yet (see :meth:`update`)."""
        self.raise_if_failed()
        self.retry_waiting()

    def retry_waiting(self) -> None:
        """Opens the standbys that could not open yet (see :meth:`update`)."""
        if not self._waiting:
            return
        for task_id in sorted(self._waiting, key=str):
            try:
                task = self._make_task(task_id)
            except ProcessorStateError as exc:
                if not is_lock_conflict(exc):
                    raise
                _log.debug("stream-thread [%s] standby %s waits: %s", self._name, task_id, exc)
                continue
            self._waiting.discard(task_id)
            if not task.changelogs:
                task.close()  # a stateless task has nothing to keep warm
                continue
            self._open(task)

    def take(self, task_id: Any, producer: Any) -> StreamTask | None:
        """The standby ``task_id`` made active here: its replay stops, its checkpoint is
        written and the task (stores open) is returned; ``None`` when it is no standby here,
        or one made with a producer since replaced (closed: the caller opens it anew)."""
        self._waiting.discard(task_id)
        with self._cond:
            standby = self._standbys.pop(task_id, None)
            if standby is None:
                return None
            self._unassign([standby])
            task = standby.task
            task.apply_committed()  # flushes the stores, writes the checkpoint
        if getattr(task, "_producer", producer) is not producer:
            self._close(task)
            return None
        _log.info("stream-thread [%s] standby task %s becomes active", self._name, task_id)
        return task

    def task_offsets(self) -> dict[Any, int]:
        """Each standby's changelog position: the sum of its changelog offsets (KIP-1071's
        ``TaskOffsets``)."""
        with self._cond:
            return {t: sum(s.next.values()) for t, s in self._standbys.items()}

    def positions(self) -> dict[TopicPartition, int]:
        """The next changelog offset to apply of every standby changelog partition."""
        with self._cond:
            return {tp: o for s in self._standbys.values() for tp, o in s.next.items()}

    def end_offsets(self) -> dict[TopicPartition, int]:
        """The changelog end offsets the standby consumer last heard of (no request is
        sent); a partition it has not fetched yet is left out."""
        with self._cond:
            consumer, parts = self._consumer, [tp for s in self._standbys.values() for tp in s.next]
        ends: dict[TopicPartition, int] = {}
        for tp in parts if consumer is not None else []:
            try:
                _, high = consumer.get_watermark_offsets(  # type: ignore[union-attr]
                    KafkaTopicPartition(tp.topic, tp.partition), cached=True
                )
            except KafkaException:
                continue
            if high >= 0:
                ends[tp] = int(high)
        return ends

    def raise_if_failed(self) -> None:
        """Raises what failed the standby thread (the stream thread dies of it)."""
        with self._cond:
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """Stops the thread, checkpoints and closes every standby, closes the consumer."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(30)
        with self._cond:
            standbys, self._standbys = list(self._standbys.values()), {}
        for standby in standbys:
            self._close(standby.task)
        if self._consumer is not None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError):
                pass

    # -- internals ------------------------------------------------------------------------------

    def _open(self, task: StreamTask) -> None:
        try:
            starts = restore_start_offsets(task)
        except TaskCorruptedError as exc:
            _log.warning("standby task %s is corrupted (%s): wiping it", task.task_id, exc)
            starts = wipe_task(task)
        standby = _Standby(task, starts)
        with self._cond:
            if self._consumer is None:
                self._consumer = self._make_consumer()
            self._standbys[task.task_id] = standby
            self._consumer.incremental_assign(
                [
                    KafkaTopicPartition(tp.topic, tp.partition, o if o > 0 else OFFSET_BEGINNING)
                    for tp, o in standby.next.items()
                ]
            )
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name}-StandbyUpdater", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        _log.info(
            "stream-thread [%s] standby task %s replays %s from %s",
            self._name,
            task.task_id,
            ", ".join(f"{tp.topic}-{tp.partition}" for tp in standby.next),
            standby.next,
        )

    def _unassign(self, standbys: list[_Standby]) -> None:
        parts = [KafkaTopicPartition(tp.topic, tp.partition) for s in standbys for tp in s.next]
        if parts and self._consumer is not None:
            self._consumer.incremental_unassign(parts)

    def _close(self, task: StreamTask) -> None:
        try:
            task.apply_committed()
        finally:
            task.close()

    def _run(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        try:
            while True:
                with self._cond:
                    while not self._stopping and not self._standbys:
                        self._cond.wait()
                    if self._stopping:
                        return
                if self._actives_restoring():
                    time.sleep(_POLL_S)
                    continue
                # Polled outside the lock: the stream thread's take and update wait for one
                # batch's apply at most, never for a poll.
                messages = consumer.consume(num_messages=_POLL_RECORDS, timeout=_POLL_S)
                with self._cond:
                    self._apply(messages)
                    if time.monotonic() - self._last_checkpoint >= self._commit_interval_s:
                        self._last_checkpoint = time.monotonic()
                        for standby in self._standbys.values():
                            standby.task.apply_committed()
        except BaseException as exc:
            _log.error("stream-thread [%s] standby updater failed: %s", self._name, exc)
            with self._cond:
                self._error = exc

    def _apply(self, messages: list[Any]) -> None:
        polled = split_poll(messages)
        polled.raise_if_fatal("standby consumer")
        owners = {tp: s for s in self._standbys.values() for tp in s.next}
        for (topic, partition), run in polled.runs.items():
            tp = TopicPartition(topic, partition)
            standby = owners.get(tp)
            if standby is None:
                continue  # fetched before its task was taken or closed
            # Never apply a record twice (one fetched before a re-assignment).
            fresh = [m for m in run if (m.offset() or 0) >= standby.next[tp]]
            if not fresh:
                continue
            restored = process_next(standby.store_of[tp], fresh, _NO_END)
            if restored.next_offset >= 0:
                standby.next[tp] = int(restored.next_offset)
            if restored.num_restored > 0:
                standby.task.changelog_offsets[tp] = int(restored.last_restored_offset)
        for (topic, partition), (offset, reason) in polled.invalid_offsets.items():
            tp = TopicPartition(topic, partition)
            standby = owners.get(tp)
            if standby is not None:
                self._restart(standby, tp, offset, reason)

    def _restart(self, standby: _Standby, tp: TopicPartition, offset: int, reason: str) -> None:
        """A position out of the log (retention, a re-created changelog): the store is wiped
        and replayed from the beginning, as an active task's restoration does."""
        _log.warning(
            "standby task %s: changelog %s-%d offset %d is out of range (%s); wiping the "
            "store and replaying it from the beginning",
            standby.task.task_id,
            tp.topic,
            tp.partition,
            offset,
            reason,
        )
        forget_changelog(standby.task, tp)
        wipe_store(standby.store_of[tp])
        standby.next[tp] = 0
        assert self._consumer is not None
        try:
            self._consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING))
        except KafkaException as exc:
            _log.warning("standby task %s: seek failed: %s", standby.task.task_id, error_text(exc))


def group_task_id(task_id: Any) -> GroupTaskId:
    """A stream thread's task id as the streams group names it: the one-function form's
    partition is a task of sub-topology ``"0"``."""
    if isinstance(task_id, int):
        return GroupTaskId("0", task_id)
    return GroupTaskId(str(task_id.subtopology), int(task_id.partition))


def directory_task_id(name: str) -> GroupTaskId | None:
    """The group task of a task directory's name (``<subtopology>_<p>``, or ``<p>`` for the
    one-function form, sub-topology ``"0"``); ``None`` for any other name."""
    found = _TASK_DIRECTORY.fullmatch(name)
    if found is None:
        return None
    sub, partition = found.group(1, 2)
    return GroupTaskId(str(int(sub)) if sub is not None else "0", int(partition))


def task_offsets(
    active: dict[Any, StreamTask],
    standbys: StandbyTasks,
    on_disk: Mapping[str, int] | None = None,
    known: Callable[[str], object] = lambda subtopology: True,
) -> tuple[dict[GroupTaskId, int], dict[GroupTaskId, int]]:
    """KIP-1071's ``TaskOffsets`` and ``TaskEndOffsets`` of a stream thread: per stateful
    task, the sum of its changelog positions (the offset of the next record to apply) and of
    their end offsets. An active task is at its changelogs' end (it writes them); a standby
    is where its replay stands, against the end its consumer last heard of. A restoring
    active task, and every task directory with a checkpoint that no task of the process runs
    (``on_disk``: :func:`~streamstate.app.state_directory.checkpointed_tasks`, of a
    sub-topology ``known`` to the topology), are where their checkpoints say, with no end
    offset: a restarted instance reports the state it holds from its first heartbeat, and the
    broker's assignor prefers it for those tasks (Kafka 4.4's ``StickyTaskAssignor`` counts
    reported offsets as a standby's), as Kafka Streams reports the task directories it
    locks."""
    offsets: dict[GroupTaskId, int] = {}
    ends: dict[GroupTaskId, int] = {}
    for task_id, task in active.items():
        if task.changelogs and not task.restoring:
            position = sum(o + 1 for o in dict(task.changelog_offsets).values())
            offsets[group_task_id(task_id)] = ends[group_task_id(task_id)] = position
        elif task.changelogs and (saved := checkpoint_offset_sum(task.checkpoint_file.path)):
            offsets[group_task_id(task_id)] = saved
    positions, heard = standbys.positions(), standbys.end_offsets()
    with standbys._cond:
        changelogs = {t: list(s.next) for t, s in standbys._standbys.items()}
    for task_id, tps in changelogs.items():
        gid = group_task_id(task_id)
        offsets[gid] = sum(positions.get(tp, 0) for tp in tps)
        ends[gid] = sum(max(heard.get(tp, 0), positions.get(tp, 0)) for tp in tps)
    for name, offset in (on_disk or {}).items():
        found = directory_task_id(name)
        if found is not None and known(found.subtopology_id):
            offsets.setdefault(found, offset)
    return offsets, ends


def standby_stores(standbys: StandbyTasks, name: str, partition: int | None) -> list[Any]:
    """The open stores ``name`` of ``standbys`` (``partition``: that task's only), for
    queries with ``stale_stores=True``."""
    with standbys._cond:
        tasks = [s.task for _, s in sorted(standbys._standbys.items(), key=lambda i: str(i[0]))]
    found = []
    for task in tasks:
        store = task.stores.get(name)
        if partition in (None, task.partition) and store is not None and store.is_open():
            found.append(store)
    return found


def unless_standby_here(
    threads: Iterable[Any],
    locate: Callable[[str, bytes], tuple[int, str] | None],
    store_name: str,
    key: bytes,
) -> tuple[int, str] | None:
    """``locate`` (where a key held elsewhere is active) for a query with stale stores: a key
    whose partition a standby of ``threads`` holds is answered here."""
    where = locate(store_name, key)
    if where is None:
        return None
    for thread in threads:
        if standby_stores(thread.standbys, store_name, where[0]):
            return None
    return where
