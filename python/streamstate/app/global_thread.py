"""``GlobalStreamThread``: global stores that rebuild themselves on an invalid offset (KIP-406).

Each global store holds every partition of its topic, in ``state.dir/application.id/global/``
with one ``.checkpoint`` for all. The thread first *bootstraps* every store (restores it to the
topic's end with a :class:`~streamstate.StoreChangelogReader` over a restore consumer of its own,
:func:`~streamstate.clients.restore_consumer.open_restore_consumer`: by default the changelog
fetch in Rust, its partitions in parallel) before the client may reach ``RUNNING``, then keeps
them up to date from where the bootstrap ended, applying what it reads in Rust batches.

KIP-406 (never implemented by Kafka, whose global thread wipes the store and dies): when the
thread's position falls out of a partition's log (retention or ``delete_records`` removed
records it had not read yet), it logs a WARNING naming the topic and partition, puts the client
in ``RESTORING``, rebuilds the store from the earliest offset of every partition into a fresh
store, swaps that in atomically (:class:`~streamstate.app.global_store.GlobalStoreHandle`), and
returns the client to ``RUNNING``; no restart and no exception reach the user. Meanwhile stream
threads and queries keep reading the old contents: a reader sees the whole old store or the
whole new one, never a half-built one. During bootstrap (no reader yet) the store is wiped and
restored in place. Since one store holds every partition of its topic, an invalid offset in one
partition rebuilds the whole store.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException

from streamstate.app.config import StreamsConfig
from streamstate.app.global_store import GlobalStoreHandle
from streamstate.app.topology import GlobalStoreSpec
from streamstate.clients.config import global_consumer_config
from streamstate.clients.poll import split_poll
from streamstate.clients.restore_consumer import RestoreConsumer, open_restore_consumer
from streamstate.errors import CorruptCheckpointError, StreamsError
from streamstate.records import TopicPartition
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.checkpoint import OffsetCheckpoint
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import PersistentKeyValueStore, holds_data, process_next, wipe_store

__all__ = ["GlobalStreamThread"]

_log = logging.getLogger("streamstate.app")
_NO_END = (1 << 63) - 1


class GlobalStreamThread(threading.Thread):
    """Bootstraps and maintains the global stores; see the module doc."""

    def __init__(
        self,
        specs: list[GlobalStoreSpec],
        config: StreamsConfig,
        *,
        on_restoring_change: Callable[[], None],
        on_fatal: Callable[[BaseException], None],
        restore_listener: StateRestoreListener | None = None,
    ) -> None:
        """Opens the stores; nothing is read before :meth:`start`."""
        super().__init__(name=f"{config.client_id}-GlobalStreamThread", daemon=True)
        self._config = config
        self._specs = {s.name: s for s in specs}
        self._on_restoring_change = on_restoring_change
        self._on_fatal = on_fatal
        self._listener = restore_listener
        self._stop_requested = threading.Event()
        self._paused = threading.Event()
        self.directory = config.app_dir() / "global"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.stores: dict[str, GlobalStoreHandle] = {
            name: GlobalStoreHandle(name, self.directory) for name in self._specs
        }
        self._checkpoint = OffsetCheckpoint(self.directory / ".checkpoint")
        self._offsets: dict[TopicPartition, int] = {}
        self._partitions: dict[str, list[TopicPartition]] = {}
        self._restoring = True
        self.bootstrapped = threading.Event()
        self._consumer = Consumer(
            global_consumer_config(
                config.bootstrap_servers,
                client_id=f"{self.name}-consumer",
                eos=config.exactly_once,
                overrides=config.overrides,
            )
        )

    @property
    def restoring(self) -> bool:
        """True while any global store is bootstrapping or being rebuilt."""
        return self._restoring

    def _set_restoring(self, restoring: bool) -> None:
        if self._restoring is not restoring:
            self._restoring = restoring
            self._on_restoring_change()

    def shutdown(self) -> None:
        """Asks the thread to checkpoint, close the stores and stop."""
        self._stop_requested.set()

    # A test hook: stop fetching (the consumer's position stays where it is) until resumed.
    def _pause_fetching(self) -> None:
        self._paused.set()

    def _resume_fetching(self) -> None:
        self._paused.clear()

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        """Bootstraps, then keeps the stores up to date until :meth:`shutdown`."""
        try:
            self._discover_partitions()
            self._bootstrap_stores(self._read_checkpoint())
            self.bootstrapped.set()
            last_checkpoint = time.monotonic()
            paused = False
            while not self._stop_requested.is_set():
                if self._paused.is_set() != paused:
                    paused = self._paused.is_set()
                    assigned = self._consumer.assignment()
                    (self._consumer.pause if paused else self._consumer.resume)(assigned)
                self._poll_once()
                if (time.monotonic() - last_checkpoint) * 1000 >= self._config.commit_interval_ms:
                    self._write_checkpoint()
                    last_checkpoint = time.monotonic()
            self._write_checkpoint()
        except BaseException as exc:
            _log.error("global thread failed: %s", exc)
            self._on_fatal(exc)
        finally:
            self.bootstrapped.set()
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError):
                pass
            for store in self.stores.values():
                store.close()

    def _discover_partitions(self) -> None:
        for name, spec in self._specs.items():
            metadata = self._consumer.list_topics(spec.topic, timeout=30)
            topic = metadata.topics.get(spec.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise StreamsError(
                    f"there are no partitions available for topic {spec.topic!r} when "
                    f"initializing global store {name!r}",
                    topic=spec.topic,
                    store_name=name,
                )
            self._partitions[name] = [
                TopicPartition(spec.topic, p) for p in sorted(topic.partitions)
            ]

    def _read_checkpoint(self) -> dict[TopicPartition, int]:
        try:
            return self._checkpoint.read()
        except CorruptCheckpointError as exc:
            _log.warning("%s; rebuilding every global store from the beginning", exc)
            for handle in self.stores.values():
                wipe_store(handle.current)
            self._checkpoint.delete()
            return {}

    def _bootstrap_stores(
        self,
        checkpoint: dict[TopicPartition, int],
        rebuilt: dict[str, PersistentKeyValueStore] | None = None,
    ) -> None:
        """Restores every store to its topic's end (the client is RESTORING meanwhile), then
        assigns the following consumer where the restoration ended; the stores in ``rebuilt``
        (fresh ones, by name) are restored instead of the current ones and swapped in at the
        end, before the checkpoint names their offsets."""
        rebuilt = rebuilt or {}
        self._set_restoring(True)
        self._consumer.unassign()
        # Bootstrap and rebuild read with a restore consumer of their own (the Rust fetch by
        # default), which the following consumer's consume() loop could not be.
        restore_consumer = open_restore_consumer(
            global_consumer_config(
                self._config.bootstrap_servers,
                client_id=f"{self.name}-restore-consumer",
                eos=self._config.exactly_once,
                overrides=self._config.overrides,
            )
        )
        try:
            positions = self._restore_stores(restore_consumer, checkpoint, rebuilt)
        finally:
            restore_consumer.close()
        if positions is None:
            return
        self._write_checkpoint()
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, o) for tp, o in positions])
        self._set_restoring(False)
        _log.info("Global stores %s are bootstrapped", sorted(self.stores))

    def _restore_stores(
        self,
        restore_consumer: RestoreConsumer,
        checkpoint: dict[TopicPartition, int],
        rebuilt: dict[str, PersistentKeyValueStore],
    ) -> list[tuple[TopicPartition, int]] | None:
        """Restores every store (or its fresh replacement in ``rebuilt``, swapped in at the end)
        with ``restore_consumer``; returns each partition's position at the end (where to follow
        it from), or ``None`` when asked to stop meanwhile."""
        reader = StoreChangelogReader(
            restore_consumer, poll_ms=50, restore_listener=self._listener, max_poll_records=5000
        )
        restorers: dict[str, list[StateRestorer]] = {}
        wiped: set[str] = set()
        for name, partitions in self._partitions.items():
            store = rebuilt[name] if name in rebuilt else self.stores[name].current
            if not any(tp in checkpoint for tp in partitions) and holds_data(store):
                # Data without any checkpoint (a crash before the first one): only a rebuild
                # vouches for it. (A partition that never had records has no offset either.)
                wipe_store(store)
                checkpoint = {tp: o for tp, o in checkpoint.items() if tp not in partitions}
            for tp in partitions:
                restorer = StateRestorer(
                    tp, store, checkpoint.get(tp), before_wipe=functools.partial(wiped.add, name)
                )
                restorers.setdefault(name, []).append(restorer)
                reader.register(restorer)
        total = sum(len(r) for r in restorers.values())
        while len(reader.restore()) < total:
            if wiped:
                # The reader wiped a store for one partition: every partition of it restarts.
                for name in list(wiped):
                    for restorer in restorers[name]:
                        restorer.checkpoint = None
                        reader.register(restorer)
                wiped.clear()
            if self._stop_requested.is_set():
                for unfinished in rebuilt.values():
                    unfinished.close()  # its directory goes at the next start
                return None
        for name, store in rebuilt.items():
            self.stores[name].swap(store)
        self._offsets = dict(reader.restored_offsets())
        positions = []
        for partitions in self._partitions.values():
            for tp in partitions:
                # Every partition completed, at or past its end offset. Past it means the
                # consumer read records it did not apply (they came after the end offset): follow
                # from the end, so that none is lost.
                position, end = reader.position(tp), reader.end_offset(tp)
                assert position is not None and end is not None
                positions.append((tp, min(position, end)))
        return positions

    def _poll_once(self) -> None:
        messages = self._consumer.consume(5000, self._config.poll_ms / 1000.0)
        polled = split_poll(messages)
        polled.raise_if_fatal("global consumer")
        for event in polled.events:
            if event.key is not None:
                _log.debug("global consumer reported %s", event.error.str())
        for (topic, partition), run in polled.runs.items():
            name = self._store_of(topic)
            done = process_next(self.stores[name].current, run, _NO_END)
            if done.last_restored_offset >= 0:
                self._offsets[TopicPartition(topic, partition)] = done.last_restored_offset
        for (topic, partition), (offset, reason) in polled.invalid_offsets.items():
            self._rebuild(topic, partition, offset, reason)

    def _store_of(self, topic: str) -> str:
        return next(n for n, s in self._specs.items() if s.topic == topic)

    def _rebuild(self, topic: str, partition: int, offset: int, reason: str) -> None:
        name = self._store_of(topic)
        _log.warning(
            "Global store %r: offset %d of topic %r partition %d is out of range (%s): records "
            "it had not read were removed (retention or delete_records). Rebuilding the store "
            "from the earliest offsets into a fresh copy; readers see the old contents until it "
            "replaces them (KIP-406)",
            name,
            offset,
            topic,
            partition,
            reason,
        )
        self._set_restoring(True)
        # The checkpoint forgets this topic first: a crash during the rebuild leaves the old
        # store without offsets, which the next start wipes and rebuilds.
        kept = {tp: o for tp, o in self._offsets.items() if tp.topic != topic}
        self._offsets = kept
        self._write_checkpoint()
        self._bootstrap_stores(kept, rebuilt={name: self.stores[name].fresh()})

    def _write_checkpoint(self) -> None:
        for store in self.stores.values():
            store.flush()
        if self._offsets:
            self._checkpoint.write(self._offsets)
        else:
            self._checkpoint.delete()
