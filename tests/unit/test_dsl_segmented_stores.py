"""Window and session stores drop their expired segments whole, in one ``drop_range`` of the
byte store below, and under exactly-once only when the transaction commits (an aborted
transaction's tasks reopen and process their records anew: they must find the windows those
records wrote to)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamstate.dsl.stores import SessionStore, StoreSerdes, WindowStore, segment_interval
from streamstate.dsl.windows import Window, Windowed
from streamstate.serde import Serdes
from streamstate.state.transaction_buffer import TransactionBuffer

RETENTION = 120_000  # a segment per minute (Kafka's floor)
INTERVAL = segment_interval(RETENTION)


class CountingDrops:
    """A byte store that counts the writes and range drops reaching it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.deletes = 0
        self.drops: list[tuple[int, int]] = []

    def put(self, key: bytes, value: bytes | None) -> None:
        self.deletes += value is None
        self.inner.put(key, value)

    def drop_range(self, from_key: bytes, to_key: bytes) -> None:
        self.drops.append((int.from_bytes(from_key, "big"), int.from_bytes(to_key, "big")))
        self.inner.drop_range(from_key, to_key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def byte_store(make_store: Callable[[str], Any]) -> Any:
    return make_store("w")


def serdes() -> StoreSerdes:
    return StoreSerdes("w", Serdes.String(), Serdes.Long())


def test_expired_segments_go_in_one_drop_and_no_delete(byte_store: Any) -> None:
    below = CountingDrops(byte_store)
    store = WindowStore(below, serdes(), RETENTION, 10_000)
    for minute in range(5):
        for key in range(300):
            start = minute * INTERVAL + key % 6 * 10_000
            store.put(f"k{key}", key, start, start)
    # Stream time 4 min 50 s, retention 2 min: segments 0 and 1 (below the segment of 2 min
    # 50 s, Kafka's rule) have expired, each dropped whole when the stream time left it.
    assert below.drops == [(0, 1), (1, 2)] and below.deletes == 0
    left = list(store.all())
    assert {w.window.start // INTERVAL for w, _ in left} == {2, 3, 4}
    assert len(left) == 900
    raw = [k for k, _ in byte_store.all() if not k.startswith(b"\xff" * 8)]
    assert len(raw) == 900


def test_a_session_store_drops_its_expired_segments_whole(byte_store: Any) -> None:
    below = CountingDrops(byte_store)
    store = SessionStore(below, serdes(), RETENTION)
    for minute in range(5):
        for key in range(50):
            end = minute * INTERVAL + key * 100
            store.put(Windowed(f"k{key}", Window(end - 50, end)), key)
    assert below.drops == [(0, 1), (1, 2)] and below.deletes == 0
    assert {w.window.end // INTERVAL for w, _ in store.all()} == {2, 3, 4}


def test_under_exactly_once_a_drop_waits_for_the_commit(byte_store: Any) -> None:
    buffer = TransactionBuffer(byte_store)
    store = WindowStore(buffer, serdes(), RETENTION, 10_000)
    store.put("a", 1, 5, 0)
    buffer.commit()
    # A record far ahead expires segment 0; the transaction carrying it aborts.
    far = 3 * INTERVAL
    store.put("a", 1, far, far)
    assert store.fetch_with_timestamp("a", 0) is None
    assert byte_store.get(next(k for k, _ in byte_store.all())) is not None
    buffer.abort()
    # The task reopens (new store objects over the same store) and processes anew: the
    # window the aborted drop would have taken is there.
    reopened = WindowStore(buffer, serdes(), RETENTION, 10_000)
    found = reopened.fetch_with_timestamp("a", 0)
    assert found is not None and found.value == 1
    # Committed, the drop reaches the store.
    reopened.put("a", 2, far, far)
    buffer.commit()
    starts = [w.window.start for w, _ in WindowStore(byte_store, serdes(), RETENTION, 10_000).all()]
    assert starts == [far]
    assert len([k for k, _ in byte_store.all() if not k.startswith(b"\xff" * 8)]) == 1
