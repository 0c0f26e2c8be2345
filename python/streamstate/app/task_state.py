"""Where a task's stores start from: its ``.checkpoint`` (for the state updater's restoration
of an active task and for a standby's replay, :mod:`streamstate.app.standby_task`).

A checkpoint holds, per changelog partition of a persistent store, the offset of the last
record the store holds; restoration resumes one past it. A store without one starts from the
beginning of its changelog, emptied first (it may hold writes the changelog never got).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamstate.errors import CorruptCheckpointError, TaskCorruptedError
from streamstate.records import TopicPartition
from streamstate.state.stores import holds_data, wipe_store

if TYPE_CHECKING:
    from streamstate.app.task import StreamTask

__all__ = ["forget_changelog", "restore_start_offsets", "wipe_task"]


def restore_start_offsets(task: StreamTask) -> dict[str, int | None]:
    """Per logged store of ``task``, the checkpointed offset to restore past, or ``None`` to
    restore from the beginning, having wiped a persistent store holding data without a
    checkpointed offset (in-memory stores start empty, unless the task is a standby made
    active: then its replay's position counts, ``changelog_offsets``). A corrupt ``.checkpoint``
    raises :class:`~streamstate.errors.TaskCorruptedError`: the caller then wipes every store
    of the task (:func:`wipe_task`) and restores them from the beginning."""
    try:
        offsets = task.checkpoint_file.read()
    except CorruptCheckpointError as exc:
        raise TaskCorruptedError(f"task {task.task_id}: {exc}") from exc
    starts: dict[str, int | None] = {}
    for name, tp in task.changelogs.items():
        store = task.stores[name]
        # A standby made active carries its replay's position, for in-memory stores too: its
        # stores were never closed (app/standby_task.py). A new task has none.
        live = task.changelog_offsets.get(tp)
        offset = live if live is not None else offsets.get(tp) if store.persistent else None
        if offset is None and holds_data(store):
            wipe_store(store)
        if offset is not None:
            task.changelog_offsets[tp] = offset
        starts[name] = offset
    return starts


def forget_changelog(task: StreamTask, changelog: TopicPartition) -> None:
    """Drops ``changelog``'s offset from ``task``'s checkpoint: its store is about to be
    wiped, and the checkpoint must never claim contents the store no longer has."""
    task.changelog_offsets.pop(changelog, None)
    kept = {tp: o for tp, o in task.checkpoint_file.read().items() if tp != changelog}
    if kept:
        task.checkpoint_file.write(kept)
    else:
        task.checkpoint_file.delete()


def wipe_task(task: StreamTask) -> dict[str, int | None]:
    """Kafka Streams' handling of a corrupted task: every store wiped, the checkpoint
    forgotten; returns the start offsets of a restoration from the beginning."""
    task.checkpoint_file.delete()
    task.changelog_offsets.clear()
    for store in task.stores.values():
        wipe_store(store)
    return dict.fromkeys(task.changelogs)
