"""The processors of a windowed stream-stream join, with Kafka 4.4's rules (Kafka's
``KStreamJoinWindow``, ``KStreamKStreamJoinLeftSide`` / ``RightSide`` and their
``KStreamKStreamJoin``).

* :class:`JoinWindowProcessor` (``KSTREAM-WINDOWED-``): forwards each record to its side's
  join processor, then keeps it in its side's window store. A record whose segment has
  expired (older than the store's stream time minus ``before + after + grace``, by segment)
  is not kept, and counted in ``dropped-records-total``.
* :class:`StreamJoinProcessor` (``KSTREAM-JOINTHIS-`` / ``-JOINOTHER-`` / ``-OUTERTHIS-`` /
  ``-OUTEROTHER-``): joins a record with the other side's records of the same key from
  ``before`` earlier to ``after`` later (the other side sees the window mirrored), each result
  stamped with the later of the two timestamps. A record without key or value is dropped and
  counted, except a record without a key on an outer side, joined with ``None`` at once.
* **Left and outer joins** (Kafka's fix of spurious results, KIP-633): a record of an outer
  side that matches nothing is kept in the shared outer-join store and joined with ``None``
  only once its window has closed (``timestamp + window + grace < stream time``), when a
  later record moves the stream time on; a match arriving before removes it. Emitting is
  throttled to once per ``emit_interval_ms`` of wall-clock time (Kafka's internal
  ``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``, 1000 ms).
  The stream time and the oldest waiting timestamp are shared by both sides of one task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamstate.dsl.join_stores import JoinWindowStore, OuterJoinStore
from streamstate.dsl.table_processors import skip_record
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record

__all__ = [
    "JoinSide",
    "JoinWindowProcessor",
    "StreamJoinProcessor",
    "TimeTracker",
    "TimeTrackers",
]

_log = logging.getLogger(__name__)
_NO_TIME = 2**63 - 1


def _long(value: int) -> int:
    """``value`` as Java's 64-bit ``long`` arithmetic leaves it (wrapping on overflow)."""
    return (value + 2**63) % 2**64 - 2**63


class TimeTracker:
    """What both sides of one task's join share (Kafka's ``KStreamImplJoin.TimeTracker``):
    the stream time, the oldest timestamp waiting in the outer-join store, and when the
    non-joined records may next be emitted (wall-clock ms)."""

    def __init__(self, emit_interval_ms: int) -> None:
        """Nothing seen yet."""
        self.emit_interval_ms = emit_interval_ms
        self.stream_time = -1
        self.min_time = _NO_TIME
        self.next_time_to_emit = 0


class TimeTrackers:
    """One :class:`TimeTracker` per task, shared by the join's two processors."""

    def __init__(self, emit_interval_ms: int) -> None:
        """``emit_interval_ms``: see the module doc."""
        self.emit_interval_ms = emit_interval_ms
        self._trackers: dict[Any, TimeTracker] = {}

    def get(self, task_id: Any) -> TimeTracker:
        """The task's tracker (made by the first side that asks)."""
        tracker = self._trackers.get(task_id)
        if tracker is None:
            tracker = self._trackers.setdefault(task_id, TimeTracker(self.emit_interval_ms))
        return tracker

    def remove(self, task_id: Any) -> None:
        """Forgets the task's tracker (its task closed)."""
        self._trackers.pop(task_id, None)


