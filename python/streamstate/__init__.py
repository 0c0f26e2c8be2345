"""streamstate: Kafka Streams' state and record machinery for Python.

A Rust core (``streamstate._core``) does the per-record work; Python coordinates; confluent-kafka
talks to Kafka; Spark scales the same functions out. The public names are listed in ``__all__``.
"""

from __future__ import annotations

from streamstate._core import __version__
from streamstate.app import (
    ProcessorContext,
    State,
    StreamsApp,
    StreamThreadExceptionResponse,
    Topology,
)
from streamstate.errors import (
    CorruptCheckpointError,
    DeserializationError,
    InvalidStateStoreError,
    InvalidStateStorePartitionError,
    InvalidTimestampError,
    NoSuchElementError,
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
    TopologyError,
    UnknownStateStoreError,
)
from streamstate.processor import (
    Cancellable,
    Processor,
    ProcessorGraphContext,
    PunctuationType,
    Record,
    RecordMetadata,
    TaskId,
    TopologyDescription,
)
from streamstate.queue import PartitionGroup, RecordQueue
from streamstate.records import (
    NOT_KNOWN,
    ConsumerRecord,
    StampedRecord,
    TimestampType,
    TopicPartition,
)
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import (
    InMemoryKeyValueStore,
    PersistentKeyValueStore,
    RestoredBatch,
    process_next,
)

__all__ = [
    "NOT_KNOWN",
    "Cancellable",
    "ConsumerRecord",
    "CorruptCheckpointError",
    "DeserializationError",
    "InMemoryKeyValueStore",
    "InvalidStateStoreError",
    "InvalidStateStorePartitionError",
    "InvalidTimestampError",
    "NoSuchElementError",
    "OffsetCheckpoint",
    "PartitionGroup",
    "PersistentKeyValueStore",
    "Processor",
    "ProcessorContext",
    "ProcessorGraphContext",
    "ProcessorStateError",
    "PunctuationType",
    "Record",
    "RecordMetadata",
    "RecordQueue",
    "RestoredBatch",
    "StampedRecord",
    "State",
    "StateRestoreListener",
    "StateRestorer",
    "StateStoreFailError",
    "StateStoreMigratedError",
    "StateStoreNotAvailableError",
    "StateStoreRetryableError",
    "StoreChangelogReader",
    "StreamThreadExceptionResponse",
    "StreamsApp",
    "StreamsError",
    "StreamsNotStartedError",
    "StreamsRebalancingError",
    "TaskCorruptedError",
    "TaskId",
    "TaskMigratedError",
    "TimestampType",
    "TopicPartition",
    "Topology",
    "TopologyDescription",
    "TopologyError",
    "UnknownStateStoreError",
    "__version__",
    "process_next",
]
