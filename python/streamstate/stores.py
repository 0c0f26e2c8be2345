"""``streamstate.stores``: the key-value stores and ``process_next``, documented in
:mod:`streamstate.state.stores`, where they live; this path keeps working."""

from __future__ import annotations

from streamstate.state.stores import (
    InMemoryKeyValueStore,
    KeyValueIterator,
    PersistentKeyValueStore,
    RestoredBatch,
    process_next,
)

__all__ = [
    "InMemoryKeyValueStore",
    "KeyValueIterator",
    "PersistentKeyValueStore",
    "RestoredBatch",
    "process_next",
]
