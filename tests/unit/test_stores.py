"""Key-value stores: both kinds must behave alike (Kafka Streams' KeyValueStore contract, bytes in
and out, keys in unsigned byte order); the persistent one also survives reopening and crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamstate import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    ProcessorStateError,
    StreamsError,
)
from streamstate import stores as stores_module

Store = Any  # either store class; both have the same methods


@pytest.fixture
def store(make_store: Callable[[str], Store]) -> Store:
    return make_store("s")


def test_the_public_module_re_exports_the_classes() -> None:
    assert stores_module.InMemoryKeyValueStore is InMemoryKeyValueStore
    assert stores_module.PersistentKeyValueStore is PersistentKeyValueStore
    assert stores_module.__doc__ and "process_next" in stores_module.__doc__


def test_put_get_delete(store: Store) -> None:
    assert store.is_open()
    assert store.get(b"a") is None
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    assert store.get(b"a") == b"1"
    store.put(b"a", b"3")
    assert store.get(b"a") == b"3"
    assert store.delete(b"a") == b"3"
    assert store.delete(b"a") is None
    assert store.get(b"a") is None
    assert store.get(b"b") == b"2"


def test_empty_keys_and_values_are_values(store: Store) -> None:
    store.put(b"", b"")
    assert store.get(b"") == b""
    assert list(store.all()) == [(b"", b"")]


def test_put_of_none_deletes_as_in_kafka_streams(store: Store) -> None:
    store.put(b"k", b"v")
    store.put(b"k", None)
    assert store.get(b"k") is None
    store.put(b"never", None)  # deleting a missing key is fine
    assert store.approximate_num_entries() == 0


def test_name_and_persistent(make_store: Callable[[str], Store]) -> None:
    store = make_store("my-store")
    assert store.name == "my-store"
    assert store.persistent is isinstance(store, PersistentKeyValueStore)
    assert "my-store" in repr(store)


def test_range_is_inclusive_and_in_unsigned_byte_order(store: Store) -> None:
    keys = [b"\xff", b"b", b"a", b"\x00", b"ab", b"c", b"\x80"]
    store.put_all([(k, b"v" + k) for k in keys])
    assert [k for k, _ in store.all()] == sorted(keys)
    assert list(store.range(b"a", b"b")) == [(b"a", b"va"), (b"ab", b"vab"), (b"b", b"vb")]
    assert list(store.range(b"b", b"b")) == [(b"b", b"vb")]
    assert [k for k, _ in store.range(b"c", b"\xff")] == [b"c", b"\x80", b"\xff"]
    assert list(store.range(b"x", b"y")) == []  # empty: no key within
    assert list(store.range(b"c", b"a")) == []  # inverted: empty, as in Kafka Streams


def test_iterators_page_through_large_ranges(store: Store) -> None:
    n = 5000  # several pages
    pairs = [(i.to_bytes(4, "big"), i.to_bytes(4, "little")) for i in range(n)]
    store.put_all(pairs)
    assert list(store.all()) == pairs
    lo, hi = 17, 4000
    got = list(store.range(lo.to_bytes(4, "big"), hi.to_bytes(4, "big")))
    assert got == pairs[lo : hi + 1]
    assert store.approximate_num_entries() == n


def test_an_iterator_is_an_iterator(store: Store) -> None:
    store.put(b"a", b"1")
    it = store.all()
    assert iter(it) is it
    assert next(it) == (b"a", b"1")
    with pytest.raises(StopIteration):
        next(it)


def test_put_all_applies_in_order_last_write_wins(store: Store) -> None:
    store.put(b"gone", b"x")
    store.put_all([(b"k", b"1"), (b"gone", None), (b"k", b"2"), (b"t", b"1"), (b"t", None)])
    assert store.get(b"k") == b"2"
    assert store.get(b"gone") is None
    assert store.get(b"t") is None
    store.put_all([])
    store.put_all(iter([(b"g", b"1")]))  # any iterable
    assert store.get(b"g") == b"1"


def test_put_all_is_atomic_when_an_item_is_bad(store: Store) -> None:
    store.put(b"k", b"old")
    with pytest.raises(TypeError):
        store.put_all([(b"k", b"new"), (b"j", b"1"), ("not bytes", b"2")])
    assert store.get(b"k") == b"old"
    assert store.get(b"j") is None
    with pytest.raises(TypeError, match="pairs"):
        store.put_all([(b"k", b"new"), b"not a pair"])
    assert store.get(b"k") == b"old"


@pytest.mark.parametrize("bad", [None, "text", 1, bytearray(b"k"), memoryview(b"k")])
def test_keys_must_be_bytes(store: Store, bad: Any) -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        store.get(bad)
    with pytest.raises(TypeError, match="must be bytes"):
        store.put(bad, b"v")
    with pytest.raises(TypeError, match="must be bytes"):
        store.delete(bad)
    with pytest.raises(TypeError, match="must be bytes"):
        store.range(bad, b"z")
    with pytest.raises(TypeError, match="must be bytes"):
        store.range(b"a", bad)


@pytest.mark.parametrize("bad", ["text", 1, bytearray(b"v")])
def test_values_must_be_bytes_or_none(store: Store, bad: Any) -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        store.put(b"k", bad)
    with pytest.raises(TypeError, match="must be bytes"):
        store.put_all([(b"k", bad)])
    assert store.get(b"k") is None


def test_drop_range_removes_the_keys_from_the_start_up_to_the_end_excluded(store: Store) -> None:
    # Window-store keys: an 8-byte segment number, then the key; 1,100 keys per segment, so the
    # default key-by-key path would page.
    def key(segment: int, k: int) -> bytes:
        return segment.to_bytes(8, "big") + k.to_bytes(4, "big")

    store.put_all([(key(s, k), bytes([s])) for s in range(4) for k in range(1100)])
    store.drop_range((1).to_bytes(8, "big"), (3).to_bytes(8, "big"))
    left = list(store.all())
    assert len(left) == 2200 and {v for _, v in left} == {b"\x00", b"\x03"}
    store.drop_range(key(3, 5), key(3, 5))  # empty
    store.drop_range(key(3, 9), key(3, 1))  # inverted
    assert store.approximate_num_entries() == 2200
    store.drop_range(key(0, 0), key(0, 2))
    assert store.get(key(0, 1)) is None and store.get(key(0, 2)) == b"\x00"
    with pytest.raises(TypeError, match="must be bytes"):
        store.drop_range("a", b"b")  # type: ignore[arg-type]


def test_a_closed_store_raises_processor_state_error(store: Store) -> None:
    store.put(b"a", b"1")
    it = store.all()
    store.close()
    store.close()  # closing twice is fine
    assert not store.is_open()
    assert "closed" in repr(store)
    for call in (
        lambda: store.get(b"a"),
        lambda: store.put(b"a", b"1"),
        lambda: store.put_all([(b"a", b"1")]),
        lambda: store.put_all([]),
        lambda: store.delete(b"a"),
        lambda: store.drop_range(b"a", b"z"),
        lambda: list(store.range(b"a", b"z")),
        lambda: list(store.all()),
        lambda: next(it),
        store.approximate_num_entries,
        store.flush,
    ):
        with pytest.raises(ProcessorStateError) as info:
            call()
        assert info.value.store_name == "s"
        assert "closed" in str(info.value)
        assert isinstance(info.value, StreamsError)


def test_a_store_is_a_context_manager(make_store: Callable[[str], Store]) -> None:
    with make_store("cm") as store:
        store.put(b"a", b"1")
    assert not store.is_open()


def test_flush_is_allowed_on_an_open_store(store: Store) -> None:
    store.put(b"a", b"1")
    store.flush()
    assert store.get(b"a") == b"1"


# --- persistent only -------------------------------------------------------------------------


def test_persistent_reopen_keeps_flushed_data(tmp_path: Path) -> None:
    path = tmp_path / "p"
    store = PersistentKeyValueStore("p", path)
    assert store.path == path
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    store.delete(b"b")
    store.flush()
    store.close()
    with PersistentKeyValueStore("p", str(path)) as again:  # str paths work too
        assert list(again.all()) == [(b"a", b"1")]
        assert again.approximate_num_entries() == 1
        assert again.persistent


def test_a_level_base_under_4_mib_is_refused_and_a_valid_one_gives_a_working_store(
    tmp_path: Path,
) -> None:
    # How the option shapes the tree (and that a reopened store keeps it) is tested in Rust
    # (store::persistent, a_small_level_base_merges_into_small_tables_and_the_store_keeps_it).
    with pytest.raises(ValueError, match="level_base_bytes must be at least 4194304"):
        PersistentKeyValueStore("p", tmp_path / "p", level_base_bytes=4 * 2**20 - 1)
    with PersistentKeyValueStore("p", tmp_path / "p", level_base_bytes=4 * 2**20) as store:
        store.put(b"k", b"v")
    with PersistentKeyValueStore("p", tmp_path / "p") as again:
        assert again.get(b"k") == b"v"


def test_close_flushes(tmp_path: Path) -> None:
    store = PersistentKeyValueStore("p", tmp_path / "p")
    store.put(b"a", b"1")
    store.close()
    with PersistentKeyValueStore("p", tmp_path / "p") as again:
        assert again.get(b"a") == b"1"


def test_two_stores_on_one_path_is_a_clear_error(tmp_path: Path) -> None:
    first = PersistentKeyValueStore("first", tmp_path / "p")
    with pytest.raises(ProcessorStateError, match="already open") as info:
        PersistentKeyValueStore("second", tmp_path / "p")
    assert info.value.store_name == "second"
    assert str(tmp_path / "p") in str(info.value)
    first.close()
    # Once the first is closed, the directory can be opened again.
    PersistentKeyValueStore("second", tmp_path / "p").close()


def test_a_path_that_is_a_file_is_a_processor_state_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(ProcessorStateError) as info:
        PersistentKeyValueStore("p", tmp_path / "file")
    assert info.value.store_name == "p"


def test_an_unusable_database_is_a_processor_state_error(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "fjall").write_bytes(b"\x5a" * 8192)  # a file where its directory goes
    with pytest.raises(ProcessorStateError, match="store 'p'"):
        PersistentKeyValueStore("p", tmp_path / "p")


def test_stores_at_different_paths_are_independent(tmp_path: Path) -> None:
    with (
        PersistentKeyValueStore("a", tmp_path / "a") as a,
        PersistentKeyValueStore("b", tmp_path / "b") as b,
    ):
        a.put(b"k", b"a")
        b.put(b"k", b"b")
        assert (a.get(b"k"), b.get(b"k")) == (b"a", b"b")


_WRITER = textwrap.dedent(
    """
    import sys
    from streamstate import PersistentKeyValueStore

    store = PersistentKeyValueStore("crash", sys.argv[1])
    batch = 0
    while True:
        # Batch b sets every key k0..k49 to b: a torn batch would leave mixed values.
        store.put_all([(b"k%d" % k, b"%d" % batch) for k in range(50)])
        if batch % 3 == 0:
            store.flush()
            print(batch, flush=True)  # batches up to here are durable
        batch += 1
    """
)


def test_a_killed_writer_leaves_a_prefix_of_whole_batches(tmp_path: Path) -> None:
    path = tmp_path / "crash"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    flushed = -1
    deadline = time.monotonic() + 30
    while flushed < 30 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        flushed = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    assert flushed >= 30, "the writer did not get going"
    with PersistentKeyValueStore("crash", path) as store:
        entries = dict(store.all())
    assert len(entries) == 50
    batches = set(entries.values())
    assert len(batches) == 1, f"a torn batch: {sorted(batches)[:5]}"
    assert int(batches.pop()) >= flushed  # nothing flushed was lost
