"""Changelog restoration into each store kind: ``process_next`` (Rust) vs a plain-Python loop.

The changelog: 1M ``confluent_kafka.Message`` records (quick mode: 50k), 100-byte values, keys
drawn from 100k distinct 8-byte keys (so most keys are overwritten several times, as in a real
changelog before compaction), handed over in polls of 10k records. "rust" calls ``process_next``
once per poll (one atomic write batch each, GIL released); "python" reads each message and calls
``store.put`` per record, which is what restoring through the store's own Python API costs.

Both must leave the same store: every benchmark checks the entry count and the last value of a
few keys. Each round restores into a fresh store. The engine comparison (redb vs fjall vs RocksDB)
is in ``docs/stores.md``.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from benches._common import size
from confluent_kafka import Message

from streamstate import InMemoryKeyValueStore, PersistentKeyValueStore, process_next

N = size(1_000_000)
DISTINCT_KEYS = max(1, N // 10)
POLL = 10_000
TOPIC = "app-store-changelog"


def _value(i: int) -> bytes:
    return struct.pack(">q", i) * 12 + b"\x00\x01\x02\x03"  # 100 bytes


@pytest.fixture(scope="module")
def polls() -> list[list[Message]]:
    msgs = [
        Message(
            topic=TOPIC,
            partition=0,
            offset=i,
            key=struct.pack(">q", (i * 7919) % DISTINCT_KEYS),
            value=_value(i),
            timestamp=(1, 1_700_000_000_000 + i),
        )
        for i in range(N)
    ]
    return [msgs[i : i + POLL] for i in range(0, N, POLL)]


def restore_rust(store: Any, polls: list[list[Message]]) -> int:
    restored = 0
    for poll in polls:
        restored += process_next(store, poll, N).num_restored
    return restored


def restore_python(store: Any, polls: list[list[Message]]) -> int:
    restored = 0
    for poll in polls:
        for m in poll:
            key = m.key()
            if key is None:
                continue
            value = m.value()
            if value is None:
                store.delete(key)
            else:
                store.put(key, value)
            restored += 1
    return restored


def _check(store: Any, restored: int) -> None:
    assert restored == N
    assert store.approximate_num_entries() == DISTINCT_KEYS
    # The last write of a key is that of the highest offset i with i * 7919 % K == key.
    for i in range(N - 3, N):
        assert store.get(struct.pack(">q", (i * 7919) % DISTINCT_KEYS)) == _value(i)


@pytest.fixture
def fresh_store() -> Iterator[Callable[[str], Any]]:
    """Makes a fresh store of a kind per round; everything made is closed and removed after."""
    made: list[Any] = []
    with tempfile.TemporaryDirectory() as d:
        counter = iter(range(1_000_000))

        def make(kind: str) -> Any:
            store: Any
            if kind == "memory":
                store = InMemoryKeyValueStore("bench")
            else:
                store = PersistentKeyValueStore("bench", Path(d) / f"s{next(counter)}")
            made.append(store)
            return store

        yield make
        for store in made:
            store.close()


@pytest.mark.parametrize("kind", ["memory", "persistent"])
@pytest.mark.parametrize("impl", ["rust", "python"])
def bench_restore(
    benchmark: Any,
    fresh_store: Callable[[str], Any],
    polls: list[list[Message]],
    kind: str,
    impl: str,
) -> None:
    benchmark.group = f"restore-{kind}"
    benchmark.extra_info.update(
        records=N, distinct_keys=DISTINCT_KEYS, value_bytes=100, poll=POLL, impl=impl
    )
    restore = restore_rust if impl == "rust" else restore_python
    stores: list[Any] = []

    def setup() -> tuple[tuple[Any, list[list[Message]]], dict[str, Any]]:
        stores.append(fresh_store(kind))
        return (stores[-1], polls), {}

    restored = benchmark.pedantic(restore, setup=setup, rounds=3, iterations=1)
    _check(stores[-1], restored)
    if kind == "persistent":
        stores[-1].flush()
