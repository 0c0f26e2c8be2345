"""Bad input through every Python-facing deserializer and timestamp extractor, under Hypothesis.

Each built-in of ``streamstate.serde`` and ``streamstate.timestamps`` gets generated bad input:
raw bytes, fixed widths one off, JSON mutated (truncated, invalid UTF-8, deep nesting, NaN and
huge numbers as timestamps), Confluent-framed Avro with a wrong magic byte, a wrong schema id,
truncated or with oversized lengths. Whatever comes in, the result is a value or a typed error
of ``streamstate.errors`` (never a crash, never another exception class), and where the record
came from a topic (``records.ConsumerRecord`` through a ``RecordQueue``) the error names its
topic, partition and offset. The Rust core sees 10⁶ payloads per entry point under
``make fuzz`` (``rust/core/tests/fuzz.rs``); this is the same contract at the Python boundary.
"""

from __future__ import annotations

import json
import math
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamstate import DeserializationError, InvalidTimestampError, StreamsError
from streamstate.queue import RecordQueue
from streamstate.records import ConsumerRecord, timestamp_type_from_confluent
from streamstate.serde import (
    AvroDeserializer,
    AvroSerializer,
    BytesDeserializer,
    Deserializer,
    DoubleDeserializer,
    FloatDeserializer,
    IntegerDeserializer,
    JsonDeserializer,
    LongDeserializer,
    ShortDeserializer,
    StringDeserializer,
    UUIDDeserializer,
)
from streamstate.timestamps import (
    FailOnInvalidTimestamp,
    JsonFieldTimestampExtractor,
    LogAndSkipOnInvalidTimestamp,
    TimestampExtractor,
    UsePartitionTimeOnInvalidTimestamp,
    WallclockTimestampExtractor,
)

TOPIC = "orders"
SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "items", "type": {"type": "array", "items": "long"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "next", "type": ["null", "Order"]},
    ],
}


def deserializers() -> dict[str, Deserializer]:
    """Every built-in deserializer, the Avro one with and without an expected schema id, and
    ``StringDeserializer`` on its Python path (an encoding other than UTF-8)."""
    return {
        "bytes": BytesDeserializer(),
        "string": StringDeserializer(),
        "string-ascii": StringDeserializer("ascii"),
        "short": ShortDeserializer(),
        "integer": IntegerDeserializer(),
        "long": LongDeserializer(),
        "float": FloatDeserializer(),
        "double": DoubleDeserializer(),
        "uuid": UUIDDeserializer(),
        "json": JsonDeserializer(),
        "avro": AvroDeserializer(SCHEMA, schema_id=7),
        "avro-any-id": AvroDeserializer(SCHEMA),
    }


DESERIALIZERS = deserializers()


def extractors() -> dict[str, TimestampExtractor]:
    """Every built-in extractor; the JSON-field one with each unit and each policy."""
    out: dict[str, TimestampExtractor] = {
        "fail": FailOnInvalidTimestamp(),
        "skip": LogAndSkipOnInvalidTimestamp(),
        "partition-time": UsePartitionTimeOnInvalidTimestamp(),
        "wallclock": WallclockTimestampExtractor(),
    }
    for unit in ("ms", "s", "iso8601"):
        for policy in ("fail", "skip", "partition_time"):
            out[f"json-{unit}-{policy}"] = JsonFieldTimestampExtractor(
                "meta.ts", unit=unit, on_invalid=policy
            )
    return out


EXTRACTORS = extractors()

# --- payloads --------------------------------------------------------------------------------

