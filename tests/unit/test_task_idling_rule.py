"""KIP-695's readiness rule (``streamstate.app.task_idling.may_process``), shared by a
``StreamTask`` and the tasks of ``streamstate.spark.process``."""

from __future__ import annotations

from streamstate.app.task_idling import may_process


def test_one_partition_or_never_waiting_processes_at_once() -> None:
    assert may_process({"a": 0}, {}, {}, lambda: 0.0, 100)
    assert may_process({"a": 3, "b": 0}, {"b": 5}, {}, lambda: 0.0, -1)


def test_an_empty_partition_with_lag_or_unknown_lag_is_waited_for() -> None:
    assert not may_process({"a": 3, "b": 0}, {"b": 5}, {}, lambda: 0.0, 0)
    assert not may_process({"a": 3, "b": 0}, {}, {}, lambda: 0.0, 0)


def test_an_empty_partition_without_lag_is_waited_for_max_task_idle_ms() -> None:
    now = [1_000.0]
    deadlines: dict[str, float] = {}
    buffered, lags = {"a": 3, "b": 0}, {"b": 0}
    assert not may_process(buffered, lags, deadlines, lambda: now[0], 50)
    assert deadlines == {"b": 1_050.0}
    now[0] = 1_049.0
    assert not may_process(buffered, lags, deadlines, lambda: now[0], 50)
    now[0] = 1_050.0
    assert may_process(buffered, lags, deadlines, lambda: now[0], 50)
    # Records of every partition: the wait is over and forgotten.
    assert may_process({"a": 3, "b": 1}, lags, deadlines, lambda: now[0], 50)
    assert deadlines == {}


def test_idle_ms_zero_processes_once_the_lag_is_known_to_be_zero() -> None:
    assert may_process({"a": 3, "b": 0}, {"b": 0}, {}, lambda: 5.0, 0)
