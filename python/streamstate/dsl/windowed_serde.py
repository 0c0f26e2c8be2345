"""Serdes of windowed keys, as Kafka's ``WindowedSerdes``: a time-windowed key is the
serialized key followed by the window start (8 bytes, big-endian); a session-windowed key is
the serialized key, the session end and the session start (8 bytes each). A windowed
aggregation's table carries one of these, wrapping its key serde, so ``to_stream().to(...)``
needs no serde (as in Kafka)."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from streamstate.dsl.windows import Window, Windowed
from streamstate.processor.serde_slot import serialize_function
from streamstate.serde import Serde

if TYPE_CHECKING:
    from streamstate.dsl.builder import StreamsBuilder
    from streamstate.processor.serde_slot import SerdeSlot

__all__ = [
    "SessionWindowedDeserializer",
    "SessionWindowedSerializer",
    "TimeWindowedDeserializer",
    "TimeWindowedSerializer",
    "session_windowed_slot",
    "time_windowed_slot",
]

_LONG = struct.Struct(">q")
_TWO = struct.Struct(">qq")


class TimeWindowedSerializer:
    """``key + window start``."""

    def __init__(self, inner: Any) -> None:
        """``inner``: the key serializer."""
        self.inner = inner

    def serialize(self, topic: str | None, windowed: Windowed[Any] | None) -> bytes | None:
        """The bytes of ``windowed``."""
        if windowed is None:
            return None
        inner = self.inner
        # A sink writes one windowed key per window and commit: the slot's key serializer is
        # called directly (one Python call fewer).
        serialize = inner.function() if type(inner) is _LazyKey else inner.serialize
        return bytes(serialize(topic, windowed.key) or b"") + _LONG.pack(windowed.window.start)


class TimeWindowedDeserializer:
    """Reads ``key + window start``; the end is the start plus ``window_size_ms``."""

    def __init__(self, inner: Any, window_size_ms: int) -> None:
        """``inner``: the key deserializer."""
        self.inner = inner
        self.window_size_ms = window_size_ms

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed[Any] | None:
        """The ``Windowed`` key."""
        if data is None:
            return None
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        key = self.inner.deserialize(topic, data[:-8])
        return Windowed(key, Window(start, start + self.window_size_ms))


class SessionWindowedSerializer:
    """``key + end + start``."""

    def __init__(self, inner: Any) -> None:
        """``inner``: the key serializer."""
        self.inner = inner

    def serialize(self, topic: str | None, windowed: Windowed[Any] | None) -> bytes | None:
        """The bytes of ``windowed``."""
        if windowed is None:
            return None
        window = windowed.window
        return bytes(self.inner.serialize(topic, windowed.key) or b"") + _TWO.pack(
            window.end, window.start
        )


class SessionWindowedDeserializer:
    """Reads ``key + end + start``."""

    def __init__(self, inner: Any) -> None:
        """``inner``: the key deserializer."""
        self.inner = inner

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed[Any] | None:
        """The ``Windowed`` key."""
        if data is None:
            return None
        end, start = _TWO.unpack_from(data, len(data) - 16)
        return Windowed(self.inner.deserialize(topic, data[:-16]), Window(start, end))


class _LazyKey:
    """A key serializer/deserializer read from a slot when used (its ``serialize`` kept while
    the slot holds the same serde)."""

    def __init__(self, slot: SerdeSlot, serializer: bool) -> None:
        self.slot = slot
        self.is_serializer = serializer
        self._serde: Any = None
        self._serialize: Any = None

    def function(self) -> Any:
        """The slot's serializer's ``serialize`` (its Rust one where it has one)."""
        serde = self.slot.resolved
        if serde is None or serde is not self._serde:
            serde = self.slot.get()
            self._serde, self._serialize = serde, serialize_function(serde.serializer)
        return self._serialize

    def serialize(self, topic: str | None, obj: Any) -> bytes | None:
        result: bytes | None = self.function()(topic, obj)
        return result

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return self.slot.get().deserializer.deserialize(topic, data)


def time_windowed_slot(builder: StreamsBuilder, key: SerdeSlot, size_ms: int) -> SerdeSlot:
    """A slot holding the time-windowed serde over ``key``'s serde."""
    serde = Serde(
        TimeWindowedSerializer(_LazyKey(key, True)),
        TimeWindowedDeserializer(_LazyKey(key, False), size_ms),
    )
    return builder.slot(serde, "key", "windowed key")


def session_windowed_slot(builder: StreamsBuilder, key: SerdeSlot) -> SerdeSlot:
    """A slot holding the session-windowed serde over ``key``'s serde."""
    serde = Serde(
        SessionWindowedSerializer(_LazyKey(key, True)),
        SessionWindowedDeserializer(_LazyKey(key, False)),
    )
    return builder.slot(serde, "key", "session-windowed key")
