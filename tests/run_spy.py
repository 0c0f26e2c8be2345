"""Watching the task loop's hand-over of record runs (``app/task_runs.py``) in tests."""

from __future__ import annotations

from typing import Any

import pytest

from streamstate.app import task as task_module


def spy_on_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patches the task's ``take_next_run`` so that each call's record count is appended to
    the returned list (0 where no run was taken); the patch is undone with ``monkeypatch``."""
    taken: list[int] = []
    real = task_module.take_next_run

    def counted(task: Any, max_records: int) -> tuple[int, bool]:
        result = real(task, max_records)
        taken.append(result[0])
        return result

    monkeypatch.setattr(task_module, "take_next_run", counted)
    return taken
