"""The record-cache flush of a built-in windowed count, in one batch.

``windowed_by(TimeWindows...).count().to_stream().to(sink)`` with string keys flushes, at each
commit and whenever its cache holds more dirty windows than it may, about one window per input
record (a 1-minute window holds few records per key). Through the general path each flushed
window costs a dozen Python calls: the store's encoding, a ``Windowed`` key, the flush listener,
the table's forwarder, ``to_stream``, the windowed and Long serializers, the sink. Here the whole
flush is one Rust call (``_core.encode_window_counts``: the store keys and values in Kafka's
timestamped window store layout, each changelog timestamp, the sink's windowed keys and Long
values) followed by two loops of ``produce`` (the changelog's, the sink's), the same calls with
the same arguments, in the same order, as the general path makes:

1. the clean entries the general flush keeps (``ObjectCache.keep_flushed``);
2. the store's ``put_all`` and each changelog record (``put_all_stamped``);
3. each window to the sink, in the cache's order, with the sink's timestamp check inlined as
   ``StreamTableJoinProcessor.run_handler`` inlines it (a record failing it goes through the
   sink itself, which reports it).

It applies only where its result is the general path's by construction (``CountFlush.resolve``):
a count (not ``reduce``/``aggregate``), tumbling windows, emitted on update, no old values sent,
the table's only child a plain ``to_stream()`` whose only child a sink without a partitioner,
the store's key serde Kafka's UTF-8 ``StringSerializer`` and its value serde the
``LongSerializer``, the sink's key serializer the windowed one over a UTF-8 string serializer
and its value serializer the built-in Long one. A flush holding anything else (a non-string
key, headers) goes the general way (``encode_window_counts`` returns ``None``).
"""

from __future__ import annotations

import time
from typing import Any

from streamstate._core import NativeSerializer, encode_window_counts
from streamstate.dsl.windowed_serde import TimeWindowedSerializer, _LazyKey
from streamstate.dsl.windows import windowed_of
from streamstate.processor.record import Record
from streamstate.serde import LongSerializer, StringSerializer

__all__ = ["CountFlush"]

_UNRESOLVED: Any = object()
_new_record = tuple.__new__


def _utf8_string(serializer: Any) -> bool:
    return type(serializer) is StringSerializer and serializer.encoding == "utf-8"


def _native_name(function: Any) -> str | None:
    """Kafka's name of the built-in serializer whose Rust ``serialize`` is ``function``."""
    native = getattr(function, "__self__", None)
    return native.name if type(native) is NativeSerializer else None


class CountFlush:
    """``ObjectCache.batch_flush`` of a windowed count (``TimeWindowAggregateProcessor``);
    see the module doc."""

    def __init__(self, processor: Any) -> None:
        """For ``processor``, resolved at its first flush (every processor of the task is
        initialised by then)."""
        self.processor = processor
        self._sink: Any = _UNRESOLVED
        self.flushed = 0  # windows written by this path (tests check it took them)

    def resolve(self) -> Any:
        """The ``PlainSink`` the flush writes to, or ``None`` when the batch path does not
        apply (module doc)."""
        processor = self.processor
        forwarder = processor.forwarder
        if (
            forwarder is None
            or not forwarder.cached
            or forwarder.send_old_values
            or not processor.counting
            or processor.emit_on_close
        ):
            return None
        to_stream = forwarder._resolve_to_stream()
        sink = None if to_stream is None else processor.context.plain_sink(to_stream)
        return sink if sink is not None and self._serdes_fit(sink) else None

    def _serdes_fit(self, sink: Any) -> bool:
        """Whether the store's and the sink's serdes write what the Rust encoding writes."""
        serdes = self.processor.store.serdes
        if not _utf8_string(serdes.key_serde.serializer) or (
            type(serdes.value_serde.serializer) is not LongSerializer
        ):
            return False
        windowed = getattr(sink.serialize_key, "__self__", None)
        if type(windowed) is not TimeWindowedSerializer:
            return False
        inner = windowed.inner
        key_serializer = inner.slot.get().serializer if type(inner) is _LazyKey else inner
        return _utf8_string(key_serializer) and (
            _native_name(sink.serialize_value) == "LongSerializer"
        )

    def __call__(self, items: list[tuple[Any, tuple[Any, Any, Any]]]) -> bool:
        """Flushes ``items`` (the cache's dirty items, in order); ``False`` when it cannot
        (nothing done: the general flush then takes them)."""
        sink = self._sink
        if sink is _UNRESOLVED:
            sink = self._sink = self.resolve()
        if sink is None:
            return False
        store = self.processor.store
        encoded = encode_window_counts(items, store.interval, store._live)
        if encoded is None:
            return False
        pairs, stamps, records, expired = encoded
        cache = store.cache
        cache.keep_flushed(items, expired)
        below = cache.below
        put_all_stamped = getattr(below, "put_all_stamped", None)
        if put_all_stamped is not None:
            put_all_stamped(pairs, stamps)
        else:
            below.put_all(pairs)
        self._send(sink, items, records)
        self.flushed += len(records)
        return True

    def _send(self, sink: Any, items: list[Any], records: list[tuple[bytes, bytes, int]]) -> None:
        topic, write, on_delivery = sink.topic, sink.write, sink.on_delivery
        producer = sink.producer
        poll = producer.poll
        # A stream thread's producer checks each sink timestamp (app/sink_timestamps.py): the
        # check inlined, a record failing it written by the sink itself (which reports it).
        # Looked up on the class: a wrapper forwarding attributes is not that producer.
        checked = getattr(type(producer), "inline_limits", None) is not None
        produce = producer.unchecked_produce if checked else producer.produce
        latest: int | None = None
        earliest: int | None = None
        if checked:
            latest, earliest = producer.inline_limits(topic)
        limited = latest is not None or earliest is not None
        clock = time.time
        for index, (raw_key, raw_value, timestamp) in enumerate(records):
            if limited and timestamp > 0:
                now = int(clock() * 1000)
                if (latest is not None and timestamp - now > latest) or (
                    earliest is not None and now - timestamp > earliest
                ):
                    self._write_refused(write, items[index], timestamp)
                    continue
            while True:
                try:
                    produce(topic, raw_value, raw_key, timestamp=timestamp, on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.05)

    def _write_refused(self, write: Any, item: Any, timestamp: int) -> None:
        """A window the sink's timestamp check refuses: through the sink itself, as the
        general path writes it."""
        (key, start), found, headers = item[1]
        windowed = windowed_of(key, start, self.processor.windows.size_ms)
        write(_new_record(Record, (windowed, found[0], timestamp, headers)))
