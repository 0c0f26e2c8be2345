"""Window specifications and windowed keys (Kafka's ``TimeWindows``, ``SlidingWindows``,
``SessionWindows``, ``JoinWindows``, ``EmitStrategy``, ``Window`` and ``Windowed``).

Durations are ``int`` milliseconds or ``datetime.timedelta``. A specification that cannot work
(a size or gap of zero or less, an advance larger than the size, a negative grace) raises
:class:`~streamstate.errors.TopologyError` at once, naming the call, where Kafka raises
``IllegalArgumentException``.

Time windows (tumbling and hopping) are ``[start, end)``: a record at ``t`` belongs to every
window with ``start <= t < start + size``, starts being multiples of the advance. Session
windows are ``[start, end]``, both ends inclusive, as in Kafka.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamstate.errors import TopologyError

__all__ = [
    "EmitStrategy",
    "JoinWindows",
    "SessionWindows",
    "SlidingWindows",
    "TimeWindows",
    "Window",
    "Windowed",
    "to_millis",
    "windowed_of",
]

K = TypeVar("K")

Duration = int | datetime.timedelta


def to_millis(duration: Duration, what: str) -> int:
    """``duration`` in milliseconds; ``what`` names the argument in the error."""
    if isinstance(duration, datetime.timedelta):
        return duration // datetime.timedelta(milliseconds=1)
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise TopologyError(
            f"{what} is int milliseconds or a datetime.timedelta, not {type(duration).__name__}"
        )
    return duration


def _grace(grace: Duration, what: str) -> int:
    ms = to_millis(grace, what)
    if ms < 0:
        raise TopologyError(f"{what}: the grace period must not be negative, not {ms} ms")
    return ms


@dataclass(frozen=True, order=True)
class Window:
    """A window's ``start`` and ``end`` (epoch ms): end-exclusive for time windows,
    end-inclusive for session windows (as in Kafka)."""

    start: int
    end: int

    def overlaps(self, other: Window) -> bool:
        """Whether the two windows share a point in time (Kafka's ``TimeWindow.overlap``)."""
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True, order=True)
class Windowed(Generic[K]):
    """A key and the window it was aggregated in: what windowed aggregations key their
    results by (Kafka's ``Windowed<K>``)."""

    key: K
    window: Window

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


