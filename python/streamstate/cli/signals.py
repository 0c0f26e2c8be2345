"""A stop request that SIGINT/SIGTERM can set without a lock.

The obvious ``signal.signal(SIGTERM, lambda *_: event.set())`` with a ``threading.Event``
deadlocks: Python runs a signal handler in the main thread between two bytecodes, and
``Event.set`` takes the event's (non-reentrant) lock, which the main thread may already hold
inside ``Event.wait``. The handler then waits forever for a lock its own thread holds, and the
app never closes. The window is a few bytecodes, but stream threads keep the GIL busy and make
it wide (measured: a main thread in ``Event.wait(0)`` beside two busy threads hung on about one
SIGTERM in two). :class:`StopRequest` only assigns an attribute in its handler, and its
:meth:`~StopRequest.wait` sleeps in short steps instead of waiting on a lock.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["StopRequest"]

# How often wait() looks at the flag: short enough that Ctrl-C feels immediate.
_STEP_S = 0.05


class StopRequest:
    """A flag set by a signal (or by :meth:`request`); safe to set from a signal handler."""

    def __init__(self) -> None:
        self._requested = False
        self.signal: int | None = None

    def request(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """Sets the flag (a signal handler's signature: ``signal.signal(SIGTERM, stop.request)``);
        takes no lock, so it can interrupt any code of the main thread."""
        self.signal = signum
        self._requested = True

    def is_set(self) -> bool:
        """Whether a stop was requested."""
        return self._requested

    def wait(self, timeout: float) -> bool:
        """Sleeps until a stop is requested or ``timeout`` seconds passed; returns
        :meth:`is_set`."""
        deadline = time.monotonic() + timeout
        while not self._requested:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(_STEP_S, left))
        return self._requested

    @contextmanager
    def installed(
        self, signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)
    ) -> Iterator[StopRequest]:
        """Makes ``signals`` set this flag inside the ``with`` block, and puts the previous
        handlers back after it (main thread only, as ``signal.signal`` requires)."""
        previous = {sig: signal.signal(sig, self.request) for sig in signals}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