TIMESTAMP_LITERALS = [
    "NaN",
    "Infinity",
    "-Infinity",
    '"NaN"',
    "1e400",
    "-1e400",
    "1e308",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "-1",
    "1.5",
    "1700000000.123",
    "null",
    "[]",
    "{}",
    '"2024-02-29T12:34:56.789Z"',
    '"2023-02-29T00:00:00Z"',
    '"2024-01-01T00:00:60+01:00"',
    '"2024-01-01T00:00:00"',
    '"9999-12-31T23:59:59.999999999-23:59"',
]
INVALID_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\x80"]

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["ts", "meta", "a", ""]), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def json_payloads(draw: st.DrawFn) -> bytes:
    """A JSON record with an event-time field, then maybe broken."""
    literal = draw(st.sampled_from(TIMESTAMP_LITERALS))
    body = json.dumps(draw(json_values))
    doc = f'{{"meta": {{"ts": {literal}}}, "ts": {literal}, "body": {body}}}'.encode()
    how = draw(st.sampled_from(["as is", "truncate", "invalid utf-8", "deep", "garbage"]))
    if how == "truncate":
        doc = doc[: draw(st.integers(0, len(doc)))]
    elif how == "invalid utf-8":
        at = draw(st.integers(0, len(doc)))
        doc = doc[:at] + draw(st.sampled_from(INVALID_UTF8)) + doc[at:]
    elif how == "deep":
        depth = draw(st.sampled_from([127, 128, 129, 1000, 50_000]))
        doc = b'{"meta":' * depth + b"1" + b"}" * depth
    elif how == "garbage":
        doc += draw(st.sampled_from([b" x", b"}", b",", b"\x00"]))
    return doc


def varint(n: int) -> bytes:
    """Avro's zig-zag varint (counts and lengths)."""
    z = ((n << 1) ^ (n >> 63)) & (2**64 - 1)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if not z:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


VALID_AVRO = AvroSerializer(SCHEMA, schema_id=7).serialize(
    TOPIC,
    {
        "id": "o-1",
        "amount": 9.5,
        "items": [1, 2, 3],
        "ts": 1_700_000_000_000,
        "next": {"id": "o-2", "amount": -1.0, "items": [], "ts": -5, "next": None},
    },
)
assert VALID_AVRO is not None


@st.composite
def avro_payloads(draw: st.DrawFn) -> bytes:
    """A valid Confluent-framed encoding, broken in the framing or the datum."""
    data = VALID_AVRO
    how = draw(
        st.sampled_from(["as is", "magic", "schema id", "truncate", "oversized", "flip", "random"])
    )
    if how == "magic":
        data = bytes([draw(st.integers(1, 255))]) + data[1:]
    elif how == "schema id":
        data = data[:1] + struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1))) + data[5:]
    elif how == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif how == "oversized":
        cut = draw(st.integers(5, len(data)))
        size = draw(st.sampled_from([2**63 - 1, -(2**63), -1, 2**31, 2**40]))
        data = data[:cut] + varint(size) + draw(st.binary(max_size=8))
    elif how == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    else:
        data = b"\x00\x00\x00\x00\x07" + draw(st.binary(max_size=48))
    return data


payloads = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([2, 4, 8, 36]).flatmap(lambda n: st.binary(min_size=n - 1, max_size=n + 1)),
    json_payloads(),
    avro_payloads(),
    st.sampled_from(INVALID_UTF8),
)

# --- the contract ----------------------------------------------------------------------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(DESERIALIZERS))
@FUZZ
@given(data=payloads)
def test_a_deserializer_returns_a_value_or_a_deserialization_error(name: str, data: bytes) -> None:
    try:
        DESERIALIZERS[name].deserialize(TOPIC, data)
    except DeserializationError as exc:
        assert isinstance(exc, ValueError)  # also a ValueError, as documented
        assert exc.topic == TOPIC, exc
        assert str(exc).strip()


def record(value: Any, timestamp: Any = 1_700_000_000_000, offset: int = 42) -> Any:
    """What an extractor reads of a record: its coordinates, timestamp and value."""
    return SimpleNamespace(
        topic=TOPIC, partition=3, offset=offset, timestamp=timestamp, value=value
    )


@st.composite
def extractor_values(draw: st.DrawFn) -> Any:
    """A record value as an extractor may be handed it: raw JSON bytes or text, a decoded
    document, or something that is no JSON object at all."""
    raw = draw(json_payloads())
    shape = draw(st.sampled_from(["bytes", "text", "decoded", "other"]))
    if shape == "bytes":
        return raw
    if shape == "text":
        return raw.decode("utf-8", "replace")
    if shape == "decoded":
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return None
    return draw(st.one_of(st.none(), st.integers(), st.floats(), st.lists(st.integers())))


