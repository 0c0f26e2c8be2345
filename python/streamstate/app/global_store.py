"""``GlobalStoreHandle``: a global store that a KIP-406 rebuild replaces whole, never in place.

Processors and interactive queries hold the handle, never the store: every read goes to the
store that is current at that moment. A rebuild (the global thread's position fell out of the
log) restores into a *fresh* store in a directory of its own while the handle keeps serving the
old contents; once the fresh store has caught up, :meth:`GlobalStoreHandle.swap` makes it
current in one step. A reader therefore sees either the whole old contents or the whole new
ones, never a half-empty store. (An iteration already running when the swap happens finishes on
the old store, which stays open until the next swap or until the thread closes.)

On disk, the store of global store ``NAME`` lives in ``global/NAME`` until its first rebuild,
then in ``global/NAME.<generation>``; the file ``global/NAME.current`` names the current
directory and is replaced atomically (written aside, then renamed over). A crash at any point
leaves the pointer naming a complete store (the old one, or the new one after it was flushed);
the directory of an unfinished rebuild is deleted at the next start.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from streamstate.state.stores import PersistentKeyValueStore

__all__ = ["GlobalStoreHandle"]

_log = logging.getLogger("streamstate.app")


class GlobalStoreHandle:
    """The current store of one global store; see the module doc."""

    def __init__(self, name: str, root: Path) -> None:
        """Opens the current store of ``name`` under ``root`` (``state.dir/app/global``) and
        deletes directories of rebuilds that never completed."""
        self.name = name
        self._root = root
        self._pointer = root / f"{name}.current"
        current = self._pointer.read_text().strip() if self._pointer.exists() else name
        for stale in root.glob(f"{name}.*"):
            if stale.is_dir() and stale.name != current:
                shutil.rmtree(stale, ignore_errors=True)
        self.current = PersistentKeyValueStore(name, root / current)
        self._directory = current
        self._retired: list[tuple[PersistentKeyValueStore, str]] = []

    @property
    def persistent(self) -> bool:
        """Global stores are persistent."""
        return True

    def fresh(self) -> PersistentKeyValueStore:
        """An empty store in a new directory, to rebuild into (not current until swapped in)."""
        directory = f"{self.name}.{uuid.uuid4().hex[:8]}"
        return PersistentKeyValueStore(self.name, self._root / directory)

    def swap(self, rebuilt: PersistentKeyValueStore) -> None:
        """Makes ``rebuilt`` (from :meth:`fresh`, restored to the end) the current store: it is
        flushed, the pointer file replaced, then reads go to it. The previous store stays open
        until the next swap, for iterations still running over it."""
        rebuilt.flush()
        directory = Path(rebuilt.path).name
        aside = self._pointer.with_name(self._pointer.name + ".tmp")
        with open(aside, "w", encoding="utf-8") as f:
            f.write(directory + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(aside, self._pointer)
        for store, old_directory in self._retired:
            self._drop(store, old_directory)
        self._retired = [(self.current, self._directory)]
        self.current, self._directory = rebuilt, directory
        _log.info("Global store %r now reads from its rebuilt copy in %s", self.name, directory)

    def _drop(self, store: PersistentKeyValueStore, directory: str) -> None:
        store.close()
        shutil.rmtree(self._root / directory, ignore_errors=True)

    def close(self) -> None:
        """Closes the current store and deletes retired ones."""
        for store, directory in self._retired:
            self._drop(store, directory)
        self._retired = []
        self.current.close()

    # -- reads (and what the global thread's bookkeeping needs), from the current store -------

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` in the current store, or ``None``."""
        value: bytes | None = self.current.get(key)
        return value

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key`` of the current store, ascending."""
        return iter(self.current.range(from_key, to_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry of the current store, ascending."""
        return iter(self.current.all())

    def approximate_num_entries(self) -> int:
        """The current store's approximate entry count."""
        return int(self.current.approximate_num_entries())

    def is_open(self) -> bool:
        """Whether the current store is open."""
        return bool(self.current.is_open())

    def flush(self) -> None:
        """Flushes the current store."""
        self.current.flush()