class JoinWindowProcessor(Processor):
    """Forwards each record, then keeps it in its side's window store; see the module doc."""

    def __init__(self, open_store: Callable[[ProcessorGraphContext], JoinWindowStore]) -> None:
        """``open_store(context)``: the side's store."""
        self.open_store = open_store

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the store."""
        self.context = context
        self.store = self.open_store(context)

    def process(self, record: Record) -> None:
        """Forwards ``record``; keeps it if it has a key (a record without one never joins)."""
        self.context.forward(record)
        if record[0] is not None and not self.store.put(record[0], record[1], record[2]):
            meta = self.context.record_metadata
            _log.warning(
                "Skipping record for expired segment. topic=[%s] partition=[%s] offset=[%s] "
                "timestamp=[%d] store=[%s]",
                meta.topic if meta else None,
                meta.partition if meta else None,
                meta.offset if meta else None,
                record[2],
                self.store.name,
            )
            self.context.record_dropped()


@dataclass(frozen=True)
class JoinSide:
    """How one side joins: the left side (``this``) sees ``[t - before, t + after]`` of the
    other's records, the right side the mirror; ``outer``: this side's unmatched records are
    joined with ``None``."""

    left: bool
    outer: bool
    before_ms: int  # JoinWindows.before
    after_ms: int  # JoinWindows.after
    grace_ms: int
    joiner: Callable[[Any, Any, Any], Any]  # joiner(key, left value, right value)
    other_store: Callable[[ProcessorGraphContext], JoinWindowStore]
    outer_store: Callable[[ProcessorGraphContext], OuterJoinStore] | None
    trackers: TimeTrackers


class StreamJoinProcessor(Processor):
    """One side of the join; see the module doc."""

    def __init__(self, side: JoinSide) -> None:
        """Made per task by the DSL."""
        self.side = side
        self.left = side.left
        self.outer = side.outer
        self.grace_ms = side.grace_ms
        if side.left:
            self.join_before_ms, self.join_after_ms = side.before_ms, side.after_ms
        else:
            self.join_before_ms, self.join_after_ms = side.after_ms, side.before_ms

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the other side's store, the outer-join store, the task's time tracker."""
        self.context = context
        self.forward = context.forward
        self.other_store = self.side.other_store(context)
        self.outer_store = None if self.side.outer_store is None else self.side.outer_store(context)
        self.tracker = self.side.trackers.get(context.task_id)

    def _join(self, key: Any, this: Any, other: Any) -> Any:
        if self.left:
            return self.side.joiner(key, this, other)
        return self.side.joiner(key, other, this)

    def process(self, record: Record) -> None:
        """Joins ``record`` with the other side's records in its window."""
        key, value, timestamp = record[0], record[1], record[2]
        tracker = self.tracker
        tracker.stream_time = max(tracker.stream_time, timestamp)
        if key is None:
            if self.outer and value is not None:
                self.forward(record.with_value(self._join(None, value, None)))
                return
            skip_record(self.context, "null key or value")
            return
        if value is None:
            skip_record(self.context, "null key or value")
            return
        outer_store = self.outer_store
        if outer_store is not None and timestamp == tracker.stream_time:
            self._emit_non_joined(outer_store, record)
        time_from = max(0, timestamp - self.join_before_ms)
        time_to = max(0, timestamp + self.join_after_ms)
        matched = False
        for other_timestamp, other_value in self.other_store.fetch(key, time_from, time_to):
            matched = True
            if outer_store is not None:
                # The other record found its match: it will not be emitted with None.
                outer_store.remove(key, other_timestamp, not self.left)
            self.forward(
                Record(
                    key,
                    self._join(key, value, other_value),
                    max(timestamp, other_timestamp),
                    record[3],
                )
            )
        if self.outer and not matched:
            # A record whose window has already closed (it came late, behind the stream time
            # of either side) is joined with None at once: no later match can reach it.
            if outer_store is None or time_to < tracker.stream_time:
                self.forward(record.with_value(self._join(key, value, None)))
            else:
                tracker.min_time = min(tracker.min_time, timestamp)
                outer_store.put(key, timestamp, self.left, value)

    def _emit_non_joined(self, store: OuterJoinStore, record: Record) -> None:
        """Joins with ``None`` the waiting records whose window has closed, oldest first, and
        removes them (Kafka's ``emitNonJoinedOuterRecords``)."""
        tracker = self.tracker
        # Only when there might be one (a scan of the store costs), and not more often than
        # the emit interval (wall-clock: a cost bound, independent of the data). The sum is
        # Java's long: with nothing waiting (the minimum is Long.MAX_VALUE) it wraps negative,
        # so Kafka goes on and spends an emit interval on an empty store; so do we.
        if _long(tracker.min_time + self.join_after_ms + self.grace_ms) >= tracker.stream_time:
            return
        now = self.context.current_system_time_ms
        if now < tracker.next_time_to_emit:
            return
        tracker.next_time_to_emit = now + tracker.emit_interval_ms
        tracker.min_time = _NO_TIME
        side = self.side
        left_open = right_open = False
        previous: bytes | None = None
        emitted: list[bytes] = []
        for raw_key, waiting, values in store.entries():
            tracker.min_time = waiting.timestamp
            if left_open and right_open:
                break  # both sides' windows are open from here on: nothing more to emit
            look_back = side.after_ms if waiting.left_side else side.before_ms
            if tracker.min_time + look_back + self.grace_ms >= tracker.stream_time:
                if waiting.left_side:
                    left_open = True
                else:
                    right_open = True
                continue
            self.forward(
                Record(
                    waiting.key,
                    side.joiner(waiting.key, values.left_value, values.right_value),
                    waiting.timestamp,
                    record[3],
                )
            )
            if raw_key != previous:
                emitted.append(raw_key)
                previous = raw_key
        # Removed once all are forwarded (a key holds a list: Kafka removes each key after
        # its last value, and the store is not changed under its own iteration).
        for raw_key in emitted:
            store.delete_raw(raw_key)

    def close(self) -> None:
        """Forgets the task's time tracker, as Kafka does."""
        self.side.trackers.remove(self.context.task_id)
