"""How the DSL keeps its state: :class:`Materialized` (a store's name, serdes and kind)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streamstate.dsl.windows import Duration, to_millis
from streamstate.errors import TopologyError
from streamstate.serde import Serde

__all__ = ["Materialized", "materialized"]

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True)
class Materialized:
    """How a DSL operation keeps its state (Kafka's ``Materialized``): the store's ``name``
    (``None``: a generated one, and the store is not meant for queries), its serdes,
    ``persistent`` (fjall) or in memory, ``logged`` (a changelog), ``caching`` (Kafka's
    record cache: results are forwarded when it flushes, at the latest at each commit),
    ``retention`` (window and session stores: how long windows are kept; at least window size
    + grace) and ``versioned_retention`` (``table``, ``to_table``, ``filter``, ``map_values``: a
    versioned key-value store keeping every version of each key that long, KIP-889; never
    cached, as in Kafka; ``streamstate.dsl.versioned_store``)."""

    name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    persistent: bool = True
    logged: bool = True
    caching: bool = True
    retention: Duration | None = None
    versioned_retention: Duration | None = None

    @classmethod
    def as_(cls, name: str, **options: Any) -> Materialized:
        """``Materialized(name, **options)`` (Kafka's ``Materialized.as``)."""
        return cls(name, **options)

    @classmethod
    def with_(cls, key_serde: Serde | None, value_serde: Serde | None) -> Materialized:
        """Serdes only (Kafka's ``Materialized.with``)."""
        return cls(None, key_serde, value_serde)

    def retention_ms(self) -> int | None:
        """The retention in ms, or ``None``."""
        return None if self.retention is None else to_millis(self.retention, "retention")

    def versioned_retention_ms(self, operation: str) -> int | None:
        """The history retention of a versioned store in ms (at least 0), or ``None``."""
        if self.versioned_retention is None:
            return None
        retention = to_millis(self.versioned_retention, "versioned_retention")
        if retention < 0:
            raise TopologyError(
                f"{operation}: versioned_retention must not be negative, not {retention} ms",
                store_name=self.name,
            )
        return retention


def materialized(value: Materialized | str | None, operation: str) -> Materialized:
    """``value`` as a :class:`Materialized` (a name alone is ``Materialized(name)``)."""
    if value is None:
        return Materialized()
    if isinstance(value, str):
        value = Materialized(value)
    if not isinstance(value, Materialized):
        raise TopologyError(
            f"{operation}: materialized is a Materialized or a store name, not "
            f"{type(value).__name__}"
        )
    if value.name is not None and not _LEGAL_NAME.fullmatch(value.name):
        raise TopologyError(
            f"{operation}: store name {value.name!r} is illegal: it must be 1 to 249 ASCII "
            f"letters, digits, '.', '_' or '-' (Kafka's rule: it names topics)",
            store_name=value.name,
        )
    return value
