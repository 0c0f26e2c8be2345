"""Kafka's names for what a DSL program leaves unnamed.

One counter per builder numbers every generated processor and store name in the order the
operations are written (Kafka's ``InternalStreamsBuilder.index``): processors are
``<PREFIX>-<10 digits>`` (``KSTREAM-SOURCE-0000000000``), stores
``<PREFIX>-STATE-STORE-<10 digits>``; a repartition topic is named after its operation
(``<name>-repartition``, with nodes ``<name>-repartition-filter``, ``-sink`` and ``-source``).
The same program therefore gets the same names, and the same ``describe()``, as in Java.
"""

from __future__ import annotations

from streamstate.errors import TopologyError

__all__ = ["NameProvider"]


class NameProvider:
    """The builder's counter of generated names."""

    def __init__(self) -> None:
        """Starts at 0."""
        self.index = 0

    def processor(self, prefix: str) -> str:
        """``<prefix><index>`` (prefixes end with ``-``), then counts one."""
        name = f"{prefix}{self.index:010d}"
        self.index += 1
        return name

    def store(self, prefix: str) -> str:
        """``<prefix>STATE-STORE-<index>``, then counts one."""
        name = f"{prefix}STATE-STORE-{self.index:010d}"
        self.index += 1
        return name

    @staticmethod
    def given(name: str | None, operation: str) -> str | None:
        """A user-given name, checked (a non-empty string without ``/``)."""
        if name is None:
            return None
        if not isinstance(name, str) or not name or "/" in name:
            raise TopologyError(f"{operation}: a name is a non-empty string, not {name!r}")
        return name
