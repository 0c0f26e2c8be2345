"""What the tests of running apps share: an app on the test broker, waiting, with a deadline,
for something to happen, a consumer that refuses calls from other threads, and an app in a
child process to SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster

TIMEOUT = 90.0


def new_app(
    apps: list[StreamsApp],
    kafka: KafkaTestCluster,
    topology: Topology,
    tmp: Path,
    **config: Any,
) -> StreamsApp:
    """A ``StreamsApp`` of ``topology`` on the test broker ``kafka`` with a fresh application
    id, state under ``tmp``, commits every 200 ms and a 6 s session (``config`` overrides);
    added to ``apps`` (the ``apps`` fixture closes it)."""
    app = StreamsApp(
        topology,
        {
            "application.id": f"app-{uuid.uuid4().hex[:10]}",
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp),
            "commit.interval.ms": 200,
            "session.timeout.ms": 6000,
            **config,
        },
    )
    apps.append(app)
    return app


class OwnedConsumer:
    """A stream thread's consumer behind a proxy: a call from any thread but its owner fails
    that caller (and is recorded: confluent-kafka's ``position()`` from another thread waits
    behind the owner's ``consume()``); ``park`` holds the owner inside its next ``consume()``
    until ``release`` is set."""

    def __init__(self, real: Any, owner: threading.Thread) -> None:
        self._real = real
        self._owner = owner
        self.park = threading.Event()
        self.parked = threading.Event()
        self.release = threading.Event()
        self.foreign_calls: list[str] = []

    def consume(self, *args: Any, **kwargs: Any) -> Any:
        """The real ``consume``, after parking the owner if ``park`` is set."""
        if self.park.is_set() and threading.current_thread() is self._owner:
            self.park.clear()
            self.parked.set()
            self.release.wait(TIMEOUT)
        return self._real.consume(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not self._owner:
                self.foreign_calls.append(name)
                raise AssertionError(f"{name}() called on the stream thread's consumer")
            return attr(*args, **kwargs)

        return call


def app_behind_owned_consumer(
    apps: list[StreamsApp], kafka: KafkaTestCluster, tmp: Path
) -> tuple[StreamsApp, str, OwnedConsumer]:
    """A running one-thread app that has processed all 20 records of its 2-partition source,
    its thread's consumer then put behind an :class:`OwnedConsumer`; the app, the source topic
    and the proxy."""
    source = kafka.create_topic(partitions=2)
    kafka.produce(source, [(b"k%d" % i, b"v") for i in range(20)])
    topology = Topology()
    seen: list[int] = []

    @topology.processor(sources=[source])
    def record_it(ctx: Any, record: Any) -> None:
        seen.append(record.offset)

    app = new_app(apps, kafka, topology, tmp)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: len(seen) == 20, "every record processed")
    (thread,) = app._threads
    proxy = OwnedConsumer(thread.consumer, thread)
    thread.consumer = proxy
    thread.fetch._consumer = proxy
    return app, source, proxy


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float = TIMEOUT, interval: float = 0.1
) -> None:
    """Polls ``condition`` every ``interval`` seconds until it holds; fails naming ``what``
    after ``timeout`` seconds (generous: the machine is shared with the broker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def member_owning_task_0_0(kafka: KafkaTestCluster, group: str, topic: str) -> Any:
    """A ``StreamsGroupMember`` of ``group`` (one sub-topology reading ``topic``) once the
    broker has given it task ``0_0``."""
    from streamstate.app.streams_group import (  # noqa: PLC0415 - only the protocol tests
        StreamsGroupMember,
        StreamsGroupTopology,
        Subtopology,
        TaskId,
        Tasks,
    )

    member = StreamsGroupMember(
        kafka.bootstrap_servers, group, StreamsGroupTopology((Subtopology("0", (topic,)),))
    )
    owned = Tasks()

    def joined() -> bool:
        nonlocal owned
        owned = member.heartbeat(owned).target
        return bool(owned.active == {TaskId("0", 0)})

    wait_until(joined, "the member's task", interval=0.2)
    return member


def start_app_child(imports: str, topology: str, config: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Starts a ``StreamsApp`` in a child process, which runs until it is killed: ``topology``
    is a Python expression building its topology (``imports``: the import lines it needs),
    ``config`` its config."""
    script = "\n".join(
        [
            "import time",
            "from streamstate.app import StreamsApp",
            imports,
            f"app = StreamsApp({topology}, {config!r})",
            "app.start()",
            "time.sleep(600)",
        ]
    )
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen(
        [sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)}
    )


def kill_word_count_mid_stream(
    kafka: Any, child: subprocess.Popen[bytes], app_id: str, text: str, lines: int
) -> None:
    """SIGKILLs the word count running in ``child`` mid-stream: once it has committed some of
    the ``lines`` of ``text`` and then sent 5,000 more words through its repartition topic
    ``<app_id>-words-repartition``, so that the kill leaves an open transaction with records
    in every topic it writes. Fails if the child had committed every line by then."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - only the kill tests need it
    from confluent_kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    offsets = kafka.consumer(**{"group.id": app_id})
    inputs = [KafkaTopicPartition(text, p) for p in kafka.partitions(text)]
    committed: list[int] = []
    try:

        def some_committed() -> bool:
            try:
                positions = offsets.committed(inputs, timeout=10)
            except KafkaException:  # the group's coordinator is not known yet
                return False
            committed.append(sum(max(tp.offset, 0) for tp in positions))
            return committed[-1] > 0

        wait_until(some_committed, "the child committing some lines", interval=0.05)
        repartition = f"{app_id}-words-repartition"
        seen = sum(kafka.end_offsets(repartition).values())
        wait_until(
            lambda: sum(kafka.end_offsets(repartition).values()) >= seen + 5_000,
            "more words through the repartition topic",
            interval=0.02,
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        offsets.close()
    assert committed[-1] < lines, "the kill should land mid-stream"
