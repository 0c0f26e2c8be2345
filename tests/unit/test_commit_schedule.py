"""``CommitSchedule`` (``app/commit_schedule.py``): a stream thread's commit interval, and a due
commit put off while the group rebalances, until a rebalance could not last longer."""

from __future__ import annotations

import pytest

from streamstate.app import commit_schedule
from streamstate.app.commit_schedule import RETRY_BACKOFF_S, CommitSchedule
from streamstate.errors import TaskMigratedError


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(commit_schedule, "monotonic", fake)
    return fake


def test_a_commit_is_due_once_the_interval_passed_since_the_last(clock: _Clock) -> None:
    schedule = CommitSchedule("t", 300.0, lambda: False)
    assert not schedule.due(100)
    clock.now += 0.099
    assert not schedule.due(100)
    clock.now += 0.001
    assert schedule.due(100)
    assert schedule.started() == clock.now
    assert not schedule.due(100)
    clock.now += 0.2
    schedule.nothing_to_commit()
    assert not schedule.due(100)


def test_a_commit_put_off_by_a_rebalance_is_due_at_once_until_committed(clock: _Clock) -> None:
    rebalancing = [True]
    schedule = CommitSchedule("t", 300.0, lambda: rebalancing[0])
    assert schedule.put_off_by_rebalance()
    assert schedule.due(10_000)  # put off: due on every loop, whatever the interval
    rebalancing[0] = False
    assert not schedule.put_off_by_rebalance()
    schedule.committed()
    assert not schedule.due(10_000)


def test_after_a_refusal_the_member_is_not_asked_again_before_the_backoff(clock: _Clock) -> None:
    asked: list[float] = []

    def rebalancing() -> bool:
        asked.append(clock.now)
        return False

    schedule = CommitSchedule("t", 300.0, rebalancing)
    assert schedule.put_off_by_rebalance("REBALANCE_IN_PROGRESS")
    clock.now += RETRY_BACKOFF_S / 2
    assert schedule.put_off_by_rebalance()
    assert asked == []
    clock.now += RETRY_BACKOFF_S
    assert not schedule.put_off_by_rebalance()
    assert asked == [clock.now]


def test_a_commit_put_off_longer_than_a_rebalance_may_last_is_task_migrated(
    clock: _Clock,
) -> None:
    schedule = CommitSchedule("t", 5.0, lambda: True)
    assert schedule.put_off_by_rebalance()
    clock.now += 5.0
    assert schedule.put_off_by_rebalance()  # not longer yet
    clock.now += 0.001
    with pytest.raises(TaskMigratedError, match=r"no commit for 5 s"):
        schedule.put_off_by_rebalance()
    # The wait starts again: the thread rejoined.
    assert schedule.put_off_by_rebalance()