@pytest.mark.parametrize("name", sorted(EXTRACTORS))
@FUZZ
@given(
    value=extractor_values(),
    timestamp=st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-1, 0])),
    partition_time=st.sampled_from([-1, 0, 1_700_000_000_000, 2**63 - 1]),
)
def test_an_extractor_returns_a_timestamp_or_an_error_naming_the_record(
    name: str, value: Any, timestamp: int, partition_time: int
) -> None:
    try:
        ts = EXTRACTORS[name].extract(record(value, timestamp), partition_time)
    except InvalidTimestampError as exc:
        assert (exc.topic, exc.partition, exc.offset) == (TOPIC, 3, 42), exc
        assert str(exc).strip()
    else:
        assert isinstance(ts, int)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e300, "1700000000000", None])
@pytest.mark.parametrize("name", ["fail", "skip", "partition-time"])
def test_a_record_timestamp_that_is_no_integer_is_a_type_error(name: str, bad: Any) -> None:
    """A record's own timestamp is an int64 on the wire; a Python object standing in for a
    record with a NaN or text timestamp is refused as the wrong type, not read as a number."""
    with pytest.raises(TypeError):
        EXTRACTORS[name].extract(record(b"{}", timestamp=bad), 0)


@st.composite
def raw_batches(draw: st.DrawFn) -> list[ConsumerRecord]:
    n = draw(st.integers(1, 6))
    offsets = sorted(draw(st.sets(st.integers(0, 10_000), min_size=n, max_size=n)))
    return [
        ConsumerRecord(
            TOPIC,
            5,
            offset,
            draw(st.sampled_from([-1, 0, 1_700_000_000_000, 2**63 - 1, -(2**63)])),
            draw(st.one_of(st.none(), payloads)),
            draw(st.one_of(st.none(), payloads)),
        )
        for offset in offsets
    ]


SERDE_NAMES = sorted(DESERIALIZERS)


@FUZZ
@given(
    records=raw_batches(),
    key=st.sampled_from(SERDE_NAMES),
    value=st.sampled_from(SERDE_NAMES),
    extractor=st.sampled_from(sorted(EXTRACTORS)),
    handler=st.sampled_from(["fail", "continue"]),
)
def test_a_record_queue_names_the_topic_partition_and_offset_of_a_bad_record(
    records: list[ConsumerRecord], key: str, value: str, extractor: str, handler: str
) -> None:
    queue = RecordQueue(
        TOPIC,
        5,
        key_deserializer=DESERIALIZERS[key],
        value_deserializer=DESERIALIZERS[value],
        timestamp_extractor=EXTRACTORS[extractor],
        deserialization_exception_handler=handler,
    )
    offsets = {r.offset for r in records}
    try:
        queue.add_raw_records(records)
    except (DeserializationError, InvalidTimestampError) as exc:
        if isinstance(exc, DeserializationError):
            assert handler == "fail", f"'continue' must drop, not raise: {exc}"
        assert exc.topic == TOPIC and exc.partition == 5, exc
        assert exc.offset in offsets, exc
        assert f"offset {exc.offset}" in str(exc)
        return
    except StreamsError as exc:  # pragma: no cover - the failure this test exists to show
        pytest.fail(f"{type(exc).__name__} instead of a record error: {exc}")
    admitted = len(queue)
    dropped = sum(queue.dropped_records.values())
    assert admitted + dropped == len(records)


def test_timestamp_types_outside_kafkas_are_refused() -> None:
    """``records``' one decoder of wire data: confluent-kafka's timestamp type numbers."""
    assert [timestamp_type_from_confluent(k) for k in (0, 1, 2)] == [-1, 0, 1]
    with pytest.raises(ValueError):
        timestamp_type_from_confluent(7)
