"""``SHUTDOWN_APPLICATION`` in a stream thread's streams group membership, against a scripted
member (the wire side is ``rust/group/src/member.rs``'s tests; the real broker's answer is
``tests/integration/test_streams_shutdown_application.py``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from streamstate.app import streams_membership
from streamstate.app.streams_group import GroupStatus, HeartbeatResult, TaskId, Tasks
from streamstate.app.streams_membership import StreamsMembership

DETAIL = "Streams group member m1 encountered a fatal error and requested a shutdown"


class _Member:
    """Answers heartbeats 60 s apart, with the SHUTDOWN_APPLICATION status once asked (or
    never, when ``answers`` is False); ``assign`` puts a task in every target."""

    member_epoch = 3
    member_id = "m"

    def __init__(self, *, answers: bool = True, status: bool = False) -> None:
        self.answers = answers
        self.status = status
        self.assign = False
        self.asked = False
        self.sent: list[bool] = []
        self.beat = threading.Event()

    def request_shutdown(self) -> None:
        self.asked = True

    def heartbeat(self, owned: Tasks) -> HeartbeatResult:
        self.sent.append(self.asked)
        self.beat.set()
        statuses: tuple[GroupStatus, ...] = ()
        if self.status or (self.asked and self.answers):
            statuses = (GroupStatus("SHUTDOWN_APPLICATION", DETAIL),)
        active = frozenset({TaskId("0", 0)}) if self.assign else frozenset()
        return HeartbeatResult(
            3, Tasks(active), Tasks(), Tasks(), False, statuses, 60_000, False, None
        )

    def leave(self) -> None:
        pass


def _membership(member: _Member, calls: list[str | None]) -> StreamsMembership:
    consumer = type("C", (), {"incremental_unassign": lambda self, parts: None})()
    parts = type("P", (), {"partitions": lambda self, tasks: [("src", 0) for _ in tasks]})()
    m = StreamsMembership(
        member,  # type: ignore[arg-type]
        consumer,
        parts,
        name="t",
        on_assigned=lambda p: calls.append("assigned"),
        on_revoked=lambda p: None,
        on_lost=lambda p: None,
    )
    m.on_shutdown_application = calls.append
    return m


def _wait(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_request_is_heartbeated_at_once_and_the_answer_closes_once() -> None:
    member = _Member()
    calls: list[str | None] = []
    m = _membership(member, calls)
    m.subscribe()
    try:
        _wait(lambda: member.sent, "the join")
        m.maybe_rejoin()  # the join's (empty) assignment
        assert calls == ["assigned"]
        # The next heartbeat is 60 s away; the request does not wait for it.
        m.request_shutdown()
        _wait(lambda: member.sent[-1], "the request sent")
        _wait(lambda: calls == ["assigned", DETAIL], "the answer heard")
        # The status comes with every heartbeat until the group is empty: heard once.
        member.assign = True
        m.request_shutdown()
        _wait(lambda: len(member.sent) >= 3, "another heartbeat")
        # No task is taken on once the application shuts down.
        m.maybe_rejoin()
        assert calls == ["assigned", DETAIL]
    finally:
        m.leave()
    assert calls == ["assigned", DETAIL]


def test_a_member_that_did_not_ask_hears_the_status_and_leaves_without_waiting() -> None:
    member = _Member(status=True)
    calls: list[str | None] = []
    m = _membership(member, calls)
    m.subscribe()
    _wait(lambda: calls == [DETAIL], "the status heard")
    started = time.monotonic()
    m.leave()
    assert time.monotonic() - started < 5
    assert not any(member.sent)


def test_an_asking_member_leaves_after_a_bounded_wait_when_no_answer_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams_membership, "_SHUTDOWN_ANSWER_S", 0.3)
    member = _Member(answers=False)
    calls: list[str | None] = []
    m = _membership(member, calls)
    m.subscribe()
    _wait(lambda: member.sent, "the join")
    m.request_shutdown()
    _wait(lambda: member.sent[-1], "the request sent")
    started = time.monotonic()
    m.leave()
    assert 0.25 <= time.monotonic() - started < 5
    # No answer: the client is still closed, told that the coordinator did not answer.
    assert calls == [None]
