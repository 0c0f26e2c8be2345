"""Serdes: Kafka's wire formats, round trips, errors, Confluent-framed Avro, and fuzzing.

Kafka's ``org.apache.kafka.common.serialization`` classes define the bytes: fixed-width numbers
big-endian with an exact length, strings UTF-8, UUIDs as their 36-character text. The plain
Python decoders of ``tests/oracle.py`` are the second opinion for random input.
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import oracle

from streamstate import DeserializationError
from streamstate.serde import (
    AvroDeserializer,
    AvroSerializer,
    BytesDeserializer,
    BytesSerializer,
    DoubleDeserializer,
    DoubleSerializer,
    FloatDeserializer,
    FloatSerializer,
    IntegerDeserializer,
    IntegerSerializer,
    JsonDeserializer,
    JsonSerializer,
    LongDeserializer,
    LongSerializer,
    Serde,
    Serdes,
    ShortDeserializer,
    ShortSerializer,
    StringDeserializer,
    StringSerializer,
    UUIDDeserializer,
    UUIDSerializer,
)

TOPIC = "topic"
SAMPLE_UUID = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")

# name -> (serializer, deserializer, sample values, oracle decoder)
SERDES = {
    "bytes": (BytesSerializer(), BytesDeserializer(), [b"", b"\x00\xff", b"x" * 1000]),
    "string": (StringSerializer(), StringDeserializer(), ["", "ascii", "ünïcode ✓ 🚀", "\x00"]),
    "short": (ShortSerializer(), ShortDeserializer(), [-(2**15), -1, 0, 1, 2**15 - 1]),
    "integer": (IntegerSerializer(), IntegerDeserializer(), [-(2**31), -1, 0, 10, 2**31 - 1]),
    "long": (LongSerializer(), LongDeserializer(), [-(2**63), -1, 0, 1, 2**63 - 1]),
    "float": (FloatSerializer(), FloatDeserializer(), [0.0, -0.0, 1.5, -2.25, math.inf]),
    "double": (
        DoubleSerializer(),
        DoubleDeserializer(),
        [0.0, math.pi, -1e308, 5e-324, -math.inf],
    ),
    "uuid": (UUIDSerializer(), UUIDDeserializer(), [SAMPLE_UUID, uuid.UUID(int=0)]),
    "json": (
        JsonSerializer(),
        JsonDeserializer(),
        [{"a": [1, 2.5, None, True, "x"], "b": {"c": "d"}}, [], "s", 42, -1.5, False],
    ),
}

ROUND_TRIPS = [
    pytest.param(name, value, id=f"{name}-{i}")
    for name, (_, _, values) in SERDES.items()
    for i, value in enumerate(values)
]


@pytest.mark.parametrize(("name", "value"), ROUND_TRIPS)
def test_round_trip(name: str, value: object) -> None:
    serializer, deserializer, _ = SERDES[name]
    data = serializer.serialize(TOPIC, value)
    assert isinstance(data, bytes)
    back = deserializer.deserialize(TOPIC, data)
    assert back == value
    assert type(back) is type(value)
    if isinstance(value, float):  # -0.0 == 0.0: compare the sign too
        assert math.copysign(1, back) == math.copysign(1, value)


def test_float_nan_round_trips() -> None:
    for serializer, deserializer in [
        (FloatSerializer(), FloatDeserializer()),
        (DoubleSerializer(), DoubleDeserializer()),
    ]:
        assert math.isnan(deserializer.deserialize(TOPIC, serializer.serialize(TOPIC, math.nan)))


@pytest.mark.parametrize(
    ("serializer", "value", "expected"),
    [
        (LongSerializer(), 1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (LongSerializer(), -1, b"\xff" * 8),
        (LongSerializer(), 2**63 - 1, b"\x7f" + b"\xff" * 7),
        (IntegerSerializer(), 1, b"\x00\x00\x00\x01"),
        (IntegerSerializer(), -(2**31), b"\x80\x00\x00\x00"),
        (ShortSerializer(), -2, b"\xff\xfe"),
        (ShortSerializer(), 258, b"\x01\x02"),
        (FloatSerializer(), 1.5, b"\x3f\xc0\x00\x00"),
        (DoubleSerializer(), 1.0, b"\x3f\xf0\x00\x00\x00\x00\x00\x00"),
        (StringSerializer(), "é✓", b"\xc3\xa9\xe2\x9c\x93"),
        (UUIDSerializer(), SAMPLE_UUID, b"123e4567-e89b-12d3-a456-426614174000"),
        (BytesSerializer(), b"\x00\x01", b"\x00\x01"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, (bytes, int, float, str)) else None,
)
def test_kafka_exact_bytes(serializer, value: object, expected: bytes) -> None:
    assert serializer.serialize(TOPIC, value) == expected


@pytest.mark.parametrize(
    ("deserializer", "data", "expected"),
    [
        (LongDeserializer(), b"\x00" * 7 + b"\x01", 1),
        (LongDeserializer(), b"\x80" + b"\x00" * 7, -(2**63)),
        (IntegerDeserializer(), b"\x00\x00\x00\x0a", 10),
        (ShortDeserializer(), b"\x80\x00", -(2**15)),
        (FloatDeserializer(), b"\xc0\x10\x00\x00", -2.25),
        (DoubleDeserializer(), struct.pack(">d", 0.1), 0.1),
        (StringDeserializer(), "ünï".encode(), "ünï"),
        (UUIDDeserializer(), b"123E4567-E89B-12D3-A456-426614174000", SAMPLE_UUID),
        (JsonDeserializer(), b' {"k": [1, "v"]} ', {"k": [1, "v"]}),
    ],
)
def test_kafka_bytes_decode(deserializer, data: bytes, expected: object) -> None:
    assert deserializer.deserialize(TOPIC, data) == expected


def test_string_deserializer_with_another_encoding() -> None:
    assert StringDeserializer(encoding="latin-1").deserialize(TOPIC, b"\xe9") == "é"


@pytest.mark.parametrize(
    ("deserializer", "data"),
    [
        (ShortDeserializer(), b"\x01"),
        (ShortDeserializer(), b"\x00\x00\x01"),
        (IntegerDeserializer(), b""),
        (IntegerDeserializer(), b"\x00\x00\x01"),
        (IntegerDeserializer(), struct.pack(">q", 1)),  # Kafka's "bad" record: a long
        (LongDeserializer(), b"\x00\x00\x00\x01"),
        (LongDeserializer(), b"\x00" * 9),
        (FloatDeserializer(), struct.pack(">d", 1.0)),
        (DoubleDeserializer(), struct.pack(">f", 1.0)),
        (StringDeserializer(), b"\xff\xfe\xfd"),
        (StringDeserializer(), b"ab\xc3"),  # a truncated multi-byte sequence
        (UUIDDeserializer(), SAMPLE_UUID.bytes),  # 16 raw bytes are not Kafka's format
        (UUIDDeserializer(), b"not-a-uuid"),
        (UUIDDeserializer(), b"123e4567-e89b-12d3-a456-42661417400g"),
        (JsonDeserializer(), b"{"),
        (JsonDeserializer(), b"{'single': 'quotes'}"),
        (JsonDeserializer(), b""),
        (JsonDeserializer(), b"\xff"),
    ],
)
def test_malformed_input_is_a_deserialization_error(deserializer, data: bytes) -> None:
    with pytest.raises(DeserializationError) as e:
        deserializer.deserialize(TOPIC, data)
    assert isinstance(e.value, ValueError)
    assert str(e.value), "the error must give a reason"


def test_wrong_length_names_the_sizes() -> None:
    with pytest.raises(DeserializationError, match="8") as e:
        LongDeserializer().deserialize(TOPIC, b"\x00\x01\x02")
    assert "3" in str(e.value)


@pytest.mark.parametrize("name", sorted(SERDES))
def test_none_is_none(name: str) -> None:
    serializer, deserializer, _ = SERDES[name]
    assert deserializer.deserialize(TOPIC, None) is None
    assert serializer.serialize(TOPIC, None) is None


# --- Avro with Confluent framing -------------------------------------------------------------

AVRO_SCHEMA = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}
USER = {"id": 1, "name": "ab", "email": None}
# magic 0, schema id 7 (big-endian), then Avro binary: zig-zag varint 1 -> 0x02, string "ab"
# (length 2 -> 0x04, then the bytes), union branch 0 (null) -> 0x00.
USER_BYTES = b"\x00\x00\x00\x00\x07" + b"\x02" + b"\x04ab" + b"\x00"


@pytest.mark.parametrize("schema", [AVRO_SCHEMA, json.dumps(AVRO_SCHEMA)], ids=["dict", "str"])
def test_avro_confluent_framing_exact_bytes(schema) -> None:
    assert AvroSerializer(schema, schema_id=7).serialize(TOPIC, USER) == USER_BYTES
    assert AvroDeserializer(schema, schema_id=7).deserialize(TOPIC, USER_BYTES) == USER


@pytest.mark.parametrize(
    "user",
    [
        USER,
        {"id": -(2**63), "name": "", "email": "x@y.z"},
        {"id": 2**63 - 1, "name": "ünïcode ✓" * 50, "email": None},
    ],
)
def test_avro_round_trip(user: dict) -> None:
    data = AvroSerializer(AVRO_SCHEMA, schema_id=42).serialize(TOPIC, user)
    assert data[:5] == b"\x00\x00\x00\x00\x2a"
    assert AvroDeserializer(AVRO_SCHEMA, schema_id=42).deserialize(TOPIC, data) == user


def test_avro_without_expected_schema_id_accepts_any_id() -> None:
    assert AvroDeserializer(AVRO_SCHEMA).deserialize(TOPIC, USER_BYTES) == USER


def test_avro_none_is_none() -> None:
    assert AvroDeserializer(AVRO_SCHEMA).deserialize(TOPIC, None) is None
    assert AvroSerializer(AVRO_SCHEMA, schema_id=7).serialize(TOPIC, None) is None


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00\x00\x00\x00\x08" + USER_BYTES[5:], "schema id"),
        (b"\x01" + USER_BYTES[1:], "magic byte"),
        (USER_BYTES[:3], "too short for the header"),
        (USER_BYTES[:-2], "truncated body"),
        (USER_BYTES[:5] + b"\x02\x04ab\x04", "union branch out of range"),
    ],
)
def test_avro_malformed_is_a_deserialization_error(data: bytes, why: str) -> None:
    with pytest.raises(DeserializationError) as e:
        AvroDeserializer(AVRO_SCHEMA, schema_id=7).deserialize(TOPIC, data)
    assert isinstance(e.value, ValueError), why


def test_avro_wrong_schema_id_names_both_ids() -> None:
    data = b"\x00\x00\x00\x00\x08" + USER_BYTES[5:]
    with pytest.raises(DeserializationError, match="8") as e:
        AvroDeserializer(AVRO_SCHEMA, schema_id=7).deserialize(TOPIC, data)
    assert "7" in str(e.value)


# --- fuzzing: random bytes never crash, and agree with Python's own decoding -------------------

FUZZ_DESERIALIZERS = {
    "bytes": BytesDeserializer(),
    "string": StringDeserializer(),
    "short": ShortDeserializer(),
    "integer": IntegerDeserializer(),
    "long": LongDeserializer(),
    "float": FloatDeserializer(),
    "double": DoubleDeserializer(),
    "uuid": UUIDDeserializer(),
    "json": JsonDeserializer(),
    "avro": AvroDeserializer(AVRO_SCHEMA, schema_id=7),
}
# Decoders whose results on arbitrary bytes are fully determined by Kafka's format (JSON is
# compared on generated documents below instead: number edge cases are not part of the contract).
EXACT = {"bytes", "string", "short", "integer", "long", "float", "double"}


def same(a: object, b: object) -> bool:
    """Equal, of the same types all the way down, and NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("name", sorted(FUZZ_DESERIALIZERS))
