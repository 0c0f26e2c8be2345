"""Punctuation: callbacks a processor schedules on stream time or wall-clock time.

Kafka Streams' ``PunctuationQueue`` semantics, kept exactly:

* a schedule fires when the time given to :meth:`PunctuationQueue.may_punctuate` reaches its
  next punctuation time; the callback receives that *current* time, not the scheduled one;
* after firing, the next time is one interval later, or, when the current time has already
  passed that (stream time jumped, or the loop was held up), the first multiple of the interval
  after the current time: missed intervals fire **once**, not once each;
* stream-time schedules are aligned to 0 and fire as soon as the task's stream time is known;
  wall-clock schedules start ``interval`` after they were made;
* ``cancel()`` on the returned handle stops a schedule, also from inside its own callback.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["Cancellable", "PunctuationQueue", "PunctuationSchedule", "PunctuationType"]


class PunctuationType(enum.Enum):
    """What a schedule follows: the task's stream time (advanced by records' timestamps) or
    the wall clock (checked by the stream thread's loop)."""

    STREAM_TIME = "STREAM_TIME"
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"


class Cancellable:
    """The handle :meth:`schedule` returns; :meth:`cancel` stops the schedule for good."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        """A live schedule's handle."""
        self.cancelled = False

    def cancel(self) -> None:
        """Stops the schedule: it never fires again (cancelling twice is harmless)."""
        self.cancelled = True


class PunctuationSchedule:
    """One schedule: the ``node`` it belongs to, its next ``timestamp``, its ``interval``, its
    ``callback(timestamp)`` and the :class:`Cancellable` shared by all its successors."""

    __slots__ = ("callback", "cancellable", "interval", "node", "timestamp")

    def __init__(
        self,
        node: Any,
        timestamp: int,
        interval: int,
        callback: Callable[[int], None],
        cancellable: Cancellable | None = None,
    ) -> None:
        """``interval`` must be at least 1 ms (``ValueError``, as Kafka's
        ``IllegalArgumentException``)."""
        if interval < 1:
            raise ValueError(f"the punctuation interval must be at least 1 ms, not {interval}")
        self.node = node
        self.timestamp = timestamp
        self.interval = interval
        self.callback = callback
        self.cancellable = cancellable if cancellable is not None else Cancellable()

    def next(self, now: int) -> PunctuationSchedule:
        """The schedule after firing at ``now``: one interval on, or past ``now`` if intervals
        were missed (they do not fire again)."""
        following = self.timestamp + self.interval
        if now >= following:
            missed = (now - self.timestamp) // self.interval
            following = self.timestamp + (missed + 1) * self.interval
        return PunctuationSchedule(
            self.node, following, self.interval, self.callback, self.cancellable
        )


Punctuator = Callable[[PunctuationSchedule, int], None]
"""How a queue fires a schedule: ``fn(schedule, now)`` (the task sets the node's context up
and calls ``schedule.callback(now)``)."""


class PunctuationQueue:
    """The schedules of one type of one task, earliest first."""

    def __init__(self) -> None:
        """An empty queue."""
        self._heap: list[tuple[int, int, PunctuationSchedule]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def heap(self) -> list[tuple[int, int, PunctuationSchedule]]:
        """The schedules, a heap by due time (empty: nothing scheduled)."""
        return self._heap

    def schedule(self, schedule: PunctuationSchedule) -> Cancellable:
        """Adds ``schedule``; returns its handle."""
        heapq.heappush(self._heap, (schedule.timestamp, next(self._order), schedule))
        return schedule.cancellable

    def may_punctuate(self, now: int, punctuate: Punctuator) -> bool:
        """Fires every live schedule due at ``now`` (``punctuate(schedule, now)``) and
        re-schedules it; returns whether anything fired. Cancelled schedules are dropped."""
        heap = self._heap
        fired = False
        while heap and heap[0][0] <= now:
            _, _, due = heapq.heappop(heap)
            if due.cancellable.cancelled:
                continue
            punctuate(due, now)
            # The callback may have cancelled its own schedule.
            if not due.cancellable.cancelled:
                following = due.next(now)
                heapq.heappush(heap, (following.timestamp, next(self._order), following))
            fired = True
        return fired

    def close(self) -> None:
        """Drops every schedule."""
        self._heap.clear()
