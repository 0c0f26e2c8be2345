"""``StreamsApp``: the Kafka Streams client — threads, global stores, state, queries."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from streamstate.app.config import StreamsConfig
from streamstate.app.garbage_collection import FreezeHold
from streamstate.app.global_thread import GlobalStreamThread
from streamstate.app.handlers import StreamThreadExceptionResponse
from streamstate.app.internal_topics import (
    CHANGELOG_TOPIC_CONFIG,
    internal_topic_config,
    make_ready,
)
from streamstate.app.key_metadata import (
    KeyQueryMetadata,
    StreamsMetadata,
    check_streams_broker,
    key_query_metadata,
    new_streams_member,
    serialize_key,
    streams_metadata,
)
from streamstate.app.metrics import RestoreMetrics
from streamstate.app.queries import ReadOnlyKeyValueStore
from streamstate.app.query_server import QueryServer
from streamstate.app.standby_replicas import apply_standby_replicas
from streamstate.app.standby_task import standby_stores, unless_standby_here
from streamstate.app.state import State, StateListener, StateMachine
from streamstate.app.state_directory import (
    StateDirectoryCleaner,
    StateDirectoryLock,
    clean_app_dir,
    process_id,
)
from streamstate.app.stream_thread import StreamThread, ThreadState
from streamstate.app.streams_group import StreamsGroupMember
from streamstate.app.streams_membership import StreamsMembership
from streamstate.app.streams_transaction import check_group_metadata_format
from streamstate.app.task_assignment import subtopology_sources, subtopology_stores
from streamstate.app.thread_metadata import ThreadMetadata, thread_metadata
from streamstate.app.topology import Topology
from streamstate.clients.config import admin_config
from streamstate.clients.kafka_errors import error_text
from streamstate.clients.metadata import MetadataClient
from streamstate.clients.rdkafka_log import RDKAFKA_LOG
from streamstate.errors import StreamsError, StreamsNotStartedError, UnknownStateStoreError
from streamstate.processor.repartition import REPARTITION_TOPIC_CONFIG, plan_internal_topics
from streamstate.state.restorer import StateRestoreListener

__all__ = ["StreamsApp", "UncaughtExceptionHandler"]

UncaughtExceptionHandler = Callable[[BaseException], StreamThreadExceptionResponse]
"""``fn(exc) -> StreamThreadExceptionResponse``, told of each stream thread's death."""

_log = logging.getLogger("streamstate.app")
METADATA_TIMEOUT_S = 30.0
"""How long :meth:`StreamsApp.start` waits for the cluster's metadata before it fails."""
_WORKING = frozenset({State.REBALANCING, State.RUNNING, State.RESTORING})