@dataclass(frozen=True)
class TimeWindows:
    """Tumbling (``advance == size``) or hopping windows of ``size_ms``, with a grace period."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise TopologyError(
                f"TimeWindows: the window size must be larger than zero, not {self.size_ms} ms"
            )
        if self.advance_ms <= 0 or self.advance_ms > self.size_ms:
            raise TopologyError(
                f"TimeWindows: the advance must be more than zero and at most the window size "
                f"({self.size_ms} ms), not {self.advance_ms} ms"
            )

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size``; a record after its window's end is dropped."""
        ms = to_millis(size, "TimeWindows.of_size_with_no_grace(size)")
        return cls(ms, ms, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` accepting records up to ``grace`` after their end."""
        ms = to_millis(size, "TimeWindows.of_size_and_grace(size)")
        return cls(ms, ms, _grace(grace, "TimeWindows.of_size_and_grace"))

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: the same size, a new one every ``advance``."""
        return TimeWindows(self.size_ms, to_millis(advance, "advance_by(advance)"), self.grace_ms)

    def windows_for(self, timestamp: int) -> list[int]:
        """The starts of the windows ``timestamp`` falls in, ascending (Kafka's
        ``windowsFor``)."""
        advance = self.advance_ms
        start = (max(0, timestamp - self.size_ms + advance) // advance) * advance
        return list(range(start, timestamp + 1, advance))

    def size(self) -> int:
        """The window size, ms."""
        return self.size_ms

    def grace_period_ms(self) -> int:
        """The grace period, ms."""
        return self.grace_ms


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of ``time_difference_ms + 1`` ms that slide with the records (KIP-450): two
    records are in a common window when their timestamps differ by at most the difference."""

    time_difference_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.time_difference_ms < 0:
            raise TopologyError(
                f"SlidingWindows: the time difference must not be negative, not "
                f"{self.time_difference_ms} ms"
            )

    @classmethod
    def of_time_difference_with_no_grace(cls, difference: Duration) -> SlidingWindows:
        """Sliding windows of ``difference``, no grace."""
        return cls(to_millis(difference, "SlidingWindows.of_time_difference_with_no_grace"), 0)

    @classmethod
    def of_time_difference_and_grace(cls, difference: Duration, grace: Duration) -> SlidingWindows:
        """Sliding windows of ``difference`` with a grace period."""
        what = "SlidingWindows.of_time_difference_and_grace"
        return cls(to_millis(difference, what), _grace(grace, what))

    def grace_period_ms(self) -> int:
        """The grace period, ms."""
        return self.grace_ms


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity separated by at least ``gap_ms`` of inactivity, per key."""

    gap_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise TopologyError(
                f"SessionWindows: the inactivity gap must be larger than zero, not {self.gap_ms} ms"
            )

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        """Sessions closed by ``gap`` of inactivity, no grace."""
        return cls(to_millis(gap, "SessionWindows.of_inactivity_gap_with_no_grace"), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions closed by ``gap`` of inactivity, with a grace period."""
        what = "SessionWindows.of_inactivity_gap_and_grace"
        return cls(to_millis(gap, what), _grace(grace, what))

    def inactivity_gap(self) -> int:
        """The gap, ms."""
        return self.gap_ms

    def grace_period_ms(self) -> int:
        """The grace period, ms."""
        return self.grace_ms


@dataclass(frozen=True)
class JoinWindows:
    """How far apart two records of a stream-stream join may be: ``before_ms`` earlier and
    ``after_ms`` later (symmetric unless changed), with a grace period."""

    before_ms: int
    after_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.before_ms + self.after_ms < 0:
            raise TopologyError(
                f"JoinWindows: the window size (before + after) must not be negative, not "
                f"{self.before_ms + self.after_ms} ms"
            )

    @classmethod
    def of_time_difference_with_no_grace(cls, difference: Duration) -> JoinWindows:
        """Records at most ``difference`` apart join; no grace."""
        ms = to_millis(difference, "JoinWindows.of_time_difference_with_no_grace")
        return cls(ms, ms, 0)

    @classmethod
    def of_time_difference_and_grace(cls, difference: Duration, grace: Duration) -> JoinWindows:
        """Records at most ``difference`` apart join, with a grace period."""
        what = "JoinWindows.of_time_difference_and_grace"
        ms = to_millis(difference, what)
        return cls(ms, ms, _grace(grace, what))

    def before(self, time_difference: Duration) -> JoinWindows:
        """How much earlier the other record may be."""
        ms = to_millis(time_difference, "JoinWindows.before")
        return JoinWindows(ms, self.after_ms, self.grace_ms)

    def after(self, time_difference: Duration) -> JoinWindows:
        """How much later the other record may be."""
        ms = to_millis(time_difference, "JoinWindows.after")
        return JoinWindows(self.before_ms, ms, self.grace_ms)

    def size(self) -> int:
        """``before + after``, ms."""
        return self.before_ms + self.after_ms

    def grace_period_ms(self) -> int:
        """The grace period, ms."""
        return self.grace_ms


@dataclass(frozen=True)
class EmitStrategy:
    """When a windowed aggregation emits (KIP-825): on every update (the default) or once,
    when the window closes (window end + grace <= stream time)."""

    on_close: bool

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        """Each window's final result, once, when it closes."""
        return cls(True)

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        """Every update of a window (Kafka's default)."""
        return cls(False)


_new_object = object.__new__


def windowed_of(key: Any, start: int, size: int) -> Windowed[Any]:
    """``Windowed(key, Window(start, start + size))``, made without the frozen dataclasses'
    checked ``__init__`` (the record caches' flushes make one per window and commit)."""
    window = _new_object(Window)
    fields = window.__dict__
    fields["start"] = start
    fields["end"] = start + size
    windowed: Windowed[Any] = _new_object(Windowed)
    fields = windowed.__dict__
    fields["key"] = key
    fields["window"] = window
    return windowed
