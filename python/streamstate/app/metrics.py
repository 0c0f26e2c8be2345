"""Kafka Streams' main metrics, measured where the work happens and read as a plain dict.

Each stream thread records into a :class:`ThreadMetrics` (processed records, polls, commits);
restoration progress reaches :class:`RestoreMetrics`, a restore listener put in front of the
user's; ``StreamsApp.metrics()`` sums them under Kafka Streams' metric names (see
``docs/api.md``). Rates and averages are over a sliding window of :data:`WINDOW_S` seconds, as
Kafka's sampled stats (two 30 s samples by default) roughly are.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

__all__ = ["WINDOW_S", "RestoreMetrics", "ThreadMetrics", "WindowedStat"]

WINDOW_S = 30.0
"""The window of every rate and average, in seconds."""


class WindowedStat:
    """Values recorded with their time; the rate (sum per second) and average over the last
    :data:`WINDOW_S` seconds, and the total and maximum since creation. Thread-safe."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        """An empty stat."""
        self._window = window_s
        self._samples: deque[tuple[float, float]] = deque()
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self.total = 0.0
        self.count = 0
        self.max = 0.0

    def record(self, value: float, now: float | None = None) -> None:
        """Adds one value."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._samples.append((now, value))
            self.total += value
            self.count += 1
            self.max = max(self.max, value)
            self._expire(now)

    def _expire(self, now: float) -> None:
        while self._samples and self._samples[0][0] < now - self._window:
            self._samples.popleft()

    def rate(self, now: float | None = None) -> float:
        """The sum of the values recorded in the window, per second of the window (or of the
        time since creation, when shorter)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            span = min(self._window, max(now - self._started, 1e-3))
            return sum(v for _, v in self._samples) / span

    def window(self, now: float | None = None) -> tuple[float, int]:
        """The sum and the number of the values recorded in the window."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            return sum(v for _, v in self._samples), len(self._samples)

    def avg(self, now: float | None = None) -> float:
        """The mean of the values recorded in the window (0.0 when there are none)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._expire(now)
            if not self._samples:
                return 0.0
            return sum(v for _, v in self._samples) / len(self._samples)


class ThreadMetrics:
    """One stream thread's sensors (Kafka's ``stream-thread-metrics`` group)."""

    def __init__(self) -> None:
        """All zero."""
        self.process = WindowedStat()  # records processed, recorded per batch
        self.poll_records = WindowedStat()  # records per poll
        self.commit_latency = WindowedStat()  # ms per commit
        # Drops of tasks this thread closed (the open tasks report their own).
        self.closed_tasks_dropped = 0
        # Exactly-once: commits forced by statestore.uncommitted.max.bytes, transactions
        # aborted, and producers replaced after a fence or a fatal error.
        self.early_commits = 0
        self.transactions_aborted = 0
        self.producers_replaced = 0


class RestoreMetrics(StateRestoreListener):
    """A restore listener that counts, per store, the records restored (``restore-rate``) and
    those still to restore (``restore-remaining-records-total``), then passes every call on to
    ``inner`` (the user's listener, if any)."""

    def __init__(self, inner: StateRestoreListener | None = None) -> None:
        """Counts, and calls ``inner`` after counting."""
        self.inner = inner
        self._lock = threading.Lock()
        self._remaining: dict[TopicPartition, tuple[str, int]] = {}
        self._rates: dict[str, WindowedStat] = {}
        # Per changelog partition too: a task's restore metrics sum its stores' partitions.
        self._partitions: dict[TopicPartition, WindowedStat] = {}

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        """Remembers how many offsets lie between ``start_offset`` and ``end_offset``."""
        with self._lock:
            self._remaining[tp] = (store_name, max(0, end_offset - max(start_offset, 0)))
            self._rates.setdefault(store_name, WindowedStat())
        if self.inner is not None:
            self.inner.on_restore_start(tp, store_name, start_offset, end_offset)

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        """Counts ``num_restored`` off the partition's remaining records."""
        with self._lock:
            name, left = self._remaining.get(tp, (store_name, 0))
            self._remaining[tp] = (name, max(0, left - num_restored))
            self._rates.setdefault(store_name, WindowedStat()).record(num_restored)
            self._partitions.setdefault(tp, WindowedStat()).record(num_restored)
        if self.inner is not None:
            self.inner.on_batch_restored(tp, store_name, batch_end_offset, num_restored)

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        """Nothing remains of that partition (compaction gaps and markers included)."""
        with self._lock:
            self._remaining.pop(tp, None)
        if self.inner is not None:
            self.inner.on_restore_end(tp, store_name, total_restored)

    def on_restore_suspended(
        self, tp: TopicPartition, store_name: str, total_restored: int
    ) -> None:
        """The partition's task moved away mid-restore: nothing of it remains here."""
        with self._lock:
            self._remaining.pop(tp, None)
        if self.inner is not None:
            self.inner.on_restore_suspended(tp, store_name, total_restored)

    def restore_rate(self) -> dict[str, float]:
        """Records restored per second, per store."""
        with self._lock:
            rates = dict(self._rates)
        return {name: stat.rate() for name, stat in rates.items()}

    def partitions(self) -> dict[TopicPartition, tuple[int, float, int]]:
        """Per changelog partition that restored here: the records restored in all, per second,
        and still to restore (Kafka's task-level ``restore-total``, ``restore-rate`` and
        ``restore-remaining-records-total`` sum these over a task's stores)."""
        with self._lock:
            stats = dict(self._partitions)
            left = {tp: n for tp, (_, n) in self._remaining.items()}
        return {
            tp: (
                int(stats[tp].total) if tp in stats else 0,
                stats[tp].rate() if tp in stats else 0.0,
                left.get(tp, 0),
            )
            for tp in stats.keys() | left.keys()
        }

    def remaining(self) -> dict[str, int]:
        """Records still to restore, per store (0 for a store restored or never restoring)."""
        with self._lock:
            out = dict.fromkeys(self._rates, 0)
            for name, left in self._remaining.values():
                out[name] = out.get(name, 0) + left
        return out
