"""``SHUTDOWN_APPLICATION`` under ``group.protocol="streams"`` (KIP-1071) on the real 4.4 broker.

Kafka Streams 4.4: when the uncaught exception handler answers ``SHUTDOWN_APPLICATION``, the
client's members set ``ShutdownApplication`` in their ``StreamsGroupHeartbeat``; the
coordinator then answers every member of the group with the ``SHUTDOWN_APPLICATION`` status
(until the group is empty) and each client closes to ``ERROR`` through ``PENDING_ERROR``
(``StreamThread.handleStreamsRebalanceData`` → ``KafkaStreams.closeToError``).

The instance that fails is the one that owns the failing record's partition by construction:
the record is produced, after the assignment settled, to the partition of A's task.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.apps import TIMEOUT, new_app, wait_until

from streamstate import StreamsError, StreamThreadExceptionResponse
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.stream_thread import ThreadState
from streamstate.kafka_local import KafkaTestCluster

# The test broker's group.streams.heartbeat.interval.ms (testing/_broker_config.py): a member
# hears of the request at its next heartbeat, so within about one interval.
HEARTBEAT_S = 1.0
# The bound the other instance must close within, from the failing handler's answer: a few
# intervals and the close itself, generous for a machine shared with the broker.
BOUND_S = 3 * HEARTBEAT_S + 10.0


def _topology(source: str, seen: list[tuple[int, bytes]], *, fails: bool = True) -> Topology:
    topology = Topology()

    @topology.processor(sources=[source])
    def process(ctx: Any, record: Any) -> None:
        if fails and record.value == b"boom":
            raise RuntimeError(f"boom at partition {record.partition}")
        seen.append((record.partition, record.value))

    return topology


def _partitions(app: StreamsApp) -> set[int]:
    return {task.partition for t in app._threads for task in t.active_tasks().values()}


def _recorder(app: StreamsApp) -> list[tuple[State, State]]:
    transitions: list[tuple[State, State]] = []
    app.set_state_listener(lambda new, old: transitions.append((new, old)))
    return transitions


def _wait_listener(transitions: list[tuple[State, State]]) -> None:
    wait_until(lambda: bool(transitions) and transitions[-1][0] is State.ERROR, "ERROR heard")


def _shutdown_application(
    answered: list[float],
) -> Callable[[BaseException], StreamThreadExceptionResponse]:
    def handler(exc: BaseException) -> StreamThreadExceptionResponse:
        answered.append(time.monotonic())
        return StreamThreadExceptionResponse.SHUTDOWN_APPLICATION

    return handler


def test_shutdown_application_closes_every_instance_of_the_group(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    app_id = f"sp-shutdown-{uuid.uuid4().hex[:8]}"
    seen_a: list[tuple[int, bytes]] = []
    seen_b: list[tuple[int, bytes]] = []
    config = {"group.protocol": "streams", "application.id": app_id}
    a = new_app(apps, kafka, _topology(source, seen_a), tmp_path / "a", **config)
    b = new_app(apps, kafka, _topology(source, seen_b), tmp_path / "b", **config)
    answered_a: list[float] = []
    answered_b: list[float] = []
    a.set_uncaught_exception_handler(_shutdown_application(answered_a))
    b.set_uncaught_exception_handler(_shutdown_application(answered_b))
    states_a = _recorder(a)
    states_b: list[tuple[State, State]] = []
    # B's PENDING_ERROR, timed as it happens (the listener runs on the thread making it).
    b_pending: list[float] = []
    b_pending_lock = threading.Lock()

    def b_listener(new: State, old: State) -> None:
        states_b.append((new, old))
        if new is State.PENDING_ERROR:
            with b_pending_lock:
                b_pending.append(time.monotonic())

    b.set_state_listener(b_listener)
    a.start()
    b.start()
    wait_until(
        lambda: len(_partitions(a)) == 1 and _partitions(a) | _partitions(b) == {0, 1},
        "one task each",
    )
    wait_until(lambda: a.state is State.RUNNING and b.state is State.RUNNING, "both RUNNING")
    (pa,) = _partitions(a)
    (pb,) = _partitions(b)
    # Both process: each sees its own partition's records.
    kafka.produce(source, [(b"k", b"before")], partition=pa)
    kafka.produce(source, [(b"k", b"before")], partition=pb)
    wait_until(lambda: (pa, b"before") in seen_a and (pb, b"before") in seen_b, "both process")

    # The failing record goes to A's partition: A's processor raises, A's handler answers
    # SHUTDOWN_APPLICATION.
    kafka.produce(source, [(b"k", b"boom")], partition=pa)
    assert a.wait_for_state(State.ERROR, TIMEOUT), a.state
    assert b.wait_for_state(State.ERROR, TIMEOUT), b.state
    assert len(answered_a) == 1 and not answered_b, "only A's thread died of an exception"
    # B heard of it from the coordinator, within a bound set by the heartbeat interval.
    assert b_pending[0] - answered_a[0] < BOUND_S, b_pending[0] - answered_a[0]
    # Both went through PENDING_ERROR to ERROR, as Kafka's closeToError (the listener may
    # run just after wait_for_state returns).
    for transitions in (states_a, states_b):
        _wait_listener(transitions)
        assert transitions[-2:] == [
            (State.PENDING_ERROR, State.RUNNING),
            (State.ERROR, State.PENDING_ERROR),
        ], transitions
    # A's error is its own exception; B's names the coordinator's status and A's member.
    assert isinstance(a.fatal_error, StreamsError)
    assert f"RuntimeError: boom at partition {pa}" in str(a.fatal_error)
    assert isinstance(b.fatal_error, StreamsError)
    assert "SHUTDOWN_APPLICATION" in str(b.fatal_error)
    assert a._members[0].member_id in str(b.fatal_error)
    # B's processing has stopped: its thread is dead and a new record on its partition is
    # not processed.
    assert all(t.state is ThreadState.DEAD for t in b._threads)
    kafka.produce(source, [(b"k", b"after")], partition=pb)
    time.sleep(3 * HEARTBEAT_S)
    assert (pb, b"after") not in seen_b

    # The coordinator forgets the request once the group is empty (Kafka's StreamsGroup): a
    # fixed application restarted under the same id runs, and processes what was left.
    seen_c: list[tuple[int, bytes]] = []
    c = new_app(apps, kafka, _topology(source, seen_c, fails=False), tmp_path / "c", **config)
    c.start()
    wait_until(lambda: (pb, b"after") in seen_c and (pa, b"boom") in seen_c, "C processes")
    assert c.state is State.RUNNING and c.fatal_error is None


def test_shutdown_application_of_the_only_member_goes_through_the_coordinator(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = kafka.create_topic(partitions=1)
    app_id = f"sp-shutdown-one-{uuid.uuid4().hex[:8]}"
    seen: list[tuple[int, bytes]] = []
    config = {"group.protocol": "streams", "application.id": app_id}
    app = new_app(apps, kafka, _topology(source, seen), tmp_path / "a", **config)
    answered: list[float] = []
    app.set_uncaught_exception_handler(_shutdown_application(answered))
    transitions = _recorder(app)
    caplog.set_level(logging.INFO, logger="streamstate.app")
    app.start()
    wait_until(lambda: _partitions(app) == {0}, "the task")
    kafka.produce(source, [(b"k", b"ok"), (b"k", b"boom")])
    assert app.wait_for_state(State.ERROR, TIMEOUT), app.state
    assert seen == [(0, b"ok")] and len(answered) == 1
    _wait_listener(transitions)
    assert transitions[-2:] == [
        (State.PENDING_ERROR, State.RUNNING),
        (State.ERROR, State.PENDING_ERROR),
    ], transitions
    assert "RuntimeError: boom at partition 0" in str(app.fatal_error)
    # The client closed on the coordinator's answer to its own request, which names it.
    member_id = app._members[0].member_id
    answers = [
        r.getMessage()
        for r in caplog.records
        if "SHUTDOWN_APPLICATION from the streams group coordinator" in r.getMessage()
    ]
    assert answers and member_id in answers[0], answers
    assert not [r for r in caplog.records if "did not answer the shutdown request" in r.message]
