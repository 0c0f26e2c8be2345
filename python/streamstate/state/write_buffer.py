"""``WriteBuffer``: what the store layers that hold writes by key before the store underneath
sees them share — the record cache (``state/caching.py``) and the exactly-once transaction buffer
(``state/transaction_buffer.py``): the store's name, the check that keys and values are bytes,
and ``put_all`` and ``delete`` made of the layer's own ``put`` and ``get`` (a delete is a
buffered ``put`` of ``None``)."""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["WriteBuffer"]


class WriteBuffer(abc.ABC):
    """A store layer over ``inner`` that buffers writes by key; subclasses say how."""

    inner: Any

    @abc.abstractmethod
    def put(self, key: bytes, value: bytes | None) -> None:
        """Buffers ``key`` = ``value`` (``None``: a delete)."""

    @abc.abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, buffered or stored."""

    def _check_types(self, key: bytes, value: bytes | None) -> None:
        # Checked when the write is buffered: the store underneath would refuse it only at the
        # commit, far from the processor that made it.
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            raise TypeError(
                f"store {self.name!r}: keys and values are bytes, not "
                f"{type(key).__name__} and {type(value).__name__}"
            )

    @property
    def name(self) -> str:
        """The store's name."""
        return str(self.inner.name)

    def put_all(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        """Buffers every pair, in order."""
        for key, value in pairs:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        """Buffers a delete of ``key``; returns its value before."""
        old = self.get(key)
        self.put(key, None)
        return old
