"""Spark's ``GroupState`` as ``applyInPandasWithState`` hands it to a function, for tests that
call a Spark task's function directly (no Spark session)."""

from __future__ import annotations

from typing import Any


class GroupState:
    """The state of one group: ``exists``, ``get`` and ``update`` as Spark's."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple[Any, ...]:
        assert self.value is not None
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value
