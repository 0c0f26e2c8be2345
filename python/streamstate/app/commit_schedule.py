"""When a stream thread commits: the commit interval, and a due commit put off by a rebalance.

Kept out of :mod:`streamstate.app.stream_thread` (whose module doc says why commits wait, as
Kafka Streams' ``rebalanceInProgress`` has them): a commit is due once ``commit.interval.ms``
has passed since the last one, or at once while one is put off. A due commit waits while the
group rebalances, or after the broker refused one for a rebalance (asked again only after
:data:`RETRY_BACKOFF_S`); put off for longer than a rebalance may last
(``max.poll.interval.ms``), it is Kafka's *task migrated*.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import monotonic

from streamstate.errors import TaskMigratedError

__all__ = ["RETRY_BACKOFF_S", "CommitSchedule"]

_log = logging.getLogger("streamstate.app")

RETRY_BACKOFF_S = 0.1
"""After the broker refused a commit for a rebalance, the pause before it is asked again."""


class CommitSchedule:
    """One stream thread's commit timing; see the module doc. Used on the thread only."""

    def __init__(
        self, name: str, max_put_off_s: float, rebalance_in_progress: Callable[[], bool]
    ) -> None:
        """``name``: the thread's, for the log; ``max_put_off_s``: the longest a rebalance may
        last (``max.poll.interval.ms``); ``rebalance_in_progress``: the member's own view."""
        self._name = name
        self._max_put_off = max_put_off_s
        self._rebalance_in_progress = rebalance_in_progress
        self._last_commit = monotonic()
        # Since when a due commit has been put off by a rebalance (None: none is), and when a
        # commit the broker refused for one may be tried again.
        self._put_off_since: float | None = None
        self._retry_at = 0.0

    def due(self, interval_ms: int) -> bool:
        """Whether a commit is due: one is put off, or ``interval_ms`` passed since the last."""
        return (
            self._put_off_since is not None
            or (monotonic() - self._last_commit) * 1000 >= interval_ms
        )

    def started(self) -> float:
        """A commit starts now: the interval runs from here; returns the monotonic time."""
        self._last_commit = monotonic()
        return self._last_commit

    def nothing_to_commit(self) -> None:
        """A due commit had nothing to commit: it counts as done now."""
        self._last_commit = monotonic()
        self._put_off_since = None

    def committed(self) -> None:
        """The commit was acknowledged: nothing is put off any more."""
        self._put_off_since = None

    def put_off_by_rebalance(self, failure: str | None = None) -> bool:
        """Whether a due commit waits for the group's rebalance to complete (Kafka Streams'
        ``rebalanceInProgress``): it has met one (``failure``, the broker's refusal), or the
        member can tell one is going on. Raises :class:`TaskMigratedError` once commits have
        been put off for longer than a rebalance may last (``max.poll.interval.ms``)."""
        now = monotonic()
        if failure is None:
            # After a refusal, the broker is asked again only after a pause (not on every loop
            # while librdkafka has yet to hear of the rebalance).
            if now < self._retry_at:
                return True
            if not self._rebalance_in_progress():
                return False
        else:
            self._retry_at = now + RETRY_BACKOFF_S
        if self._put_off_since is None:
            self._put_off_since = now
            _log.info(
                "stream-thread [%s] %s; committing once the rebalance completes",
                self._name,
                f"committing offsets failed ({failure})" if failure else "the group is rebalancing",
            )
        elif now - self._put_off_since > self._max_put_off:
            self._put_off_since = None
            raise TaskMigratedError(
                f"no commit for {self._max_put_off:.0f} s (max.poll.interval.ms): the group "
                "did not complete its rebalance for this member"
            )
        return True
