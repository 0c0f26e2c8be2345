"""Diagnostic for Spark's ``process(..., stores="local")`` (issue "Spark at production scale",
point 1): what one micro-batch costs a task's fjall store, open to close, as the store grows.

A Spark task opens its local stores for each micro-batch, reads, applies the last micro-batch's
writes and closes them again (``streamstate/spark/_local_stores.py``). This drives one store
that way, without Spark: a store of N keys is built once, then each round opens it, reads 50k
keys (other keys each round), writes 50k values and flushes, and closes it. Two ways to write:

* ``runs``: through the restore path (``process_next``), as ``_local_stores.py`` does: a write
  of at least 1 MiB becomes a sorted run in the LSM tree's level 0, past the memtable and the
  journal;
* ``put_all``: an ordinary write batch through fjall's memtable and journal.

It prints, per round: open, reads, write and flush, close (seconds), then the mean and the
rounds whose close took over 0.2 s (an LSM compaction the close waited for)::

    .venv/bin/python -m benches.diag_local_store_cycle runs 5000000 40
    .venv/bin/python -m benches.diag_local_store_cycle put_all 5000000 40
    .venv/bin/python -m benches.diag_local_store_cycle runs 5000000 40 256

The store is created with the local stores' ``level_base_bytes`` (32 MiB); a fourth argument
gives another, in MiB (256: fjall's default).

Measured on 2026-11-27 (2 cores, a quiet machine), 5M keys, 40 rounds, with fjall's default level 1:
``put_all`` 1.41 s per round on average, the open growing from 0.9 to 1.4 s with the journal it
replays, until fjall starts another journal (at 64 MB); ``runs`` 0.64 s, reads ~0.2 s and a close of
~1.55 s every 4th round (level 0's 4 runs merged into level 1, the whole store). With fjall's
level-0 threshold raised to 16 (a one-line change to ``KeyspaceCreateOptions`` in
``rust/core/src/store/persistent.rs``, not kept): 0.48 s, a 2.4 s close every 16th round and reads
~25% slower.

Measured on 2026-11-27 (one run, 5M keys, 40 rounds, ``runs``) by level 1's size: 256 MiB (fjall's
default) 0.78 s per round, a ~1.9 s close every 4th round (level 1 is the whole store); 64 MiB
0.69 s (the same: the store still fits); 32 MiB 0.39 s, closes of 0.2-0.6 s; 16 MiB 0.34-0.38 s
with reads ~20% slower. The local stores use 32 MiB (``_local_stores.py``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from streamstate.spark._local_stores import _LEVEL_BASE_BYTES
from streamstate.stores import PersistentKeyValueStore, process_next

READS = 50_000


def _write(store: PersistentKeyValueStore, mode: str, keys: list[bytes], value: bytes) -> None:
    if mode == "put_all":
        store.put_all([(k, value) for k in keys])
        return
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array([value] * len(keys), pa.binary()),
            pa.array(range(len(keys)), pa.int64()),
        ],
        names=["key", "value", "offset"],
    )
    process_next(store, batch, len(keys))


def main(mode: str, n: int, rounds: int, level_base_bytes: int = _LEVEL_BASE_BYTES) -> None:
    """Builds an ``n``-key store (level 1 of ``level_base_bytes``), then runs ``rounds``
    open-read-write-close cycles."""
    if mode not in ("runs", "put_all"):
        raise SystemExit(f"mode must be runs or put_all, not {mode!r}")
    directory = Path(tempfile.mkdtemp(prefix="diag-local-store-"))
    try:
        with PersistentKeyValueStore("s", directory, level_base_bytes=level_base_bytes) as store:
            for start in range(0, n, 500_000):
                keys = [b"k%08d" % i for i in range(start, min(n, start + 500_000))]
                _write(store, mode, keys, b"1")
            store.flush()
        cycles: list[tuple[float, float, float, float]] = []
        for r in range(rounds):
            started = time.perf_counter()
            store = PersistentKeyValueStore("s", directory)
            opened = time.perf_counter()
            keys = [b"k%08d" % ((i * 7919 + r * 104_729) % n) for i in range(READS)]
            for key in keys:
                store.get(key)
            read = time.perf_counter()
            _write(store, mode, keys, b"2")
            store.flush()
            written = time.perf_counter()
            store.close()
            closed = time.perf_counter()
            cycles.append((opened - started, read - opened, written - read, closed - written))
            print(r, " ".join(f"{t:.3f}" for t in cycles[-1]))
        totals = [sum(c) for c in cycles]
        print(f"{mode} {n:,} keys: {sum(totals) / len(totals):.3f} s per round on average")
        print("slow closes:", [(i, round(c[3], 2)) for i, c in enumerate(cycles) if c[3] > 0.2])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    mib = int(sys.argv[4]) if len(sys.argv) > 4 else _LEVEL_BASE_BYTES // 2**20
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), mib * 2**20)
