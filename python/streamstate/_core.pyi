"""Type stubs for the Rust extension module ``streamstate._core``."""

from typing import Any

import pyarrow as pa

__version__: str

def build_profile() -> str:
    """``"release"`` or ``"debug"``: how the extension was compiled."""

def decode_column(array: Any, deserializer: str) -> pa.Array:
    """Deserializes a column of raw Kafka bytes into a typed pyarrow array.

    ``array`` is anything exporting the Arrow PyCapsule interface with a binary,
    large_binary or binary_view type. ``deserializer`` is one of ``bytes``, ``string``,
    ``short``, ``integer``, ``long``, ``float``, ``double``, ``uuid``.
    """

def decode_kafka_batch(batch: Any, key: str, value: str) -> pa.RecordBatch:
    """Deserializes ``key`` and ``value`` of a batch in Spark's Kafka source schema.

    Returns a batch with ``topic``, ``partition``, ``offset``, ``timestamp`` (epoch ms),
    ``key`` and ``value``; a malformed record raises ``DeserializationError`` naming its topic,
    partition and offset.
    """

def _panic_for_test(message: str) -> None:
    """Panics inside Rust on purpose; raises ``StreamsError``."""
