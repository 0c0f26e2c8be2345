"""What a processor sees: its task's stores (changelogged), global stores, and ``send``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, Producer

from streamstate.clients.producer_proxy import UnsentMessage
from streamstate.errors import ProcessorStateError, StreamsError

if TYPE_CHECKING:
    from streamstate.state.stores import InMemoryKeyValueStore, PersistentKeyValueStore

__all__ = ["ChangeLoggingKeyValueStore", "ProcessorContext", "ReadOnlyStoreView", "call_processor"]

Store = Any  # InMemoryKeyValueStore | PersistentKeyValueStore


class ReadOnlyStoreView:
    """The reads of a store (``get``, ``range``, ``all``, ``approximate_num_entries``). As is,
    it is a global store as processors see it: the global thread alone writes those."""

    def __init__(self, store: Store) -> None:
        """Wraps ``store``."""
        self.inner = store

    @property
    def name(self) -> str:
        """The store's name."""
        return str(self.inner.name)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or ``None``."""
        value: bytes | None = self.inner.get(key)
        return value

    def range(self, from_key: bytes, to_key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``from_key <= key <= to_key``, ascending."""
        return iter(self.inner.range(from_key, to_key))

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry, ascending."""
        return iter(self.inner.all())

    def approximate_num_entries(self) -> int:
        """The number of entries, approximately."""
        return int(self.inner.approximate_num_entries())


class ChangeLoggingKeyValueStore(ReadOnlyStoreView):
    """A task store that sends every write to its changelog partition (Kafka Streams'
    ``ChangeLoggingKeyValueBytesStore``): the store is written first, then the change is
    produced to ``changelog`` partition ``partition``, key = store key, value = new value
    (``None`` for a delete). Reads go straight to the store."""

    def __init__(
        self,
        inner: InMemoryKeyValueStore | PersistentKeyValueStore,
        producer: Producer,
        changelog: str,
        partition: int,
        on_delivery: Callable[[Any, Any], None],
        *,
        value_timestamps: bool = False,
    ) -> None:
        """Wraps ``inner``; ``on_delivery`` receives each changelog record's delivery report.
        With ``value_timestamps`` (the DSL's stores) a value starts with the timestamp of the
        record that wrote it (8 bytes, big-endian), which the changelog record carries as its
        own timestamp, as Kafka's timestamped stores log it."""
        super().__init__(inner)
        self._value_timestamps = value_timestamps
        self._producer = producer
        self._changelog = changelog
        self._partition = partition
        self._on_delivery = on_delivery

    def _log(self, key: bytes, value: bytes | None) -> None:
        while True:
            try:
                if self._value_timestamps and value is not None and len(value) >= 8:
                    self._producer.produce(
                        self._changelog,
                        value,
                        key,
                        partition=self._partition,
                        on_delivery=self._on_delivery,
                        timestamp=max(int.from_bytes(value[:8], "big", signed=True), 0),
                    )
                    return
                self._producer.produce(
                    self._changelog,
                    value,
                    key,
                    partition=self._partition,
                    on_delivery=self._on_delivery,
                )
                return
            except BufferError:
                self._producer.poll(0.05)

    def put(self, key: bytes, value: bytes | None) -> None:
        """Writes ``key`` (``None`` deletes it) and logs the change."""
        self.inner.put(key, value)
        self._log(key, value)

    def put_all(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        """Writes every pair atomically, then logs each."""
        pairs = list(pairs)
        self.inner.put_all(pairs)
        for key, value in pairs:
            self._log(key, value)

    def put_all_stamped(
        self, pairs: list[tuple[bytes, bytes | None]], timestamps: list[int]
    ) -> None:
        """As :meth:`put_all` for values that are not ``None``, each changelog record
        stamped with ``timestamps[i]``: what :meth:`put_all` reads from the value's first 8
        bytes (floored at 0), given by a caller that has it (a windowed count's flush)."""
        if not self._value_timestamps:
            self.put_all(pairs)
            return
        self.inner.put_all(pairs)
        produce = self._producer.produce
        changelog, partition, on_delivery = self._changelog, self._partition, self._on_delivery
        for (key, value), timestamp in zip(pairs, timestamps, strict=True):
            while True:
                try:
                    produce(
                        changelog,
                        value,
                        key,
                        partition=partition,
                        on_delivery=on_delivery,
                        timestamp=timestamp,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)

    def drop_range(self, from_key: bytes, to_key: bytes) -> None:
        """Removes every key with ``from_key <= key < to_key`` without a changelog record: a
        window or session store dropping its expired segments (Kafka's segment drops are not
        logged either: a windowed changelog expires by its own ``retention.ms``)."""
        self.inner.drop_range(from_key, to_key)

    def delete(self, key: bytes) -> bytes | None:
        """Deletes ``key``, logs a tombstone, and returns the old value."""
        old: bytes | None = self.inner.delete(key)
        self._log(key, None)
        return old


class ProcessorContext:
    """Handed to the processor with each record: its task's stores, global stores, ``send``.

    ``task_id`` is the task's partition number; ``topic``, ``partition``, ``offset`` and
    ``timestamp`` describe the record being processed.
    """

    def __init__(
        self,
        task_id: int,
        stores: dict[str, Any],
        sinks: frozenset[str],
        producer: Producer,
        on_send: Callable[[Any, Any], None] | None = None,
    ) -> None:
        """Made by the task; ``stores`` maps the names the processor declared to stores;
        ``on_send`` receives each sink record's delivery report (and, as ``(exception,
        None-partition message)``, a record ``produce`` refused at once)."""
        self.task_id = task_id
        self._on_send = on_send
        self._stores = stores
        self._sinks = sinks
        self._producer = producer
        self.topic: str | None = None
        self.partition: int | None = None
        self.offset: int | None = None
        self.timestamp: int | None = None

    def store(self, name: str) -> Any:
        """The store ``name`` (declared in ``stores=`` of the processor)."""
        try:
            return self._stores[name]
        except KeyError:
            raise ProcessorStateError(
                f"processor has no access to store {name!r}: declare it in stores=[...] "
                f"(it declared {sorted(self._stores)})",
                store_name=name,
            ) from None

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> None:
        """Produces a record to sink ``topic`` (declared in ``sinks=``). The timestamp defaults
        to the input record's, as Kafka Streams' ``forward`` does; the partition to murmur2 of
        the key, as the Java producer (and so Kafka Streams) chooses it; ``headers`` are
        ``(key, value)`` pairs (none by default; pass ``record.headers`` to carry the input
        record's). A record the broker refuses goes to
        ``production.exception.handler``."""
        if topic not in self._sinks:
            raise StreamsError(
                f"processor may not send to topic {topic!r}: declare it in sinks=[...] "
                f"(it declared {sorted(self._sinks)})",
                topic=topic,
            )
        kwargs: dict[str, Any] = {}
        stamp = timestamp if timestamp is not None else self.timestamp
        if stamp is not None and stamp >= 0:
            kwargs["timestamp"] = stamp
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        if self._on_send is not None:
            kwargs["on_delivery"] = self._on_send
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)
            except KafkaException as exc:
                # Refused before it was queued (a record too large, say).
                if self._on_send is None:
                    raise
                self._on_send(exc, UnsentMessage(topic, partition))
                return


def call_processor(
    function: Callable[[Any, Any], None], ctx: ProcessorContext, record: Any
) -> None:
    """Hands ``record`` to the processor ``function`` with ``ctx`` describing it; anything but a
    ``StreamsError`` it raises becomes one naming the record. Spark's ``process`` runs its
    processors through here; the runtime's ``StreamTask`` hands such errors to its processing
    exception handler instead."""
    ctx.topic, ctx.partition = record.topic, record.partition
    ctx.offset, ctx.timestamp = record.offset, record.timestamp
    try:
        function(ctx, record)
    except StreamsError:
        raise
    except Exception as exc:
        raise StreamsError(
            f"the processor failed: {type(exc).__name__}: {exc}",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
        ) from exc
