"""``StreamThread``: one group member's poll loop, its tasks, their restoration and commits.

Each thread has its own consumer (a member of the ``application.id`` group), a
:class:`~streamstate.app.state_updater.StateUpdater` (a thread of its own, with the restore
consumer, KIP-869), and an idempotent producer for sinks and changelogs. The rebalance callbacks
(run by librdkafka inside ``consume`` on this thread) create tasks for assigned partitions and
hand those with changelogged stores to the state updater (their partitions stay paused until the
updater hands them back restored), commit and close tasks whose partitions are revoked, and close
lost tasks without committing. A task whose stores are still held by another thread is retried
(``streamstate.app.state_directory``).

Commits and rebalances, as Kafka Streams has them (``docs/runtime.md``): no commit is attempted
while the group rebalances (``ConsumerCoordinator.rebalance_in_progress``: librdkafka's group
thread may be in a newer generation than the last assignment the thread was given); the commit
is retried on every loop until the rebalance completes, with the tasks the member still owns,
and is then due at once (``app/commit_schedule.py``). A commit that meets a rebalance all the
same (``REBALANCE_IN_PROGRESS`` or a stale generation, the race the check cannot close) is
retried the same way: the member is still in the group, so no task is closed (librdkafka reports
the assignment lost at the next poll if it finds the member out). Only a commit refused because
this member is out of the group (unknown member, fenced static member: a processor slower than
``max.poll.interval.ms``, say) is Kafka's *task migrated*: every task is closed as lost, without
committing, and the thread rejoins the group and carries on; the records since the last commit
are processed again by whoever owns them next (at-least-once). A commit put off for longer than
a rebalance may last (``max.poll.interval.ms``) counts as task migrated too. A commit the broker
cannot take now (a broker restarting) is retried at the next commit.

Under ``exactly_once_v2`` (KIP-447) the thread's producer is transactional, with
``transactional.id`` = ``<application.id>-<process id>-<thread index from 1>`` (the process id
persisted in the state directory, ``app/state_directory.py``): ``init_transactions`` runs before
the thread joins the group (fencing a previous incarnation), a transaction begins before the
first record of each commit period, and a commit covers every running task of the thread: flush
the caches, flush the producer, ``send_offsets_to_transaction`` with the consumer's group
metadata, ``commit_transaction``, and only then apply each task's buffered store writes and
write its checkpoint (``state/transaction_buffer.py``). A revocation commits every task, then
closes the revoked ones. Failures, as Kafka Streams handles them (classified once,
``clients/kafka_errors.classify_transaction``): a fenced producer, a stale epoch or another fatal
producer error, and offsets the group refused because this member is out of it, are task
migration: the transaction is aborted when the producer still can, every task closed dirty
(buffers and caches discarded, checkpoint untouched), the producer replaced and initialised
again when it can write no more, and the thread rejoins and re-processes from the committed
offsets. Offsets that met a rebalance, and an abortable transaction, abort the transaction:
every task re-processes from the last committed offsets, without rejoining. While the group
rebalances the transaction stays open and no offsets are sent. A retriable failure of a
transactional call is retried until ``task.timeout.ms``, then the transaction is aborted. None
of these takes the client to ERROR.
"""

from __future__ import annotations

