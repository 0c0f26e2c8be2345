"""Global stores inside Spark tasks: one in-memory copy per Python worker, caught up per task.

A ``StreamsApp`` keeps each global store up to date with a global thread. A Spark job has no
such thread, so each task of ``process`` brings the copy held by its Python worker up to the
topic's current end before it processes its micro-batch, with the runtime's own
``StoreChangelogReader`` (null keys skipped, ``None`` values delete, an out-of-range position
rebuilds the copy). Spark reuses its Python workers, so a copy is read from the beginning once
per worker and afterwards only the records added since the last task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from confluent_kafka import Consumer

from streamstate.changelog import StateRestorer, StoreChangelogReader, restore_consumer_config
from streamstate.clients.config import connection_settings
from streamstate.records import TopicPartition
from streamstate.stores import InMemoryKeyValueStore
from streamstate.topic_restore import topic_partitions

__all__ = ["GlobalStoreCopies"]


class _Copy:
    """One global store's copy and how far it has read each partition of its topic."""

    def __init__(self, name: str, topic: str) -> None:
        self.store = InMemoryKeyValueStore(name)
        self.topic = topic
        # Per partition, the offset of the last record applied (a StateRestorer checkpoint).
        self.applied: dict[int, int] = {}


class GlobalStoreCopies:
    """The global store copies of this Python worker for one Kafka cluster."""

    _by_cluster: ClassVar[dict[tuple[str, tuple[tuple[str, str], ...]], GlobalStoreCopies]] = {}

    def __init__(self, bootstrap_servers: str, settings: Mapping[str, Any] | None = None) -> None:
        """Copies read from ``bootstrap_servers``, reached with the connection settings
        (``security.protocol``, ``sasl.*``, ``ssl.*``) of ``settings``; use :meth:`for_servers`.
        """
        self._servers = bootstrap_servers
        self._connection = connection_settings(settings or {})
        self._consumer: Consumer | None = None
        self._copies: dict[tuple[str, str], _Copy] = {}

    @classmethod
    def for_servers(
        cls, bootstrap_servers: str, settings: Mapping[str, Any] | None = None
    ) -> GlobalStoreCopies:
        """This worker's copies for the cluster at ``bootstrap_servers`` as reached with
        ``settings``' connection settings (the app config's global consumer's: a secured
        cluster's listener needs them, and other credentials get copies of their own)."""
        connection = connection_settings(settings or {})
        key = (bootstrap_servers, tuple(sorted((k, str(v)) for k, v in connection.items())))
        copies = cls._by_cluster.get(key)
        if copies is None:
            copies = cls._by_cluster[key] = cls(bootstrap_servers, connection)
        return copies

    def caught_up(self, name: str, topic: str) -> InMemoryKeyValueStore:
        """Store ``name`` holding every partition of ``topic`` up to the end offsets read now."""
        copy = self._copies.get((name, topic))
        if copy is None:
            copy = self._copies[(name, topic)] = _Copy(name, topic)
        if self._consumer is None:
            self._consumer = Consumer(restore_consumer_config(self._servers, **self._connection))
        reader = StoreChangelogReader(self._consumer)
        restorers = {
            p: StateRestorer(TopicPartition(topic, p), copy.store, copy.applied.get(p))
            for p in topic_partitions(self._servers, topic, client_config=self._connection)
        }
        for restorer in restorers.values():
            reader.register(restorer)
        try:
            while len(reader.restore()) < len(restorers):
                pass
            for p, restorer in restorers.items():
                position = reader.position(restorer.partition)
                if position is not None and position > 0:
                    copy.applied[p] = position - 1
                elif restorer.checkpoint is None:
                    copy.applied.pop(p, None)
        finally:
            reader.clear()
        return copy.store
