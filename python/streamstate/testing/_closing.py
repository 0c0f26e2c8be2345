"""``Closing``: the context manager of the testing helpers that are closed when done."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_C = TypeVar("_C", bound="Closing")


class Closing:
    """``with helper:`` gives the helper and calls its ``close()`` on the way out."""

    def close(self) -> None:
        """Releases what the helper holds."""
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        """The helper itself."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Calls ``close()``."""
        self.close()
