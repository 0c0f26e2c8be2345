"""librdkafka's log lines, routed to Python's ``logging`` and rate-limited.

Left to itself librdkafka prints every line to stderr: against an address where no broker
listens, a client prints a "Connection refused" line every few hundred milliseconds per
address (about 590 lines in 30 s measured). A client configured with ``"logger":
RDKAFKA_LOG`` hands its lines to the ``streamstate.librdkafka`` logger instead, where the
application's logging configuration decides; and a line repeating one seen less than
:data:`REPEAT_S` seconds ago (same facility and level) goes out at ``DEBUG``, so a dead address
costs one line at its own level per facility per 10 s.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RDKAFKA_LOG", "REPEAT_S", "RateLimitedLog"]

REPEAT_S = 10.0
"""How long a facility's lines at one level are shown once, then at ``DEBUG``."""

# librdkafka's syslog levels to logging's (confluent-kafka passes them as they are).
_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR}
_LEVELS |= {4: logging.WARNING, 5: logging.INFO, 6: logging.INFO, 7: logging.DEBUG}


class RateLimitedLog:
    """What confluent-kafka's ``logger`` setting calls: ``log(level, fmt, *args)`` with
    librdkafka's syslog ``level`` and ``fmt % args`` the line (facility first); see the module
    doc."""

    def __init__(self, logger: logging.Logger, repeat_s: float = REPEAT_S) -> None:
        """Logs to ``logger``."""
        self._logger = logger
        self._repeat = repeat_s
        self._last: dict[tuple[object, int], float] = {}
        self._lock = threading.Lock()

    def log(self, level: int, fmt: str, *args: object) -> None:
        """One librdkafka line."""
        mapped = _LEVELS.get(level, logging.DEBUG) if level <= 7 else level
        if mapped > logging.DEBUG:
            key = (args[0] if args else fmt, mapped)
            now = time.monotonic()
            with self._lock:
                last = self._last.get(key)
                if last is not None and now - last < self._repeat:
                    mapped = logging.DEBUG
                else:
                    self._last[key] = now
        self._logger.log(mapped, fmt, *args)


RDKAFKA_LOG = RateLimitedLog(logging.getLogger("streamstate.librdkafka"))
"""The one instance the runtime's clients log through."""
