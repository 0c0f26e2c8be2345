"""The changelog reader's bookkeeping: each partition's phase and position, and its watchdog.

:class:`~streamstate.state.changelog_reader.StoreChangelogReader` runs the restore protocol
(initialize, assign, poll and apply, complete); this module holds what it keeps per changelog
partition (:class:`ChangelogState`: phase, end offset, position, records restored) and what
watches them between calls (:class:`RestoreWatch`: a partition that makes no progress is warned
about every few seconds and fails after the stall timeout; an INFO line reports the restoring
partitions every ``progress_interval_s``). Internal: nothing here is public API.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable

from streamstate.errors import ProcessorStateError
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestorer

__all__ = ["ChangelogPhase", "ChangelogState", "RestoreWatch", "changelog_key", "tp_str"]

# The reader's logger: logging is configured by this name (see changelog_reader).
_log = logging.getLogger("streamstate.changelog")

# Seconds without progress between two warnings about a restoring partition (at most a quarter
# of the stall timeout).
_STALL_WARN_S = 5.0


class ChangelogPhase(enum.Enum):
    """Where a registered changelog partition stands."""

    REGISTERED = "registered"  # waiting for its end offset
    RESTORING = "restoring"
    COMPLETED = "completed"


class ChangelogState:
    """The reader's state for one registered changelog partition."""

    def __init__(self, restorer: StateRestorer) -> None:
        """A partition just registered with ``restorer``: nothing read yet."""
        self.restorer = restorer
        self.phase = ChangelogPhase.REGISTERED
        self.assigned = False
        self.end: int | None = None
        self.start: int | None = None
        # The offset of the next record to read, as far as the reader knows.
        self.position = -1
        self.last_applied = -1
        self.total_restored = 0
        # Seconds of restore() calls without progress, whether the current call made some, and
        # the last problem seen.
        self.stalled_s = 0.0
        self.stall_warned_s = 0.0
        self.progressed = False
        self.problem: str | None = None

    @property
    def tp(self) -> TopicPartition:
        """The changelog partition."""
        return self.restorer.partition

    def reset(self) -> None:
        """Back to just registered (the partition is initialized again on the next call)."""
        self.phase = ChangelogPhase.REGISTERED
        self.end = None
        self.start = None
        self.position = -1
        self.last_applied = -1
        self.total_restored = 0
        self.stalled_s = 0.0
        self.stall_warned_s = 0.0
        self.progressed = False
        self.problem = None

    def advance(self, position: int) -> None:
        """Moves the known position forward (never back); moving it is progress."""
        if position > self.position:
            self.position = position
            self.progressed = True


def changelog_key(tp: TopicPartition) -> tuple[str, int]:
    """``(topic, partition)``: how the reader indexes its partitions."""
    return (tp.topic, tp.partition)


def tp_str(tp: TopicPartition) -> str:
    """``topic-partition``, as Kafka names a partition in logs."""
    return f"{tp.topic}-{tp.partition}"


class RestoreWatch:
    """Stall detection and the periodic progress log of a reader's restoring partitions.

    Time counts only while the caller keeps calling ``restore()``: :meth:`check_stalls` adds the
    duration of the call, plus at most a poll or two of the gap since the previous call, to the
    stall time of each partition that made no progress.
    """

    def __init__(self, *, stall_timeout_s: float, progress_interval_s: float, poll_s: float):
        """A watch that fails a partition after ``stall_timeout_s`` seconds without progress and
        logs progress every ``progress_interval_s`` seconds (``poll_s``: the reader's poll)."""
        self.stall_timeout_s = stall_timeout_s
        self._progress_interval_s = progress_interval_s
        self._poll_s = poll_s
        self._last_call_end: float | None = None
        self._last_progress_log: float | None = None

    def clear(self) -> None:
        """Forgets the previous call and the last progress line (the reader was cleared)."""
        self._last_call_end = None
        self._last_progress_log = None

    def started(self, now: float) -> None:
        """A partition started restoring: the progress log's interval counts from now if no
        partition was restoring before."""
        if self._last_progress_log is None:
            self._last_progress_log = now

    def call_ended(self, now: float) -> None:
        """A ``restore()`` call ended at ``now``."""
        self._last_call_end = now

    def check_stalls(
        self, changelogs: Iterable[ChangelogState], call_start: float, now: float
    ) -> None:
        """Adds this call's time to each partition without progress; raises
        :class:`~streamstate.errors.ProcessorStateError` for one past the stall timeout."""
        # A gap between calls longer than a poll or two (the caller was busy elsewhere) counts
        # as at most one second.
        gap = call_start - self._last_call_end if self._last_call_end is not None else 0.0
        elapsed = (now - call_start) + min(max(gap, 0.0), max(1.0, 2 * self._poll_s))
        for changelog in changelogs:
            if changelog.phase is ChangelogPhase.COMPLETED:
                continue
            if changelog.progressed:
                changelog.progressed = False
                changelog.stalled_s = 0.0
                changelog.stall_warned_s = 0.0
                continue
            changelog.stalled_s += elapsed
            if changelog.stalled_s <= self.stall_timeout_s:
                self._maybe_warn_stall(changelog)
                continue
            tp = changelog.tp
            if changelog.phase is ChangelogPhase.REGISTERED:
                detail = changelog.problem or "it could not be initialized"
                raise ProcessorStateError(
                    f"restoration made no progress for {changelog.stalled_s:.1f} s: {detail}",
                    topic=tp.topic,
                    partition=tp.partition,
                    store_name=changelog.restorer.store_name,
                )
            raise ProcessorStateError(
                f"restoration made no progress for {changelog.stalled_s:.1f} s "
                f"(stall_timeout_s={self.stall_timeout_s:g}): position {changelog.position}, "
                f"end offset {changelog.end}, {changelog.total_restored} records restored",
                topic=tp.topic,
                partition=tp.partition,
                store_name=changelog.restorer.store_name,
            )

    def _maybe_warn_stall(self, changelog: ChangelogState) -> None:
        """A WARNING every few seconds while a restoring partition makes no progress (a broker
        gone away, say): the client keeps retrying until the stall timeout."""
        interval = min(_STALL_WARN_S, self.stall_timeout_s / 4)
        if changelog.phase is not ChangelogPhase.RESTORING:
            return
        if changelog.stalled_s - changelog.stall_warned_s < interval:
            return
        changelog.stall_warned_s = changelog.stalled_s
        tp = changelog.tp
        _log.warning(
            "No progress restoring store %r from changelog topic %r partition %d for %.1f s "
            "(position %d, end offset %s); retrying, and failing after %g s without progress",
            changelog.restorer.store_name,
            tp.topic,
            tp.partition,
            changelog.stalled_s,
            changelog.position,
            changelog.end,
            self.stall_timeout_s,
        )

    def maybe_log_progress(self, changelogs: Iterable[ChangelogState], now: float) -> None:
        """An INFO line on the restoring partitions every ``progress_interval_s`` seconds."""
        restoring = [c for c in changelogs if c.phase is ChangelogPhase.RESTORING]
        if not restoring:
            self._last_progress_log = None
            return
        if self._last_progress_log is None:
            self._last_progress_log = now
            return
        if now - self._last_progress_log < self._progress_interval_s:
            return
        self._last_progress_log = now
        details = ", ".join(
            f"{tp_str(c.tp)}: position={c.position}, end={c.end}, restored={c.total_restored}"
            for c in sorted(restoring, key=lambda c: changelog_key(c.tp))
        )
        _log.info("Restoration in progress for %d partitions. {%s}", len(restoring), details)
