"""What a consumer's group metadata says: the generation librdkafka's group thread is in now.

librdkafka runs the group protocol on a thread of its own, so the generation can move between
the stream thread's ``consume`` and its ``commit``: the rebalance callbacks only tell the
stream thread where the group *was* at its last poll. confluent-kafka exposes no generation,
but ``Consumer.consumer_group_metadata()`` (what exactly-once hands to
``send_offsets_to_transaction``) is librdkafka's serialized ``rd_kafka_consumer_group_metadata_t``:
the magic ``CGMDv2:``, the generation id (a native-endian int32), then the group id and the
member id, each NUL-terminated. :func:`group_generation` reads the generation from it, and
answers ``None`` for anything else (another client version's format): callers then know
nothing, and must not guess.
"""

from __future__ import annotations

import struct
from typing import Any

from confluent_kafka import KafkaException

from streamstate.clients.kafka_errors import kafka_call

__all__ = ["NO_GENERATION", "group_generation"]

_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")

NO_GENERATION = -1
"""librdkafka's generation of a member that is not in the group (not joined yet, or reset
after it left or was dropped)."""


def group_generation(consumer: Any) -> int | None:
    """The generation ``consumer``'s group thread is in now (:data:`NO_GENERATION` when not
    in the group), or ``None`` when its metadata cannot be read."""
    try:
        metadata = kafka_call(consumer.consumer_group_metadata)
    except (KafkaException, RuntimeError, ValueError, TypeError):  # closed, or no group
        return None
    return parse_generation(metadata)


def parse_generation(metadata: object) -> int | None:
    """The generation in librdkafka's serialized group metadata; ``None`` if it is not that."""
    if not isinstance(metadata, bytes) or not metadata.startswith(_MAGIC):
        return None
    start = len(_MAGIC)
    if len(metadata) < start + _GENERATION.size:
        return None
    (generation,) = _GENERATION.unpack_from(metadata, start)
    return int(generation)
