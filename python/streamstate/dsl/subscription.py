"""The wire formats of the foreign-key join (KIP-213), as Kafka writes them
(``streams/.../kstream/internals/foreignkeyjoin``):

* :class:`SubscriptionWrapper` on the subscription-registration topic (keyed by the foreign
  key): ``{1 bit hash-is-null}{7 bits version}{instruction byte}{16-byte hash, if any}{primary
  key bytes}{4-byte primary partition}`` (version 1);
* :class:`SubscriptionResponseWrapper` on the response topic (keyed by the primary key):
  ``{1 bit hash-is-null}{7 bits version 0}{16-byte hash, if any}{foreign value bytes}`` (no
  bytes: no value);
* the subscription store's key, a combined key: ``{4-byte foreign key length}{foreign key
  bytes}{primary key bytes}``, so that the subscriptions of one foreign key are one prefix;
* :func:`murmur3_128`: the hash of a left row's serialized value (Kafka's ``Murmur3.hash128``,
  MurmurHash3 x64 128 with seed 104729) that each response carries back, so a response to a
  row that has changed since is recognized as stale and dropped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from streamstate.errors import StreamsError

__all__ = [
    "DELETE_KEY_AND_PROPAGATE",
    "DELETE_KEY_NO_PROPAGATE",
    "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE",
    "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE",
    "ResponseDeserializer",
    "ResponseSerializer",
    "SubscriptionDeserializer",
    "SubscriptionResponseWrapper",
    "SubscriptionSerializer",
    "SubscriptionWrapper",
    "combined_key",
    "murmur3_128",
    "split_combined_key",
]

# Kafka's SubscriptionWrapper.Instruction byte values.
DELETE_KEY_NO_PROPAGATE = 0
"""Remove the subscription; send nothing."""
DELETE_KEY_AND_PROPAGATE = 1
"""Remove the subscription; send ``(pk, None)``."""
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
"""Subscribe; send the right value, or ``None`` when the foreign key has none."""
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3
"""Subscribe; send the right value only if the foreign key has one."""

_INSTRUCTIONS = frozenset({0, 1, 2, 3})
SUBSCRIPTION_VERSION = 1
RESPONSE_VERSION = 0
_HASH = struct.Struct(">qq")
_INT = struct.Struct(">i")
_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_SEED = 104729


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    k ^= k >> 33
    return k


def _signed(x: int) -> int:
    return x - (1 << 64) if x >> 63 else x


def murmur3_128(data: bytes) -> tuple[int, int]:
    """Kafka's ``Murmur3.hash128(data)``: MurmurHash3 x64 128-bit, seed 104729, as two
    signed 64-bit integers."""
    length = len(data)
    h1 = h2 = _SEED
    blocks = length // 16
    for i in range(blocks):
        k1 = int.from_bytes(data[i * 16 : i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8 : i * 16 + 16], "little")
        k1 = (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        k2 = (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK
    tail = data[blocks * 16 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _signed(h1), _signed(h2)


@dataclass(frozen=True)
class SubscriptionWrapper:
    """A left row's subscription to a foreign key: the ``hash`` of its value (``None`` for a
    deleted row), the ``instruction``, its ``primary_key`` and the ``primary_partition`` the
    response goes back to."""

    hash: tuple[int, int] | None
    instruction: int
    primary_key: Any
    primary_partition: int | None
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class SubscriptionResponseWrapper:
    """The right side's answer: the subscription's ``original_hash`` and the foreign key's
    current value (``None``: none); ``primary_partition`` is not written (the response sink's
    partitioner reads it)."""

    original_hash: tuple[int, int] | None
    foreign_value: Any
    primary_partition: int | None = None
    version: int = RESPONSE_VERSION


def _first_byte(version: int, hash_: tuple[int, int] | None) -> bytes:
    return bytes([version if hash_ is not None else version | 0x80])


class SubscriptionSerializer:
    """Writes a :class:`SubscriptionWrapper` (version 1) with ``key_serializer`` for the
    primary key."""

    def __init__(self, key_serializer: Any, pseudo_topic: str) -> None:
        """``pseudo_topic``: the topic name the primary key is serialized for (Kafka's
        ``<subscription topic>-pk``) when ``serialize`` is given none."""
        self.key_serializer = key_serializer
        self.pseudo_topic = pseudo_topic

    def serialize(self, topic: str | None, data: SubscriptionWrapper | None) -> bytes | None:
        """The bytes (``None`` stays ``None``)."""
        if data is None:
            return None
        # Kafka's "<app>-<subscription topic>-pk": the topic written, when known.
        pk_topic = f"{topic}-pk" if topic else self.pseudo_topic
        pk = self.key_serializer.serialize(pk_topic, data.primary_key) or b""
        hashed = b"" if data.hash is None else _HASH.pack(*data.hash)
        partition = _INT.pack(data.primary_partition if data.primary_partition is not None else 0)
        head = _first_byte(data.version, data.hash) + bytes([data.instruction])
        return head + hashed + bytes(pk) + partition


class SubscriptionDeserializer:
    """Reads what :class:`SubscriptionSerializer` (or Kafka, versions 0 and 1) wrote."""

    def __init__(self, key_deserializer: Any, pseudo_topic: str) -> None:
        """``key_deserializer``: the primary key's."""
        self.key_deserializer = key_deserializer
        self.pseudo_topic = pseudo_topic

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionWrapper | None:
        """The wrapper."""
        if data is None:
            return None
        version = data[0] & 0x7F
        if version > SUBSCRIPTION_VERSION:
            raise StreamsError(f"SubscriptionWrapper version {version} is not supported")
        instruction = data[1]
        if instruction not in _INSTRUCTIONS:
            raise StreamsError(f"Unknown instruction byte value = {instruction}")
        offset = 2
        hash_: tuple[int, int] | None = None
        if not data[0] & 0x80:
            hash_ = _HASH.unpack_from(data, offset)
            offset += _HASH.size
        end = len(data) - (_INT.size if version > 0 else 0)
        pk_topic = f"{topic}-pk" if topic else self.pseudo_topic
        pk = self.key_deserializer.deserialize(pk_topic, bytes(data[offset:end]))
        partition = _INT.unpack_from(data, end)[0] if version > 0 else None
        return SubscriptionWrapper(hash_, instruction, pk, partition, version)


