"""``streamstate.changelog``: changelog restoration, documented in
:mod:`streamstate.state` (``changelog_reader``, ``restorer``, ``stores``), where it lives; this
path keeps working."""

from __future__ import annotations

from streamstate.state.changelog_reader import StoreChangelogReader, restore_consumer_config
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import holds_data, wipe_store

__all__ = [
    "StateRestoreListener",
    "StateRestorer",
    "StoreChangelogReader",
    "holds_data",
    "restore_consumer_config",
    "wipe_store",
]
