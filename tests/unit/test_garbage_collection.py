"""``python.gc.freeze`` (``streamstate.app.garbage_collection``): the heap frozen while a
client runs, shared between the clients of a process, and garbage made of frozen objects
collected once the last one closes."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streamstate.app.config import StreamsConfig
from streamstate.app.garbage_collection import FreezeHold


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.me = self


def test_the_last_of_two_holders_to_release_unfreezes() -> None:
    first, second = FreezeHold(), FreezeHold()
    first.acquire()
    assert gc.get_freeze_count() > 0 and first.held
    second.acquire()
    first.release()
    assert gc.get_freeze_count() > 0, "a client still running lost its freeze"
    second.release()
    assert gc.get_freeze_count() == 0 and not second.held


def test_acquire_and_release_are_idempotent() -> None:
    first, second = FreezeHold(), FreezeHold()
    first.acquire()
    first.acquire()
    second.acquire()
    first.release()
    first.release()
    assert gc.get_freeze_count() > 0, "a second release of one client counted as another's"
    second.release()
    assert gc.get_freeze_count() == 0


def test_a_cycle_frozen_while_running_is_collected_after_the_last_release() -> None:
    node = _Node()
    gone = weakref.ref(node)
    hold = FreezeHold()
    hold.acquire()
    del node
    gc.collect()
    assert gone() is not None, "the collector saw a frozen object: nothing was frozen"
    hold.release()
    gc.collect()
    assert gone() is None


def test_start_up_garbage_is_collected_before_the_freeze() -> None:
    node = _Node()
    gone = weakref.ref(node)
    del node
    hold = FreezeHold()
    hold.acquire()
    try:
        assert gone() is None, "garbage of start-up was frozen with the live heap"
    finally:
        hold.release()


@pytest.mark.parametrize(
    ("given", "parsed"), [(None, True), (False, False), ("false", False), ("TRUE", True)]
)
def test_the_setting_is_a_flag(given: object, parsed: bool) -> None:
    config = {"application.id": "a", "bootstrap.servers": "b:9092"}
    if given is not None:
        config["python.gc.freeze"] = given  # type: ignore[assignment]
    assert StreamsConfig.from_mapping(config).python_gc_freeze is parsed


def test_anything_but_true_or_false_is_refused() -> None:
    with pytest.raises(ValueError, match=r"python.gc.freeze must be true or false, not 'yes'"):
        StreamsConfig.from_mapping(
            {"application.id": "a", "bootstrap.servers": "b:9092", "python.gc.freeze": "yes"}
        )


def test_a_second_client_does_not_freeze_what_the_first_made_since() -> None:
    first, second = FreezeHold(), FreezeHold()
    first.acquire()
    task = _Node()
    gone = weakref.ref(task)
    second.acquire()
    del task
    gc.collect()
    try:
        assert gone() is None, "a task the first client dropped was kept by the second's start"
    finally:
        first.release()
        second.release()
