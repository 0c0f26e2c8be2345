"""Sliding-window aggregation (KIP-450): Kafka's ``KStreamSlidingWindowAggregate``, ported.

A sliding window of time difference ``d`` is ``[start, start + d]``, both ends inclusive. The
windows that exist are the ones records define: for a record at ``t``, its **left window**
``[t - d, t]`` (the record at the right edge) and its **right window** ``[t + 1, t + 1 + d]``
(created only while some later record falls in it). An arriving record

* updates every existing window of its key that contains it,
* creates its own left window (seeded with the aggregate of the window that ends just before
  it when the previous record lies within ``d``, else with the initializer),
* creates its own right window from the aggregate of the records after it, and the previous
  record's right window when it falls into it.

The windows of a key are read backward (latest start first) over ``[t - 2d, t + 1]``, as
Kafka does with its built-in stores (``processReverse``): that order is the order updates are
forwarded in. A record earlier than ``d`` (``t < d``) would need a window with a negative
start; such records all go into the window ``[0, d]`` instead (``processEarly``), and never
trigger ``EmitStrategy.on_window_close`` emission, as in Kafka.

**Late records**: the window close time is ``stream time - grace``. A record whose own left
window could only be closed (``t + d < close time``) is dropped and counted once; otherwise
every closed window it would create or update is skipped and counted (one each), as Kafka's
``droppedRecordsSensor`` counts them. A ``None`` key or ``None`` value is dropped and counted.

**Results** are keyed ``Windowed(key, Window(start, start + d))`` and stamped with the highest
record timestamp in the window. ``EmitStrategy.on_window_close()`` forwards each window once,
when ``end < close time``: windows whose start lies in ``[last close - d, close - d - 1]``.
Kafka throttles that emission by wall-clock time (``emit.interval.ms``); streamstate does not.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streamstate.dsl.stores import ValueAndTimestamp, WindowStore
from streamstate.dsl.table_processors import Change, TableState, skip_record
from streamstate.dsl.window_processors import _skip_expired, _WindowedAggregate
from streamstate.dsl.windows import EmitStrategy, SlidingWindows, Window, Windowed
from streamstate.errors import StreamsError
from streamstate.processor.record import Record

__all__ = ["SlidingWindowAggregateProcessor"]

_LONG = struct.Struct(">q")


def _live_from(store: WindowStore, time_from: int) -> int:
    # Kafka's segmented stores hide windows older than the retention on every read
    # (``getActualFrom``: ``max(from, observedStreamTime - retention + 1)``), at window
    # granularity, whereas WindowStore drops whole segments only: filter the rest here so the
    # windows found (and emitted) are the ones Kafka finds.
    return max(time_from, store.observed_stream_time - store.retention_ms + 1)


def _fetch_windows(
    store: WindowStore, key: Any, time_from: int, time_to: int
) -> list[tuple[int, ValueAndTimestamp]]:
    """``(window start, ValueAndTimestamp)`` of ``key``'s live windows starting in
    ``[time_from, time_to]``, ascending by start (reverse it to read backward, as Kafka's
    ``backwardFetch``: the range spans at most ``2d + 2`` ms, so a list is small)."""
    time_from = _live_from(store, time_from)
    if time_to < time_from:
        return []
    de = store.serdes.value_from_bytes
    key_bytes = store.serdes.key_to_bytes(key)
    return [
        (_LONG.unpack_from(raw_key, len(raw_key) - 8)[0], de(raw_value))
        for raw_key, raw_value in store._scan(key_bytes, time_from, time_to)
    ]


class SlidingWindowAggregateProcessor(_WindowedAggregate):
    """``TimeWindowedKStream.aggregate`` / ``reduce`` / ``count`` over ``SlidingWindows``;
    ``initializer`` is ``None`` for ``reduce`` (the first value is the aggregate)."""

    store: WindowStore

    def __init__(  # noqa: PLR0917 - made in one place, by the DSL
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        windows: SlidingWindows,
        emit: EmitStrategy,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        """``aggregator(key, value, aggregate)``."""
        super().__init__(state, open_store, emit)
        self.windows = windows
        self.difference = windows.time_difference_ms
        self.initializer = initializer
        self.aggregator = aggregator

    # -- processing -------------------------------------------------------------------------

    def process(self, record: Record) -> None:
        """Creates and updates the windows ``record`` defines and falls in."""
        key, value, timestamp = record[0], record[1], record[2]
        if key is None or value is None:
            skip_record(self.context, "null key or value")
            return
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms
        end = timestamp + self.difference
        if end < close_time:
            _skip_expired(
                self.context,
                timestamp,
                f"[{timestamp},{end}]",
                close_time,
                self.observed_stream_time,
            )
            return
        if timestamp < self.difference:
            # No emission after it, as in Kafka: an early record cannot move the close time
            # past any window's end.
            self._process_early(record, close_time)
            return
        self._process_backward(record, close_time)
        if self.emit_on_close:
            self._emit_final(record, close_time)

    def _process_backward(self, record: Record, close_time: int) -> None:
        """Kafka's ``processReverse``: the key's windows over ``[t - 2d, t + 1]``, latest first."""
        timestamp, difference = record[2], self.difference
        start_times: set[int] = set()
        left_aggregate: ValueAndTimestamp | None = None  # seeds the record's left window
        right_aggregate: ValueAndTimestamp | None = None  # becomes the record's right window
        left_exists = right_exists = False
        previous: int | None = None  # the timestamp of the record before this one, if near
        windows = _fetch_windows(
            self.store, record[0], max(0, timestamp - 2 * difference), timestamp + 1
        )
        for start, found in reversed(windows):
            start_times.add(start)
            end = start + difference
            if start == timestamp + 1:
                right_exists = True
            elif end > timestamp:
                # The latest-starting window holding the record holds exactly the records
                # after it that its right window needs (read before this record joins it).
                if right_aggregate is None:
                    right_aggregate = found
                self._update(start, found, record, close_time)
            elif end == timestamp:
                left_exists = True
                self._update(start, found, record, close_time)
                if found.timestamp < timestamp:
                    previous = found.timestamp
                else:
                    # A record at this very timestamp came before: every window this one
                    # would create exists already.
                    return
            else:
                left_aggregate = found
                previous = found.timestamp
                break
        self._create_windows(
            record,
            close_time,
            start_times,
            right_aggregate,
            left_aggregate,
            left_exists,
            right_exists,
            previous,
        )

    def _process_early(self, record: Record, close_time: int) -> None:
        """Kafka's ``processEarly``: a record with ``0 <= t < d`` goes into the combined
        window ``[0, d]`` (a left window would start before 0)."""
        key, timestamp = record[0], record[2]
        if timestamp < 0 or timestamp >= self.difference:
            raise StreamsError(
                f"Early record for sliding windows must fall between 0 <= inputRecordTimestamp "
                f"< {self.difference}; timestamp {timestamp} does not"
            )
        combined: ValueAndTimestamp | None = None
        right_aggregate: ValueAndTimestamp | None = None
        right_exists = False
        start_times: set[int] = set()
        previous: int | None = None
        # The range [0, t + 1] leaves three kinds of window: the combined one, right windows
        # of earlier records (they hold this one), and this record's own right window.
        for start, found in _fetch_windows(self.store, key, 0, timestamp + 1):
            start_times.add(start)
            if start == 0:
                combined = found
                # When the combined window's latest record is later than this one, that
                # record's arrival already made the previous record's right window.
                if found.timestamp < timestamp:
                    previous = found.timestamp
            elif start <= timestamp:
                right_aggregate = found
                self._update(start, found, record, close_time)
            else:
                right_exists = True
        # With no right window found, the combined window holds only records later than this
        # one (an earlier one would have made a right window that holds this record), so its
        # aggregate is this record's right window's.
        if right_aggregate is None and combined is not None and combined.timestamp > timestamp:
            right_aggregate = combined
        if not right_exists and self._right_not_empty(right_aggregate, timestamp):
            assert right_aggregate is not None
            self._create_right_window(record, right_aggregate)
        if previous is not None and previous + 1 not in start_times:
            self._update(previous + 1, self._initial(timestamp), record, close_time)
        self._update(
            0, self._initial(timestamp) if combined is None else combined, record, close_time
        )

    def _create_windows(  # noqa: PLR0917 - Kafka's createWindows, argument for argument
        self,
        record: Record,
        close_time: int,
        start_times: set[int],
        right_aggregate: ValueAndTimestamp | None,
        left_aggregate: ValueAndTimestamp | None,
        left_exists: bool,
        right_exists: bool,
        previous: int | None,
    ) -> None:
        timestamp, difference = record[2], self.difference
        # The previous record's right window, when this record is its first content.
        if previous is not None:
            start = previous + 1
            if start not in start_times and start + difference >= timestamp:
                self._update(start, self._initial(timestamp), record, close_time)
        # This record's left window: it holds the previous record's left window's content
        # when the previous record lies within d (the window ending at it has all of them).
        if not left_exists:
            if previous is not None and timestamp - difference <= previous:
                assert left_aggregate is not None
                seed = ValueAndTimestamp(left_aggregate.value, timestamp)
            else:
                seed = self._initial(timestamp)
            self._update(timestamp - difference, seed, record, close_time)
        if not right_exists and self._right_not_empty(right_aggregate, timestamp):
            assert right_aggregate is not None
            self._create_right_window(record, right_aggregate)

    # -- windows ----------------------------------------------------------------------------

    def _initial(self, timestamp: int) -> ValueAndTimestamp:
        return ValueAndTimestamp(
            None if self.initializer is None else self.initializer(), timestamp
        )

    @staticmethod
    def _right_not_empty(aggregate: ValueAndTimestamp | None, timestamp: int) -> bool:
        # Its latest record is after this one: some record falls in this one's right window.
        return aggregate is not None and aggregate.timestamp > timestamp

    def _create_right_window(self, record: Record, aggregate: ValueAndTimestamp) -> None:
        # Holds only records later than this one, so it is stored as found, not aggregated.
        start = record[2] + 1
        self.store.put(record[0], aggregate.value, aggregate.timestamp, start, record[3])
        self._forward(record, start, None, aggregate.value, aggregate.timestamp)

    def _update(
        self, start: int, found: ValueAndTimestamp, record: Record, close_time: int
    ) -> None:
        """Kafka's ``updateWindowAndForward``: aggregates ``record`` into the window at
        ``start`` (``found``: its current aggregate) unless the window has closed."""
        key, timestamp = record[0], record[2]
        end = start + self.difference
        if end < close_time:
            _skip_expired(
                self.context, timestamp, f"[{start},{end}]", close_time, self.observed_stream_time
            )
            return
        old = found.value
        if old is None and self.initializer is None:
            new = record[1]  # reduce: the first value is the aggregate
        else:
            new = self.aggregator(key, record[1], old)
        new_timestamp = timestamp if old is None else max(timestamp, found.timestamp)
        self.store.put(key, new, new_timestamp, start, record[3])
        self._forward(record, start, old, new, new_timestamp)

    def _forward(self, record: Record, start: int, old: Any, new: Any, timestamp: int) -> None:
        if self.forwarder is not None:
            windowed = Windowed(record[0], Window(start, start + self.difference))
            self.forwarder.maybe_forward(windowed, new, old, timestamp, record[3])

    # -- EmitStrategy.on_window_close -------------------------------------------------------

    def _emit_final(self, record: Record, close_time: int) -> None:
        last = self.last_emit_close_time
        if last != -1 and last >= close_time:
            return
        # Both ends of a sliding window are inclusive: closed means end < close time.
        upper = close_time - self.difference - 1
        if upper < 0:
            return
        lower = _live_from(self.store, 0 if last == -1 else max(0, last - self.difference))
        # Kafka's emit-final store orders by time first: by window start, then key.
        closed = sorted(
            self.store.fetch_all_with_timestamps(lower, upper), key=lambda kv: kv[0].window.start
        )
        for windowed, found in closed:
            self.context.forward(
                Record(windowed, Change(found.value, None), found.timestamp, record[3])
            )
        self._emitted(close_time)
