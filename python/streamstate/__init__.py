"""streamstate: Kafka Streams' state and record machinery for Python.

A Rust core (``streamstate._core``) does the per-record work; Python coordinates; confluent-kafka
talks to Kafka; Spark scales the same functions out. The public names are listed in ``__all__``.
"""

from __future__ import annotations

from streamstate._core import __version__
from streamstate.errors import (
    CorruptCheckpointError,
    DeserializationError,
    InvalidStateStoreError,
    InvalidStateStorePartitionError,
    InvalidTimestampError,
    ProcessorStateError,
    StateStoreFailError,
    StateStoreMigratedError,
    StateStoreNotAvailableError,
    StateStoreRetryableError,
    StreamsError,
    StreamsNotStartedError,
    StreamsRebalancingError,
    TaskCorruptedError,
    TaskMigratedError,
    UnknownStateStoreError,
)

__all__ = [
    "CorruptCheckpointError",
    "DeserializationError",
    "InvalidStateStoreError",
    "InvalidStateStorePartitionError",
    "InvalidTimestampError",
    "ProcessorStateError",
    "StateStoreFailError",
    "StateStoreMigratedError",
    "StateStoreNotAvailableError",
    "StateStoreRetryableError",
    "StreamsError",
    "StreamsNotStartedError",
    "StreamsRebalancingError",
    "TaskCorruptedError",
    "TaskMigratedError",
    "UnknownStateStoreError",
    "__version__",
]
