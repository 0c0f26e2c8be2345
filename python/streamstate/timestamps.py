"""Kafka Streams' timestamp extractors, running in Rust.

An extractor has ``extract(record, partition_time) -> int``; ``record`` carries the deserialized
key and value and the record's own ``timestamp``. A negative result makes the ``RecordQueue``
drop the record. ``partition_time`` is the highest timestamp accepted so far on that partition,
or ``NOT_KNOWN`` (-1). Any other object with such an ``extract`` method works too (the slow
path, one Python call per record).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from streamstate._core import NativeExtractor
from streamstate._native import NativeBacked, runs_native

_log = logging.getLogger("streamstate.timestamps")

__all__ = [
    "FailOnInvalidTimestamp",
    "JsonFieldTimestampExtractor",
    "LogAndSkipOnInvalidTimestamp",
    "TimestampExtractor",
    "UsePartitionTimeOnInvalidTimestamp",
    "WallclockTimestampExtractor",
]

OnInvalid = Literal["fail", "skip", "partition_time"]


class TimestampExtractor(NativeBacked):
    """Base of the built-in extractors: the work happens in the Rust object ``_native``."""

    _spec: tuple[Any, ...] = ("record", "fail")

    def __init__(self) -> None:
        self._native = NativeExtractor(self._spec)

    @runs_native
    def extract(self, record: Any, partition_time: int) -> int:
        """The timestamp (epoch ms) of ``record``; negative means "drop it"."""
        ts = int(self._native.extract(record, partition_time))
        if ts < 0:
            # Inside a RecordQueue the queue logs the drop; called directly, say it here.
            _log.warning(
                "Input record (topic %s, partition %s, offset %s) will be dropped because it "
                "has an invalid (negative) timestamp %d",
                getattr(record, "topic", None),
                getattr(record, "partition", None),
                getattr(record, "offset", None),
                ts,
            )
        return ts


class FailOnInvalidTimestamp(TimestampExtractor):
    """The record's own timestamp; a negative one raises ``InvalidTimestampError`` (the default,
    as in Kafka Streams)."""

    _spec = ("record", "fail")


class LogAndSkipOnInvalidTimestamp(TimestampExtractor):
    """The record's own timestamp; a negative one is returned as it is, so the record is dropped
    (and counted and logged by the queue)."""

    _spec = ("record", "skip")


class UsePartitionTimeOnInvalidTimestamp(TimestampExtractor):
    """The record's own timestamp; a negative one is replaced by the partition time, and is an
    ``InvalidTimestampError`` while the partition time is ``NOT_KNOWN``."""

    _spec = ("record", "partition_time")


class WallclockTimestampExtractor(TimestampExtractor):
    """The wall-clock time at extraction, in epoch ms (processing-time semantics)."""

    _spec = ("wallclock",)


class JsonFieldTimestampExtractor(TimestampExtractor):
    """A field of a JSON value: ``field`` is a dotted path (``"meta.ts"``), ``unit`` is ``"ms"``,
    ``"s"`` or ``"iso8601"`` (with a ``Z`` or ``±HH:MM`` offset).

    A missing, null, unparsable or negative field is invalid, and ``on_invalid`` decides as the
    three record-timestamp extractors do: ``"fail"`` raises ``InvalidTimestampError``, ``"skip"``
    drops the record, ``"partition_time"`` uses the partition time. The value may be a decoded
    dict (``JsonDeserializer``) or raw JSON bytes/text.
    """

    def __init__(
        self,
        field: str,
        unit: Literal["ms", "s", "iso8601"] = "ms",
        on_invalid: OnInvalid = "fail",
    ) -> None:
        self.field = field
        self.unit = unit
        self.on_invalid = on_invalid
        self._spec = ("json_field", field, unit, on_invalid)
        super().__init__()

    def _state(self) -> dict[str, Any]:
        return {"field": self.field, "unit": self.unit, "on_invalid": self.on_invalid}