@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=48), st.binary(min_size=2, max_size=8)))
def test_random_bytes_never_crash(name: str, data: bytes) -> None:
    try:
        got = FUZZ_DESERIALIZERS[name].deserialize(TOPIC, data)
    except DeserializationError:
        got = DeserializationError
    if name not in EXACT:
        return
    try:
        expected = oracle.DESERIALIZERS[name](data)
    except ValueError:
        expected = DeserializationError
    assert same(got, expected), (data, got, expected)


@pytest.mark.parametrize("name", ["uuid", "avro"])
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=40), flip=st.integers(0, 39))
def test_corrupted_valid_input_never_crashes(name: str, data: bytes, flip: int) -> None:
    valid = {"uuid": str(SAMPLE_UUID).encode(), "avro": USER_BYTES}[name]
    mangled = bytearray(valid + data)
    mangled[flip % len(mangled)] ^= 0xFF
    try:
        FUZZ_DESERIALIZERS[name].deserialize(TOPIC, bytes(mangled))
    except DeserializationError:
        pass


json_documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.integers(-4000, 4000).map(lambda n: n / 4)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(document=json_documents, ensure_ascii=st.booleans())
def test_json_agrees_with_python_json(document: object, ensure_ascii: bool) -> None:
    data = json.dumps(document, ensure_ascii=ensure_ascii).encode()
    got = JsonDeserializer().deserialize(TOPIC, data)
    assert same(got, oracle.deserialize_json(data)), (data, got)
    if document is not None:  # a None value is a Kafka null, not the JSON text "null"
        assert same(json.loads(JsonSerializer().serialize(TOPIC, document)), document)


