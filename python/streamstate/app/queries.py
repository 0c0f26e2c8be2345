"""Interactive queries: read-only store facades that say *why* a store is unavailable (KIP-216).

Every call on a facade checks, at that moment and in this order:

=====================================================  ==========================================
condition                                              error
=====================================================  ==========================================
no store of that name in the topology (any state)      ``UnknownStateStoreError`` (fatal)
client ``CREATED``                                     ``StreamsNotStartedError`` (retry later)
client ``PENDING_SHUTDOWN``, ``NOT_RUNNING``,          ``StateStoreNotAvailableError`` (fatal)
``PENDING_ERROR`` or ``ERROR``
the store (that partition, or any local partition      ``StreamsRebalancingError`` (retry later)
of it) is restoring, or waiting for its directory
no local store answers while the client is             ``StreamsRebalancingError`` (retry later:
``REBALANCING`` or ``RESTORING``                       the store may be moving here)
``partition=p`` and no local active task has ``p``     ``InvalidStateStorePartitionError``
no local active task has the store, or it was closed   ``StateStoreMigratedError`` (rediscover)
=====================================================  ==========================================

Under ``group.protocol="streams"`` a ``get`` over every local partition of a key whose partition
is active on another instance raises ``InvalidStateStorePartitionError`` naming the partition
and that instance, rather than returning ``None`` as if the key were absent
(``docs/rebalancing.md``).

"Restoring" is one flag per task, the one the client's state is derived from: set when the stream
thread creates the task, before the task, its store or the client's state can be seen, and
cleared only when the state updater hands it back restored (Kafka's rule: a task is RUNNING
once its stores are restored). So a client ``RUNNING`` with no active task restoring answers
from every local task's store; a query never reads a store the status calls restored but is
still empty (``tests/integration/test_task_readiness.py``).

So during a rebalance, the stores of running tasks and global stores keep answering, as Kafka
Streams answers them from a stream thread that is ``RUNNING`` while its other tasks restore on
the state updater (KIP-869); only what is restoring or moving raises. One deliberate difference:
a query over every local partition (no ``partition``) raises ``StreamsRebalancingError`` while
any local partition of that store restores, where Kafka would silently answer from the running
ones only (a ``get`` would then return ``None`` for a key whose partition is restoring). A global
store answers from the end of its bootstrap on, also while KIP-406 rebuilds it (the old contents
are served until the rebuilt store replaces them).

Kafka defines these classes but throws only three of them (``StreamsNotStartedException``,
``UnknownStateStoreException``, ``InvalidStateStorePartitionException``), falling back to
``IllegalStateException`` or the base class elsewhere; here each row raises its own class, as
the KIP intended. A facade obtained earlier keeps working across rebalances: it looks the stores
up on every call, so after its store moved away it raises ``StateStoreMigratedError``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from streamstate.app.state import State
from streamstate.errors import (
    InvalidStateStorePartitionError,
    ProcessorStateError,
    StateStoreMigratedError,
    StateStoreNotAvailableError,
    StreamsNotStartedError,
    StreamsRebalancingError,
    UnknownStateStoreError,
)

__all__ = ["ReadOnlyKeyValueStore"]

# (name, partition) -> the matching open stores right now.
Lookup = Callable[[str, int | None], list[Any]]
# (name, partition) -> whether that store (partition, or any local partition) is restoring.
Restoring = Callable[[str, int | None], bool]
# (name, key) -> None when the key's partition is here (or unknown), else (its partition,
# where it lives): group.protocol=streams only (app/key_metadata.py).
Locate = Callable[[str, bytes], "tuple[int, str] | None"]


class ReadOnlyKeyValueStore:
    """A read-only view of the local stores named ``name`` (every local partition, or just
    ``partition``): ``get``, ``range``, ``all``, ``approximate_num_entries``."""

    def __init__(
        self,
        name: str,
        partition: int | None,
        *,
        state: Callable[[], State],
        known: Callable[[str], bool],
        is_global: Callable[[str], bool],
        lookup: Lookup,
        restoring: Restoring | None = None,
        locate: Locate | None = None,
    ) -> None:
        """Made by :meth:`StreamsApp.store <streamstate.StreamsApp.store>`."""
        self.name = name
        self.partition = partition
        self._state = state
        self._known = known
        self._is_global = is_global
        self._lookup = lookup
        self._restoring = restoring
        self._locate = locate

    def __repr__(self) -> str:
        """``ReadOnlyKeyValueStore('name', partition=p)``."""
        return f"ReadOnlyKeyValueStore({self.name!r}, partition={self.partition})"

    def _stores(self) -> list[Any]:
        if not self._known(self.name):
            raise UnknownStateStoreError(
                f"Cannot get state store {self.name} because no such store is registered in "
                "the topology.",
                store_name=self.name,
            )
        state = self._state()
        if state is State.CREATED:
            raise StreamsNotStartedError(
                "KafkaStreams has not been started, you can retry after calling start()",
                store_name=self.name,
            )
        if state not in (State.RUNNING, State.REBALANCING, State.RESTORING):
            raise StateStoreNotAvailableError(
                f"the client is {state.value}: its stores are closed and cannot be queried",
                store_name=self.name,
            )
        where = "" if self.partition is None else f" partition {self.partition}"
        if self._restoring is not None and self._restoring(self.name, self.partition):
            raise StreamsRebalancingError(
                f"store {self.name}{where} is being restored; retry shortly",
                store_name=self.name,
            )
        stores = self._lookup(self.name, self.partition)
        if not stores:
            if state is not State.RUNNING:
                raise StreamsRebalancingError(
                    f"the client is {state.value} and store {self.name}{where} is not here "
                    "(it may be moving here); retry shortly",
                    store_name=self.name,
                )
            if self.partition is not None and not self._is_global(self.name):
                raise InvalidStateStorePartitionError(
                    f"The specified partition {self.partition} for store {self.name} does not "
                    "exist on this instance.",
                    partition=self.partition,
                    store_name=self.name,
                )
            raise StateStoreMigratedError(
                f"The state store, {self.name}, may have migrated to another instance.",
                store_name=self.name,
            )
        return stores

    def _call(self, op: Callable[[list[Any]], Any]) -> Any:
        stores = self._stores()
        try:
            return op(stores)
        except ProcessorStateError as exc:
            # Closed under us (a rebalance took the task away between lookup and read).
            raise StateStoreMigratedError(
                f"The state store, {self.name}, may have migrated to another instance ({exc})",
                store_name=self.name,
            ) from exc

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` in whichever local partition holds it, or ``None``."""

        def find(stores: list[Any]) -> bytes | None:
            for store in stores:
                value = store.get(key)
                if value is not None:
                    return bytes(value)
            return None

        result: bytes | None = self._call(find)
        if result is None and self.partition is None and self._locate is not None:
            # Under the streams protocol the key's partition is known: a key held by another
            # instance is not reported absent (Kafka would return null).
            elsewhere = self._locate(self.name, key)
            if elsewhere is not None:
                partition, host = elsewhere
                raise InvalidStateStorePartitionError(
                    f"the key's partition {partition} of store {self.name} is not hosted on "
                    f"this instance (active on {host}): ask there (query_metadata_for_key)",
                    partition=partition,
                    store_name=self.name,
                )
        return result

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key`` over every local partition, ascending,
        lazily (a store closed under the iteration raises ``StateStoreMigratedError``)."""
        stores = self._stores()
        return self._lazy(heapq.merge(*(self._guard(s.range(from_key, to_key)) for s in stores)))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry over every local partition, ascending by key, lazily."""
        stores = self._stores()
        return self._lazy(heapq.merge(*(self._guard(s.all()) for s in stores)))

    def _guard(self, iterator: Any) -> Iterator[tuple[bytes, bytes]]:
        try:
            yield from iterator
        except ProcessorStateError as exc:
            raise StateStoreMigratedError(
                f"The state store, {self.name}, may have migrated to another instance ({exc})",
                store_name=self.name,
            ) from exc

    @staticmethod
    def _lazy(iterator: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        yield from iterator

    def approximate_num_entries(self) -> int:
        """The sum of the local partitions' approximate entry counts."""
        total: int = self._call(lambda stores: sum(s.approximate_num_entries() for s in stores))
        return total
