"""``StreamThread``: one group member's poll loop, its tasks, their restoration and commits.

Each thread has its own consumer (a member of the ``application.id`` group), a restore consumer
with a :class:`~streamstate.StoreChangelogReader`, and an idempotent producer for sinks and
changelogs. The rebalance callbacks (run by librdkafka inside ``consume`` on this thread) create
tasks for assigned partitions and register their stores for restoration (the partitions stay
paused until the stores are restored), commit and close tasks whose partitions are revoked, and
close lost tasks without committing.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.config import StreamsConfig
from streamstate.app.coordinator import ConsumerCoordinator
from streamstate.app.task import StreamTask, decode_partition_time
from streamstate.app.topology import Topology
from streamstate.clients.config import (
    main_consumer_config,
    producer_config,
    thread_restore_consumer_config,
)
from streamstate.clients.poll import split_poll
from streamstate.errors import StreamsError
from streamstate.records import TopicPartition
from streamstate.state.changelog_reader import StoreChangelogReader
from streamstate.state.restorer import StateRestoreListener, StateRestorer

__all__ = ["StreamThread", "ThreadState"]

_log = logging.getLogger("streamstate.app")
_PROCESS_PER_TASK = 1_000
_POLL_RECORDS = 5_000


class ThreadState(enum.Enum):
    """A stream thread's state (Kafka's ``StreamThread.State``, plus ``RESTORING``)."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RESTORING = "RESTORING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"


