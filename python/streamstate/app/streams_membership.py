"""A stream thread's membership of a streams group (``group.protocol="streams"``, KIP-1071).

:class:`StreamsMembership` takes the place of :class:`~streamstate.app.coordinator.
ConsumerCoordinator` in a :class:`~streamstate.app.stream_thread.StreamThread` (the same
methods and callbacks), with the broker assigning tasks instead of librdkafka assigning
partitions. It follows Kafka's ``StreamsMembershipManager``:

* a heartbeat thread of its own (the request itself runs in Rust with the GIL released)
  sends ``StreamsGroupHeartbeat`` every heartbeat interval with the tasks the stream thread
  owns, and hands each assignment that differs from them to the stream thread;
* the stream thread applies it between batches (:meth:`maybe_rejoin`, called at the top of
  every loop): the revoked active tasks are committed and closed (``on_revoked``) and their
  partitions unassigned from its consumer, then the new tasks' partitions are assigned
  (``on_assigned``: ``incremental_assign``, the consumer never subscribes), and only then
  are the new owned tasks reported, with a heartbeat sent at once: the broker gives a task to
  its next owner only once this heartbeat says it is gone (Kafka's cooperative flow);
* fenced (``FENCED_MEMBER_EPOCH``, ``UNKNOWN_MEMBER_ID``): every task is lost (closed
  without committing, ``on_lost``) and the member rejoins under its member id;
* offsets are committed through the member (:meth:`commit`: OffsetCommit v9 with the member
  id and epoch, which a streams group requires and librdkafka cannot send on manual
  assignment).

Standby and warm-up tasks (``num.standby.replicas``, ``docs/rebalancing.md``) go to the stream
thread with every assignment (``on_standby``, after the active tasks, so that a standby made
active is taken over with its stores open, :mod:`streamstate.app.standby_task`) and are
reported as owned, as Kafka's ``StreamsMembershipManager`` reports them; the heartbeat carries
their changelog positions (``TaskOffsets``) so that the broker can tell where state is, with
those of every other task directory holding a checkpoint, from the join on (a restarted
instance gets the tasks whose state it kept).

``SHUTDOWN_APPLICATION`` (an uncaught exception handler's answer, ``docs/rebalancing.md``):
:meth:`StreamsMembership.request_shutdown` sets ``ShutdownApplication`` in every heartbeat
until the coordinator answers with the ``SHUTDOWN_APPLICATION`` status, which it then gives
every member of the group, this one included, until the group is empty; each member that
sees it calls ``on_shutdown_application(detail)`` once (the client closes to ``ERROR``, Kafka's
``StreamThread.handleStreamsRebalanceData``). A member that asked waits in :meth:`leave` for
that answer (at most ``_SHUTDOWN_ANSWER_S``), so that a dying thread's request is not lost
with its member.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.coordinator import MemberState
from streamstate.app.streams_group import (
    GroupStatus,
    HeartbeatResult,
    StreamsGroupMember,
    TaskId,
    Tasks,
)
from streamstate.app.task_assignment import TaskPartitions
from streamstate.errors import StreamsError, TaskMigratedError

__all__ = ["CommitOutcome", "StreamsMembership"]

_log = logging.getLogger("streamstate.app")

Callback = Callable[[list[KafkaTopicPartition]], None]

# Kafka's error codes an OffsetCommit answers a streams member with.
# STALE_MEMBER_EPOCH (a newer epoch is on its way), ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS.
_REBALANCING = {113, 22, 27}
_MIGRATED = {25, 110, 82}  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID
# TOPIC_ / GROUP_AUTHORIZATION_FAILED, INVALID_COMMIT_OFFSET_SIZE, OFFSET_METADATA_TOO_LARGE.
_FATAL = {29, 30, 28, 12}
# How often the heartbeat carries the tasks' changelog positions (a placement hint).
_TASK_OFFSETS_S = 10.0
# How long a member that asked the application to shut down waits, when leaving, for the
# coordinator's answer (the request goes with the next heartbeat, sent at once).
_SHUTDOWN_ANSWER_S = 10.0
# The status a coordinator gives every member once one asked the application to shut down.
SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"


class CommitOutcome(enum.Enum):
    """What a :meth:`StreamsMembership.commit` came to."""

    DONE = "done"
    # The member's epoch moved on, or it is rejoining: commit again once it has its new one.
    REBALANCING = "rebalancing"
    # The coordinator cannot take it now (moving, loading, timed out): try at the next commit.
    RETRIABLE = "retriable"
    # The member is out of the group: its tasks belong to others (Kafka's task migrated).
    MIGRATED = "migrated"


class StreamsMembership:
    """The stream thread's member of the streams group (see the module doc)."""

    def __init__(
        self,
        member: StreamsGroupMember,
        consumer: Consumer,
        tasks: TaskPartitions,
        *,
        name: str,
        on_assigned: Callback,
        on_revoked: Callback,
        on_lost: Callback,
        on_standby: Callback | None = None,
        task_offsets: Callable[[], tuple[dict[TaskId, int], dict[TaskId, int]]] | None = None,
    ) -> None:
        """Nothing is sent before :meth:`subscribe`. ``on_standby`` gets the source
        partitions of the standby and warm-up tasks of each assignment; ``task_offsets()`` the
        changelog positions and end offsets of the tasks (sent every ``_TASK_OFFSETS_S``)."""
        self.member = member
        self._consumer = consumer
        self._tasks = tasks
        self._name = name
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self._on_standby = on_standby
        self._task_offsets = task_offsets
        self._task_offsets_due = 0.0
        self._cond = threading.Condition()
        # What the stream thread owns (reported in every heartbeat), the assignment waiting
        # for it, and a fatal heartbeat error for it to raise.
        self._owned = Tasks()
        self._pending: HeartbeatResult | None = None
        self._lost = False
        self._lost_tasks = Tasks()
        self._error: BaseException | None = None
        self._owned_changed = False
        self._stopping = False
        self._generation = 0
        self._state = MemberState.UNJOINED
        self._thread: threading.Thread | None = None
        self._statuses: tuple[GroupStatus, ...] = ()
        # SHUTDOWN_APPLICATION: asked by this member; answered (the status seen); whether the
        # heartbeat loop has ended (no answer can come any more); a heartbeat due at once.
        self._shutdown_requested = False
        self._shutdown_seen = False
        self._loop_ended = False
        self._heartbeat_now = False
        #: Called once, from the heartbeat thread, with the coordinator's detail when a
        #: heartbeat answers with the ``SHUTDOWN_APPLICATION`` status; with ``None`` when this
        #: member asked and leaves without an answer.
        self.on_shutdown_application: Callable[[str | None], None] | None = None
        self.assignment: set[tuple[str, int]] = set()

    # -- the ConsumerCoordinator interface the stream thread uses -----------------------------

    @property
    def state(self) -> MemberState:
        """The member state, as the stream thread has applied it."""
        with self._cond:
            return self._state

    @property
    def generation(self) -> int:
        """The number of assignments the stream thread applied."""
        with self._cond:
            return self._generation

    @property
    def member_id(self) -> str | None:
        """The member id (this client's own, kept across rejoins)."""
        return self.member.member_id

    @property
    def owned(self) -> Tasks:
        """The tasks the stream thread owns (as last reported)."""
        with self._cond:
            return self._owned

    def rebalance_in_progress(self) -> bool:
        """Whether commits must wait: the member is (re)joining, with no epoch to commit
        with."""
        return self.member.member_epoch <= 0

    def subscribe(self) -> None:
        """Starts the heartbeat thread, which joins the group."""
        with self._cond:
            self._state = MemberState.REBALANCING
        self._thread = threading.Thread(
            target=self._heartbeat_loop, name=f"{self._name}-Heartbeat", daemon=True
        )
        self._thread.start()

    def request_rejoin(self) -> None:
        """After a task migration (the stream thread has closed every task): gives up the
        assignment, so that nothing is reopened from it; the broker hands the tasks back, or
        to others, through the next heartbeats."""
        self._unassign(sorted(self.assignment))
        self.assignment.clear()
        self._report(Tasks())

    def maybe_rejoin(self) -> None:
        """Applies the assignment the heartbeat thread received, if any (see the module doc);
        raises the heartbeat thread's fatal error. Called by the stream thread."""
        with self._cond:
            error = self._error
            pending, self._pending = self._pending, None
            lost, self._lost = self._lost, False
            lost_tasks, self._lost_tasks = self._lost_tasks, Tasks()
            owned = self._owned
        if error is not None:
            raise error
        if lost:
            parts = self._tasks.partitions(lost_tasks.active)
            _log.warning(
                "stream-thread [%s] fenced by the streams group: tasks %s are lost",
                self._name,
                _names(lost_tasks.active),
            )
            self._set_state(MemberState.REBALANCING)
            self.assignment -= set(parts)
            self._unassign(parts)
            self._on_lost(_kafka(parts))
        if pending is None:
            return
        target = pending.target.active
        revoked = owned.active - target
        assigned = target - owned.active
        if revoked:
            parts = self._tasks.partitions(revoked)
            _log.info("stream-thread [%s] revoking tasks %s", self._name, _names(revoked))
            self._set_state(MemberState.REBALANCING)
            self.assignment -= set(parts)
            # Committed and closed before the consumer lets go and before the heartbeat says
            # they are gone: their next owner starts from this commit.
            self._on_revoked(_kafka(parts))
            self._unassign(parts)
        with self._cond:
            self._state = MemberState.STABLE
            self._generation += 1
        parts = self._tasks.partitions(assigned)
        if assigned:
            _log.info(
                "stream-thread [%s] assigned tasks %s (member epoch %d)",
                self._name,
                _names(assigned),
                pending.member_epoch,
            )
        self.assignment |= set(parts)
        # Called even with nothing new (an empty first assignment, a revocation alone), as
        # librdkafka's cooperative protocol calls it: it ends the thread's REBALANCING.
        self._on_assigned(_kafka(parts))
        standby = pending.target.standby | pending.target.warmup
        if self._on_standby is not None:
            # After the active tasks: a standby made active was taken over with its stores.
            self._on_standby(_kafka(self._tasks.partitions(standby - target)))
            self._report(pending.target)
        else:
            self._report(Tasks(active=frozenset(target)))

    def request_shutdown(self) -> None:
        """Asks every member of the group to shut down (``ShutdownApplication`` in every
        heartbeat from now until the coordinator answers with the status; the next one is sent
        at once)."""
        self.member.request_shutdown()
        with self._cond:
            self._shutdown_requested = True
            self._heartbeat_now = True
            self._cond.notify_all()

    def leave(self) -> None:
        """Stops the heartbeat thread and leaves the group (the caller has closed its
        tasks). A member that asked the application to shut down first waits (at most
        ``_SHUTDOWN_ANSWER_S``) for the coordinator's answer."""
        with self._cond:
            if (
                self._shutdown_requested
                and self._thread is not None
                and self._thread is not threading.current_thread()
            ):
                answered = self._cond.wait_for(
                    lambda: self._shutdown_seen or self._loop_ended, timeout=_SHUTDOWN_ANSWER_S
                )
                if not self._shutdown_seen:
                    _log.warning(
                        "stream-thread [%s] the streams group coordinator did not answer the "
                        "shutdown request (%s): the application's other clients may not be "
                        "told",
                        self._name,
                        "the heartbeat failed" if answered else "timed out",
                    )
        if self._shutdown_requested and not self._shutdown_seen:
            self._shutdown_answered(None)
        with self._cond:
            self._stopping = True
            self._state = MemberState.UNJOINED
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self.member.leave()
        except StreamsError as exc:
            _log.warning("stream-thread [%s] leaving the streams group: %s", self._name, exc)

    def commit(self, offsets: list[KafkaTopicPartition]) -> tuple[CommitOutcome, str]:
        """Commits ``offsets`` as this member (OffsetCommit v9 with its id and epoch); the
        outcome and, when not done, why."""
        try:
            errors = self.member._member.commit_offsets(
                [(o.topic, o.partition, o.offset, o.metadata) for o in offsets]
            )
        except StreamsError as exc:
            text = str(exc)
            if "is not in the group" in text:
                return CommitOutcome.REBALANCING, text
            return CommitOutcome.RETRIABLE, text
        failed = sorted({(code, f"{t}-{p}") for t, p, code in errors if code != 0})
        if not failed:
            return CommitOutcome.DONE, ""
        codes = {code for code, _ in failed}
        text = "OffsetCommit failed with error codes " + ", ".join(
            f"{code} ({tp})" for code, tp in failed[:5]
        )
        if codes & _MIGRATED:
            return CommitOutcome.MIGRATED, text
        if codes & _FATAL:
            raise StreamsError(f"committing offsets failed: {text}")
        if codes <= _REBALANCING:
            return CommitOutcome.REBALANCING, text
        # Anything else (a coordinator moving, a request timing out, a code this client does
        # not know) is tried again at the next commit: at-least-once loses nothing by waiting.
        return CommitOutcome.RETRIABLE, text

    def commit_offsets(
        self, offsets: list[KafkaTopicPartition], put_off: Callable[[str], object] | None
    ) -> bool:
        """The stream thread's at-least-once commit of ``offsets``: True when done. A commit
        that meets a newer member epoch is put off (``put_off(why)``, the thread's
        rebalance wait) or, when it cannot be (revocation, shutdown), is Kafka's *task
        migrated*, as is a member out of the group; one the coordinator cannot take now is
        tried again at the next commit."""
        outcome, text = self.commit(offsets)
        if outcome is CommitOutcome.REBALANCING and put_off is not None:
            put_off(text)
            return False
        if outcome in (CommitOutcome.MIGRATED, CommitOutcome.REBALANCING):
            raise TaskMigratedError(f"committing offsets failed: {text}")
        if outcome is CommitOutcome.RETRIABLE:
            _log.warning("stream-thread [%s] %s; retrying at the next commit", self._name, text)
        return outcome is CommitOutcome.DONE

    def committed(
        self, partitions: list[KafkaTopicPartition], timeout: float = 30.0
    ) -> list[KafkaTopicPartition]:
        """The committed offsets (and metadata) of ``partitions``, read through the member
        (OffsetFetch): confluent-kafka's ``committed`` hands back commit metadata without its
        terminating NUL, so a short one (Kafka Streams' 12 characters of partition time) comes
        back with bytes of whatever followed it in memory. Retries what the coordinator cannot
        answer now for up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                answer = self.member._member.committed_offsets(
                    [(p.topic, p.partition) for p in partitions]
                )
            except StreamsError as exc:
                if time.monotonic() >= deadline:
                    raise StreamsError(f"reading committed offsets failed: {exc}") from exc
                time.sleep(0.1)
                continue
            failed = [(t, p, code) for t, p, _, _, code in answer if code != 0]
            if not failed:
                # Offsets committed in a transaction (exactly_once_v2) went through
                # confluent-kafka, which sends metadata with its terminating NUL.
                return [
                    KafkaTopicPartition(
                        t,
                        p,
                        offset if offset >= 0 else OFFSET_INVALID,
                        metadata.split("\0", 1)[0] if metadata else metadata,
                    )
                    for t, p, offset, metadata, _ in answer
                ]
            if time.monotonic() >= deadline:
                raise StreamsError(f"reading committed offsets failed: error codes {failed[:5]}")
            time.sleep(0.1)

    # -- internals ----------------------------------------------------------------------------

    def _set_state(self, state: MemberState) -> None:
        with self._cond:
            self._state = state

    def _differs(self, target: Tasks, owned: Tasks) -> bool:
        if self._on_standby is None:  # standbys not run: only the active tasks count
            return target.active != owned.active
        return target != owned

    def _send_task_offsets(self) -> None:
        # Every join carries them (a restarted or fenced member is new to the assignor, which
        # places tasks where reported state is), then every _TASK_OFFSETS_S.
        if self._task_offsets is None:
            return
        if self.member.member_epoch > 0 and time.monotonic() < self._task_offsets_due:
            return
        self._task_offsets_due = time.monotonic() + _TASK_OFFSETS_S
        try:
            self.member.set_task_offsets(*self._task_offsets())
        except Exception as exc:  # only a placement hint: the heartbeat goes on without it
            _log.debug("stream-thread [%s] task offsets not sent: %s", self._name, exc)

    def _unassign(self, parts: list[tuple[str, int]]) -> None:
        if parts:
            self._consumer.incremental_unassign(_kafka(parts))

    def _report(self, owned: Tasks) -> None:
        """Records the tasks the stream thread now owns and wakes the heartbeat thread, which
        reports them at once."""
        with self._cond:
            if owned != self._owned:
                self._owned = owned
            self._owned_changed = True
            self._cond.notify_all()

    def _shutdown_answered(self, detail: str | None) -> None:
        with self._cond:
            if self._shutdown_seen:
                return
            self._shutdown_seen = True
            self._cond.notify_all()
        if self.on_shutdown_application is not None:
            self.on_shutdown_application(detail)

    def _heartbeat_loop(self) -> None:
        try:
            self._heartbeats()
        finally:
            with self._cond:
                self._loop_ended = True
                self._cond.notify_all()

    def _heartbeats(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                owned = self._owned
                self._owned_changed = False
                self._heartbeat_now = False
            self._send_task_offsets()
            try:
                result = self.member.heartbeat(owned)
            except StreamsError as exc:
                if "connection to the broker" in str(exc):
                    # The coordinator is away (restarting, moving): keep trying, as Kafka's
                    # client does; the broker fences the member if it stays away too long.
                    _log.warning("stream-thread [%s] heartbeat failed: %s", self._name, exc)
                    with self._cond:
                        self._cond.wait_for(lambda: self._stopping, timeout=0.5)
                    continue
                with self._cond:
                    self._error = exc
                return
            except BaseException as exc:  # handed to the stream thread, which dies of it
                with self._cond:
                    self._error = exc
                return
            if result.statuses != self._statuses:
                # Logged when they change (the broker repeats them in every heartbeat).
                self._statuses = result.statuses
                for status in result.statuses:
                    _log.info(
                        "stream-thread [%s] streams group status %s: %s",
                        self._name,
                        status.code,
                        status.detail,
                    )
            shutdown = [s for s in result.statuses if s.code == SHUTDOWN_APPLICATION]
            if shutdown:
                self._shutdown_answered(shutdown[0].detail)
            with self._cond:
                if result.lost:
                    # What the thread owns now is lost; the member rejoins at once owning
                    # nothing (the thread closes those tasks on its next loop).
                    self._lost = True
                    self._lost_tasks = Tasks(active=self._lost_tasks.active | self._owned.active)
                    self._owned = Tasks()
                    self._pending = None
                elif not self._shutdown_seen and (
                    self._differs(result.target, owned)
                    or (
                        # The first assignment completes the join even when empty, but not
                        # while the broker delays it or lacks topics: the thread stays
                        # REBALANCING.
                        self._state is not MemberState.STABLE
                        and result.member_epoch > 0
                        and not result.statuses
                    )
                ):
                    # Once the application shuts down no task is taken on: the asking
                    # member's leaving hands its tasks to members that are closing too.
                    self._pending = result
                if result.retriable_error is not None:
                    wait = 0.1
                elif result.lost:
                    wait = 0.0
                else:
                    wait = result.heartbeat_interval_ms / 1000.0
                # Wake early when the stream thread reports new owned tasks (an acknowledgement
                # the broker waits for) or the member stops.
                self._cond.wait_for(
                    lambda: self._stopping or self._owned_changed or self._heartbeat_now,
                    timeout=wait,
                )


def _kafka(parts: list[tuple[str, int]]) -> list[KafkaTopicPartition]:
    return [KafkaTopicPartition(t, p) for t, p in parts]


def _names(tasks: Any) -> list[str]:
    return sorted(f"{t.subtopology_id}_{t.partition}" for t in tasks)
