"""``_core.UntrackedPairs`` (rust/py/src/untracked.rs) and the counts' use of it: the
``ValueAndTimestamp`` objects a count makes per record and keeps in its record cache are not
tracked by CPython's cyclic garbage collector when they hold only numbers, strings, bytes or
``None`` (tracked, every full collection visited them all: 15-20% of a windowed count's CPU),
and are otherwise the same objects."""

from __future__ import annotations

import gc
import pickle
import sys
from typing import Any, NamedTuple

import pytest

from streamstate._core import UntrackedPairs
from streamstate.dsl import StreamsBuilder, TimeWindows
from streamstate.dsl.stores import ValueAndTimestamp, new_value_and_timestamp
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
TEXT = StringSerializer()


class Pair(NamedTuple):
    first: Any
    second: Any


@pytest.mark.parametrize(
    "items", [(1, 2), (2**70, -1), ("a", b"b"), (1.5, None), (True, False), (None, None)]
)
def test_a_pair_of_atomic_items_is_untracked_and_equal_to_the_tuple(items: tuple[Any, Any]) -> None:
    pair = UntrackedPairs(Pair).make(*items)
    assert type(pair) is Pair
    assert pair == items
    assert (pair.first, pair.second) == items
    assert hash(pair) == hash(items)
    assert not gc.is_tracked(pair)
    assert pickle.loads(pickle.dumps(pair)) == pair
    assert pair._replace(first=0) == (0, items[1])


@pytest.mark.parametrize("container", [[], {}, (1, []), Pair(1, 2)])
def test_a_pair_that_could_be_in_a_cycle_stays_tracked(container: Any) -> None:
    new = UntrackedPairs(Pair).make
    assert gc.is_tracked(new(container, 1))
    assert gc.is_tracked(new(1, container))


def test_a_cycle_through_a_tracked_pair_is_collected() -> None:
    cycle: list[Any] = []
    cycle.append(UntrackedPairs(Pair).make(cycle, 1))
    probe = UntrackedPairs(Pair).make(1, 2)
    collected = []

    class Marker:
        def __del__(self) -> None:
            collected.append(True)

    cycle.append(Marker())
    del cycle
    gc.collect()
    assert collected == [True]
    assert probe == (1, 2)


def test_items_are_released_with_the_pair() -> None:
    item = "x" * 100
    before = sys.getrefcount(item)
    pairs = [UntrackedPairs(Pair).make(item, item) for _ in range(1000)]
    assert sys.getrefcount(item) == before + 2000
    del pairs
    assert sys.getrefcount(item) == before


def test_only_a_tuple_subclass_without_an_instance_dict() -> None:
    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    for cls in (dict, tuple, WithDict):
        with pytest.raises(TypeError, match="tuple subclass without an instance dict"):
            UntrackedPairs(cls)


def test_value_and_timestamp_as_the_stores_make_it() -> None:
    made = new_value_and_timestamp(3, 17)
    assert type(made) is ValueAndTimestamp
    assert made == ValueAndTimestamp(3, 17)
    assert (made.value, made.timestamp) == (3, 17)
    assert not gc.is_tracked(made)
    assert gc.is_tracked(new_value_and_timestamp({"a": 1}, 17))


def _cached_values(store: Any) -> list[Any]:
    cache = store.cache
    return [entry[1] for entry in cache.dirty.values()] + list(cache.clean.values())


def test_the_counts_cache_untracked_values() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("input")
    stream.group_by_key().count(materialized="counts")
    stream.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100)).count(
        materialized="windowed-counts"
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for i in range(60):
            topic.pipe_input(f"k{i % 7}", "v", i * 10)
        for name in ("counts", "windowed-counts"):
            values = _cached_values(driver._typed(name))
            assert values, name
            assert all(type(v) is ValueAndTimestamp for v in values), name
            assert [v for v in values if gc.is_tracked(v)] == [], name
        assert dict(driver.get_key_value_store("counts").all()) == {
            f"k{k}": len(range(k, 60, 7)) for k in range(7)
        }
