"""The restore progress bar and the recent-window rate behind its records/s and ETA.

A rate averaged since the start misleads twice: in the first second (the wait for the first
fetch counts as time, a few records have arrived, and the ETA reads twenty minutes for a restore
that takes five seconds) and after a change of speed (a restore that slowed down, or sped up once
the broker's page cache was warm, keeps showing the old speed for minutes). :class:`RecentRate`
measures over the last few seconds of progress instead, from the first progress seen (the wait
before it is latency, not throughput), and gives no figure until it has enough signal: the bar
shows ``?`` then, as ``tqdm`` and Kafka's own tools do, rather than a wild number.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

__all__ = ["ProgressBar", "RecentRate", "format_duration"]

WINDOW_S = 5.0
"""Seconds of recent progress the rate is measured over."""

MIN_SIGNAL_S = 1.0
"""Seconds of progress needed before a rate (and so an ETA) is given."""


class RecentRate:
    """Units per second over the last ``window_s`` seconds of a growing count.

    Feed it the count done so far with :meth:`update`; :meth:`rate` is the count's growth between
    the newest sample and the one at (or just before) ``window_s`` seconds ago, divided by the time
    from that sample to ``now``; so a stall makes the rate fall, and a change of speed shows within
    ``window_s``. Until ``min_signal_s`` seconds have passed since the count first grew,
    :meth:`rate` and :meth:`eta` are ``None``. ``clock`` is injectable
    for tests (``time.monotonic`` by default).
    """

    def __init__(
        self,
        *,
        window_s: float = WINDOW_S,
        min_signal_s: float = MIN_SIGNAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """An empty meter."""
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, not {window_s}")
        if min_signal_s < 0:
            raise ValueError(f"min_signal_s must be >= 0, not {min_signal_s}")
        self._window = window_s
        self._min_signal = min_signal_s
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._last: int | None = None

    def update(self, done: int) -> None:
        """Records that ``done`` units are done now (a count that only grows).

        The first call only notes the count; the first growth after it starts the clock (and
        the units of that growth are not counted: they arrived over an unknown time, after the
        wait for the first fetch).
        """
        now = self._clock()
        if self._last is None:
            self._last = done
            return
        if done <= self._last:
            return  # no progress: the rate falls as time passes, without a new sample
        self._last = done
        self._samples.append((now, done))
        self._expire(now)

    def _expire(self, now: float) -> None:
        # Keep one sample at or before the window's start: the baseline of the rate.
        while len(self._samples) >= 2 and self._samples[1][0] <= now - self._window:
            self._samples.popleft()

    def rate(self) -> float | None:
        """Units per second over the recent window; ``None`` without enough signal yet."""
        if not self._samples:
            return None
        now = self._clock()
        self._expire(now)
        base_t, base_done = self._samples[0]
        span = now - base_t
        if span < self._min_signal or span <= 0:
            return None
        return (self._samples[-1][1] - base_done) / span

    def eta(self, remaining: int) -> float | None:
        """Seconds until ``remaining`` more units are done at the recent rate; ``None`` without
        a rate, 0.0 when nothing remains."""
        if remaining <= 0:
            return 0.0
        rate = self.rate()
        if rate is None or rate <= 0:
            return None
        return remaining / rate


class ProgressBar(StateRestoreListener):
    """A one-line progress bar over every partition being restored, redrawn at most 10 times a
    second: percentage, offsets restored of the total, records/s and the ETA over the last few
    seconds (:class:`RecentRate`; ``?`` until there is a second of progress), and on the last
    frame the average rate and the time it all took."""

    def __init__(
        self, out: TextIO, width: int = 30, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Draws on ``out`` (a terminal); ``clock`` is injectable for tests."""
        self._out = out
        self._width = width
        self._clock = clock
        self._start: dict[int, int] = {}
        self._end: dict[int, int] = {}
        self._done: dict[int, int] = {}
        self._began: float | None = None
        self._drawn = 0.0
        self._rate = RecentRate(clock=clock)

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        """Adds the partition's offsets to the total."""
        if self._began is None:
            self._began = self._clock()
        self._start[tp.partition] = start_offset
        self._end[tp.partition] = end_offset
        self._done[tp.partition] = 0
        self._draw(force=True)

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        """Moves the partition's progress to the batch's last offset."""
        start = self._start.get(tp.partition, 0)
        self._done[tp.partition] = batch_end_offset + 1 - start
        self._draw()

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        """Marks the partition complete."""
        self._done[tp.partition] = self._end[tp.partition] - self._start[tp.partition]
        self._draw(force=True)

    def finish(self) -> None:
        """Ends the bar's line."""
        if self._began is not None:
            self._draw(force=True)
            self._out.write("\n")
            self._out.flush()

    def _draw(self, force: bool = False) -> None:
        now = self._clock()
        total = sum(self._end[p] - self._start[p] for p in self._end)
        done = min(sum(self._done.values()), total)
        self._rate.update(done)
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        fraction = done / total if total else 1.0
        filled = int(fraction * self._width)
        if total and done >= total:
            # Complete: the average over the whole restore is the figure that matters now.
            elapsed = now - (self._began if self._began is not None else now)
            average = f"{done / elapsed:,.0f}" if elapsed > 0 else "?"
            speed = f"{average} rec/s avg  done in {format_duration(elapsed)}"
        else:
            rate = self._rate.rate()
            eta = self._rate.eta(total - done)
            rate_text = "?" if rate is None else f"{rate:,.0f}"
            eta_text = "?" if eta is None else format_duration(eta)
            speed = f"{rate_text} rec/s  ETA {eta_text}"
        self._out.write(
            f"\r[{'#' * filled}{'.' * (self._width - filled)}] {fraction:6.1%} "
            f"{done:,}/{total:,} offsets  {speed}  ({len(self._end)} partitions)"
        )
        self._out.flush()


def format_duration(seconds: float) -> str:
    """``42s``, ``3m07s`` or ``1h05m``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