# -- Serde and Serdes (Kafka's Serdes factory) ---------------------------------------------------


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (Serdes.String(), "héllo"),
        (Serdes.String("latin-1"), "héllo"),
        (Serdes.Long(), -(2**63)),
        (Serdes.Integer(), 2**31 - 1),
        (Serdes.Short(), -(2**15)),
        (Serdes.Float(), 1.5),
        (Serdes.Double(), 2.25),
        (Serdes.Bytes(), b"\x00\xff"),
        (Serdes.UUID(), uuid.UUID("12345678-1234-5678-1234-567812345678")),
        (Serdes.Json(), {"a": [1, None, True]}),
        (
            Serdes.Avro(
                {"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]}, 7
            ),
            {"n": 42},
        ),
    ],
)
def test_each_serde_reads_back_what_it_writes(serde: Serde, value: Any) -> None:
    data = serde.serializer.serialize("t", value)
    assert isinstance(data, bytes)
    assert serde.deserializer.deserialize("t", data) == value
    assert serde.deserializer.deserialize("t", None) is None


def test_serdes_pair_kafkas_formats() -> None:
    assert Serdes.Long().serializer.serialize("t", 1) == b"\x00" * 7 + b"\x01"
    assert Serdes.String().serializer.serialize("t", "k") == b"k"
    assert isinstance(Serdes.Integer().deserializer, IntegerDeserializer)
