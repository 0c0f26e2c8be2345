"""The DSL counts' hot paths over the record cache (``dsl/object_cache.py``): flushed entries
kept as clean objects, evicted oldest first; a tumbling-window count that skips the store read
of a window newer than any the store holds unseen by the cache. Each scenario revisits keys and
windows after their clean entries were evicted (``_MAX_CLEAN`` made tiny), so a stale or
missing read would show as a wrong count. The driver flushes the caches after every record, as
Kafka's commits after each.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest
from tests.dsl_support import capture

from streamstate.dsl import (
    Materialized,
    StreamsBuilder,
    TimeWindows,
    Window,
    Windowed,
    object_cache,
)
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
TEXT = StringSerializer()
SIZE = 100


def _inputs(seed: int, n: int) -> list[tuple[str, int]]:
    """``n`` (key, timestamp) over 5 keys, timestamps mostly ascending over a few windows,
    each key and window coming back after others."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(5)}", i * 7 + rng.randrange(3)) for i in range(n)]


@pytest.mark.parametrize("max_clean", [1, 2, 100_000], ids=["clean-1", "clean-2", "default"])
def test_count_with_clean_entries_evicted(monkeypatch: pytest.MonkeyPatch, max_clean: int) -> None:
    monkeypatch.setattr(object_cache, "_MAX_CLEAN", max_clean)
    builder = StreamsBuilder()
    out = capture(builder.stream("input").group_by_key().count(materialized="counts").to_stream())
    inputs = _inputs(1, 200)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for key, timestamp in inputs:
            topic.pipe_input(key, "v", timestamp)
        store = dict(driver.get_key_value_store("counts").all())
    expected: collections.Counter[str] = collections.Counter()
    updates = []
    for key, timestamp in inputs:
        expected[key] += 1
        updates.append((key, expected[key], timestamp))
    assert out == updates
    assert store == dict(expected)


@pytest.mark.parametrize("max_clean", [1, 2, 100_000], ids=["clean-1", "clean-2", "default"])
def test_windowed_count_with_clean_entries_evicted(
    monkeypatch: pytest.MonkeyPatch, max_clean: int
) -> None:
    monkeypatch.setattr(object_cache, "_MAX_CLEAN", max_clean)
    builder = StreamsBuilder()
    table = (
        builder.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(SIZE, 10_000))
        .count(materialized="windowed-counts")
    )
    out = capture(table.to_stream())
    inputs = _inputs(2, 300)
    # Late records (within the grace) go back to windows evicted from the clean entries.
    inputs += [(key, timestamp // 2) for key, timestamp in inputs[-40:]]
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for key, timestamp in inputs:
            topic.pipe_input(key, "v", timestamp)
        store = {
            (windowed.key, windowed.window.start): count
            for windowed, count in driver.get_window_store("windowed-counts").all()
        }
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    latest: dict[tuple[str, int], int] = {}
    updates: list[tuple[Any, int, int]] = []
    for key, timestamp in inputs:
        start = timestamp - timestamp % SIZE
        counts[key, start] += 1
        latest[key, start] = max(latest.get((key, start), timestamp), timestamp)
        windowed = Windowed(key, Window(start, start + SIZE))
        updates.append((windowed, counts[key, start], latest[key, start]))
    assert out == updates
    assert store == dict(counts)


def test_a_value_changed_in_place_downstream_is_not_the_next_aggregate() -> None:
    # The aggregate forwarded at the flush is the object the cache held: a processor further
    # down that changes it in place must not change what the next record aggregates onto
    # (Kafka's cache holds bytes; each reader decodes its own copy).
    def bump(value: dict[str, int]) -> dict[str, int]:
        value["n"] += 100
        return value

    builder = StreamsBuilder()
    table = (
        builder.stream("input")
        .group_by_key()
        .aggregate(
            lambda: {"n": 0},
            lambda key, value, agg: {"n": agg["n"] + 1},
            materialized=Materialized.as_("sums", value_serde=Serdes.Json()),
        )
    )
    out = capture(table.to_stream().map_values(bump))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for timestamp in range(3):
            topic.pipe_input("k", "v", timestamp)
        stored = dict(driver.get_key_value_store("sums").all())
    assert [value for _, value, _ in out] == [{"n": 101}, {"n": 102}, {"n": 103}]
    assert stored == {"k": {"n": 3}}
