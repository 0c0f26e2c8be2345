"""Windowed aggregations: Kafka's ``KStreamWindowAggregate`` (tumbling and hopping windows)
and ``KStreamSessionWindowAggregate``, with Kafka 4.4's rules.

* **Stream time** is the processor's own: the highest timestamp it has seen.
* **Late records**: a window closes when ``window end + grace <= stream time`` (a session
  when ``end < stream time - grace - gap``); a record that would only update closed windows is
  dropped and counted in ``dropped-records-total`` (time windows count one per closed window
  the record falls in, as Kafka's sensor does).
* **Results** are keyed by :class:`~streamstate.dsl.windows.Windowed` and stamped with the
  highest input timestamp of the window (a session's result with its end). A session that
  absorbs others forwards a tombstone for each one merged away, then the merged session.
* **EmitStrategy.on_window_close()** (KIP-825): nothing is forwarded on update; when stream
  time closes windows, each closed window's final result is forwarded once, and the last
  close time emitted is kept with the store (Kafka keeps it as processor metadata) so a
  restarted task does not emit twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamstate.dsl.count_flush import CountFlush
from streamstate.dsl.object_cache import MISSING
from streamstate.dsl.stores import SessionStore, WindowStore, new_value_and_timestamp
from streamstate.dsl.table_processors import Change, TableForwarder, TableState, skip_record
from streamstate.dsl.windows import EmitStrategy, SessionWindows, TimeWindows, Window, Windowed
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record

__all__ = ["SessionWindowAggregateProcessor", "TimeWindowAggregateProcessor"]

_log = logging.getLogger(__name__)
# A built-in windowed count flushes its record cache in one batch where it can
# (dsl/count_flush.py); tests switch it off to compare both paths.
BATCH_FLUSH = True
_LAST_EMIT = b"last-emit-window-close-time"


def _skip_expired(
    context: ProcessorGraphContext, timestamp: int, window: str, expiry: int, stream_time: int
) -> None:
    meta = context.record_metadata
    _log.warning(
        "Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] "
        "timestamp=[%d] window=%s expiration=[%d] streamTime=[%d]",
        meta.topic if meta else None,
        meta.partition if meta else None,
        meta.offset if meta else None,
        timestamp,
        window,
        expiry,
        stream_time,
    )
    context.record_dropped()


class _WindowedAggregate(Processor):
    """What the windowed aggregations share: the store, stream time, emit strategy."""

    store: Any

    def __init__(
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        emit: EmitStrategy,
    ) -> None:
        self.state = state
        self.open_store = open_store
        self.emit_on_close = emit.on_close
        self.observed_stream_time = -1
        self.last_emit_close_time = -1
        self.forwarder: TableForwarder | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the store; restores the last emitted close time."""
        self.context = context
        assert self.state.store is not None
        self.store = self.open_store(context.get_state_store(self.state.store))
        if self.emit_on_close:
            if isinstance(self.store, WindowStore):
                self.store.time_first = True  # Kafka's emit-final window store is time-ordered
            last = self.store.get_metadata(_LAST_EMIT)
            self.last_emit_close_time = -1 if last is None else last
        else:
            self.forwarder = TableForwarder(context, self.store, self.state.send_old_values)

    def _forward_update(
        self, key: Windowed[Any], old: Any, new: Any, timestamp: int, headers: Any
    ) -> None:
        if self.forwarder is not None:
            self.forwarder.maybe_forward(key, new, old, timestamp, headers)

    def _emitted(self, close_time: int) -> None:
        self.last_emit_close_time = close_time
        self.store.put_metadata(_LAST_EMIT, close_time)


