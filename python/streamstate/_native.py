"""What the built-in serdes and extractors share: a Rust object behind a Python face.

The Rust object (``_native``) does the work and cannot be pickled; these classes pickle by their
constructor arguments instead, so Spark can ship them to its workers.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["NATIVE_MARK", "NativeBacked", "runs_native"]

F = TypeVar("F")

#: The attribute that marks a method whose work the ``_native`` object does. A ``RecordQueue``
#: runs the Rust object instead of calling the method only when the method it finds carries
#: this mark: a subclass that overrides the method is called through Python.
NATIVE_MARK = "_streamstate_native"


def runs_native(method: F) -> F:
    """Marks ``method`` as one the Rust object ``_native`` can stand for."""
    setattr(method, NATIVE_MARK, True)
    return method


class NativeBacked:
    """Pickling and ``repr`` from ``_state()``: the keyword arguments that rebuild the object."""

    def _state(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._state().items())
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self._state()))


def _rebuild(cls: type[Any], state: dict[str, Any]) -> Any:
    return cls(**state)