import enum
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from streamstate.app.commit_schedule import CommitSchedule
from streamstate.app.commit_steps import commit_with_consumer, flush_for_commit
from streamstate.app.config import StreamsConfig
from streamstate.app.coordinator import ConsumerCoordinator
from streamstate.app.fetch_control import FetchControl
from streamstate.app.metrics import ThreadMetrics
from streamstate.app.refused_sinks import RefusedSends
from streamstate.app.sink_timestamps import SinkTimestampLimits
from streamstate.app.standby_task import StandbyTasks, task_offsets
from streamstate.app.state_directory import LockedTasks, checkpointed_tasks, is_lock_conflict
from streamstate.app.state_updater import StateUpdater
from streamstate.app.streams_group import StreamsGroupMember
from streamstate.app.streams_membership import StreamsMembership
from streamstate.app.streams_transaction import commit_as_member, wait_for_stable_offsets
from streamstate.app.task import StreamTask, TransactionAbortedError, decode_partition_time
from streamstate.app.task_assignment import TaskPartitions
from streamstate.app.thread_producer import ProducerFencedError, ThreadProducer
from streamstate.app.topology import Topology
from streamstate.clients.config import (
    admin_config,
    main_consumer_config,
    thread_restore_consumer_config,
)
from streamstate.clients.kafka_errors import kafka_call
from streamstate.clients.poll import split_poll
from streamstate.clients.restore_consumer import open_restore_consumer
from streamstate.errors import ProcessorStateError, StreamsError, TaskMigratedError
from streamstate.processor.repartition import RepartitionPurger
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

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
        process_id: str | None = None,
        streams_member: StreamsGroupMember | None = None,
    ) -> None:
        """Creates the clients; nothing is joined before :meth:`start`. With
        ``streams_member`` the thread is that member of a streams group (KIP-1071). With
        ``wait_for``, the thread joins the group only once that event is set (the global
        stores' bootstrap).
        ``process_id`` (the client's, from its state directory) names the transactional
        producer under exactly-once (a random one when not given)."""
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
        # Keyed by task id: the partition, or a graph's TaskId (topology.task_id).
        self.tasks: dict[Any, StreamTask] = {}
        instance_id = None
        if config.group_instance_id:
            # One static member per thread, as Kafka Streams names them.
            suffix = f"-{index + 1}" if config.num_stream_threads > 1 else ""
            instance_id = f"{config.group_instance_id}{suffix}"
        servers, overrides = config.bootstrap_servers, config.overrides
        self.eos = config.exactly_once
        self._streams = streams_member is not None
        consumer_config = main_consumer_config(
            servers,
            group_id=config.application_id,
            client_id=f"{name}-consumer",
            partition_assignment_strategy=config.partition_assignment_strategy,
            session_timeout_ms=config.session_timeout_ms,
            group_instance_id=instance_id,
            eos=self.eos,
            overrides=overrides,
        )
        self.consumer = Consumer(consumer_config)
        # The longest a rebalance may last (the broker's rebalance timeout is the members'
        # max.poll.interval.ms, librdkafka's default 300 s): commits put off by a rebalance for
        # longer mean the member was left out of it.
        max_put_off = float(consumer_config.get("max.poll.interval.ms", 300_000)) / 1000
        transactional_id = None
        if self.eos:
            # Kafka Streams' EOS v2 name: stable per process (state directory) and thread index.
            process = process_id or uuid.uuid4().hex
            transactional_id = f"{config.application_id}-{process}-{index + 1}"
        self.metrics = ThreadMetrics()
        self.txn = ThreadProducer(config, name, transactional_id, self.metrics)
        self.updater = StateUpdater(
            f"{name}-StateUpdater",
            # The changelog fetch in Rust by default (open_restore_consumer's choice and fallback).
            open_restore_consumer(
                thread_restore_consumer_config(
                    servers, client_id=f"{name}-restore-consumer", eos=self.eos, overrides=overrides
                )
            ),
            task_timeout_ms=config.task_timeout_ms,
            restore_listener=restore_listener,
        )
        # Standby and warm-up tasks (streams protocol): replayed on a thread of their own.
        self.standbys = StandbyTasks(
            name,
            self._new_task,
            lambda: Consumer(
                thread_restore_consumer_config(
                    servers, client_id=f"{name}-standby-consumer", eos=self.eos, overrides=overrides
                )
            ),
            commit_interval_ms=config.commit_interval_ms,
            actives_restoring=self.updater.restoring,
        )
        self.locked = LockedTasks()
        # Whether a task waited for records last loop (FetchControl.records_to_poll).
        self._starving = False
        callbacks = {
            "on_assigned": self._on_assigned,
            "on_revoked": self._on_revoked,
            "on_lost": self._on_lost,
        }
        # group.protocol=streams: the broker assigns tasks (app/streams_membership.py).
        parts, app_dir = TaskPartitions(topology), config.app_dir()
        known = parts.source_topics
        self.coordinator: ConsumerCoordinator | StreamsMembership = (
            StreamsMembership(
                streams_member,
                self.consumer,
                parts,
                name=name,
                **callbacks,
                on_standby=self._on_standby,
                task_offsets=lambda: task_offsets(
                    self.active_tasks(), self.standbys, checkpointed_tasks(app_dir), known
                ),
            )
            if streams_member is not None
            else ConsumerCoordinator(self.consumer, topology.source_topics, **callbacks)
        )
        self._schedule = CommitSchedule(name, max_put_off, self.coordinator.rebalance_in_progress)
        self.fetch = FetchControl(
            self.consumer, config.buffered_records_per_partition, name=self.name
        )
        # Sink records the broker would refuse for their timestamp are refused here, before
        # they could fail their batch or doom the transaction (app/sink_timestamps.py).
        # Named as Kafka Streams names its admin client (ThreadMetadata.admin_client_id).
        admin_id = {"client.id": f"{config.client_id}-admin"}
        self._sink_limits = SinkTimestampLimits(
            lambda: AdminClient(admin_config(servers, overrides=overrides, **admin_id))
        )
        # Under exactly-once, the sink sends the broker refused, remembered across the aborts
        # that isolate and drop them (app/refused_sinks.py).
        self._refused_sends = RefusedSends()
        repartitions = topology.repartition_topics
        self._purger = RepartitionPurger(
            AdminClient(admin_config(servers, overrides=overrides, **admin_id))
            if repartitions
            else None,
            repartitions,
        )

    @property
    def producer(self) -> Producer:
        """The thread's producer (replaced after a fence under exactly-once)."""
        return self.txn.producer

    @property
    def transactional_id(self) -> str | None:
        """The producer's ``transactional.id`` under exactly-once."""
        return self.txn.transactional_id

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (begun, not yet committed or aborted)."""
        return self.txn.in_transaction

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

    def active_tasks(self) -> dict[Any, StreamTask]:
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
            if self.eos:
                # Before any task processes: fences a previous incarnation of this thread and
                # completes (aborts) its open transaction.
                self.txn.init()
            self.updater.start()
            self.coordinator.subscribe()
            while not self._stop_requested.is_set():
                try:
                    self._run_once()
                except TaskMigratedError as exc:
                    self._handle_task_migrated(exc)
                except TransactionAbortedError as exc:
                    self._handle_transaction_aborted(exc)
                except StreamsError as exc:
                    fenced = self.txn.fenced_cause(exc)
                    if fenced is None:
                        raise
                    self._handle_task_migrated(ProducerFencedError(fenced))
            self._set_state(ThreadState.PENDING_SHUTDOWN)
            try:
                self._commit(list(self.tasks.values()), defer=False)
            except (TaskMigratedError, TransactionAbortedError) as exc:
                _log.warning("stream-thread [%s] not committing on shutdown: %s", self.name, exc)
        except BaseException as exc:
            self._die(exc)
        except:  # noqa: E722 -- a raised object that is no exception (see kafka_call)
            self._die(StreamsError(f"the thread failed: {sys.exc_info()[1]!r}"))
        finally:
            self._close()

    def _die(self, exc: BaseException) -> None:
        _log.error("stream-thread [%s] encountered an error: %s", self.name, exc)
        self._on_fatal(self, exc)

    def _run_once(self) -> None:
        self.coordinator.maybe_rejoin()
        # Block in poll only when there is nothing to process: records already buffered must
        # not wait poll.ms per loop.
        busy = any(not t.restoring and t.group.num_buffered() for t in self.tasks.values())
        timeout = 0.0 if busy else self._config.poll_ms / 1000.0
        messages = kafka_call(
            self.consumer.consume,
            self.fetch.records_to_poll(_POLL_RECORDS, starving=self._starving),
            timeout,
        )
        self.metrics.poll_records.record(len(messages))
        polled = split_poll(messages)
        self.fetch.reached_end(polled.end_positions)
        polled.raise_if_fatal("consumer")
        id_of = self._topology.task_id
        for (topic, partition), (_, reason) in polled.invalid_offsets.items():
            _log.warning("stream-thread [%s] consumer error: %s", self.name, reason)
            reset = self.tasks.get(id_of(topic, partition))
            if reset is not None:
                # The consumer moves by auto.offset.reset, backwards too (a truncated or
                # re-created topic): what it hands over next is no second delivery.
                reset.offset_reset(TopicPartition(topic, partition))
        for event in polled.events:
            _log.warning("stream-thread [%s] consumer error: %s", self.name, event.error.str())
        for (topic, partition), run in polled.runs.items():
            task = self.tasks.get(id_of(topic, partition))
            if task is not None:
                tp = TopicPartition(topic, partition)
                self.fetch.added(tp, task.add_records(tp, run))
        self._hand_over_restored()
        self.standbys.tick()
        if self.locked and (due := self.locked.due()):
            self._create_tasks(due)
        processed = 0
        if self.eos and not self.in_transaction:
            if any(not t.restoring for t in self.tasks.values()):
                self.txn.begin()
        # The lags of every running partition, read here on the consumer's own thread and
        # published for metrics() (fetch_control's module doc).
        lags = self.fetch.publish_lags(
            [tp for t in self.tasks.values() if not t.restoring for tp in t.partitions]
        )
        starving = False
        for task in list(self.tasks.values()):
            if not task.restoring:
                if len(task.partitions) > 1 and self._config.max_task_idle_ms >= 0:
                    task.update_lags({tp: lags[tp] for tp in task.partitions if tp in lags})
                done = task.process(_PROCESS_PER_TASK)
                processed += done
                # Records buffered but none processable: the task waits for another partition's
                # records (KIP-695), which may sit in the consumer's queue behind a held one's.
                starving = starving or (not done and task.group.num_buffered() > 0)
        self._starving = starving
        if processed:
            self.metrics.process.record(processed)
        self.fetch.release_drained(self._queue_size)
        self._punctuate()
        self.producer.poll(0)
        if self._schedule.due(self._config.commit_interval_ms) or any(
            t.commit_requested for t in self.tasks.values()
        ):
            self._commit(list(self.tasks.values()))
        elif self.eos and any(
            t.uncommitted_bytes > self._config.statestore_uncommitted_max_bytes
            for t in self.tasks.values()
        ):
            # A task's uncommitted writes passed statestore.uncommitted.max.bytes: commit now.
            self.metrics.early_commits += 1
            self._commit(list(self.tasks.values()))

    def _punctuate(self) -> None:
        # Kafka's TaskManager.punctuate: after processing, each running task's due punctuations.
        for task in list(self.tasks.values()):
            if not task.restoring:
                task.punctuate()

    # -- restoration --------------------------------------------------------------------------

    def _hand_over_restored(self) -> None:
        restored = self.updater.drain_restored()
        for task in restored:
            if self.tasks.get(task.task_id) is not task:
                continue  # revoked meanwhile
            task.restoring = False
            self.consumer.resume(
                [KafkaTopicPartition(t.topic, t.partition) for t in task.partitions]
            )
            _log.info("stream-thread [%s] task %s restored; processing", self.name, task.task_id)
        if restored:
            self._update_running_state()

    def _update_running_state(self) -> None:
        if self._stop_requested.is_set():
            return
        restoring = bool(self.locked) or any(t.restoring for t in self.tasks.values())
        self._set_state(ThreadState.RESTORING if restoring else ThreadState.RUNNING)

    # -- rebalance callbacks ------------------------------------------------------------------

    def _on_assigned(self, partitions: list[KafkaTopicPartition]) -> None:
        # librdkafka assigns after the callback anyway; assigning here lets the callback pause
        # partitions of restoring tasks before any record of theirs is fetched.
        if self._streams or "cooperative" in self._config.partition_assignment_strategy:
            self.consumer.incremental_assign(partitions)
        else:
            self.consumer.assign(partitions)
        if not self._stop_requested.is_set():
            # An assignment that completes while the thread closes gets no tasks: they would
            # only be closed again, and their committed offsets cannot be read any more.
            self._open_tasks(partitions)

    def _open_tasks(self, partitions: list[KafkaTopicPartition]) -> None:
        """Creates the tasks of ``partitions`` (assigned) that have none yet."""
        id_of = self._topology.task_id
        self._create_tasks(
            sorted({id_of(p.topic, p.partition) for p in partitions} - set(self.tasks))
        )

    def _create_tasks(self, task_ids: list[Any]) -> None:
        """Creates tasks, hands those with changelogs to the state updater, and pauses the
        partitions of every task not ready to process (restoring, or waiting for its stores)."""
        id_of = self._topology.task_id
        created: list[StreamTask] = []
        for task_id in task_ids:
            try:
                # A standby made active keeps its stores: only the changelog tail restores.
                task = self.standbys.take(task_id, self.producer) or self._new_task(task_id)
            except ProcessorStateError as exc:
                if not is_lock_conflict(exc):
                    raise
                self._restoring_from_now()
                self.locked.retry_later(self.name, task_id, exc)
                continue
            self.locked.discard({task_id})
            # Kafka's rule, set here only: a task is RUNNING once its stores are restored; marked
            # (the thread RESTORING) before queries or the client's state can see it.
            task.restoring = bool(task.changelogs)
            if task.restoring:
                self._restoring_from_now()
            with self._lock:
                self.tasks[task_id] = task
            created.append(task)
        if created:
            committed = self._committed(
                [
                    KafkaTopicPartition(tp.topic, tp.partition)
                    for t in created
                    for tp in t.partitions
                ]
            )
            # Until the consumer hands over a record of a partition, its lag (KIP-695) counts
            # from where the task starts.
            self.fetch.starting_at(
                {(c.topic, c.partition): c.offset for c in committed if c.offset >= 0}
            )
            for c in committed:
                owner = self.tasks.get(id_of(c.topic, c.partition))
                if owner is not None:
                    owner.set_partition_time(
                        TopicPartition(c.topic, c.partition), decode_partition_time(c.metadata)
                    )
            for task in created:
                if task.restoring:
                    self.updater.add(task)
        assignment = self.coordinator.assignment
        waiting = [
            KafkaTopicPartition(topic, partition)
            for topic, partition in assignment
            if (task_id := id_of(topic, partition)) in self.locked
            or (task_id in self.tasks and self.tasks[task_id].restoring)
        ]
        if waiting:
            self.consumer.pause(waiting)
        # librdkafka keeps a partition paused across a rebalance (a pause made while restoring
        # a task since closed as lost or migrated, say): a new task starts with it fetching.
        ready = [
            KafkaTopicPartition(tp.topic, tp.partition)
            for t in created
            if not t.restoring
            for tp in t.partitions
            if (tp.topic, tp.partition) in assignment
        ]
        if ready:
            self.consumer.resume(ready)
        self._update_running_state()

    def _restoring_from_now(self) -> None:
        # Before a task that is not RUNNING (restoring, or waiting for its directory) shows.
        if not self._stop_requested.is_set():
            self._set_state(ThreadState.RESTORING)

    def _new_task(self, task_id: Any) -> StreamTask:
        return StreamTask(
            task_id,
            self._topology,
            self._config,
            self.producer,
            self._global_stores,
            position=self.fetch.position,
            sink_limits=self._sink_limits,
            refused_sends=self._refused_sends,
        )

    def _on_standby(self, partitions: list[KafkaTopicPartition]) -> None:
        # The broker's standby and warm-up tasks, less any this thread runs as active.
        id_of = self._topology.task_id
        wanted = {id_of(p.topic, p.partition) for p in partitions} - set(self.tasks)
        self.standbys.update(wanted)

    def _committed(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        if isinstance(self.coordinator, StreamsMembership):
            if self.eos:  # KIP-447's requireStable (app/streams_transaction.py)
                wait_for_stable_offsets(
                    self.consumer, partitions, self._config.task_timeout_ms / 1000.0
                )
            return self.coordinator.committed(partitions)  # why: StreamsMembership.committed
        return list(self.consumer.committed(partitions, timeout=30))

    def _queue_size(self, key: tuple[str, int]) -> int | None:
        task = self.tasks.get(self._topology.task_id(key[0], key[1]))
        if task is None or (key[0], key[1]) not in self.coordinator.assignment:
            return None
        return task.queue_size(TopicPartition(*key))

    def _tasks_of(self, partitions: list[KafkaTopicPartition]) -> list[StreamTask]:
        ids = {self._topology.task_id(p.topic, p.partition) for p in partitions}
        return [t for i, t in self.tasks.items() if i in ids]

    def _on_revoked(self, partitions: list[KafkaTopicPartition]) -> None:
        self._set_state(ThreadState.REBALANCING)
        self.locked.discard({self._topology.task_id(p.topic, p.partition) for p in partitions})
        tasks = self._tasks_of(partitions)
        try:
            # Under exactly-once one transaction covers every task: commit them all. The
            # member is in the rebalance's generation now: the commit is not put off.
            committed = self._commit([t for t in tasks if not t.restoring], defer=False)
        except TaskMigratedError as exc:
            # Raising here would abort librdkafka's rebalance callback, and rejoining inside
            # it would start another rebalance: the revoked tasks close without a commit (their
            # next owner processes their records again); librdkafka reports the rest lost if
            # the member is out of the group.
            committed = False
            _log.warning(
                "stream-thread [%s] not committing the revoked tasks (%s); closing them "
                "without a commit",
                self.name,
                exc,
            )
            if self.eos:
                self._handle_transaction_aborted(TransactionAbortedError(str(exc)), closing=tasks)
                return
        except TransactionAbortedError as exc:
            self._handle_transaction_aborted(exc, closing=tasks)
            return
        if not committed and self.eos:
            # The transaction holds the revoked tasks' writes and could not commit: abort it.
            self._handle_transaction_aborted(
                TransactionAbortedError("the revoked tasks could not be committed"), closing=tasks
            )
            return
        self._close_tasks(tasks)

    def _on_lost(self, partitions: list[KafkaTopicPartition]) -> None:
        self._set_state(ThreadState.REBALANCING)
        self.locked.discard({self._topology.task_id(p.topic, p.partition) for p in partitions})
        # Another member owns these partitions now: committing would overwrite its progress.
        lost = self._tasks_of(partitions)
        if self.eos and self.in_transaction:
            # The lost tasks' writes are in the thread's one transaction: it is aborted, so the
            # other tasks start again from their committed offsets too.
            self._handle_transaction_aborted(
                TransactionAbortedError("partitions were lost"), closing=lost
            )
            return
        self._close_tasks(lost)

    def _handle_task_migrated(self, exc: TaskMigratedError) -> None:
        """Kafka's ``handleTaskMigrated``: close every task as lost, then rejoin. Under
        exactly-once the open transaction is aborted first (the producer replaced if it can
        write no more)."""
        _log.warning(
            "stream-thread [%s] detected that the group moved on without it (%s); closing "
            "all tasks as lost and rejoining",
            self.name,
            exc,
        )
        self._set_state(ThreadState.REBALANCING)
        self.txn.abort(replace_producer=isinstance(exc, ProducerFencedError))
        self._close_tasks(list(self.tasks.values()))
        self.coordinator.request_rejoin()
        self._reopen_assigned()

    def _handle_transaction_aborted(
        self, exc: TransactionAbortedError, closing: list[StreamTask] | None = None
    ) -> None:
        """Exactly-once: aborts the open transaction and re-processes every task from the last
        committed offsets (closed dirty, then opened again, so their queues and partition
        times are the committed ones); ``closing`` (revoked or lost) are not reopened."""
        _log.warning(
            "stream-thread [%s] aborting the transaction (%s); re-processing every task from "
            "the last committed offsets",
            self.name,
            exc,
        )
        self.txn.abort()
        self._close_tasks(list(self.tasks.values()))
        gone = {tp for t in closing or [] for tp in t.partitions}
        self._reopen_assigned(exclude={(tp.topic, tp.partition) for tp in gone})

    def _reopen_assigned(self, exclude: set[tuple[str, int]] | None = None) -> None:
        # librdkafka's cooperative protocol may keep this member's partitions through the
        # rejoin without calling back: no partition may stay without a task (its records
        # would be dropped), so each still assigned gets a new task that starts again from
        # the committed offset, as a task the rejoin handed back would.
        assigned = [
            KafkaTopicPartition(t, p)
            for t, p in sorted(self.coordinator.assignment)
            if (t, p) not in (exclude or set())
        ]
        if not assigned:
            return
        for c in self._committed(assigned):
            offset = c.offset if c.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(KafkaTopicPartition(c.topic, c.partition, offset))
        self._open_tasks(assigned)

    # -- commit -------------------------------------------------------------------------------

    def _commit_transaction(self, tasks: list[StreamTask], started: float) -> bool:
        """Exactly-once: one transaction for ``tasks``, every running task (see the module
        doc); False when not acknowledged (the transaction stays open)."""
        if not self.in_transaction:
            self.txn.begin()
        if not self._flush(tasks):
            return False
        offsets: list[KafkaTopicPartition] = []
        for task in tasks:
            offsets.extend(task.committable_offsets())
        if isinstance(self.coordinator, StreamsMembership):
            # The consumer is in no group: the offsets carry the member's identity, taken now.
            commit_as_member(self.txn, offsets, self.coordinator, self._config.application_id)
        else:
            self.txn.commit(offsets, self.consumer.consumer_group_metadata())
        self._schedule.committed()
        for task in tasks:
            task.apply_committed()
            task.mark_committed()
        if offsets:
            self.metrics.commit_latency.record((time.monotonic() - started) * 1000)
            self._purger.purge(offsets)
        return True

    def _close_tasks(self, tasks: list[StreamTask]) -> None:
        self.fetch.forget((tp.topic, tp.partition) for t in tasks for tp in t.partitions)
        # The updater lets go of restoring tasks' stores before they are closed.
        self.updater.remove({t.task_id for t in tasks if t.restoring})
        for task in tasks:
            self.metrics.closed_tasks_dropped += task.dropped_records()
            with self._lock:
                self.tasks.pop(task.task_id, None)
            task.close()

    # -- commit -------------------------------------------------------------------------------

    def _flush(self, tasks: list[StreamTask]) -> bool:
        return flush_for_commit(tasks, self.producer, eos=self.eos, name=self.name)

    def _commit(self, tasks: list[StreamTask], *, defer: bool = True) -> bool:
        """Commits ``tasks``; True when done. Puts the commit off while the group rebalances
        (see the module doc) unless not to ``defer`` (in the revocation callback the member is
        in the rebalance's generation; on shutdown there is no later), raises
        :class:`TaskMigratedError` when the group moved on without this member, and skips
        (WARN) a commit the cluster cannot take now. Under exactly-once, commits every running
        task in one transaction instead."""
        if self.eos:
            tasks = [t for t in self.tasks.values() if not t.restoring]
        if not tasks:
            self._schedule.nothing_to_commit()
            return True
        if defer and self._schedule.put_off_by_rebalance():
            return False
        started = self._schedule.started()
        if self.eos:
            return self._commit_transaction(tasks, started)
        return self._commit_consumer(tasks, started, defer=defer)

    def _commit_consumer(self, tasks: list[StreamTask], started: float, *, defer: bool) -> bool:
        """At-least-once: flushes, checkpoints and commits ``tasks``' offsets with the
        consumer; False when not done (to be tried again)."""
        if not self._flush(tasks):
            return False
        offsets: list[KafkaTopicPartition] = []
        for task in tasks:
            offsets.extend(task.prepare_commit())
        if not offsets:
            self._schedule.nothing_to_commit()
            return True
        if not self._commit_offsets(offsets, defer=defer):
            return False
        self._schedule.committed()
        for task in tasks:
            task.mark_committed()
        self.metrics.commit_latency.record((time.monotonic() - started) * 1000)
        self._purger.purge(offsets)
        return True

    def _commit_offsets(self, offsets: list[KafkaTopicPartition], *, defer: bool) -> bool:
        """At-least-once: commits ``offsets`` with the consumer; False when the commit is to be
        tried again (a rebalance met, or a failure the cluster may not have next time)."""
        put_off = self._schedule.put_off_by_rebalance if defer else None
        if isinstance(self.coordinator, StreamsMembership):
            # A streams group takes commits from its members only (app/streams_membership.py).
            return self.coordinator.commit_offsets(offsets, put_off)
        return commit_with_consumer(self.consumer, offsets, put_off, name=self.name)

    def _close(self) -> None:
        try:
            # The thread dies (or shuts down) with writes not committed: abort them.
            self.txn.abort_on_close()
            self._close_tasks(list(self.tasks.values()))
        finally:
            self.coordinator.leave()
            self.standbys.close()
            self.updater.shutdown()
            try:
                # kafka_call: close may raise the bare KafkaError (_DESTROY) of a call that
                # librdkafka cut short, which no except clause would catch.
                kafka_call(self.consumer.close)
            except (KafkaException, RuntimeError) as exc:
                _log.debug("stream-thread [%s] closing the consumer: %s", self.name, exc)
            self.txn.close()
            # Their admin clients would otherwise live (and reconnect) as long as the thread.
            self._sink_limits.close()
            self._purger.close()
            with self._lock:
                self._state = ThreadState.DEAD
            self._on_state_change()
