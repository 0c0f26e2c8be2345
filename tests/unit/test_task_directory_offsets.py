"""The ``TaskOffsets`` of task directories on disk (KIP-1071): read from their checkpoints,
corrupt or empty ones skipped, merged under the thread's live tasks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from streamstate.app.standby_task import StandbyTasks, directory_task_id, task_offsets
from streamstate.app.state_directory import TaskDirectories, checkpointed_tasks
from streamstate.app.streams_group import TaskId
from streamstate.app.streams_membership import StreamsMembership
from streamstate.records import TopicPartition
from streamstate.state.checkpoint import OffsetCheckpoint

CHANGELOG = "app-counts-changelog"


def _checkpoint(app_dir: Path, task: str, offsets: dict[TopicPartition, int]) -> None:
    (app_dir / task).mkdir(parents=True)
    OffsetCheckpoint(app_dir / task / ".checkpoint").write(offsets)


class _Holder:
    """A task holding its directory (held by weak reference)."""


def test_checkpointed_task_directories_report_the_sum_of_their_next_offsets(
    tmp_path: Path,
) -> None:
    _checkpoint(
        tmp_path, "0_0", {TopicPartition(CHANGELOG, 0): 41, TopicPartition("app-x-changelog", 0): 9}
    )
    _checkpoint(tmp_path, "3", {TopicPartition(CHANGELOG, 3): 0})  # the one-function form
    _checkpoint(tmp_path, "0_4", {})  # an empty checkpoint: no state
    (tmp_path / "0_2").mkdir()
    (tmp_path / "0_2" / ".checkpoint").write_text("0\n2\nbroken")  # corrupt: no state
    (tmp_path / "0_5").mkdir()  # no checkpoint at all
    _checkpoint(tmp_path, "global", {TopicPartition("g", 0): 5})  # not a task directory
    (tmp_path / "kafka-streams-process-metadata").write_text("{}")
    directories = TaskDirectories()
    assert checkpointed_tasks(tmp_path, directories=directories) == {"0_0": 42 + 10, "3": 1}
    assert checkpointed_tasks(tmp_path / "missing", directories=directories) == {}
    # A directory a live task of the process holds is reported by its thread, not from disk.
    holder = _Holder()
    directories.claim(tmp_path / "3", holder)
    assert checkpointed_tasks(tmp_path, directories=directories) == {"0_0": 52}
    directories.release(tmp_path / "3", holder)
    assert checkpointed_tasks(tmp_path, directories=directories) == {"0_0": 52, "3": 1}


def test_directory_names_map_to_group_tasks() -> None:
    assert directory_task_id("0_1") == TaskId("0", 1)
    assert directory_task_id("12_30") == TaskId("12", 30)
    assert directory_task_id("7") == TaskId("0", 7)
    for name in ("global", "a_1", "0_", "_1", "0_1_2", ".lock"):
        assert directory_task_id(name) is None, name


def test_live_tasks_win_over_their_directories_and_unknown_subtopologies_are_left_out(
    tmp_path: Path,
) -> None:
    standbys = StandbyTasks(
        "t",
        lambda task_id: None,  # type: ignore[arg-type,return-value]
        lambda: None,  # type: ignore[arg-type,return-value]
        commit_interval_ms=100,
    )
    tp0, tp1 = TopicPartition(CHANGELOG, 0), TopicPartition(CHANGELOG, 1)
    active: dict[object, object] = {
        0: SimpleNamespace(
            changelogs={"counts": tp0}, restoring=False, changelog_offsets={tp0: 99}
        ),
        1: SimpleNamespace(
            changelogs={"counts": tp1},
            restoring=True,
            changelog_offsets={},
            checkpoint_file=OffsetCheckpoint(tmp_path / "1.checkpoint"),
        ),
    }
    OffsetCheckpoint(tmp_path / "1.checkpoint").write({tp1: 20})
    offsets, ends = task_offsets(
        active,  # type: ignore[arg-type]
        standbys,
        {"0_0": 52, "0_1": 7, "0_2": 11, "9_0": 3},
        known=lambda sub: sub == "0",
    )
    # The running task where it is; the restoring one and the directory of a task this thread
    # does not run where their checkpoints say, with no end offset (nothing fetched for them).
    assert offsets == {TaskId("0", 0): 100, TaskId("0", 1): 21, TaskId("0", 2): 11}
    assert ends == {TaskId("0", 0): 100}
    assert task_offsets({}, standbys) == ({}, {})


class _Member:
    """A streams group member that records the task offsets it is given."""

    def __init__(self) -> None:
        self.member_epoch = 0
        self.sent: list[dict[TaskId, int]] = []

    def set_task_offsets(self, offsets: dict[TaskId, int], end_offsets: dict[TaskId, int]) -> None:
        self.sent.append(offsets)


def test_every_join_carries_the_task_offsets_then_every_interval() -> None:
    member = _Member()
    on_disk = {TaskId("0", 1): 7}
    membership = StreamsMembership(
        member,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        name="t",
        on_assigned=lambda parts: None,
        on_revoked=lambda parts: None,
        on_lost=lambda parts: None,
        task_offsets=lambda: (dict(on_disk), {}),
    )
    membership._send_task_offsets()  # the join
    membership._send_task_offsets()  # joining still (the first answer not in yet)
    member.member_epoch = 3
    membership._send_task_offsets()  # in the group: not due for another interval
    assert member.sent == [on_disk, on_disk]
    member.member_epoch = 0  # fenced: the rejoin carries them at once
    membership._send_task_offsets()
    assert member.sent == [on_disk] * 3
