"""The partition time in commit metadata, as Kafka Streams writes and reads it.

A task commits each source partition's offset with the highest timestamp it processed there
(the *partition time*) as metadata, so that a task that takes the partition over (after a
restart or a rebalance) starts with it: Kafka Streams 3.x's ``TopicPartitionMetadata``
version 2, base64 of a version byte and the time (then processor metadata, empty here); 2.x
wrote version 1 (the time alone). Both carry the time in the same 8 bytes.
"""

from __future__ import annotations

import base64
import struct

from streamstate.records import NOT_KNOWN

__all__ = ["decode_partition_time", "encode_partition_time"]

_METADATA_VERSION = 2
_READABLE_VERSIONS = (1, 2)


def encode_partition_time(partition_time: int) -> str:
    """Kafka Streams 3.x's commit metadata (``TopicPartitionMetadata`` version 2): base64 of a
    version byte and the partition time, with no processor metadata."""
    return base64.b64encode(struct.pack(">bq", _METADATA_VERSION, partition_time)).decode()


def decode_partition_time(metadata: str | None) -> int:
    """The partition time in commit metadata of version 1 (Kafka 2.x) or 2 (Kafka 3.x, any
    processor metadata after it ignored), ``NOT_KNOWN`` when absent or unreadable."""
    if not metadata:
        return NOT_KNOWN
    try:
        # The first 12 characters are the first 9 bytes (version, partition time): whatever
        # follows (processor metadata, or bytes past the end that confluent-kafka's
        # committed() may append to metadata it did not write) is not read.
        version, value = struct.unpack(">bq", base64.b64decode(metadata[:12]))
    except (ValueError, struct.error):
        return NOT_KNOWN
    return int(value) if version in _READABLE_VERSIONS else NOT_KNOWN
