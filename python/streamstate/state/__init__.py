"""State: key-value stores, their ``.checkpoint`` files, and their restoration from changelogs.

Modules: ``stores`` (the Rust-backed stores, ``process_next``, and ``holds_data`` /
``wipe_store``), ``checkpoint`` (``OffsetCheckpoint``), ``restorer`` (``StateRestorer``,
``StateRestoreListener``), ``changelog_reader`` (``StoreChangelogReader``), ``topic_restore``
(a whole changelog topic into a state directory, what ``streamstate restore`` runs).
The runtime (``streamstate.app``) and Spark (``streamstate.spark``) build on this package; it
imports neither.
"""

from __future__ import annotations

from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.restorer import StateRestoreListener, StateRestorer
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
    "OffsetCheckpoint",
    "PersistentKeyValueStore",
    "RestoredBatch",
    "StateRestoreListener",
    "StateRestorer",
    "StoreChangelogReader",
    "process_next",
]
