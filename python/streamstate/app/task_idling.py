"""KIP-695's task idling: when a task with several input partitions may process, in one place.

A ``StreamTask`` (:meth:`streamstate.app.task.StreamTask.ready`) and a task of
``streamstate.spark.process`` both ask :func:`may_process` before taking a record: a task whose
partition is empty but has records on the broker beyond what it holds (lag > 0) or whose lag is
not known waits, since processing now could take a later record before an earlier one; an empty
partition with lag 0 is waited for ``max.task.idle.ms`` (``-1``: never wait), as Kafka Streams
3.0+ does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, MutableMapping
from typing import TypeVar

__all__ = ["may_process"]

P = TypeVar("P", bound=Hashable)


def may_process(
    buffered: Mapping[P, int],
    lags: Mapping[P, int],
    deadlines: MutableMapping[P, float],
    now: Callable[[], float],
    idle_ms: int,
) -> bool:
    """Whether a task holding records may process now (KIP-695).

    ``buffered``: the records buffered per partition, in the task's partition order; ``lags``:
    each partition's lag (absent or negative: unknown); ``deadlines``: the wall-clock deadline
    (ms, on ``now``'s clock) of each empty partition with lag 0, kept by the caller between
    calls and updated here; ``idle_ms``: ``max.task.idle.ms``."""
    if len(buffered) == 1 or idle_ms < 0:
        return True
    if all(buffered.values()):
        deadlines.clear()
        return True
    at = now()
    for tp, size in buffered.items():
        if size:
            deadlines.pop(tp, None)
            continue
        if lags.get(tp, -1) != 0:
            # Unknown (no fetch yet), or records on the broker not yet buffered here.
            return False
        deadline = deadlines.setdefault(tp, at + idle_ms)
        if at < deadline:
            return False
    return True
