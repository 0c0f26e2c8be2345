"""``StreamsApp``: the Kafka Streams client — threads, global stores, state, queries."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from streamstate.app.config import StreamsConfig
from streamstate.app.global_thread import GlobalStreamThread
from streamstate.app.queries import ReadOnlyKeyValueStore
from streamstate.app.state import State, StateListener, StateMachine
from streamstate.app.stream_thread import StreamThread, ThreadState
from streamstate.app.topology import Topology
from streamstate.clients.config import admin_config
from streamstate.errors import StreamsError
from streamstate.state.restorer import StateRestoreListener

__all__ = ["StreamsApp"]

_log = logging.getLogger("streamstate.app")
_WORKING = frozenset({State.REBALANCING, State.RUNNING, State.RESTORING})


class StreamsApp:
    """A Kafka Streams client running ``topology`` with ``config`` (Kafka Streams' names).

    ``start()`` returns at once; the client goes ``REBALANCING`` (joining the group),
    ``RESTORING`` (global stores bootstrapping or task stores restoring) and ``RUNNING``.
    ``close()`` commits, closes every store and leaves the group (a member with
    ``group.instance.id`` stays until its session times out). ``store(name, partition=None)``
    returns a query facade (``streamstate.app.queries``). An error in any thread moves the client
    to ``PENDING_ERROR`` then ``ERROR``, closing the other threads.
    """

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any],
        *,
        restore_listener: StateRestoreListener | None = None,
    ) -> None:
        """Validates the topology and config; nothing connects before :meth:`start`."""
        self.config = StreamsConfig.from_mapping(config)
        topology.node()
        sources = topology.source_topics
        if len(sources) > 1 and "partition.assignment.strategy" not in config:
            # cooperative-sticky does not keep partition p of every source topic together.
            self.config = dataclasses.replace(self.config, partition_assignment_strategy="range")
        elif len(sources) > 1 and self.config.partition_assignment_strategy != "range":
            raise ValueError(
                "a topology with several (co-partitioned) source topics needs "
                "partition.assignment.strategy=range"
            )
        self.topology = topology
        self._restore_listener = restore_listener
        self._machine = StateMachine(self.config.client_id)
        self._threads: list[StreamThread] = []
        self._global: GlobalStreamThread | None = None
        self._lock = threading.RLock()
        self.fatal_error: BaseException | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        """The client's :class:`~streamstate.app.state.State`."""
        return self._machine.state

    def set_state_listener(self, listener: StateListener | None) -> None:
        """Calls ``listener(new, old)`` on every state transition (from the thread making it)."""
        self._machine.set_listener(listener)

    def set_global_state_restore_listener(self, listener: StateRestoreListener | None) -> None:
        """Receives the restoration progress of every store, task and global (Kafka's
        ``setGlobalStateRestoreListener``); only before :meth:`start`."""
        if self._machine.state is not State.CREATED:
            raise StreamsError("the restore listener can only be set before start()")
        self._restore_listener = listener

    def wait_for_state(self, state: State, timeout: float | None = None) -> bool:
        """Blocks until the client is in ``state``; False on timeout."""
        return self._machine.wait_for(frozenset({state}), timeout)

    def _update_state(self) -> None:
        with self._lock:
            if self._machine.state not in _WORKING:
                return
            states = [t.state for t in self._threads]
            # A global store being built or rebuilt makes the client RESTORING whatever the
            # group does (its stream threads wait for the bootstrap, or keep running).
            if self._global is not None and self._global.restoring:
                new = State.RESTORING
            elif any(s in (ThreadState.CREATED, ThreadState.REBALANCING) for s in states):
                new = State.REBALANCING
            elif any(s is ThreadState.RESTORING for s in states):
                new = State.RESTORING
            else:
                new = State.RUNNING
            self._machine.transition(new, only_from=_WORKING)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Creates missing changelog topics, starts the global thread and the stream threads."""
        if self._machine.state is not State.CREATED:
            raise StreamsError(f"the client can only start once; it is {self.state.value}")
        self._prepare_topics()
        self.config.app_dir().mkdir(parents=True, exist_ok=True)
        global_stores: dict[str, Any] = {}
        self._machine.transition(State.REBALANCING)
        if self.topology.global_stores:
            self._global = GlobalStreamThread(
                list(self.topology.global_stores.values()),
                self.config,
                on_restoring_change=self._update_state,
                on_fatal=lambda exc: self._fail(None, exc),
                restore_listener=self._restore_listener,
            )
            global_stores = dict(self._global.stores)
        self._threads = [
            StreamThread(
                i,
                self.topology,
                self.config,
                global_stores,
                on_state_change=self._update_state,
                on_fatal=self._fail,
                restore_listener=self._restore_listener,
                wait_for=self._global.bootstrapped if self._global is not None else None,
            )
            for i in range(self.config.num_stream_threads)
        ]
        if self._global is not None:
            self._global.start()
        for thread in self._threads:
            thread.start()

    def _prepare_topics(self) -> None:
        admin = AdminClient(admin_config(self.config.bootstrap_servers))
        metadata = admin.list_topics(timeout=30)
        partitions = 0
        for topic in self.topology.source_topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                raise StreamsError(f"source topic {topic!r} does not exist", topic=topic)
            partitions = max(partitions, len(info.partitions))
        wanted = [
            NewTopic(
                spec.changelog_topic(self.config.application_id),
                num_partitions=partitions,
                replication_factor=1 if len(metadata.brokers) == 1 else -1,
                config={"cleanup.policy": "compact"},
            )
            for spec in self.topology.stores.values()
            if spec.logged
            and spec.changelog_topic(self.config.application_id) not in metadata.topics
        ]
        if not wanted:
            return
        for topic, future in admin.create_topics(wanted, operation_timeout=30).items():
            try:
                future.result(timeout=30)
                _log.info("Created changelog topic %r with %d partitions", topic, partitions)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise StreamsError(
                        f"could not create changelog topic {topic!r}: {exc}", topic=topic
                    ) from exc

    def _fail(self, thread: StreamThread | None, exc: BaseException) -> None:
        with self._lock:
            if self.fatal_error is None:
                self.fatal_error = exc
            if not self._machine.transition(State.PENDING_ERROR, only_from=_WORKING):
                return
        for other in self._threads:
            other.shutdown()
        if self._global is not None:
            self._global.shutdown()

        def finish() -> None:
            self._join(None)
            self._machine.transition(State.ERROR, only_from=frozenset({State.PENDING_ERROR}))

        threading.Thread(target=finish, name="streamstate-close-to-error", daemon=True).start()

    def _join(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        current = threading.current_thread()
        for thread in [*self._threads, *([self._global] if self._global else [])]:
            if thread is current or not thread.is_alive():
                continue
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
            if thread.is_alive():
                return False
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Commits, closes every store and leaves the group; returns False if the threads did
        not stop within ``timeout`` seconds (they keep stopping in the background)."""
        state = self.state
        if state is State.CREATED:
            self._machine.transition(State.PENDING_SHUTDOWN)
            self._machine.transition(State.NOT_RUNNING)
            return True
        if state in (State.PENDING_ERROR, State.ERROR):
            _log.info("stream-client [%s] is in %s; closing", self.config.client_id, state.value)
            return self._join(timeout)
        if state is State.NOT_RUNNING:
            return True
        self._machine.transition(State.PENDING_SHUTDOWN, only_from=_WORKING)
        for thread in self._threads:
            thread.shutdown()
        if self._global is not None:
            self._global.shutdown()
        done = self._join(timeout)
        if done:
            self._machine.transition(
                State.NOT_RUNNING, only_from=frozenset({State.PENDING_SHUTDOWN})
            )
        return done

    def __enter__(self) -> StreamsApp:
        """Starts the client."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Closes the client."""
        self.close()

    # -- interactive queries ------------------------------------------------------------------

    def store(self, name: str, partition: int | None = None) -> ReadOnlyKeyValueStore:
        """A read-only facade over the local stores ``name`` (``partition``: just that one);
        every call checks availability then (see ``streamstate.app.queries``)."""
        return ReadOnlyKeyValueStore(
            name,
            partition,
            state=lambda: self.state,
            known=lambda n: n in self.topology.stores or n in self.topology.global_stores,
            is_global=lambda n: n in self.topology.global_stores,
            lookup=self._lookup,
        )

    def _lookup(self, name: str, partition: int | None) -> list[Any]:
        if name in self.topology.global_stores:
            store = self._global.stores.get(name) if self._global is not None else None
            return [store] if store is not None and store.is_open() else []
        found = []
        for thread in self._threads:
            for task_id, task in sorted(thread.active_tasks().items()):
                if task.restoring or (partition is not None and task_id != partition):
                    continue
                store = task.stores.get(name)
                if store is not None and store.is_open():
                    found.append(store)
        return found
