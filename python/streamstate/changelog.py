"""``streamstate.changelog``: changelog restoration, documented in
:mod:`streamstate.state` (``changelog_reader``, ``restorer``, ``stores``) and
:mod:`streamstate.clients.config` (``restore_consumer_config``), where it lives; this path keeps
working."""

from __future__ import annotations

from streamstate.clients.config import restore_consumer_config
from streamstate.clients.restore_consumer import open_restore_consumer
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import holds_data, wipe_store

__all__ = [
    "StateRestoreListener",
    "StateRestorer",
    "StoreChangelogReader",
    "holds_data",
    "open_restore_consumer",
    "restore_consumer_config",
    "wipe_store",
]
