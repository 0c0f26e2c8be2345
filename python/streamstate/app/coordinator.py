"""The member's view of its consumer group (Kafka's ``AbstractCoordinator``).

librdkafka runs the group protocol (find coordinator, join, sync, heartbeat) in its own threads;
this class follows it through the rebalance callbacks confluent-kafka delivers in ``poll``:

* ``UNJOINED`` until the first assignment, and again after ``leave``/``close``;
* ``REBALANCING`` from ``subscribe`` or a revocation until the next assignment;
* ``STABLE`` after each assignment, with the generation counted up.

The *generation* here counts the assignments this member received; ``member_id`` is the
broker-assigned id. ``request_rejoin`` asks for a new rebalance by re-subscribing, the only way
confluent-kafka offers.

Because librdkafka's group thread moves on its own, the member may already be in a new
generation (or out of the group) whose assignment the callbacks have not delivered yet: the
tasks still follow the last one. :meth:`rebalance_in_progress` tells so, comparing the group
thread's generation now (``clients.group_metadata``) with the one of the last assignment. It is
Kafka Streams' ``TaskManager.rebalanceInProgress``: no commit is attempted while it holds (the
broker would refuse it with a stale generation, or with ``REBALANCE_IN_PROGRESS``); librdkafka
delivers an assignment at the end of every rebalance, even an empty one, which ends it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.clients.group_metadata import group_generation

__all__ = ["ConsumerCoordinator", "MemberState"]

_log = logging.getLogger("streamstate.app")


class MemberState(enum.Enum):
    """Kafka's ``AbstractCoordinator.MemberState``."""

    UNJOINED = "UNJOINED"
    REBALANCING = "REBALANCING"
    STABLE = "STABLE"


Callback = Callable[[list[KafkaTopicPartition]], None]


class ConsumerCoordinator:
    """Subscribes ``consumer`` and routes the rebalance callbacks, tracking the member state."""

    def __init__(
        self,
        consumer: Consumer,
        topics: Sequence[str],
        *,
        on_assigned: Callback,
        on_revoked: Callback,
        on_lost: Callback,
    ) -> None:
        """Nothing happens until :meth:`subscribe`."""
        self._consumer = consumer
        self._topics = list(topics)
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self._lock = threading.Lock()
        self._state = MemberState.UNJOINED
        self._generation = 0
        # The group thread's generation when the last assignment was delivered (None: unknown).
        self._assigned_generation: int | None = None
        self._rejoin_requested = False
        self.assignment: set[tuple[str, int]] = set()

    @property
    def state(self) -> MemberState:
        """The member state."""
        with self._lock:
            return self._state

    @property
    def generation(self) -> int:
        """The number of assignments received (see the module doc)."""
        with self._lock:
            return self._generation

    @property
    def member_id(self) -> str | None:
        """The broker-assigned member id, once joined."""
        try:
            member: str | None = self._consumer.memberid()
        except RuntimeError:
            return None
        return member or None

    def rebalance_in_progress(self) -> bool:
        """Whether the group is rebalancing as far as this member can tell (see the module
        doc): not STABLE, or librdkafka's group thread in another generation than that of the
        last assignment delivered."""
        with self._lock:
            if self._state is not MemberState.STABLE:
                return True
            assigned = self._assigned_generation
        if assigned is None:
            return False  # the client's metadata cannot be read: nothing to compare
        return group_generation(self._consumer) != assigned

    def _set(self, state: MemberState) -> None:
        with self._lock:
            self._state = state

    def subscribe(self) -> None:
        """Joins the group: the member is REBALANCING until its first assignment."""
        self._set(MemberState.REBALANCING)
        self._consumer.subscribe(
            self._topics,
            on_assign=self._assign,
            on_revoke=self._revoke,
            on_lost=self._lose,
        )

    def request_rejoin(self) -> None:
        """Asks for a rebalance; done on the polling thread by :meth:`maybe_rejoin`."""
        with self._lock:
            self._rejoin_requested = True

    def maybe_rejoin(self) -> None:
        """Re-subscribes if a rejoin was requested (call from the polling thread)."""
        with self._lock:
            requested, self._rejoin_requested = self._rejoin_requested, False
        if requested:
            _log.info("Rejoining group: re-subscribing to %s", self._topics)
            self._consumer.unsubscribe()
            self.subscribe()

    def leave(self) -> None:
        """Leaves the group (``close`` of the consumer sends the LeaveGroup; with a
        ``group.instance.id`` librdkafka does not, and the member's partitions stay with it
        until ``session.timeout.ms``, as Kafka's static membership intends)."""
        self._set(MemberState.UNJOINED)

    # -- callbacks, run by librdkafka inside consumer.poll/consume -----------------------------

    def _assign(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        group = group_generation(self._consumer)
        with self._lock:
            self._state = MemberState.STABLE
            self._generation += 1
            generation = self._generation
            self._assigned_generation = group
        self.assignment |= {(p.topic, p.partition) for p in partitions}
        _log.info(
            "Assigned partitions %s (generation %d, member %s)",
            sorted(f"{p.topic}-{p.partition}" for p in partitions),
            generation,
            self.member_id,
        )
        self._on_assigned(partitions)

    def _revoke(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        self._set(MemberState.REBALANCING)
        self.assignment -= {(p.topic, p.partition) for p in partitions}
        _log.info("Revoking partitions %s", sorted(f"{p.topic}-{p.partition}" for p in partitions))
        self._on_revoked(partitions)

    def _lose(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        self._set(MemberState.REBALANCING)
        self.assignment -= {(p.topic, p.partition) for p in partitions}
        _log.warning(
            "Lost partitions %s (the group moved on without this member)",
            sorted(f"{p.topic}-{p.partition}" for p in partitions),
        )
        self._on_lost(partitions)
