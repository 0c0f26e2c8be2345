"""Kafka's serdes, running in Rust, plus JSON and Confluent-framed Avro.

Every deserializer has ``deserialize(topic, data) -> object`` (``None`` gives ``None``) and every
serializer ``serialize(topic, obj) -> bytes | None``, as in Kafka. The numeric formats are
Kafka's: big-endian, exact length (a wrong length is a ``DeserializationError``, which is also a
``ValueError``). A ``RecordQueue`` given one of these classes runs it inside Rust with no Python
call per record; any other object with a ``deserialize(topic, data)`` method works too, through
Python (the slow path).

A :class:`Serde` pairs a serializer with its deserializer, and :class:`Serdes` makes the
built-in pairs (Kafka's ``Serdes.String()`` and the like).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

from streamstate._core import NativeDeserializer, NativeSerializer
from streamstate._native import NATIVE_MARK, NativeBacked, runs_native
from streamstate.errors import DeserializationError

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "BytesDeserializer",
    "BytesSerializer",
    "Deserializer",
    "DoubleDeserializer",
    "DoubleSerializer",
    "FloatDeserializer",
    "FloatSerializer",
    "IntegerDeserializer",
    "IntegerSerializer",
    "JsonDeserializer",
    "JsonSerializer",
    "LongDeserializer",
    "LongSerializer",
    "Serde",
    "Serdes",
    "Serializer",
    "ShortDeserializer",
    "ShortSerializer",
    "StringDeserializer",
    "StringSerializer",
    "UUIDDeserializer",
    "UUIDSerializer",
]


class Deserializer(NativeBacked):
    """Base of the built-in deserializers: the work happens in the Rust object ``_native``."""

    _spec: tuple[Any, ...] = ("bytes",)

    def __init__(self) -> None:
        self._native = NativeDeserializer(self._spec)

    @runs_native
    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        """Turns Kafka bytes into a Python object; ``None`` stays ``None``."""
        return self._native.deserialize(topic, data)


class Serializer(NativeBacked):
    """Base of the built-in serializers: the work happens in the Rust object ``_native``."""

    _spec: tuple[Any, ...] = ("bytes",)

    def __init__(self) -> None:
        self._native = NativeSerializer(self._spec)

    def serialize(self, topic: str | None, obj: Any) -> bytes | None:
        """Turns a Python object into Kafka bytes; ``None`` stays ``None``."""
        return self._native.serialize(topic, obj)


def deserialize_function(deserializer: Any) -> Any:
    """``deserializer``'s Rust ``deserialize`` itself where its Python method only forwards to
    it (one call per record instead of two; the rule a ``RecordQueue`` follows), else the
    method: a subclass that overrides ``deserialize`` keeps its override. For the library's
    hot paths (a stream-table join's lookups); not part of the public surface."""
    native = getattr(deserializer, "_native", None)
    method = type(deserializer).deserialize
    if native is not None and getattr(method, NATIVE_MARK, False):
        return native.deserialize
    return deserializer.deserialize


class BytesDeserializer(Deserializer):
    """The bytes as they are."""

    _spec = ("bytes",)


class BytesSerializer(Serializer):
    """Bytes as they are (``bytearray`` and ``memoryview`` are copied to ``bytes``)."""

    _spec = ("bytes",)


class StringDeserializer(Deserializer):
    """Text in ``encoding`` (UTF-8 runs in Rust; other encodings decode in Python)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = codecs.lookup(encoding).name
        self._spec = ("string",)
        if self.encoding == "utf-8":
            super().__init__()
        # Otherwise there is no `_native`: a RecordQueue then calls deserialize() (Python).

    @runs_native  # only where there is a `_native` (UTF-8)
    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        """Decodes the bytes; undecodable bytes are a ``DeserializationError``."""
        if self.encoding == "utf-8":
            return self._native.deserialize(topic, data)
        if data is None:
            return None
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DeserializationError(f"StringDeserializer: {exc}", topic=topic) from None

    def _state(self) -> dict[str, Any]:
        return {"encoding": self.encoding}


class StringSerializer(Serializer):
    """Text in ``encoding``."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = codecs.lookup(encoding).name
        self._spec = ("string",)
        super().__init__()

    def serialize(self, topic: str | None, obj: Any) -> bytes | None:
        """Encodes the text."""
        if self.encoding == "utf-8" or obj is None:
            return self._native.serialize(topic, obj)
        return str(obj).encode(self.encoding)

    def _state(self) -> dict[str, Any]:
        return {"encoding": self.encoding}


class ShortDeserializer(Deserializer):
    """A 2-byte big-endian signed integer (Kafka's ``ShortDeserializer``)."""

    _spec = ("short",)


class ShortSerializer(Serializer):
    """A 2-byte big-endian signed integer."""

    _spec = ("short",)


class IntegerDeserializer(Deserializer):
    """A 4-byte big-endian signed integer (Kafka's ``IntegerDeserializer``)."""

    _spec = ("integer",)


class IntegerSerializer(Serializer):
    """A 4-byte big-endian signed integer."""

    _spec = ("integer",)


class LongDeserializer(Deserializer):
    """An 8-byte big-endian signed integer (Kafka's ``LongDeserializer``)."""

    _spec = ("long",)


class LongSerializer(Serializer):
    """An 8-byte big-endian signed integer."""

    _spec = ("long",)


class FloatDeserializer(Deserializer):
    """A 4-byte big-endian IEEE 754 float."""

    _spec = ("float",)


class FloatSerializer(Serializer):
    """A 4-byte big-endian IEEE 754 float."""

    _spec = ("float",)


class DoubleDeserializer(Deserializer):
    """An 8-byte big-endian IEEE 754 double."""

    _spec = ("double",)


class DoubleSerializer(Serializer):
    """An 8-byte big-endian IEEE 754 double."""

    _spec = ("double",)


class UUIDDeserializer(Deserializer):
    """A ``uuid.UUID`` from its 36-character text form, as Kafka's ``UUIDDeserializer``."""

    _spec = ("uuid",)


class UUIDSerializer(Serializer):
    """A ``uuid.UUID`` (or its text) as its 36-character text form."""

    _spec = ("uuid",)


class JsonDeserializer(Deserializer):
    """UTF-8 JSON into dicts, lists, str, int, float, bool and ``None``."""

    _spec = ("json",)


class JsonSerializer(Serializer):
    """Python data as compact UTF-8 JSON."""

    _spec = ("json",)


def _schema_text(schema: str | dict[str, Any] | list[Any]) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


class AvroDeserializer(Deserializer):
    """Avro in Confluent's framing: magic byte 0, a 4-byte big-endian schema id, then the Avro
    binary encoding of one datum written with ``schema``.

    With ``schema_id`` set, a record framed with another id is a ``DeserializationError`` (it
    was written with a schema this deserializer does not know). Records become dicts.
    """

    def __init__(self, schema: str | dict[str, Any] | list[Any], schema_id: int | None = None):
        self.schema = _schema_text(schema)
        self.schema_id = schema_id
        self._spec = ("avro", self.schema, schema_id)
        super().__init__()

    def _state(self) -> dict[str, Any]:
        return {"schema": self.schema, "schema_id": self.schema_id}

    def __repr__(self) -> str:
        return f"AvroDeserializer(schema_id={self.schema_id!r})"  # the schema is long


class AvroSerializer(Serializer):
    """Avro in Confluent's framing with ``schema`` and ``schema_id`` (0 when not given)."""

    def __init__(self, schema: str | dict[str, Any] | list[Any], schema_id: int | None = None):
        self.schema = _schema_text(schema)
        self.schema_id = schema_id
        self._spec = ("avro", self.schema, schema_id)
        super().__init__()

    def _state(self) -> dict[str, Any]:
        return {"schema": self.schema, "schema_id": self.schema_id}


@dataclass(frozen=True)
class Serde:
    """A serializer and the deserializer that reads what it writes (Kafka's ``Serde``)."""

    serializer: Any
    deserializer: Any


class Serdes:
    """The built-in serdes, as Kafka's ``Serdes`` (its capitalized names kept): each call
    returns a new :class:`Serde`."""

    @staticmethod
    def String(encoding: str = "utf-8") -> Serde:
        """Text in ``encoding`` (UTF-8 by default)."""
        return Serde(StringSerializer(encoding), StringDeserializer(encoding))

    @staticmethod
    def Long() -> Serde:
        """64-bit signed integers, 8 bytes big-endian."""
        return Serde(LongSerializer(), LongDeserializer())

    @staticmethod
    def Integer() -> Serde:
        """32-bit signed integers, 4 bytes big-endian."""
        return Serde(IntegerSerializer(), IntegerDeserializer())

    @staticmethod
    def Short() -> Serde:
        """16-bit signed integers, 2 bytes big-endian."""
        return Serde(ShortSerializer(), ShortDeserializer())

    @staticmethod
    def Float() -> Serde:
        """IEEE 754 single precision, 4 bytes big-endian."""
        return Serde(FloatSerializer(), FloatDeserializer())

    @staticmethod
    def Double() -> Serde:
        """IEEE 754 double precision, 8 bytes big-endian."""
        return Serde(DoubleSerializer(), DoubleDeserializer())

    @staticmethod
    def Bytes() -> Serde:
        """Bytes as they are."""
        return Serde(BytesSerializer(), BytesDeserializer())

    @staticmethod
    def UUID() -> Serde:
        """``uuid.UUID`` as its 36-character text form."""
        return Serde(UUIDSerializer(), UUIDDeserializer())

    @staticmethod
    def Json() -> Serde:
        """Python data as compact UTF-8 JSON."""
        return Serde(JsonSerializer(), JsonDeserializer())

    @staticmethod
    def Avro(schema: str | dict[str, Any] | list[Any], schema_id: int | None = None) -> Serde:
        """Avro in Confluent's framing with ``schema`` (see :class:`AvroSerializer`)."""
        return Serde(AvroSerializer(schema, schema_id), AvroDeserializer(schema, schema_id))
