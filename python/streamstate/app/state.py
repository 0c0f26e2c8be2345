"""The client state machine: Kafka Streams' ``KafkaStreams.State`` plus ``RESTORING``.

Kafka 3.x's states and legal transitions, with one addition the API promises: ``RESTORING``,
the state while any store of this client (a task's or a global one) is being restored from its
changelog. It sits where Kafka Streams would say ``REBALANCING`` (tasks restoring) or simply
block (global bootstrap), so a caller can tell "the group is moving partitions" from "stores are
being rebuilt". An illegal transition is a bug in streamstate and raises.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable

from streamstate.errors import StreamsError

__all__ = ["IllegalStateTransitionError", "State", "StateMachine"]

_log = logging.getLogger("streamstate.app")


class State(enum.Enum):
    """The state of a :class:`~streamstate.StreamsApp` (Kafka's ``KafkaStreams.State``)."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    RESTORING = "RESTORING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"


# Kafka 3.x: CREATED(1, 3) (a client that never started cannot fail), REBALANCING(2, 3, 5),
# RUNNING(1, 2, 3, 5), PENDING_SHUTDOWN(4), NOT_RUNNING, PENDING_ERROR(6), ERROR; RESTORING is
# reachable from and leads to the three working states.
_LEGAL: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN}),
    State.REBALANCING: frozenset(
        {State.RUNNING, State.RESTORING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}
    ),
    State.RUNNING: frozenset(
        {State.REBALANCING, State.RESTORING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}
    ),
    State.RESTORING: frozenset(
        {State.RUNNING, State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}
    ),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}


class IllegalStateTransitionError(StreamsError):
    """A transition Kafka Streams' state machine forbids was attempted: a bug in streamstate."""


StateListener = Callable[[State, State], None]


class StateMachine:
    """The current :class:`State`, its legal transitions, and the listener told of each one.

    Thread-safe: stream threads, the global thread and the caller all move it. The listener is
    called outside the lock, in the thread that made the transition, as ``fn(new, old)``.
    """

    def __init__(self, name: str) -> None:
        """Starts in ``CREATED``; ``name`` (the client id) prefixes the transition log lines."""
        self._name = name
        self._state = State.CREATED
        self._lock = threading.Condition()
        self._listener: StateListener | None = None

    @property
    def state(self) -> State:
        """The current state."""
        with self._lock:
            return self._state

    def set_listener(self, listener: StateListener | None) -> None:
        """Calls ``listener(new, old)`` on every transition from now on."""
        with self._lock:
            self._listener = listener

    def transition(self, new: State, *, only_from: frozenset[State] | None = None) -> bool:
        """Moves to ``new``; returns whether the state changed.

        A transition to the current state changes nothing (and is not an error). With
        ``only_from``, nothing happens unless the current state is one of those (used where a
        concurrent close may already have moved the client on). Otherwise an illegal
        transition raises :class:`IllegalStateTransitionError`.
        """
        with self._lock:
            old = self._state
            if old is new:
                return False
            if only_from is not None and old not in only_from:
                return False
            if new not in _LEGAL[old]:
                raise IllegalStateTransitionError(
                    f"stream-client [{self._name}] unexpected state transition from "
                    f"{old.value} to {new.value}"
                )
            self._state = new
            listener = self._listener
            self._lock.notify_all()
        _log.info(
            "stream-client [%s] State transition from %s to %s", self._name, old.value, new.value
        )
        if listener is not None:
            try:
                listener(new, old)
            except Exception:
                _log.exception("stream-client [%s] state listener failed", self._name)
        return True

    def wait_for(self, states: frozenset[State], timeout: float | None) -> bool:
        """Blocks until the state is one of ``states``; returns False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._state in states, timeout=timeout)