class TimeWindowAggregateProcessor(_WindowedAggregate):
    """``TimeWindowedKStream.aggregate`` / ``reduce`` / ``count`` over ``windows``;
    ``initializer`` is ``None`` for ``reduce``."""

    def __init__(  # noqa: PLR0917 - made in one place, by the DSL
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        windows: TimeWindows,
        emit: EmitStrategy,
        initializer: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any, Any], Any],
        *,
        counting: bool = False,
    ) -> None:
        """``aggregator(key, value, aggregate)``; ``counting``: the built-in ``count``
        (see :class:`~streamstate.dsl.table_processors.StreamAggregateProcessor`)."""
        super().__init__(state, open_store, emit)
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.counting = counting
        self._fast = False
        self._dirty: dict[Any, Any] = {}
        self._clean: dict[Any, Any] = {}

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the store; tumbling windows over a cached store take the hot path."""
        super().init(context)
        store = self.store
        cache = getattr(store, "cache", None)
        self._fast = (
            isinstance(store, WindowStore)
            and cache is not None
            and self.forwarder is not None
            and self.forwarder.cached
            and self.initializer is not None
            and self.windows.size_ms == self.windows.advance_ms
        )
        if self._fast:
            assert cache is not None
            self._dirty, self._clean, self._cache_put = cache.dirty, cache.clean, cache.put
            store.stored_absent_after()
            if self.counting and BATCH_FLUSH:
                cache.batch_flush = CountFlush(self)

    def process(self, record: Record) -> None:
        """Aggregates ``record`` into each open window it falls in."""
        key, value, timestamp = record[0], record[1], record[2]
        if (
            self._fast
            and type(key) is str
            and timestamp >= 0
            and self._tumble(key, value, timestamp, record[3])
        ):
            return
        if key is None or (self.initializer is None and value is None):
            skip_record(self.context, "null key" if key is None else "null value")
            return
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms
        size = self.windows.size_ms
        store: WindowStore = self.store
        for start in self.windows.windows_for(timestamp):
            end = start + size
            if end <= close_time:
                _skip_expired(
                    self.context,
                    timestamp,
                    f"[{start},{end})",
                    close_time,
                    self.observed_stream_time,
                )
                continue
            found = store.fetch_with_timestamp(key, start)
            if found is None:
                if self.initializer is None:
                    old, new, new_timestamp = None, value, timestamp
                else:
                    old = self.initializer()
                    new = self.aggregator(key, value, old)
                    new_timestamp = timestamp
            else:
                old = found.value
                new = self.aggregator(key, value, old)
                new_timestamp = max(timestamp, found.timestamp)
            store.put(key, new, new_timestamp, start, record[3])
            if not self.emit_on_close:
                self._forward_update(
                    Windowed(key, Window(start, end)), old, new, new_timestamp, record[3]
                )
        if self.emit_on_close:
            self._emit_final(record, close_time)

    # A run of records is handed over here (app/task_runs.py) only for a windowed count over
    # a cached store: it writes nothing downstream while processing (its cache's flush does).
    runs_without_sink = True

    def run_handler(self, sink: Any, topology: Any) -> Callable[[list[Any]], int] | None:
        """For tumbling windows over a cached store (the hot path): a function that takes a
        run of source ``StampedRecord``s (``ProcessorTopology.run_handlers``) and counts or
        aggregates them one after the other exactly as :meth:`process` would, the source's
        ``Record`` not made; it returns how many it took, stopping before a record off the
        hot path (a key not a string, a negative timestamp, headers, a record for a closed
        window: those go through :meth:`process`, which logs and counts a late one).
        ``topology.current`` is the record being processed. ``None`` otherwise."""
        del sink  # the table forwards at its cache's flush, not per record
        if not self._fast:
            return None
        if self.counting:
            return self._count_run(topology)
        tumble = self._tumble

        def run(records: list[Any]) -> int:
            done = 0
            for stamped in records:
                key = stamped.key
                timestamp = stamped.timestamp
                if type(key) is not str or timestamp < 0 or stamped.headers:
                    break
                topology.current = stamped
                if not tumble(key, stamped.value, timestamp, ()):
                    break
                done += 1
            return done

        return run

    def _count_run(self, topology: Any) -> Callable[[list[Any]], int]:
        """The run handler of a count: :meth:`_tumble` for a count, and the object cache's
        ``put``, inlined into the loop (the same reads and writes, in the same order)."""
        store: WindowStore = self.store
        size, grace = self.windows.size_ms, self.windows.grace_ms
        interval, retention = store.interval, store.retention_ms
        dirty, clean = self._dirty, self._clean
        cache = store.cache
        assert cache is not None
        layer = cache.layer

        def run(records: list[Any]) -> int:
            done = 0
            for stamped in records:
                key = stamped.key
                timestamp = stamped.timestamp
                if type(key) is not str or timestamp < 0 or stamped.headers:
                    break
                topology.current = stamped
                observed = self.observed_stream_time
                if timestamp > observed:
                    observed = self.observed_stream_time = timestamp
                start = timestamp - timestamp % size
                if start + size <= observed - grace:
                    break  # late: process() logs and counts it
                cache_key = (key, start)
                stream_time = store.observed_stream_time
                found: Any = None
                if start >= stream_time - retention + 1:  # _min_live_time
                    entry = dirty.get(cache_key)
                    if entry is not None:
                        found = entry[1]
                    else:
                        found = clean.get(cache_key, MISSING)
                        if found is MISSING:
                            absent_after = store.absent_after
                            if absent_after is not None and start > absent_after:
                                found = None
                            else:
                                found = store.fetch_stored(key, start)
                if found is None:
                    value = new_value_and_timestamp(1, timestamp)
                else:
                    old = found[1]
                    value = new_value_and_timestamp(
                        found[0] + 1, timestamp if timestamp > old else old
                    )
                segment = start // interval
                bounds = store._bounds
                if (
                    start <= stream_time
                    and segment >= store._live
                    and bounds is not None
                    and bounds[0] <= segment <= bounds[1]
                ) or store._observe(start):
                    # ObjectCache.put: flushed in the order last written, as Kafka's cache.
                    if cache_key in dirty:
                        del dirty[cache_key]
                    dirty[cache_key] = (cache_key, value, ())
                    if len(dirty) > cache.max_entries:
                        layer.flush_cache()
                done += 1
            return done

        return run

    def _tumble(self, key: str, value: Any, timestamp: int, headers: Any) -> bool:
        """The common case inlined: a string key, one tumbling window, a cached store (which
        forwards at its flush, so nothing is forwarded here), no ``Windowed`` made. ``False``
        when the window is closed: the general path skips the record as Kafka does."""
        observed = self.observed_stream_time
        if timestamp > observed:
            observed = self.observed_stream_time = timestamp
        size = self.windows.size_ms
        start = timestamp - timestamp % size
        if start + size <= observed - self.windows.grace_ms:
            return False
        store: WindowStore = self.store
        cache_key = (key, start)
        found: Any = None
        if start >= store.observed_stream_time - store.retention_ms + 1:  # _min_live_time
            entry = self._dirty.get(cache_key)
            if entry is not None:
                found = entry[1]
            else:
                found = self._clean.get(cache_key, MISSING)
                if found is MISSING:
                    absent_after = store.absent_after
                    # A window newer than any the store held unseen by the cache: a new one.
                    if absent_after is not None and start > absent_after:
                        found = None
                    else:
                        found = store.fetch_stored(key, start)
        if found is None:
            new = 1 if self.counting else self.aggregator(key, value, self.initializer())  # type: ignore[misc]
            new_timestamp = timestamp
        else:
            new = found[0] + 1 if self.counting else self.aggregator(key, value, found[0])
            new_timestamp = timestamp if timestamp > found[1] else found[1]
        # The store's write rule (_observe) without its call when stream time stands still
        # and the segment is live and tracked (no side effect to miss then).
        segment = start // store.interval
        bounds = store._bounds
        if (
            start <= store.observed_stream_time
            and segment >= store._live
            and bounds is not None
            and bounds[0] <= segment <= bounds[1]
        ) or store._observe(start):
            self._cache_put(
                cache_key,
                cache_key,
                new_value_and_timestamp(new, new_timestamp),
                headers,
            )
        return True

    def _emit_final(self, record: Record, close_time: int) -> None:
        last = self.last_emit_close_time
        if last != -1 and last >= close_time:
            return
        size = self.windows.size_ms
        upper = close_time - size
        if upper < 0:
            return
        lower = 0 if last == -1 else max(0, last - size) + 1
        if last != -1 and self.windows.windows_for(upper) == self.windows.windows_for(lower - 1):
            return
        # Kafka's emit-final store orders by time first: by window start, then key.
        closed = sorted(
            self.store.fetch_all_with_timestamps(lower, upper), key=lambda kv: kv[0].window.start
        )
        for windowed, value in closed:
            self.context.forward(
                Record(windowed, Change(value.value, None), value.timestamp, record[3])
            )
        self._emitted(close_time)


class SessionWindowAggregateProcessor(_WindowedAggregate):
    """``SessionWindowedKStream.aggregate`` / ``reduce`` / ``count``: ``merger(key, agg1,
    agg2)`` combines sessions a record bridges."""

    def __init__(  # noqa: PLR0917 - made in one place, by the DSL
        self,
        state: TableState,
        open_store: Callable[[Any], Any],
        windows: SessionWindows,
        emit: EmitStrategy,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
    ) -> None:
        """For ``reduce``, the DSL passes an initializer of ``None`` and a merger that keeps
        the non-``None`` side."""
        super().__init__(state, open_store, emit)
        self.windows = windows
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger

    def process(self, record: Record) -> None:
        """Adds ``record`` to its session, merging the sessions it bridges."""
        key, value, timestamp = record[0], record[1], record[2]
        if key is None:
            skip_record(self.context, "null key")
            return
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        gap = self.windows.gap_ms
        close_time = self.observed_stream_time - self.windows.grace_ms - gap
        store: SessionStore = self.store
        merged = list(store.find_sessions(key, timestamp - gap, timestamp + gap))
        aggregate = self.initializer()
        start = end = timestamp
        for session, session_value in merged:
            aggregate = self.merger(key, aggregate, session_value)
            start = min(start, session.window.start)
            end = max(end, session.window.end)
        if end < close_time:
            _skip_expired(
                self.context, timestamp, f"[{start},{end}]", close_time, self.observed_stream_time
            )
        else:
            if (start, end) != (timestamp, timestamp):
                for session, session_value in merged:
                    store.remove(session)
                    self._forward_update(
                        session, session_value, None, session.window.end, record[3]
                    )
            aggregate = self.aggregator(key, value, aggregate)
            session_key = Windowed(key, Window(start, end))
            store.put(session_key, aggregate)
            self._forward_update(session_key, None, aggregate, end, record[3])
        if self.emit_on_close:
            self._emit_final(record, close_time)

    def _emit_final(self, record: Record, close_time: int) -> None:
        last = self.last_emit_close_time
        if last != -1 and last >= close_time:
            return
        upper = close_time - 1
        lower = max(0, last)
        if upper < 0 or upper < lower:
            return
        closed = sorted(
            self.store.sessions_ending_in(lower, upper), key=lambda kv: kv[0].window.end
        )
        for session, value in closed:
            self.context.forward(
                Record(session, Change(value, None), session.window.end, record[3])
            )
        self._emitted(close_time)
