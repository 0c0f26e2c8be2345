"""Python's cyclic garbage collector and the stream threads (``python.gc.freeze``).

A stream thread allocates containers per record (decoded values, joined rows, records waiting
in their partition's queue); the ones that outlive two young collections push CPython into a
full collection every few tens of thousands of records, and a full collection walks every
tracked object of the process: the modules, the topology, the user's own start-up data. In
the stream-table join of ``benches/bench_join.py`` that was 7-8% of the stream thread's CPU
(``benches/profile_join.py``, measured with ``gc.callbacks``; ``docs/PERFORMANCE.md``).

``gc.freeze()`` moves everything alive into a permanent generation the collector skips, so a
full collection walks only what was made since. It is process-wide, so the first client to
start freezes (after one full collection, so that no garbage of start-up is kept) and the last
one running to close unfreezes: objects alive at a freeze that later become garbage in a
cycle wait until then (freed by reference counting, as most objects are, they go at once).
"""

from __future__ import annotations

import gc
import threading

__all__ = ["FreezeHold"]


class _Holders:
    # The clients of this process holding the heap frozen.
    lock = threading.Lock()
    count = 0


class FreezeHold:
    """One client's share of the process's freeze: :meth:`acquire` at start, :meth:`release`
    at close; both idempotent, so any close path may release."""

    def __init__(self) -> None:
        self._held = False

    @property
    def held(self) -> bool:
        """Whether this client holds a share of the freeze."""
        return self._held

    def acquire(self) -> None:
        """Collects, then freezes what is alive, unless another client holds it frozen."""
        with _Holders.lock:
            if self._held:
                return
            self._held = True
            _Holders.count += 1
            # Only the first: a later one would freeze the running clients' tasks too, and a
            # task closed in a rebalance should go (its directory's claim is a weak one).
            if _Holders.count == 1:
                gc.collect()
                gc.freeze()

    def release(self) -> None:
        """Gives the share back; the last one unfreezes, so that the collector sees the whole
        heap again once no client runs."""
        with _Holders.lock:
            if not self._held:
                return
            self._held = False
            _Holders.count -= 1
            if _Holders.count == 0:
                gc.unfreeze()