class StreamThread(threading.Thread):
    """One member of the group; see the module doc."""

    def __init__(
        self,
        index: int,
        topology: Topology,
        config: StreamsConfig,
        global_stores: dict[str, Any],
        *,
        on_state_change: Callable[[], None],
        on_fatal: Callable[[StreamThread, BaseException], None],
        restore_listener: StateRestoreListener | None = None,
        wait_for: threading.Event | None = None,
    ) -> None:
        """Creates the clients; nothing is joined before :meth:`start`. With ``wait_for``, the
        thread joins the group only once that event is set (the global stores' bootstrap)."""
        name = f"{config.client_id}-StreamThread-{index + 1}"
        super().__init__(name=name, daemon=True)
        self._topology = topology
        self._config = config
        self._global_stores = global_stores
        self._on_state_change = on_state_change
        self._on_fatal = on_fatal
        self._stop_requested = threading.Event()
        self._wait_for = wait_for
        self._state = ThreadState.CREATED
        self._lock = threading.RLock()
        self.tasks: dict[int, StreamTask] = {}
        instance_id = None
        if config.group_instance_id:
            # One static member per thread, as Kafka Streams names them.
            suffix = f"-{index + 1}" if config.num_stream_threads > 1 else ""
            instance_id = f"{config.group_instance_id}{suffix}"
        servers, overrides = config.bootstrap_servers, config.overrides
        self.consumer = Consumer(
            main_consumer_config(
                servers,
                group_id=config.application_id,
                client_id=f"{name}-consumer",
                partition_assignment_strategy=config.partition_assignment_strategy,
                session_timeout_ms=config.session_timeout_ms,
                group_instance_id=instance_id,
                overrides=overrides,
            )
        )
        self.producer = Producer(
            producer_config(servers, client_id=f"{name}-producer", overrides=overrides)
        )
        self.restore_consumer = Consumer(
            thread_restore_consumer_config(
                servers, client_id=f"{name}-restore-consumer", overrides=overrides
            )
        )
        self.reader = StoreChangelogReader(
            self.restore_consumer, poll_ms=10, restore_listener=restore_listener
        )
        self.coordinator = ConsumerCoordinator(
            self.consumer,
            topology.source_topics,
            on_assigned=self._on_assigned,
            on_revoked=self._on_revoked,
            on_lost=self._on_lost,
        )
        self._last_commit = time.monotonic()

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ThreadState:
        """The thread's state."""
        with self._lock:
            return self._state

    def _set_state(self, state: ThreadState) -> None:
        with self._lock:
            if self._state is state or self._state is ThreadState.DEAD:
                return
            if self._state is ThreadState.PENDING_SHUTDOWN and state is not ThreadState.DEAD:
                return  # the revocations of a shutdown are not a rebalance
            _log.info(
                "stream-thread [%s] State transition from %s to %s",
                self.name,
                self._state.value,
                state.value,
            )
            self._state = state
        self._on_state_change()

    def active_tasks(self) -> dict[int, StreamTask]:
        """The tasks this thread runs now (restored or restoring)."""
        with self._lock:
            return dict(self.tasks)

    # -- the loop -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Asks the thread to commit, close its tasks and leave the group."""
        self._stop_requested.set()

    def run(self) -> None:
        """Polls, restores, processes and commits until :meth:`shutdown`."""
        try:
            # Kafka Streams starts its stream threads after the global stores are bootstrapped:
            # no record is processed against a partial global store.
            while self._wait_for is not None and not self._wait_for.wait(0.1):
                if self._stop_requested.is_set():
                    return
            self._set_state(ThreadState.REBALANCING)
            self.coordinator.subscribe()
            while not self._stop_requested.is_set():
                self._run_once()
            self._set_state(ThreadState.PENDING_SHUTDOWN)
            self._commit(list(self.tasks.values()))
        except BaseException as exc:
            _log.error("stream-thread [%s] encountered an error: %s", self.name, exc)
            self._on_fatal(self, exc)
        finally:
            self._close()

    def _run_once(self) -> None:
        self.coordinator.maybe_rejoin()
        # Block in poll only when there is nothing to process: records already buffered must
        # not wait poll.ms per loop.
        busy = any(not t.restoring and t.group.num_buffered() for t in self.tasks.values())
        timeout = 0.0 if busy else self._config.poll_ms / 1000.0
        messages = self.consumer.consume(_POLL_RECORDS, timeout)
        polled = split_poll(messages)
        polled.raise_if_fatal("consumer")
        for _, reason in polled.invalid_offsets.values():
            _log.warning("stream-thread [%s] consumer error: %s", self.name, reason)
        for event in polled.events:
            _log.warning("stream-thread [%s] consumer error: %s", self.name, event.error.str())
        for (topic, partition), run in polled.runs.items():
            task = self.tasks.get(partition)
            if task is not None:
                task.add_records(TopicPartition(topic, partition), run)
        if any(t.restoring for t in self.tasks.values()):
            self._restore_step()
        for task in list(self.tasks.values()):
            if not task.restoring:
                task.process(_PROCESS_PER_TASK)
        self.producer.poll(0)
        if (time.monotonic() - self._last_commit) * 1000 >= self._config.commit_interval_ms:
            self._commit(list(self.tasks.values()))

    # -- restoration --------------------------------------------------------------------------

    def _restore_step(self) -> None:
        completed = self.reader.restore()
        restored = self.reader.restored_offsets()
        for task in self.tasks.values():
            if not task.restoring:
                continue
            if all(tp in completed for tp in task.changelogs.values()):
                for tp in task.changelogs.values():
                    if tp in restored:
                        task.changelog_offsets[tp] = restored[tp]
                task.restoring = False
                self.reader.remove(task.changelogs.values())
                self.consumer.resume(
                    [KafkaTopicPartition(t.topic, t.partition) for t in task.partitions]
                )
                _log.info(
                    "stream-thread [%s] task %d restored; processing", self.name, task.task_id
                )
        self._update_running_state()

    def _update_running_state(self) -> None:
        if self._stop_requested.is_set():
            return
        restoring = any(t.restoring for t in self.tasks.values())
        self._set_state(ThreadState.RESTORING if restoring else ThreadState.RUNNING)

    # -- rebalance callbacks ------------------------------------------------------------------

    def _on_assigned(self, partitions: list[KafkaTopicPartition]) -> None:
        # librdkafka assigns after the callback anyway; assigning here lets the callback pause
        # partitions of restoring tasks before any record of theirs is fetched.
        if "cooperative" in self._config.partition_assignment_strategy:
            self.consumer.incremental_assign(partitions)
        else:
            self.consumer.assign(partitions)
        new_ids = sorted({p.partition for p in partitions} - set(self.tasks))
        created: list[StreamTask] = []
        for task_id in new_ids:
            task = StreamTask(
                task_id, self._topology, self._config, self.producer, self._global_stores
            )
            with self._lock:
                self.tasks[task_id] = task
            created.append(task)
            starts = task.restore_start_offsets()
            for name, changelog in task.changelogs.items():
                self.reader.register(
                    StateRestorer(
                        changelog,
                        task.stores[name],
                        starts[name],
                        before_wipe=functools.partial(self._forget, task, changelog),
                    )
                )
            task.restoring = bool(task.changelogs)
        if created:
            committed = self.consumer.committed(
                [
                    KafkaTopicPartition(tp.topic, tp.partition)
                    for t in created
                    for tp in t.partitions
                ],
                timeout=30,
            )
            for c in committed:
                owner = self.tasks.get(c.partition)
                if owner is not None:
                    owner.set_partition_time(
                        TopicPartition(c.topic, c.partition), decode_partition_time(c.metadata)
                    )
        restoring = [
            KafkaTopicPartition(tp.topic, tp.partition)
            for t in self.tasks.values()
            if t.restoring
            for tp in t.partitions
            if (tp.topic, tp.partition) in self.coordinator.assignment
        ]
        if restoring:
            self.consumer.pause(restoring)
        self._update_running_state()

    @staticmethod
    def _forget(task: StreamTask, changelog: TopicPartition) -> None:
        # The reader is about to wipe this store: its checkpointed offset no longer holds.
        task.changelog_offsets.pop(changelog, None)
        kept = {tp: o for tp, o in task.checkpoint_file.read().items() if tp != changelog}
        if kept:
            task.checkpoint_file.write(kept)
        else:
            task.checkpoint_file.delete()

    def _tasks_of(self, partitions: list[KafkaTopicPartition]) -> list[StreamTask]:
        ids = {p.partition for p in partitions}
        return [t for i, t in self.tasks.items() if i in ids]

    def _on_revoked(self, partitions: list[KafkaTopicPartition]) -> None:
        self._set_state(ThreadState.REBALANCING)
        tasks = self._tasks_of(partitions)
        self._commit([t for t in tasks if not t.restoring])
        self._close_tasks(tasks)

    def _on_lost(self, partitions: list[KafkaTopicPartition]) -> None:
        self._set_state(ThreadState.REBALANCING)
        # Another member owns these partitions now: committing would overwrite its progress.
        self._close_tasks(self._tasks_of(partitions))

    def _close_tasks(self, tasks: list[StreamTask]) -> None:
        for task in tasks:
            self.reader.remove(task.changelogs.values())
            with self._lock:
                self.tasks.pop(task.task_id, None)
            task.close()

    # -- commit -------------------------------------------------------------------------------

    def _commit(self, tasks: list[StreamTask]) -> None:
        self._last_commit = time.monotonic()
        if not tasks:
            return
        remaining = self.producer.flush(30)
        if remaining:
            raise StreamsError(
                f"{remaining} records were not acknowledged within 30 s; not committing"
            )
        offsets: list[KafkaTopicPartition] = []
        for task in tasks:
            offsets.extend(task.prepare_commit())
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            raise StreamsError(
                f"committing offsets failed: {exc.args[0] if exc.args else exc}"
            ) from exc
        for task in tasks:
            task.consumed.clear()

    def _close(self) -> None:
        try:
            self._close_tasks(list(self.tasks.values()))
        finally:
            self.coordinator.leave()
            for client in (self.consumer, self.restore_consumer):
                try:
                    client.close()
                except (KafkaException, RuntimeError):
                    pass
            self.producer.flush(10)
            with self._lock:
                self._state = ThreadState.DEAD
            self._on_state_change()