class ResponseSerializer:
    """Writes a :class:`SubscriptionResponseWrapper` with ``value_serializer`` for the
    foreign value."""

    def __init__(self, value_serializer: Any) -> None:
        """``value_serializer``: the right table's."""
        self.value_serializer = value_serializer

    def serialize(
        self, topic: str | None, data: SubscriptionResponseWrapper | None
    ) -> bytes | None:
        """The bytes."""
        if data is None:
            return None
        value = b""
        if data.foreign_value is not None:
            value = bytes(self.value_serializer.serialize(topic, data.foreign_value) or b"")
        hashed = b"" if data.original_hash is None else _HASH.pack(*data.original_hash)
        return _first_byte(data.version, data.original_hash) + hashed + value


class ResponseDeserializer:
    """Reads what :class:`ResponseSerializer` wrote (no value bytes: ``None``, as Kafka)."""

    def __init__(self, value_deserializer: Any) -> None:
        """``value_deserializer``: the right table's."""
        self.value_deserializer = value_deserializer

    def deserialize(
        self, topic: str | None, data: bytes | None
    ) -> SubscriptionResponseWrapper | None:
        """The wrapper."""
        if data is None:
            return None
        version = data[0] & 0x7F
        offset = 1
        hash_: tuple[int, int] | None = None
        if not data[0] & 0x80:
            hash_ = _HASH.unpack_from(data, offset)
            offset += _HASH.size
        value = None
        if len(data) > offset:
            value = self.value_deserializer.deserialize(topic, bytes(data[offset:]))
        return SubscriptionResponseWrapper(hash_, value, None, version)


def combined_key(foreign_key: bytes, primary_key: bytes = b"") -> bytes:
    """The subscription store's key (without ``primary_key``: the prefix of every
    subscription to ``foreign_key``)."""
    return _INT.pack(len(foreign_key)) + foreign_key + primary_key


def split_combined_key(raw: bytes) -> tuple[bytes, bytes]:
    """The foreign and primary key bytes of a combined key."""
    length = _INT.unpack_from(raw)[0]
    return raw[4 : 4 + length], raw[4 + length :]
