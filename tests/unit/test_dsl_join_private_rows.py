"""A joiner may change the table row it is given, as in Kafka, whose record cache holds bytes and
whose value getters deserialize each row anew: the change reaches neither the table's store (and
changelog) nor the next record's join. And the record cache's bytes of flushed rows that can
change (``ObjectCache.raw``): decoded anew on each read, bounded, dropped with the dirty
entries. (The same with the row still dirty in the cache, between two commits, is
``tests/integration/test_dsl_join_private_rows_app.py``: the test driver commits after each
record.) And a windowed aggregate of lists, flushed as bytes, carries on in its window (the
window store's shortcut for new windows is told of keys no clean object covers)."""

from __future__ import annotations

import json
from typing import Any

from streamstate.dsl import Materialized, StreamsBuilder, TimeWindows
from streamstate.dsl.object_cache import MISSING, ObjectCache
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

TEXT = StringSerializer()
JSON = Serdes.Json()


def bumping_joiner(order: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """Changes the row it is given in place (allowed: Kafka hands each join its own copy)."""
    user["n"] += 1
    user.setdefault("orders", []).append(order["i"])
    return {**order, **user}


def test_a_joiner_changing_its_row_changes_neither_the_store_nor_the_next_join() -> None:
    builder = StreamsBuilder()
    users = builder.table(
        "users", key_serde=Serdes.String(), value_serde=JSON, materialized="users-store"
    )
    orders = builder.stream("orders", key_serde=Serdes.String(), value_serde=JSON)
    orders.join(users, bumping_joiner).to("out", value_serde=JSON)
    driver = TopologyTestDriver(builder.build(), {"application.id": "private-rows"})
    try:
        driver.create_input_topic("users", TEXT, JSON.serializer).pipe_input("k", {"n": 1}, 10)
        order_topic = driver.create_input_topic("orders", TEXT, JSON.serializer)
        for i in range(3):
            order_topic.pipe_input("k", {"i": i}, 20 + i)
        out = driver.create_output_topic("out", Serdes.String().deserializer, JSON.deserializer)
        assert out.read_key_values_to_list() == [
            ("k", {"i": i, "n": 2, "orders": [i]}) for i in range(3)
        ]
        assert driver.get_key_value_store("users-store").get("k") == {"n": 1}
        changelog = driver.create_output_topic(
            "private-rows-users-store-changelog",
            Serdes.String().deserializer,
            Serdes.Bytes().deserializer,
        )
        # A timestamped store's changelog: the row's timestamp (8 bytes), then its value.
        assert [json.loads(raw[8:]) for raw in changelog.read_values_to_list()] == [{"n": 1}]
    finally:
        driver.close()


class _Layer:
    """The byte cache an ObjectCache sits on: a dict store below, flushes on demand."""

    def __init__(self) -> None:
        self.inner = self
        self.stored: dict[bytes, bytes | None] = {}
        self.overlay: ObjectCache | None = None

    def get(self, key: bytes) -> bytes | None:
        return self.stored.get(key)

    def put_all(self, puts: list[tuple[bytes, bytes | None]]) -> None:
        self.stored.update(puts)

    def flush_cache(self) -> None:
        assert self.overlay is not None
        self.overlay.flush()


def _cache(max_clean: int = 100) -> tuple[ObjectCache, _Layer]:
    layer = _Layer()
    cache = ObjectCache(layer, max_clean=max_clean)
    layer.overlay = cache
    cache.encode = lambda key, obj: (
        key.encode(),
        None if obj is None else json.dumps(obj).encode(),
    )
    cache.decode = json.loads
    return cache, layer


def test_a_flushed_row_that_can_change_is_decoded_anew_on_each_read() -> None:
    cache, layer = _cache()
    cache.put("a", "a", {"n": 1})
    cache.put("b", "b", 7)
    first = cache.get("a")
    first["n"] = 99  # the writer's own dirty object: not flushed yet
    cache.flush()
    assert layer.stored == {b"a": b'{"n": 99}', b"b": b"7"}
    assert cache.raw == {"a": b'{"n": 99}'} and cache.clean == {"b": 7}
    one, two = cache.get("a"), cache.get_private("a")
    assert one == two == {"n": 99} and one is not two
    one["n"] = 0
    assert cache.get("a") == {"n": 99}
    cache.put("a", "a", 5)  # dirty again, then flushed as an immutable: clean, not raw
    assert cache.get("a") == 5
    cache.flush()
    assert cache.raw == {} and cache.clean == {"b": 7, "a": 5} and cache.raw_bytes == 0


def test_a_dirty_row_that_can_change_is_a_copy_for_a_private_reader_only() -> None:
    cache, _ = _cache()
    row = {"n": 1}
    cache.put("a", "a", row)
    assert cache.get("a") is row  # the writer's (an aggregation reads its own aggregate)
    copy = cache.get_private("a")
    assert copy == row and copy is not row
    cache.put("b", "b", (1, "x"))
    assert cache.get_private("b") == (1, "x")
    assert cache.get_private("c") is MISSING


def test_raw_rows_are_bounded_oldest_first_and_dropped_with_the_dirty_ones() -> None:
    cache, _ = _cache(max_clean=3)
    forgotten: list[Any] = []
    cache.forget_listeners.append(forgotten.append)
    for i in range(5):
        cache.put(f"k{i}", f"k{i}", {"i": i})
    cache.flush()
    assert list(cache.raw) == ["k2", "k3", "k4"]
    # Flushed as bytes (no clean object covers them), then the oldest two evicted.
    assert forgotten == [[f"k{i}" for i in range(5)], ["k0", "k1"]]
    assert cache.raw_bytes == sum(len(raw) for raw in cache.raw.values())
    cache.max_raw_bytes = 2 * len(b'{"i": 9}')
    cache.put("k2", "k2", {"i": 9})  # written again: the newest now
    cache.flush()
    assert list(cache.raw) == ["k4", "k2"]
    assert forgotten[-2:] == [["k2"], ["k3"]]
    assert cache.get("k3") is MISSING
    cache.discard()
    assert cache.raw == {} and cache.raw_bytes == 0 and forgotten[-1] is None


def test_a_windowed_aggregate_that_can_change_carries_on_after_each_flush() -> None:
    """A tumbling-window aggregate of lists: the driver flushes the cache after each record,
    and the flushed list (kept as bytes, not as a clean object) is read back from the store
    for the next record of its window; it was taken for a new window before (the window
    store's shortcut trusted the clean entries alone) and the aggregate started over."""
    builder = StreamsBuilder()
    table = (
        builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .aggregate(
            list,
            lambda _key, value, aggregate: [*aggregate, value],
            materialized=Materialized.with_(Serdes.String(), JSON),
        )
    )
    out: list[Any] = []
    table.to_stream().foreach(lambda key, value: out.append((key.key, key.window.start, value)))
    driver = TopologyTestDriver(builder.build(), {"application.id": "window-lists"})
    try:
        topic = driver.create_input_topic("in", TEXT, TEXT)
        for timestamp, value in enumerate("abc"):
            topic.pipe_input("k", value, timestamp)
        topic.pipe_input("k", "d", 12)
        assert out == [
            ("k", 0, ["a"]),
            ("k", 0, ["a", "b"]),
            ("k", 0, ["a", "b", "c"]),
            ("k", 10, ["d"]),
        ]
    finally:
        driver.close()