class StreamsApp:
    """A Kafka Streams client running ``topology`` with ``config`` (Kafka Streams' names).

    ``start()`` returns at once; the client goes ``REBALANCING`` (joining the group),
    ``RESTORING`` (global stores bootstrapping or task stores restoring) and ``RUNNING``.
    ``close()`` commits, closes every store and leaves the group (a member with
    ``group.instance.id`` stays until its session times out). ``store(name, partition=None)``
    returns a query facade (``streamstate.app.queries``). A stream thread that dies goes to the
    uncaught exception handler (:meth:`set_uncaught_exception_handler`): by default, as in Kafka,
    the client moves to ``PENDING_ERROR`` then ``ERROR``, closing the other threads.
    ``metrics()`` reads Kafka Streams' main metrics.
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
        topology.validate()
        sources = topology.source_topics
        self._streams_protocol = self.config.group_protocol == "streams"
        if self._streams_protocol and self.config.exactly_once:
            # The transactions' offsets carry the member's identity in librdkafka's format:
            # a librdkafka that changed it is refused here (app/streams_transaction.py).
            check_group_metadata_format(self.config.application_id)
        # Under the streams protocol the broker assigns tasks: no consumer assignor is involved.
        several = len(sources) > 1 and not self._streams_protocol
        if several and "partition.assignment.strategy" not in config:
            # cooperative-sticky does not keep partition p of every source topic together.
            self.config = dataclasses.replace(self.config, partition_assignment_strategy="range")
        elif several and self.config.partition_assignment_strategy != "range":
            raise ValueError(
                "a topology with several (co-partitioned) source topics needs "
                "partition.assignment.strategy=range"
            )
        self.topology = topology
        # What the threads run: internal topics named for this application id.
        self._bound = topology.bind(
            self.config.application_id,
            self.config.default_key_serde,
            self.config.default_value_serde,
        )
        self._restore_metrics = RestoreMetrics(restore_listener)
        self._exception_handler: UncaughtExceptionHandler | None = None
        self._machine = StateMachine(self.config.client_id)
        self._threads: list[StreamThread] = []
        self._global: GlobalStreamThread | None = None
        self._gc_freeze = FreezeHold()
        self._lock = threading.RLock()
        self._global_stores: dict[str, Any] = {}
        self._directory_lock = StateDirectoryLock(self.config.app_dir())
        # Deletes task directories no task holds (state.cleanup.delay.ms) while the client runs.
        self._cleaner: StateDirectoryCleaner | None = None
        self.fatal_error: BaseException | None = None
        # The exception a SHUTDOWN_APPLICATION answered, while the group is told of it.
        self._shutdown_cause: BaseException | None = None
        self.threads_replaced = 0
        # Read from the state directory at start() (under its lock): what names the stream
        # threads' transactional producers under exactly-once.
        self.process_id: str | None = None
        # Partition counts of the topology's topics, read at start() (key metadata, and the
        # repartition topics' counts in a streams group's topology).
        self._partition_counts: dict[str, int] = {}
        self._members: list[StreamsGroupMember] = []
        # query.server.enabled: the HTTP endpoint at application.server, start() to close().
        self._query_server: QueryServer | None = None

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
        self._restore_metrics.inner = listener

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler | None) -> None:
        """Calls ``handler(exc)`` when a stream thread dies of ``exc``; it returns a
        :class:`~streamstate.StreamThreadExceptionResponse`: ``REPLACE_THREAD`` (a new thread
        takes the dead one's place and the client keeps running), ``SHUTDOWN_CLIENT`` (the
        default without a handler: the client closes to ``ERROR``) or ``SHUTDOWN_APPLICATION``
        (under ``group.protocol="streams"`` every client of the application closes to ``ERROR``
        once the group coordinator answers, ``docs/rebalancing.md``; under the classic protocol
        this client only, ``docs/runtime.md``). A handler that raises or
        returns anything else means ``SHUTDOWN_CLIENT``. Only before :meth:`start` (Kafka's
        ``setUncaughtExceptionHandler``). A failure of the global thread always closes the
        client to ``ERROR``, as in Kafka."""
        if self._machine.state is not State.CREATED:
            raise StreamsError("the uncaught exception handler can only be set before start()")
        self._exception_handler = handler

    def wait_for_state(self, state: State, timeout: float | None = None) -> bool:
        """Blocks until the client is in ``state``; False on timeout."""
        return self._machine.wait_for(frozenset({state}), timeout)

    def _update_state(self) -> None:
        with self._lock:
            if self._machine.state not in _WORKING:
                return
            # A dead thread being replaced does not hold the client back.
            states = [t.state for t in self._threads if t.state is not ThreadState.DEAD]
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
        """Creates missing internal topics (an existing one with the wrong partition count is a
        :class:`~streamstate.errors.TopologyError` naming it), starts the global thread, the
        stream threads and the state cleaner (``state.cleanup.delay.ms``)."""
        if self._machine.state is not State.CREATED:
            raise StreamsError(f"the client can only start once; it is {self.state.value}")
        # One client per state directory: a second one fails here, before touching a store.
        self._directory_lock.acquire()
        try:
            self.process_id = str(process_id(self.config.app_dir()))
            self._prepare_topics()
            if self._streams_protocol:
                # A broker without streams groups fails start() here, naming itself and the
                # setting, rather than each stream thread dying of it.
                check_streams_broker(self._streams_member(0))
                self._members.clear()
                # Before any member joins: the broker places standbys by the group's config.
                apply_standby_replicas(self.config)
            if self.config.query_server_enabled and self.config.application_server:
                # Last: a port taken fails start() naming it, with nothing else started.
                self._query_server = QueryServer(
                    self,
                    self.config.application_server,
                    streams_protocol=self._streams_protocol,
                    forward_timeout_ms=self.config.query_server_forward_timeout_ms,
                )
                self._query_server.start()
        except BaseException:
            self._directory_lock.release()
            raise
        global_stores: dict[str, Any] = {}
        self._machine.transition(State.REBALANCING)
        if self.topology.global_stores:
            self._global = GlobalStreamThread(
                list(self.topology.global_stores.values()),
                self.config,
                on_restoring_change=self._update_state,
                on_fatal=lambda exc: self._fail(None, exc),
                restore_listener=self._restore_metrics,
            )
            global_stores = dict(self._global.stores)
        self._global_stores = global_stores
        self._threads = [self._new_thread(i) for i in range(self.config.num_stream_threads)]
        self._cleaner = StateDirectoryCleaner(
            self.config.app_dir(),
            self.config.state_cleanup_delay_ms,
            name=f"{self.config.client_id}-CleanupThread",
        )
        self._cleaner.start()
        if self.config.python_gc_freeze:
            self._gc_freeze.acquire()
        if self._global is not None:
            self._global.start()
        for thread in self._threads:
            thread.start()

    def _new_thread(self, index: int) -> StreamThread:
        thread = StreamThread(
            index,
            self._bound,
            self.config,
            self._global_stores,
            on_state_change=self._update_state,
            on_fatal=self._on_thread_died,
            restore_listener=self._restore_metrics,
            wait_for=self._global.bootstrapped if self._global is not None else None,
            process_id=self.process_id,
            streams_member=self._streams_member(index) if self._streams_protocol else None,
        )
        if isinstance(thread.coordinator, StreamsMembership):
            thread.coordinator.on_shutdown_application = self._on_shutdown_application
        return thread

    def _streams_member(self, index: int) -> StreamsGroupMember:
        member = new_streams_member(
            self.config, self._bound, self._partition_counts, self.process_id or "", index
        )
        self._members.append(member)
        return member

    def transactional_ids(self) -> list[str]:
        """Under exactly-once, each stream thread's ``transactional.id``
        (``<application.id>-<process id>-<thread index from 1>``), in thread order; empty
        under at-least-once or before :meth:`start`."""
        return [t.transactional_id for t in self._threads if t.transactional_id is not None]

    def _on_thread_died(self, thread: StreamThread, exc: BaseException) -> None:
        """A stream thread's last act: ask the handler what to do (Kafka 2.8+)."""
        response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if self._exception_handler is not None:
            try:
                response = StreamThreadExceptionResponse(self._exception_handler(exc))
            except Exception:
                _log.exception(
                    "stream-client [%s] the uncaught exception handler failed; shutting down",
                    self.config.client_id,
                )
        if response is StreamThreadExceptionResponse.REPLACE_THREAD and self.state in _WORKING:
            _log.error(
                "stream-client [%s] replacing thread %s, which died of %s",
                self.config.client_id,
                thread.name,
                exc,
            )
            threading.Thread(
                target=self._replace_thread,
                args=(thread,),
                name=f"{thread.name}-replacer",
                daemon=True,
            ).start()
            return
        if response is StreamThreadExceptionResponse.SHUTDOWN_APPLICATION:
            if self._request_application_shutdown(thread, exc):
                return
            _log.error(
                "stream-client [%s] SHUTDOWN_APPLICATION: closing this client to ERROR; under "
                "group.protocol=classic the application's other clients are not told "
                "(docs/runtime.md)",
                self.config.client_id,
            )
        self._fail(thread, exc)

    def _request_application_shutdown(self, thread: StreamThread, exc: BaseException) -> bool:
        """``group.protocol=streams``: asks the coordinator, through every stream thread's
        member (the dying one's included: it waits for the answer before leaving), to shut the
        whole application down; the client closes when the answer comes
        (:meth:`_on_shutdown_application`), as Kafka's does. False under the classic
        protocol."""
        members = [
            t.coordinator
            for t in self._threads
            if isinstance(t.coordinator, StreamsMembership)
            and (t is thread or t.state is not ThreadState.DEAD)
        ]
        if not members or self.state not in _WORKING:
            return False
        with self._lock:
            if self._shutdown_cause is None:
                self._shutdown_cause = exc
        _log.error(
            "stream-client [%s] SHUTDOWN_APPLICATION: %s died of %r; asking every client of "
            "the application to shut down (ShutdownApplication in the streams group heartbeat)",
            self.config.client_id,
            thread.name,
            exc,
        )
        for member in members:
            member.request_shutdown()
        return True

    def _on_shutdown_application(self, detail: str | None) -> None:
        """A heartbeat answered with the ``SHUTDOWN_APPLICATION`` status (a member of the
        group asked; ``detail`` is the coordinator's), or this client asked and got no answer
        (``None``): the client closes to ``ERROR`` (``PENDING_ERROR`` first), as Kafka's
        ``closeToError``. ``fatal_error`` is the exception that asked, on the client that
        asked, and a :class:`~streamstate.errors.StreamsError` quoting ``detail`` elsewhere."""
        with self._lock:
            cause = self._shutdown_cause
        if cause is None:
            cause = StreamsError(
                f"application {self.config.application_id!r} shut down at the request of the "
                f"streams group coordinator (SHUTDOWN_APPLICATION): {detail}"
            )
        if detail is not None:
            _log.error(
                "stream-client [%s] SHUTDOWN_APPLICATION from the streams group coordinator "
                "(closing this client to ERROR): %s",
                self.config.client_id,
                detail,
            )
        self._fail(None, cause)

    def _replace_thread(self, dead: StreamThread) -> None:
        # Wait until the dead thread has closed its stores and left the group: its successor
        # may be given the same tasks and open the same store directories.
        dead.join()
        with self._lock:
            if self.state not in _WORKING or dead not in self._threads:
                return
            fresh = self._new_thread(self._threads.index(dead))
            self._threads[self._threads.index(dead)] = fresh
            self.threads_replaced += 1
        fresh.start()
        self._update_state()

    def _prepare_topics(self) -> None:
        servers = self.config.bootstrap_servers
        # librdkafka's lines go to logging, rate-limited: against a dead address it would
        # print a "Connection refused" line every few hundred ms until the timeout.
        # A refused login or TLS handshake comes as an error event, not as list_topics' error:
        # MetadataClient watches for it, so that it fails start() at once, as the
        # AuthenticationError (a StreamsError) naming the broker.
        client = MetadataClient(
            admin_config(
                servers,
                overrides=self.config.overrides,
                logger=RDKAFKA_LOG,
                **{"client.id": self.admin_client_id},
            )
        )
        admin = client.admin
        try:
            metadata = client.list_topics(METADATA_TIMEOUT_S)
        except KafkaException as exc:
            admin.poll(0)  # hands librdkafka's queued lines to logging
            raise StreamsError(
                f"no Kafka broker answered at bootstrap.servers={servers} within "
                f"{METADATA_TIMEOUT_S:.0f} s ({error_text(exc)}): check the address and that "
                "the broker runs"
            ) from exc
        partitions = 0
        topology = self._bound
        if topology.is_graph:
            user_topics = topology.graph().user_topics()
        else:
            user_topics = topology.source_topics
        for topic in user_topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                raise StreamsError(f"source topic {topic!r} does not exist", topic=topic)
            partitions = max(partitions, len(info.partitions))
        existing = {
            name: len(info.partitions)
            for name, info in metadata.topics.items()
            if info.error is None
        }
        self._partition_counts = dict(existing)
        # replication.factor -1 is the broker's default.replication.factor, as in Kafka 3.0+.
        replication = self.config.replication_factor
        topic_configs = self.config.topic_configs
        changelog_partitions = {name: partitions for name in topology.stores}
        wanted = []
        if topology.is_graph:
            internal = plan_internal_topics(topology.graph(), self.config.application_id, existing)
            changelog_partitions = internal.changelogs
            self._partition_counts.update(internal.repartitions)
            wanted += [
                NewTopic(
                    topic,
                    num_partitions=count,
                    replication_factor=replication,
                    config=internal_topic_config(REPARTITION_TOPIC_CONFIG, topic_configs, None),
                )
                for topic, count in internal.repartitions.items()
            ]
        wanted += [
            NewTopic(
                spec.changelog_topic(self.config.application_id),
                num_partitions=changelog_partitions[spec.name],
                replication_factor=replication,
                config=internal_topic_config(
                    CHANGELOG_TOPIC_CONFIG, topic_configs, spec.changelog_config
                ),
            )
            for spec in self.topology.stores.values()
            if spec.logged
        ]
        # Existing changelogs are checked too: one with another partition count than the
        # topology needs fails here, naming it (Kafka's InternalTopicManager.makeReady).
        make_ready(admin, wanted, existing)

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
            self._stop_cleaner()
            self._directory_lock.release()
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
        # The query endpoint goes first (its port free once close() returns): a query during
        # the shutdown would only be told the stores are closing.
        if self._query_server is not None:
            self._query_server.close()
        if state in (State.PENDING_ERROR, State.ERROR):
            _log.info("stream-client [%s] is in %s; closing", self.config.client_id, state.value)
            done = self._join(timeout)
            if done:
                self._gc_freeze.release()
            return done
        if state is State.NOT_RUNNING:
            return True
        self._machine.transition(State.PENDING_SHUTDOWN, only_from=_WORKING)
        for thread in self._threads:
            thread.shutdown()
        if self._global is not None:
            self._global.shutdown()
        done = self._join(timeout)
        if done:
            self._stop_cleaner()
            self._gc_freeze.release()
            self._directory_lock.release()
            self._machine.transition(
                State.NOT_RUNNING, only_from=frozenset({State.PENDING_SHUTDOWN})
            )
        return done

    def _stop_cleaner(self) -> None:
        # Joined before the directory lock goes: no deletion runs once another client may own
        # the directory. A run under way only deletes directories no task holds.
        if self._cleaner is not None:
            self._cleaner.shutdown()
            self._cleaner.join()

    def clean_up(self) -> None:
        """Deletes this application's local state: every task's and global store's directory
        under ``state.dir/application.id`` (Kafka's ``KafkaStreams.cleanUp()``); the next
        start restores every store from its changelog. Only before :meth:`start` or after the
        client stopped (``NOT_RUNNING``, ``ERROR``): otherwise a
        :class:`~streamstate.errors.StreamsError`. A client of another process running on the
        same directory makes it raise :class:`~streamstate.errors.ProcessorStateError`. The
        process id stays, as Kafka keeps it."""
        state = self.state
        if state not in (State.CREATED, State.NOT_RUNNING, State.ERROR):
            raise StreamsError(
                f"cannot clean up the local state while it is running ({state.value}): close() "
                "the client first"
            )
        clean_app_dir(self.config.app_dir())

    def __enter__(self) -> StreamsApp:
        """Starts the client."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Closes the client."""
        self.close()

    # -- interactive queries ------------------------------------------------------------------

    def store(self, name: str, partition: int | None = None, *, stale_stores: bool = False) -> Any:
        """A read-only facade over the local stores ``name`` (``partition``: just that one);
        every call checks availability then (see ``streamstate.app.queries``). A DSL store
        takes and returns typed keys and values: a key-value, window or session store by
        the store's kind (``streamstate.dsl.stores``). With ``stale_stores`` the stores of
        this instance's standby tasks answer too (Kafka's ``enableStaleStores``): as current
        as their changelog replay (``docs/rebalancing.md``)."""
        locate = self._locate_key if self._streams_protocol else None
        if stale_stores and locate is not None:
            locate = functools.partial(unless_standby_here, self._threads, locate)
        view = ReadOnlyKeyValueStore(
            name,
            partition,
            state=lambda: self.state,
            known=lambda n: n in self.topology.stores or n in self.topology.global_stores,
            is_global=lambda n: n in self.topology.global_stores,
            lookup=functools.partial(self._lookup, stale=stale_stores),
            restoring=self._store_restoring,
            locate=locate,
        )
        spec = self.topology.stores.get(name) or self.topology.global_stores.get(name)
        typed = getattr(spec, "typed", None)
        return typed(view) if typed is not None else view

    def _store_restoring(self, name: str, partition: int | None) -> bool:
        if name in self.topology.global_stores:
            return self._global is None or not self._global.bootstrapped.is_set()
        for thread in self._threads:
            if thread.locked if partition is None else thread.locked.holds_partition(partition):
                return True
            for task in thread.active_tasks().values():
                if task.restoring and partition in (None, task.partition) and name in task.stores:
                    return True
        return False

    def _lookup(self, name: str, partition: int | None, *, stale: bool = False) -> list[Any]:
        if name in self.topology.global_stores:
            store = self._global.stores.get(name) if self._global is not None else None
            return [store] if store is not None and store.is_open() else []
        found = []
        for thread in self._threads:
            for _, task in sorted(thread.active_tasks().items()):
                if task.restoring or (partition is not None and task.partition != partition):
                    continue
                store = task.stores.get(name)
                if store is not None and store.is_open():
                    found.append(store)
            if stale:
                found.extend(standby_stores(thread.standbys, name, partition))
        return found

    def _locate_key(self, store_name: str, key: bytes) -> tuple[int, str] | None:
        """None when ``key``'s partition of the store is active here or unknown; else the
        partition and where it is active."""
        if store_name not in self.topology.stores:
            return None
        meta = self.query_metadata_for_key(store_name, key)
        if meta.partition < 0:
            return None
        for thread in self._threads:
            for task in thread.active_tasks().values():
                if task.partition == meta.partition and store_name in task.stores:
                    return None
        host = meta.active_host
        return meta.partition, f"{host.host}:{host.port}" if host.port >= 0 else "no instance"

    @property
    def admin_client_id(self) -> str:
        """The ``client.id`` of the client's admin clients: ``<client.id>-admin``, as Kafka
        Streams names its shared admin client."""
        return f"{self.config.client_id}-admin"

    def metadata_for_local_threads(self) -> set[ThreadMetadata]:
        """What each local stream thread runs now (Kafka's ``metadataForLocalThreads``): a
        :class:`~streamstate.ThreadMetadata` per live thread, with its active and standby
        tasks as :class:`~streamstate.TaskMetadata` (committed and highest polled offsets,
        idling start) and its clients' ids (``app/thread_metadata.py``). Under either
        ``group.protocol``; safe to call from any thread while the app runs. In any state, as
        Kafka's (which checks none): empty before :meth:`start` (the threads are made there,
        where Kafka makes them in the constructor) and once every thread is ``DEAD``."""
        threads = list(self._threads)
        return {
            thread_metadata(t, self._bound, self.admin_client_id)
            for t in threads
            if t.state is not ThreadState.DEAD
        }

    def metadata_for_all_streams_clients(self) -> list[StreamsMetadata]:
        """Every instance of the application (Kafka's ``metadataForAllStreamsClients``): its
        ``application.server``, the stores of its tasks and their source partitions, as the
        broker last shared them (empty until it did); ``group.protocol="streams"`` only (else
        :class:`~streamstate.errors.StreamsError`, as :meth:`query_metadata_for_key`)."""
        self._need_streams_metadata("metadata_for_all_streams_clients")
        stores_by_topic: dict[str, tuple[str, ...]] = {}
        stores = subtopology_stores(self._bound)
        for sub, topics in subtopology_sources(self._bound).items():
            for topic in topics:
                stores_by_topic[topic] = stores.get(sub, ())
        members = list(self._members)
        return streams_metadata(members[-1].endpoints() if members else [], stores_by_topic)

    def streams_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances holding store ``store_name`` (Kafka's ``streamsMetadataForStore``);
        see :meth:`metadata_for_all_streams_clients`."""
        if store_name not in self.topology.stores:
            raise UnknownStateStoreError(f"no store named {store_name!r} in the topology")
        return [
            m for m in self.metadata_for_all_streams_clients() if store_name in m.state_store_names
        ]

    def _need_streams_metadata(self, what: str) -> None:
        if self.state is State.CREATED:
            raise StreamsNotStartedError("the client is not started yet: call start() first")
        if not self._streams_protocol:
            raise StreamsError(
                f"{what} needs group.protocol=streams: under the classic protocol this client "
                "does not learn the other instances' endpoints"
            )

    def query_metadata_for_key(
        self, store_name: str, key: Any, key_serializer: Any = None
    ) -> KeyQueryMetadata:
        """Where ``key`` of store ``store_name`` lives (Kafka's ``queryMetadataForKey``): the
        instance (``application.server``) running the active task of the key's partition,
        those with standbys of it, and the partition. ``key_serializer`` (a ``Serde``, a
        serializer, or a callable) makes the key's bytes; without it the key must be bytes.
        Known under ``group.protocol="streams"`` only (the broker shares every member's
        endpoint); ``KeyQueryMetadata.NOT_AVAILABLE``-like (host ``unavailable``) until the
        first heartbeat brought the endpoints. Raises ``UnknownStateStoreError`` for a store
        the topology lacks, ``StreamsNotStartedError`` before ``start()``, and
        :class:`~streamstate.errors.StreamsError` under the classic protocol."""
        if store_name not in self.topology.stores:
            raise UnknownStateStoreError(f"no store named {store_name!r} in the topology")
        self._need_streams_metadata("query_metadata_for_key")
        sources = next(
            (
                subtopology_sources(self._bound)[sub]
                for sub, stores in subtopology_stores(self._bound).items()
                if store_name in stores
            ),
            (),
        )
        raw = serialize_key(key, key_serializer, sources[0] if sources else store_name)
        members = list(self._members)
        endpoints = members[-1].endpoints() if members else []
        return key_query_metadata(endpoints, sources, self._partition_counts, raw)

    # -- metrics ------------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Kafka Streams' main metrics under their names, as a plain dict (``docs/api.md``):
        the client ``state`` and ``alive-stream-threads``; over the stream threads,
        ``process-total``, ``process-rate``, ``poll-records-avg``, ``commit-total``,
        ``commit-latency-avg``, ``commit-latency-max``, ``dropped-records-total``;
        ``records-lag`` as ``{topic: {partition: lag}}`` for the partitions of running tasks
        whose lag the consumer knows; ``restore-rate`` and ``restore-remaining-records-total``
        as ``{store: value}``. Rates and averages cover the last 30 s."""
        threads = list(self._threads)
        process_total = process_rate = 0.0
        poll_sum = poll_count = commit_sum = commit_count = commit_max = 0.0
        dropped = 0
        lags: dict[str, dict[int, int]] = {}
        for thread in threads:
            m = thread.metrics
            process_total += m.process.total
            process_rate += m.process.rate()
            total, count = m.poll_records.window()
            poll_sum, poll_count = poll_sum + total, poll_count + count
            total, count = m.commit_latency.window()
            commit_sum, commit_count = commit_sum + total, commit_count + count
            commit_max = max(commit_max, m.commit_latency.max)
            dropped += m.closed_tasks_dropped
            tasks = thread.active_tasks()
            for task in tasks.values():
                dropped += task.dropped_records()
            if thread.state is not ThreadState.DEAD:
                # What the thread last published: the consumer is the stream thread's alone.
                for tp, lag in thread.fetch.published_lags().items():
                    lags.setdefault(tp.topic, {})[tp.partition] = lag
        return {
            "state": self.state.value,
            "alive-stream-threads": sum(1 for t in threads if t.is_alive()),
            "process-total": int(process_total),
            "process-rate": process_rate,
            "poll-records-avg": poll_sum / poll_count if poll_count else 0.0,
            "commit-total": sum(t.metrics.commit_latency.count for t in threads),
            "commit-latency-avg": commit_sum / commit_count if commit_count else 0.0,
            "commit-latency-max": commit_max,
            "dropped-records-total": dropped,
            "records-lag": lags,
            "restore-rate": self._restore_metrics.restore_rate(),
            "restore-remaining-records-total": self._restore_metrics.remaining(),
        }
