"""``streamstate.topic_restore``: a whole changelog topic into a state directory, documented in
:mod:`streamstate.state.topic_restore`, where it lives; this path keeps working."""

from __future__ import annotations

from streamstate.state.topic_restore import (
    CHECKPOINT_FILE,
    PartitionRestoreResult,
    read_checkpoint,
    restore_topic,
    select_partitions,
    store_directory,
    topic_partitions,
)

__all__ = [
    "CHECKPOINT_FILE",
    "PartitionRestoreResult",
    "read_checkpoint",
    "restore_topic",
    "select_partitions",
    "store_directory",
    "topic_partitions",
]
