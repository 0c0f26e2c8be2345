"""``ProcessorGraphContext``: what a processor of a graph reaches through (Kafka's
``api.ProcessorContext``): ``forward``, stores, punctuation, ``commit`` and where it runs.

Each processor node of each task has its own context, so ``forward`` knows its children.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamstate.errors import ProcessorStateError, StreamsError
from streamstate.processor.punctuation import Cancellable, PunctuationType
from streamstate.processor.record import Record, RecordMetadata

if TYPE_CHECKING:
    from streamstate.processor.graph import TaskId
    from streamstate.processor.processor_topology import ProcessorTopology

__all__ = ["ProcessorGraphContext"]

Forward = Callable[[Record], None]


class ProcessorGraphContext:
    """The context of one processor node in one task; see the module doc."""

    def __init__(
        self,
        name: str,
        topology: ProcessorTopology,
        children: dict[str, Forward],
        stores: dict[str, Any],
    ) -> None:
        """Made by the task's ``ProcessorTopology``."""
        self.node_name = name
        self._topology = topology
        self._children = children
        self._targets = tuple(children.values())
        self._stores = stores

    @property
    def application_id(self) -> str:
        """The app's ``application.id``."""
        return self._topology.application_id

    @property
    def task_id(self) -> TaskId:
        """The task: ``TaskId(subtopology, partition)``, printed ``0_1``."""
        return self._topology.task_id

    @property
    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record being processed; ``None`` in a
        punctuation (Kafka's ``Optional.empty()``)."""
        current = self._topology.current
        if current is None:
            return None
        return RecordMetadata(current.topic, current.partition, current.offset)

    @property
    def current_stream_time_ms(self) -> int:
        """The task's stream time: the highest timestamp processed so far (-1 before any)."""
        return self._topology.stream_time()

    @property
    def current_system_time_ms(self) -> int:
        """The wall-clock time, epoch ms."""
        return self._topology.clock()

    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Passes ``record`` to every child, or to the child ``child_name`` only. Records are
        immutable, so every child sees the same one; headers travel with it to sinks."""
        if type(record) is not Record:
            if not isinstance(record, Record):
                raise TypeError(
                    f"{self.node_name}: forward takes a Record, not {type(record).__name__}"
                )
        if child_name is None:
            for target in self._targets:
                target(record)
            return
        named = self._children.get(child_name)
        if named is None:
            raise StreamsError(
                f"processor {self.node_name!r} has no child {child_name!r} (its children: "
                f"{sorted(self._children)})"
            )
        named(record)

    def trusted_forward(self) -> Forward:
        """``forward`` to every child without its checks, for the library's own processors
        (which forward only ``Record`` objects): one Python call per record saved on their
        hot paths. The children are fixed when the context is made."""
        targets = self._targets
        if len(targets) == 1:
            return targets[0]

        def forward(record: Record) -> None:
            for target in targets:
                target(record)

        return forward

    def plain_sink(self, forward: Forward) -> Any:
        """The ``PlainSink`` whose ``write`` is ``forward`` (a sink without a partitioner, as
        ``ProcessorTopology.run_handlers`` hands it), else ``None``: for the library's own
        processors that write a batch to it (a windowed count's flush)."""
        return self._topology._plain_sinks.get(forward)

    def get_state_store(self, name: str) -> Any:
        """The store ``name``: a task store connected to this processor with
        ``add_store(name, ..., this processor)`` (reads and writes, logged when the store is),
        or a global store (reads only)."""
        store = self._stores.get(name)
        if store is None:
            raise ProcessorStateError(
                f"processor {self.node_name!r} has no access to store {name!r}: connect it "
                f"with add_store({name!r}, {self.node_name!r}) (it reaches {sorted(self._stores)})",
                store_name=name,
            )
        return store

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, callback: Callable[[int], None]
    ) -> Cancellable:
        """Calls ``callback(timestamp)`` every ``interval_ms`` of stream time or wall-clock
        time (``PunctuationType``); returns a handle whose ``cancel()`` stops it. See
        ``streamstate.processor.punctuation`` for Kafka's exact rules."""
        if not isinstance(punctuation_type, PunctuationType):
            raise TypeError(f"punctuation_type must be a PunctuationType, not {punctuation_type!r}")
        return self._topology.schedule(self.node_name, interval_ms, punctuation_type, callback)

    def record_dropped(self) -> None:
        """Counts a record this processor drops on purpose in the task's
        ``dropped-records-total`` (the DSL's aggregations count null keys and late records
        so); nothing is silently lost."""
        self._topology.record_dropped()

    def commit(self) -> None:
        """Asks for a commit as soon as the stream thread can (after this record); Kafka's
        ``commit()`` is a request too."""
        self._topology.commit_requested = True
